"""Queueing with Kueue (docs/queueing.md): ResourceFlavors, ClusterQueues and LocalQueues
from `kns:queues`, queued Jobs and CronJob templates suspended and labelled, Kueue installed
from the vendored manifests, `./kns explain` and `./kns queues`, and every bad queue a
path-qualified config error through the program and `./kns validate` alike, nothing
registered. The same objects meet the real API server and Kueue in tests/test_e2e_queueing.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

import pytest

from config import names, rules
from kns_cli import cli
from kns_testing import apiserver
from kns_testing import tokens
from kns_testing.doors import refused, write_project
from kns_testing.program import ROOT, pinned_versions, run_program
from kns_testing.queueing import CONFIG, without_queueing
from plan import kueue_install

FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


@pytest.fixture(scope="module")
def run():
    return run_program(CONFIG)


def of(run, type_: str) -> dict[str, dict[str, Any]]:
    return {r.name: apiserver.manifest(r) for r in run.of_type(type_)}


def test_one_flavor_per_pool_a_queue_names_carrying_its_label_and_taints(run):
    flavors = of(run, FLAVOR)
    assert set(flavors) == {"resourceflavor-cpu", "resourceflavor-a100"}  # not sys, not spare
    a100 = flavors["resourceflavor-a100"]
    assert a100["metadata"]["name"] == "a100" and a100["metadata"]["labels"]["kns.io/cluster"] == "kns-test"
    assert a100["spec"]["nodeLabels"] == {"kns.io/pool": "a100"}
    assert a100["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
    ]
    assert "tolerations" not in flavors["resourceflavor-cpu"]["spec"]


def test_a_cluster_queue_covers_every_resource_of_its_quota_on_every_pool(run):
    batch = of(run, CLUSTER_QUEUE)["clusterqueue-batch"]["spec"]
    (group,) = batch["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "ephemeral-storage", "pods", "nvidia.com/gpu"]
    flavors = {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}
    assert list(flavors) == ["cpu", "a100"]
    assert flavors["cpu"]["cpu"] == {"name": "cpu", "nominalQuota": "16", "borrowingLimit": "8"}
    assert flavors["cpu"]["nvidia.com/gpu"]["nominalQuota"] == "0"  # left out: 0 there
    assert flavors["a100"]["ephemeral-storage"]["nominalQuota"] == "0"
    assert flavors["a100"]["memory"]["nominalQuota"] == "256Gi"
    for flavor in group["flavors"]:  # Kueue wants each flavor's resources in coveredResources order
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    assert batch["cohortName"] == "shared"
    assert batch["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    assert batch["fairSharing"] == {"weight": "0.5"}
    assert batch["namespaceSelector"] == {"matchLabels": {"kns.io/cluster": "kns-test"}}
    adhoc = of(run, CLUSTER_QUEUE)["clusterqueue-adhoc"]["spec"]
    assert adhoc["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "cpu", "nominalQuota": "8", "lendingLimit": "4"}
    assert "fairSharing" not in adhoc


def test_each_queued_entry_has_a_local_queue_and_its_jobs_wait_for_admission(run):
    local = of(run, LOCAL_QUEUE)
    # `sandbox` (type namespace) runs no workload: @ml's queue leaves it out.
    expected = {"etl": "adhoc", "train": "batch", "own-queue": "adhoc", "warm": "batch", "plain": "batch"}
    assert {name.removesuffix("-queue"): m["spec"]["clusterQueue"] for name, m in local.items()} == expected
    for name, manifest in local.items():
        assert manifest["metadata"]["name"] == names.LOCAL_QUEUE
        assert manifest["metadata"]["namespace"] == f"kns-{name.removesuffix('-queue')}"
    for name in ("etl", "train", "own-queue"):
        job = apiserver.manifest(run.named("kubernetes:batch/v1:Job", name))
        assert job["metadata"]["labels"][names.QUEUE_LABEL] == "kns" and job["spec"]["suspend"] is True
    cronjobs = of(run, "kubernetes:batch/v1:CronJob")
    assert set(cronjobs) >= {"warm", "plain"}
    for manifest in cronjobs.values():  # the primer CronJob too: its Job is the workload
        template = manifest["spec"]["jobTemplate"]
        assert template["metadata"]["labels"][names.QUEUE_LABEL] == "kns" and template["spec"]["suspend"] is True
        assert manifest["spec"]["suspend"] is False  # the CronJob itself still fires


def test_the_per_entry_quota_stays_beside_the_queue(run):
    quota = apiserver.manifest(run.named("kubernetes:core/v1:ResourceQuota", "etl-quota"))
    assert quota["spec"]["hard"]["requests.cpu"] == "12" and quota["spec"]["hard"]["pods"] == "3"


def test_without_queueing_nothing_of_kueue_is_registered_and_jobs_run_at_once():
    plain = run_program(without_queueing(CONFIG))
    assert not [r for r in plain.resources if "kueue" in r.type or r.type.startswith("kns:queueing")]
    job = apiserver.manifest(plain.named("kubernetes:batch/v1:Job", "etl"))
    assert "suspend" not in job["spec"] and names.QUEUE_LABEL not in job["metadata"]["labels"]


def test_the_profile_queue_is_ordered_and_the_entry_own_wins(tmp_path):
    config = copy.deepcopy(CONFIG)
    config["queueing"]["install"] = False
    config["profiles"] = {"*": {"queue": "adhoc"}, "@ml": {"queue": "batch"}, "cid": {"defaultCpu": 1}}
    config["jobs"][0].pop("queue")
    done = run_program(config, stack="case", project_dir=write_project(tmp_path / "p", config))
    local = of(done, LOCAL_QUEUE)
    assert local["etl-queue"]["spec"]["clusterQueue"] == "adhoc"  # only "*" matches bob
    assert local["train-queue"]["spec"]["clusterQueue"] == "batch"  # "@ml" comes later and wins
    assert local["warm-queue"]["spec"]["clusterQueue"] == "batch"  # a later rule without queue keeps it
    assert local["own-queue-queue"]["spec"]["clusterQueue"] == "adhoc"  # the entry's own wins over @ml
    config["profiles"] = {"@ml": {"queue": "batch"}, "*": {"queue": "adhoc"}}
    config["jobs"] = [j for j in config["jobs"] if j["name"] != "train"]  # adhoc has no GPU pool
    config["schedules"] = [s for s in config["schedules"] if s["name"] != "warm"]  # nor ephemeral-storage
    done = run_program(config, stack="case", project_dir=write_project(tmp_path / "q", config))
    assert of(done, LOCAL_QUEUE)["plain-queue"]["spec"]["clusterQueue"] == "adhoc"  # now "*" is later


def test_every_kueue_object_is_valid_against_the_pinned_crds(run):
    kueue = [r for r in run.resources if r.type.startswith("kubernetes:kueue.x-k8s.io")]
    assert len(kueue) == 2 + 2 + 5
    assert apiserver.problems(kueue) == []


def test_the_crd_check_can_fail(run):
    broken = copy.deepcopy(of(run, CLUSTER_QUEUE)["clusterqueue-batch"])
    broken["spec"]["preemption"]["withinClusterQueue"] = "Always"
    broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "sixteen"
    validator = apiserver._validator("kueue.x-k8s.io/v1beta2", "ClusterQueue")
    assert len(list(validator.iter_errors(broken))) == 2


# ---- Kueue installed by the program -------------------------------------------------------


def test_install_registers_the_vendored_kueue_held_to_the_system_namespace_rules(run):
    component = run.named(tokens.KUEUE, "kueue")
    assert component is not None
    crds = {apiserver.manifest(r)["metadata"]["name"] for r in run.of_type(CRD)}
    assert {"clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io",
            "workloads.kueue.x-k8s.io"} <= crds and len(crds) == 11
    namespace = apiserver.manifest(run.named("kubernetes:core/v1:Namespace", "kueue-system"))
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    deployment = apiserver.manifest(run.named(DEPLOYMENT, "kueue-system/kueue-controller-manager"))
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == f"registry.k8s.io/kueue/kueue:v{pinned_versions()['KUEUE_VERSION']}"
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 65532 and security["runAsGroup"] == 65532
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"key": "kns.io/system", "operator": "Equal", "value": "", "effect": "NoSchedule"} in pod["tolerations"]
    preferred = pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert preferred["preference"]["matchExpressions"][0]["values"] == ["sys"]
    kueue_objects = [r for r in run.resources if r.type.startswith("kubernetes:") and r.name.startswith(
        ("kueue-system/", "kueue-")) or r.type == CRD]
    assert all(apiserver.manifest(r)["metadata"]["labels"]["kns.io/cluster"] == "kns-test" for r in kueue_objects)


def test_the_reserved_kueue_namespaces_are_those_of_the_vendored_bundle():
    bundle = kueue_install.load(ROOT)
    created = {d["metadata"]["name"] for d in bundle if d["kind"] == "Namespace"}
    used = {d["metadata"]["namespace"] for d in bundle if d["metadata"].get("namespace")}
    assert created == names.KUEUE_INSTALL_NAMESPACES
    assert used - names.RESERVED_NAMESPACES == created  # its leader-election Role is in kube-system


KUEUE_NS = ("namespace \"kueue-system\" is Kueue's, which the program installs (kns:queueing.install: true); "
            "choose another name")


@pytest.mark.parametrize("change, lines", [
    (lambda c: c["cluster"].update(systemNamespace="kueue-system"), [f"kns:cluster.systemNamespace: {KUEUE_NS}"]),
    (lambda c: c["cluster"].update(namespacePrefix="kueue-") or c["jobs"].append(
        {"name": "system", "user": "bob", "image": "busybox:1.37"}), [f"kns:jobs[system].name: its {KUEUE_NS}"]),
    (lambda c: c["cluster"].update(namespacePrefix="") or c["jobs"].append(
        {"name": "kueue-system", "type": "namespace", "user": "bob"}),
     [f"kns:jobs[kueue-system].name: its {KUEUE_NS}"]),
], ids=["system namespace", "entry by prefix", "namespace entry"])
def test_no_namespace_of_the_stack_is_kueues_when_the_program_installs_it(tmp_path, capsys, change, lines):
    refused(tmp_path, capsys, case(change), lines)


def test_kueues_namespace_is_free_when_the_program_does_not_install_kueue():
    config = case(lambda c: c["queueing"].update(install=False) or c["cluster"].update(systemNamespace="kueue-system"))
    done = run_program(config)
    assert "kueue-system" in {apiserver.manifest(r)["metadata"]["name"] for r in done.of_type("kubernetes:core/v1:Namespace")}


def test_install_false_registers_queues_but_not_kueue():
    config = copy.deepcopy(CONFIG)
    config["queueing"]["install"] = False
    done = run_program(config)
    assert not done.of_type(tokens.KUEUE) and not done.of_type(CRD)
    assert len(done.of_type(CLUSTER_QUEUE)) == 2 and len(done.of_type(LOCAL_QUEUE)) == 5


def test_the_vendored_manifests_are_the_pinned_version_made_by_the_recorded_command():
    readme = (ROOT / "vendor" / "kueue" / f"v{kueue_install.KUEUE_VERSION}" / "README.md").read_text()
    digest = re.search(r"sha256 of manifests.yaml: `([0-9a-f]{64})`", readme).group(1)
    assert hashlib.sha256(kueue_install.manifest_path(ROOT).read_bytes()).hexdigest() == digest
    assert pinned_versions()["KUEUE_VERSION"] == kueue_install.KUEUE_VERSION
    assert "kustomize build config/default" in readme


def test_kueue_installed_changes_only_what_the_platform_rules_say():
    upstream = kueue_install.load(ROOT)
    adapted = kueue_install.install_objects(upstream, "c", [])
    changed = [(u["kind"], u["metadata"]["name"]) for u, a in zip(upstream, adapted)
               if json.dumps({**u, "metadata": {**u["metadata"], "labels": None}}, sort_keys=True)
               != json.dumps({**a, "metadata": {**a["metadata"], "labels": None}}, sort_keys=True)]
    assert changed == [("Deployment", "kueue-controller-manager")]
    assert all(a["metadata"]["labels"]["kns.io/cluster"] == "c" for a in adapted)


# ---- explain and queues -------------------------------------------------------------------

OVER = copy.deepcopy(CONFIG)
OVER["jobs"] += [{"name": f"big-{i}", "user": "ann", "groups": ["ml"], "image": "busybox:1.37", "cpu": 8,
                  "memory": 1024, "pool": "cpu"} for i in range(3)]
OVER["schedules"][0]["cpu"] = 12  # fits the 16-CPU pool quota of batch, with the others over it


def test_kns_queues_shows_each_queue_against_what_its_entries_ask(tmp_path, capsys):
    root = write_project(tmp_path / "p", OVER)
    assert cli.main(["queues", "--stack", "case", "--project-dir", str(root), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    batch = next(q for q in document["queues"] if q["name"] == "batch")
    cpu = next(line for line in batch["lines"] if line["pool"] == "cpu" and line["resource"] == "cpu")
    # big-0..2 (8 each), warm (12; its init wait counts only as it is larger), plain (1): 37
    # CPU against 16 + 4 borrowed
    assert cpu["requested"] == "37" and cpu["quota"] == "16" and cpu["borrowing"] == "4"  # its limit is 8, adhoc lends 4
    assert cpu["overSubscribed"] is True and set(cpu["entries"]) == {"big-0", "big-1", "big-2", "warm", "plain"}
    adhoc = next(q for q in document["queues"] if q["name"] == "adhoc")
    adhoc_cpu = next(line for line in adhoc["lines"] if line["resource"] == "cpu")
    # etl: min(parallelism 3, completions 2) pods of 4 CPU; own-queue (no pool): 1
    assert adhoc_cpu["requested"] == "9" and adhoc_cpu["borrowing"] == "16" and not adhoc_cpu["overSubscribed"]
    assert cli.main(["queues", "--stack", "case", "--project-dir", str(root)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"cpu\s+cpu\s+16\s+4\s+37\s+OVER-SUBSCRIBED: big-0", text), text


def test_explain_shows_the_queue_and_warns_when_a_warm_up_may_start_late(tmp_path, capsys):
    root = write_project(tmp_path / "p", OVER)
    assert cli.main(["explain", "warm", "etl", "--stack", "case", "--project-dir", str(root), "--format", "json"]) == 0
    warm, etl = json.loads(capsys.readouterr().out)["entries"]
    assert warm["queue"]["name"] == "batch" and warm["queue"]["quota"] == {
        "cpu": {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "10Gi", "pods": "4"}}
    assert warm["queue"]["requests"]["cpu"] == "12"
    assert any("over-subscribed" in w for w in warm["queue"]["warnings"])
    assert etl["queue"]["warnings"] == []  # not prescaled: waiting is what a queue is for
    assert cli.main(["explain", "warm", "--stack", "case", "--project-dir", str(root)]) == 0
    text = capsys.readouterr().out
    assert "queue:" in text and "batch (Kueue ClusterQueue, cohort shared; pool cpu: cpu=16" in text
    assert "warning: queue \"batch\" is over-subscribed on pool \"cpu\"" in text


def test_explain_warns_when_a_warm_up_fits_only_by_borrowing(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["schedules"][0]["cpu"] = 20  # over the 16 of batch on cpu, within 16 + the 4 adhoc lends
    root = write_project(tmp_path / "p", config)
    assert cli.main(["explain", "warm", "--stack", "case", "--project-dir", str(root), "--format", "json"]) == 0
    (warm,) = json.loads(capsys.readouterr().out)["entries"]
    assert any('only with quota borrowed from cohort "shared"' in w for w in warm["queue"]["warnings"])


# ---- bad input ----------------------------------------------------------------------------


# The entries of queue adhoc, when it is invalid, point at its problems.
ADHOC_INVALID = [f'kns:jobs[{name}].queue: queue "adhoc" is invalid (its problems are listed under kns:queues[adhoc])'
                 for name in ("etl", "own-queue")]


def case(change) -> dict[str, Any]:
    config = copy.deepcopy(CONFIG)
    change(config)
    return config


def _queue(name: str) -> Any:
    return lambda c: next(q for q in c["queues"] if q["name"] == name)


def _entry(section: str, name: str) -> Any:
    return lambda c: next(e for e in c[section] if e["name"] == name)


BATCH_INVALID = 'kns:profiles[@ml].queue: queue "batch" is invalid (its problems are listed under kns:queues[batch])'
BAD = {
    "unknown queue on an entry": (
        lambda c: _entry("jobs", "etl")(c).update(queue="nightly"),
        ['kns:jobs[etl].queue: no queue named "nightly" (queues: adhoc, batch)']),
    "a queue one letter off on an entry": (
        lambda c: _entry("jobs", "etl")(c).update(queue="btach"),
        ['kns:jobs[etl].queue: no queue named "btach"; did you mean "batch"? (queues: adhoc, batch)']),
    "unknown queue in a profile": (
        lambda c: c["profiles"]["@ml"].update(queue="gpu"),
        ['kns:profiles[@ml].queue: no queue named "gpu" (queues: adhoc, batch)']),
    "quota naming an unknown pool": (
        lambda c: _queue("batch")(c)["quota"].update({"h100": {"cpu": 4}}),
        ['kns:queues[batch].quota.h100: no node pool named "h100"; did you mean "a100"? (pools: a100, cpu, spare, sys)']),
    "a resource that is not a quantity": (
        lambda c: _queue("adhoc")(c)["quota"]["cpu"].update(memory="lots"),
        ['kns:queues[adhoc].quota.cpu: memory: "lots" is not a quantity'] + ADHOC_INVALID),
    "a resource name a queue cannot hold": (
        lambda c: _queue("adhoc")(c)["quota"]["cpu"].update(nodes=3),
        ['kns:queues[adhoc].quota.cpu: "nodes" is not a resource a queue can hold (cpu, memory, '
         'ephemeral-storage, pods, hugepages-<size>, or an extended resource domain/name)'] + ADHOC_INVALID),
    "a memory quota in bytes by mistake (digits as text)": (
        lambda c: _queue("adhoc")(c)["quota"]["cpu"].update(memory="512"),
        ['kns:queues[adhoc].quota.cpu: memory: "512" is only 512 bytes; write a number for MiB (4096) or a unit '
         '("4Gi")'] + ADHOC_INVALID),
    "a borrowing limit in bytes by mistake": (
        lambda c: _queue("adhoc")(c).update(cohort="shared", borrowingLimit={"cpu": {"ephemeral-storage": "1000Ki"}}),
        ['kns:queues[adhoc].borrowingLimit.cpu: ephemeral-storage: "1000Ki" is only 1024000 bytes; write a number '
         'for MiB (4096) or a unit ("4Gi")'] + ADHOC_INVALID),
    "an entry's own quota in bytes by mistake": (
        lambda c: _entry("jobs", "etl")(c).update(quota={"cpu": 2, "memory": "900"}),
        ['kns:jobs[etl].quota: memory: "900" is only 900 bytes; write a number for MiB (4096) or a unit ("4Gi")']),
    "hugepages without a page size": (
        lambda c: _queue("adhoc")(c)["quota"]["cpu"].update({"hugepages-big": 4}),
        ['kns:queues[adhoc].quota.cpu: "hugepages-big" is not a resource a queue can hold (cpu, memory, '
         'ephemeral-storage, pods, hugepages-<size>, or an extended resource domain/name)'] + ADHOC_INVALID),
    "a typo inside kns:queueing keeps what is written of enabled": (
        lambda c: c["queueing"].update(instal=False),
        ['kns:queueing.instal: unknown key; did you mean "install"?']),
    "an invisible character in a queue reference, said once and shown": (
        lambda c: _entry("jobs", "etl")(c).update(queue="adhoc\u200b"),
        ['kns:jobs[etl].queue: "adhoc\\u200b" is not a DNS-1123 label (lower-case letters, digits and "-", '
         'starting and ending with a letter or digit)']),
    "a queue a profile rule gives that can never admit the entry": (
        lambda c: _entry("jobs", "train")(c).update(cpu=200),
        ['kns:jobs[train]: its queue "batch" (from kns:profiles[@ml].queue) can never admit its pod (Kueue would '
         'keep it waiting): cpu 200 is more than pool "a100" can hold: quota 32 + borrowing 0']),
    "a podSpec selecting a pool the queue cannot hold it on": (
        lambda c: [_entry("jobs", "own-queue")(c).pop(k, None) for k in ("image", "cpu", "memory")] and
        _entry("jobs", "own-queue")(c).update(podSpec={"nodeSelector": {"kns.io/pool": "spare"}, "containers": [
            {"name": "main", "image": "busybox:1.37", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}),
        ['kns:jobs[own-queue].queue: queue "adhoc" can never admit its pod (Kueue would keep it waiting): '
         'pool "spare" has no quota in it (its pools: cpu)']),
    "an override selecting a pool the queue cannot hold it on": (
        lambda c: _entry("jobs", "own-queue")(c).update(jsonOverrides=[
            {"path": "/spec/template/spec/nodeSelector", "value": {"kns.io/pool": "spare"}}]),
        ['kns:jobs[own-queue].queue: queue "adhoc" can never admit its pod (Kueue would keep it waiting): '
         'pool "spare" has no quota in it (its pools: cpu)']),
    "a negative quota": (
        lambda c: _queue("adhoc")(c)["quota"]["cpu"].update(cpu=-2),
        ["kns:queues[adhoc].quota.cpu: cpu: -2 must not be negative"] + ADHOC_INVALID),
    "a cohort that is not a DNS label": (
        lambda c: _queue("adhoc")(c).update(cohort="Shared_Pool"),
        ['kns:queues[adhoc].cohort: "Shared_Pool" is not a DNS-1123 label (lower-case letters, digits and "-", '
         'starting and ending with a letter or digit)'] + ADHOC_INVALID),
    "queues while queueing is off": (
        lambda c: c["queueing"].update(enabled=False),
        ["kns:queues: queueing is off: set kns:queueing.enabled: true to use queues (Kueue)",
         'kns:profiles[@ml].queue: names queue "batch" but queueing is off: set kns:queueing.enabled: true to use '
         "queues (Kueue)",
         'kns:jobs[etl].queue: names queue "adhoc" but queueing is off: set kns:queueing.enabled: true to use '
         "queues (Kueue)",
         'kns:jobs[own-queue].queue: names queue "adhoc" but queueing is off: set kns:queueing.enabled: true to '
         "use queues (Kueue)"]),
    "a limit without a cohort": (
        lambda c: _queue("adhoc")(c).pop("cohort"),
        ["kns:queues[adhoc].lendingLimit: borrowingLimit and lendingLimit need a cohort: they bound what the "
         "queue borrows from and lends to the other queues of its cohort"] + ADHOC_INVALID),
    "lending more than the quota": (
        lambda c: _queue("adhoc")(c)["lendingLimit"]["cpu"].update(cpu=9),
        ["kns:queues[adhoc].lendingLimit.cpu.cpu: 9 is more than the quota 8: a queue lends at most its quota"] + ADHOC_INVALID),
    "a limit on a pool outside the quota": (
        lambda c: _queue("adhoc")(c)["lendingLimit"].update(a100={"cpu": 1}),
        ['kns:queues[adhoc].lendingLimit.a100: pool "a100" has no quota in this queue (its pools: cpu)'] + ADHOC_INVALID),
    "two queues with one name": (
        lambda c: c["queues"].append(copy.deepcopy(c["queues"][1])),
        ['kns:queues[adhoc].name: "adhoc" names another queue too; queue names are unique']),
    "an entry over its queue's quota without a cohort": (
        lambda c: (_queue("adhoc")(c).pop("cohort"), _queue("adhoc")(c).pop("lendingLimit"),
                   _entry("jobs", "etl")(c).update(cpu=6)),
        ['kns:jobs[etl].queue: queue "adhoc" can never admit its 2 pods at once (Kueue would keep it waiting): '
         'cpu 12 is more than pool "cpu" can hold: quota 8 + borrowing 0']),
    "an entry over quota plus what the cohort lends": (
        lambda c: _entry("jobs", "etl")(c).update(cpu=13),
        ['kns:jobs[etl].queue: queue "adhoc" can never admit its 2 pods at once (Kueue would keep it waiting): '
         'cpu 26 is more than pool "cpu" can hold: quota 8 + borrowing 16']),
    "an entry over quota plus its borrowing limit": (
        lambda c: (_queue("adhoc")(c).pop("lendingLimit"), _entry("schedules", "plain")(c).update(cpu=25)),
        ['kns:schedules[plain]: its queue "batch" (from kns:profiles[@ml].queue) can never admit its pod (Kueue would keep it waiting): '
         'cpu 25 is more than pool "cpu" can hold: quota 16 + borrowing 8']),
    "an entry over quota plus what the cohort's lending limits allow": (
        lambda c: _entry("schedules", "plain")(c).update(cpu=21),
        ['kns:schedules[plain]: its queue "batch" (from kns:profiles[@ml].queue) can never admit its pod (Kueue would keep it waiting): '
         'cpu 21 is more than pool "cpu" can hold: quota 16 + borrowing 4']),
    "an entry on a pool its queue has no quota on": (
        lambda c: _entry("jobs", "etl")(c).update(pool="spare"),
        ['kns:jobs[etl].queue: queue "adhoc" can never admit its 2 pods at once (Kueue would keep it waiting): '
         'pool "spare" has no quota in it (its pools: cpu)']),
    "more pods at once than the pods quota": (
        lambda c: _entry("schedules", "plain")(c).update(parallelism=5),
        ['kns:schedules[plain]: its queue "batch" (from kns:profiles[@ml].queue) can never admit its 5 pods at once (Kueue would keep it '
         'waiting): pods 5 is more than pool '
         '"cpu" can hold: quota 4 + borrowing 0']),
    "an entry without a pool that fits on none of its queue's pools": (
        lambda c: _entry("jobs", "own-queue")(c).update(cpu=30),
        ['kns:jobs[own-queue].queue: queue "adhoc" can never admit its pod (Kueue would keep it waiting): '
         'cpu 30 is more than pool "cpu" can hold: quota 8 + borrowing 16']),
    "a native sidecar counted beside the containers, not in their maximum": (
        lambda c: c["jobs"].append({"name": "proxied", "user": "bob", "queue": "adhoc", "podSpec": {
            "initContainers": [{"name": "proxy", "image": "envoy:1", "restartPolicy": "Always",
                                "resources": {"limits": {"cpu": 5, "memory": "1Gi"}}}],
            "containers": [{"name": "main", "image": "busybox:1.37", "resources": {"limits": {"cpu": 20, "memory": "1Gi"}}}]}}),
        ['kns:jobs[proxied].queue: queue "adhoc" can never admit its pod (Kueue would keep it waiting): '
         'cpu 25 is more than pool "cpu" can hold: quota 8 + borrowing 16']),
    "an override taking a queued Job out of its queue": (
        lambda c: _entry("jobs", "etl")(c).update(jsonOverrides=[
            {"path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "other"}]),
        ['kns:jobs[etl].jsonOverrides[0]: /metadata/labels/kueue.x-k8s.io~1queue-name: is "kns", set by queue (the '
         'Job waits in its queue); overrides may not change it']),
    "an override starting a queued Job before its queue admits it": (
        lambda c: _entry("schedules", "warm")(c).update(jsonOverrides=[{"path": "/spec/suspend", "value": False}]),
        ["kns:schedules[warm].jsonOverrides[0]: /spec/suspend: is true, set by queue (Kueue starts the Job when its "
         "queue admits it); overrides may not change it"]),
    "the queue label among an entry's labels": (
        lambda c: c["jobs"].append({"name": "sneaky", "user": "bob", "image": "busybox:1.37",
                                    "labels": {"kueue.x-k8s.io/queue-name": "kns"}}),
        [f"kns:jobs[sneaky].labels.kueue.x-k8s.io/queue-name: {rules.PROGRAM_OWNED_LABEL.message}"]),
    "reclaiming within a cohort without a cohort": (
        lambda c: (_queue("adhoc")(c).pop("cohort"), _queue("adhoc")(c).pop("lendingLimit"),
                   _queue("adhoc")(c).update(preemption={"reclaimWithinCohort": "Any"})),
        [f"kns:queues[adhoc].preemption.reclaimWithinCohort: {rules.RECLAIM_NEEDS_COHORT.message}"] + ADHOC_INVALID),
    "a boolean for a number": (
        lambda c: _queue("batch")(c).update(fairSharingWeight=True),
        [f"kns:queues[batch].fairSharingWeight: {rules.BOOLEAN_IS_NOT_A_NUMBER.message}", BATCH_INVALID]),
    "a fair-sharing weight past what Kueue computes with": (
        lambda c: _queue("batch")(c).update(fairSharingWeight=float("1e300")),
        ["kns:queues[batch].fairSharingWeight: 1e+300 is invalid: input should be less than or equal to "
         f"{rules.FAIR_SHARING_WEIGHT_MAX}", BATCH_INVALID]),
    "a queue on a namespace entry": (
        lambda c: _entry("jobs", "sandbox")(c).update(queue="batch"),
        [f"kns:jobs[sandbox].queue: {rules.NAMESPACE_NO_WORKLOAD.message}"]),
    "an invalid entry naming an unknown queue": (
        lambda c: _entry("jobs", "etl")(c).update(queue="nope", cpu="many"),
        ['kns:jobs[etl].cpu: "many" is not a quantity',
         'kns:jobs[etl].queue: no queue named "nope" (queues: adhoc, batch)']),
}


@pytest.mark.parametrize("change, lines", list(BAD.values()), ids=list(BAD))
def test_a_bad_queue_is_a_config_error_through_both_doors(tmp_path, capsys, change, lines):
    refused(tmp_path, capsys, case(change), lines)


def test_a_queue_of_cpu_memory_and_pods_admits_a_prescaled_schedule():
    """What the platform adds to a pod (the warm-up wait) adds nothing a queue must hold: a
    queue naming only cpu, memory and pods takes a prescaled schedule, whose wait asks no
    ephemeral-storage (Kueue skips a zero request of a resource its queue does not name)."""
    config = case(lambda c: _queue("batch")(c)["quota"]["cpu"].pop("ephemeral-storage"))
    assert set(_queue("batch")(config)["quota"]["cpu"]) == {"cpu", "memory", "pods"}
    done = run_program(config)
    warm = next(r for r in done.of_type("kubernetes:batch/v1:CronJob") if r.name == "warm")
    pod = warm.inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert names.QUEUE_LABEL in warm.inputs["spec"]["jobTemplate"]["metadata"]["labels"]
    wait = next(c for c in pod["initContainers"] if c["name"] == "kns-wait")
    assert wait["resources"]["requests"]["ephemeral-storage"] == "0"
    assert all("ephemeral-storage" not in c.get("resources", {}).get("requests", {})
               for c in pod["containers"])


def test_a_profile_queue_leaves_namespace_entries_out():
    """A profile's queue is for the workloads it covers; `sandbox` (type namespace, covered
    by @ml's queue) runs none, so it gets no LocalQueue."""
    done = run_program(CONFIG)
    queued = {name for name in of(done, LOCAL_QUEUE)}
    assert "train-queue" in queued and "sandbox-queue" not in queued


def test_an_entry_that_fits_only_by_borrowing_is_accepted():
    config = case(lambda c: _entry("schedules", "plain")(c).update(cpu=20))  # 16 + the 4 adhoc lends
    done = run_program(config)
    assert apiserver.manifest(done.named(LOCAL_QUEUE, "plain-queue"))["spec"]["clusterQueue"] == "batch"
    assert done.named("kubernetes:batch/v1:CronJob", "plain")


def test_the_documented_queues_session_is_what_kns_prints(tmp_path, capsys):
    """docs/queueing.md's worked example: its config on the dev stack's cluster and `a100`
    pool plus a `compute` pool, and `./kns queues` printing what the page shows (up to its
    `...`)."""
    import yaml
    doc = (ROOT / "docs" / "queueing.md").read_text()
    start = doc.index("## Worked example")
    example = yaml.safe_load(doc[doc.index("```yaml\n", start) + 8:doc.index("```\n", doc.index("```yaml\n", start))])
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    pools = [p for p in dev["kns:nodePools"] if p["name"] == "a100"]
    pools.append({"name": "compute", "role": "compute", "nodes": ["cpu-node-1", "cpu-node-2"]})
    config = {"cluster": dev["kns:cluster"], "nodePools": pools,
              **{key.split(":", 1)[1]: value for key, value in example["config"].items()}}
    root = write_project(tmp_path / "project", config, stack="dev")
    assert cli.main(["queues", "--stack", "dev", "--project-dir", str(root)]) == 0
    printed = capsys.readouterr().out
    session = doc[doc.index("$ ./kns queues\n", start):]
    shown = session[len("$ ./kns queues\n"):session.index("  ...\n")]
    assert shown.count("\n") >= 6 and printed.startswith(shown), printed
