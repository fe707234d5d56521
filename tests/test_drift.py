"""Drift (issue 21): objects the stack manages, edited or deleted by hand, are shown by
`pulumi preview --refresh` under the entry they belong to (node pools under the platform),
in the per-entry summary CI prints (scripts/preview-summary.py), and `pulumi up --refresh`
puts them back; a preview after that has nothing to do.

On a control plane of its own with a small stack: static pools (no Karpenter), a Job, a
schedule, a namespace entry, and two queued Jobs admitted by Kueue's manager (a process),
so that a field Kueue owns (a queued Job's `spec.suspend`) is in the stack and must not
read as drift. Every hand edit goes through kubectl as an operator would make it: a merge
patch, `kubectl edit`, a server-side apply by another field manager, a delete, `kubectl
label`, `kubectl taint`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kns_cli import up as up_module
from kns_cli.preview import summary_module
from kns_testing import tokens
from kns_testing.cluster import Cluster, local_cluster, node_manifest, script
from kns_testing.kueue import start_kueue
from kns_testing.pace import slack
from kns_testing.program import ROOT, ci_checkout, dev_stack_config, engine_project, registration_requests, run_program
from kns_testing.queueing import CONFIG as QUEUED_CONFIG, without_queueing
from kns_testing.stacks import Stack
from kns_testing.watch import Watch
from plan import stacks
from plan.identity import FORCE_ANNOTATION, KUEUE_OWNED_JOB_FIELDS

NODES = [("sys-node-1", 8, 0), ("cpu-node-1", 16, 0), ("cpu-node-2", 16, 0), ("gpu-node-1", 32, 8)]
PASSPHRASE = "kns-local-drift"
SUMMARY = summary_module()

JOBS = [
    {"name": "cpu-job", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 256, "pool": "compute"},
    {"name": "gpu-job", "user": "alice", "image": "pytorch:test", "cpu": 2, "memory": "4Gi", "gpus": 1,
     "pool": "a100"},
    {"name": "sandbox", "user": "eve", "type": "namespace"},
    # Queued: created suspended, then Kueue's, which unsuspends them on admission. One on a
    # pool, one placed by the queue's flavor (Kueue adds the pool's label to its pod template).
    {"name": "queued", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 256, "pool": "compute",
     "queue": "batch"},
    {"name": "queued-anywhere", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 256, "queue": "batch"},
]
SCHEDULES = [
    {"name": "nightly", "user": "bob", "image": "busybox:1.37", "schedule": "0 3 * * *", "timeZone": "Etc/UTC",
     "cpu": 1, "memory": 256},
]
ENTRIES = {e["name"] for e in JOBS + SCHEDULES}
QUEUED = ("queued", "queued-anywhere")


def stack_config(kubeconfig: Path) -> dict:
    return {
        "kns:cluster": {"name": "kns-drift", "kubeconfig": str(kubeconfig)},
        "kns:nodePools": [
            {"name": "system", "role": "system", "nodes": ["sys-node-1"],
             "taints": [{"key": "kns.io/system", "value": "true", "effect": "NoSchedule"}]},
            {"name": "compute", "role": "compute", "nodes": ["cpu-node-1", "cpu-node-2"]},
            {"name": "a100", "role": "gpu", "nodes": ["gpu-node-1"], "gpu": {"vendor": "nvidia", "perNode": 8}},
        ],
        "kns:queueing": {"enabled": True, "install": False},
        "kns:queues": [{"name": "batch", "quota": {"compute": {"cpu": 8, "memory": "16Gi"}}}],
        "kns:jobs": JOBS,
        "kns:schedules": SCHEDULES,
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("drift-cluster"), [node_manifest(*n) for n in NODES]) as live:
        start_kueue(live)
        yield live


@pytest.fixture(scope="module")
def jobs(cluster):
    """Every version of every Job from before the first `up`: whether anything ever
    suspended a queued Job again after Kueue admitted it."""
    watch = Watch(cluster, "jobs.batch")
    yield watch
    watch.stop()


def brought_up(cluster: Cluster, root: Path, config: dict) -> Stack:
    """A project copy in `root` with the stack `local` of `config`, after a plain `pulumi up`."""
    env = engine_project(root, script("toolchain.sh"), PASSPHRASE, base_env=cluster.env)
    (root / "Pulumi.local.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    live = Stack(root, env)
    live.pulumi("stack", "init", "local")
    live.up()
    return live


@pytest.fixture(scope="module")
def stack(cluster, jobs, tmp_path_factory):
    live = brought_up(cluster, tmp_path_factory.mktemp("drift") / "kns-platform", stack_config(cluster.kubeconfig))
    for name in QUEUED:  # admitted: from now on `spec.suspend` is Kueue's
        cluster.wait(lambda name=name: cluster.get("job", name, "-n", f"kns-{name}")["spec"]["suspend"] is False,
                     slack(), message=f"Kueue admitted {name}")
    return live


# ---- reading the drift ----------------------------------------------------------------------


def drift_preview(stack: Stack):
    """`pulumi preview --refresh`, summarised as CI summarises a preview: sections by entry."""
    done = stack.pulumi("preview", "--refresh", "--json", "--show-sames", check=False)
    preview = json.loads(done.stdout)
    errors = [d["message"] for d in preview.get("diagnostics") or [] if d.get("severity") == "error"]
    assert done.returncode == 0 and not errors, (done.returncode, errors, done.stderr[-3000:])
    return SUMMARY.summarise(preview, "local")


def changes(summary) -> dict[str, set[tuple[str, str, str, tuple[str, ...]]]]:
    """Section (entry name, or Platform) -> its changes as (op, kind, name, fields); only
    the sections that change."""
    sections = [*summary.entries, summary.platform]
    return {s.title: {(c.op, SUMMARY.kind_of(c.type), c.name, c.fields) for c in s.changes}
            for s in sections if s.changes}


def assert_no_drift(stack: Stack) -> None:
    """A refreshed preview changes nothing in any entry or the platform, and every entry is
    there to say so (a summary that lost an entry would say nothing about it either)."""
    summary = drift_preview(stack)
    assert changes(summary) == {}, SUMMARY.render(summary)
    assert {s.title for s in summary.entries} == ENTRIES, SUMMARY.render(summary)
    stack.pulumi("preview", "--expect-no-changes")


def repair(stack: Stack) -> None:
    stack.pulumi("up", "--refresh", "--yes")


def never_resuspended(jobs: Watch, cluster: Cluster) -> None:
    """No queued Job went back to `suspend: true` after its admission (an `up` that fought
    Kueue would write it, and Kueue unsuspend it again)."""
    for name in QUEUED:
        cluster.wait(lambda name=name: jobs.of(f"kns-{name}", name), slack(floor=30), message=f"the watch saw {name}")
        values = [obj["spec"].get("suspend") for _, obj in jobs.of(f"kns-{name}", name)]
        flips = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
        assert flips == [True, False], (name, values)


# ---- no drift --------------------------------------------------------------------------------


def test_right_after_up_a_refreshed_preview_shows_nothing_for_any_entry(stack, cluster, jobs):
    """The baseline every drift test relies on, and the fields controllers own: Kueue has
    unsuspended the queued Jobs and put its flavor's pool label on the pod template of the
    one without a pool, neither of which is drift."""
    for name in QUEUED:
        assert cluster.get("job", name, "-n", f"kns-{name}")["spec"]["suspend"] is False
    placed = cluster.get("job", "queued-anywhere", "-n", "kns-queued-anywhere")["spec"]["template"]["spec"]
    assert placed["nodeSelector"]["kns.io/pool"] == "compute", placed
    assert_no_drift(stack)
    repair(stack)  # nothing to repair: an `up --refresh` must not re-suspend them either
    never_resuspended(jobs, cluster)
    assert_no_drift(stack)


# ---- a quota raised by hand ------------------------------------------------------------------


EDITOR = """\
import sys, yaml
key, value, path = sys.argv[1], sys.argv[2], sys.argv[3]
with open(path) as f:
    obj = yaml.safe_load(f)
obj["spec"]["hard"][key] = value
with open(path, "w") as f:
    yaml.safe_dump(obj, f)
"""


def kubectl_edit(cluster: Cluster, tmp_path: Path, key: str, value: str, *target: str) -> None:
    """`kubectl edit` with an editor that sets spec.hard[key] (the edit an operator makes)."""
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    env = {**cluster.env, "KUBE_EDITOR": f"{sys.executable} {editor} {key} {value}"}
    done = subprocess.run(["kubectl", "edit", *target], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def quota(cluster: Cluster, entry: str) -> dict:
    return cluster.get("resourcequota", "kns-quota", "-n", f"kns-{entry}")


def test_a_quota_raised_by_hand_is_shown_under_its_entry_and_restored(stack, cluster, jobs, tmp_path):
    """Each way a quota is loosened, on each kind of entry: a value raised by a merge patch
    (Job), by `kubectl edit` (schedule), by another server-side applier taking the field
    (namespace entry, queued Job), and a limit deleted (the GPU one: no cap at all)."""
    before = {entry: quota(cluster, entry) for entry in ("cpu-job", "nightly", "sandbox", "queued", "gpu-job")}
    cluster.kubectl("patch", "resourcequota", "kns-quota", "-n", "kns-cpu-job", "--type", "merge",
                    "-p", json.dumps({"spec": {"hard": {"requests.cpu": "64"}}}))
    kubectl_edit(cluster, tmp_path, "pods", "50", "resourcequota", "kns-quota", "-n", "kns-nightly")
    for entry, key in (("sandbox", "limits.memory"), ("queued", "requests.memory")):
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=ops-runbook", "-f", "-",
                        input=json.dumps({"apiVersion": "v1", "kind": "ResourceQuota",
                                          "metadata": {"name": "kns-quota", "namespace": f"kns-{entry}"},
                                          "spec": {"hard": {key: "512Gi"}}}))
    cluster.kubectl("patch", "resourcequota", "kns-quota", "-n", "kns-gpu-job", "--type", "json",
                    "-p", json.dumps([{"op": "remove", "path": "/spec/hard/requests.nvidia.com~1gpu"}]))

    def update(entry: str, field: str):
        return {("update", "ResourceQuota", f"{entry}-quota", (field,))}

    # Without a refresh the engine diffs against its state, never the cluster: a no-change
    # run sees nothing of a hand edit, so `make up` skipping an unchanged entry stack
    # restores no less than running it would (docs/entry-stacks.md); KNS_REFRESH=true does.
    assert stack.pulumi("preview", "--expect-no-changes", check=False).returncode == 0

    assert changes(drift_preview(stack)) == {
        "cpu-job": update("cpu-job", 'spec.hard["requests.cpu"]'),
        "nightly": update("nightly", "spec.hard.pods"),
        "sandbox": update("sandbox", 'spec.hard["limits.memory"]'),
        "queued": update("queued", 'spec.hard["requests.memory"]'),
        "gpu-job": update("gpu-job", 'spec.hard["requests.nvidia.com/gpu"]'),
    }
    repair(stack)
    for entry, old in before.items():
        now = quota(cluster, entry)
        assert now["spec"]["hard"] == old["spec"]["hard"], entry
        assert now["metadata"]["uid"] == old["metadata"]["uid"], entry  # put back in place, not recreated
    never_resuspended(jobs, cluster)
    assert_no_drift(stack)


# ---- CI's drift check and its converge (.github/workflows/drift.yml, up.yml) ----------------


def ci_script(stack: Stack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", *args], cwd=stack.root, env={**stack.env, "KNS_PARALLEL_STACKS": "1"},
                          capture_output=True, text=True, timeout=1800)


def test_the_ci_drift_check_fails_on_a_hand_edit_and_passes_after_the_converging_up(stack, cluster, jobs, tmp_path):
    """scripts/ci-drift.sh as the drift workflow runs it, in a checkout, reading with an
    identity of its own that may only get, list and watch (docs/ci.md): clean, although the
    stack's digest output differs with the kubeconfig read; a quota loosened by hand fails
    it with the object under its entry, and it changes nothing itself (still failing on a
    second run, the quota still loosened); the up workflow's converge (scripts/ci-up.sh
    --converge, the real `make up`, with the apply identity) puts the quota back and
    records the commit, and the check passes again. Always with the admin's config put back."""
    commit = ci_checkout(stack.root)
    config = stack.root / "Pulumi.local.yaml"
    admin = config.read_text()
    reader = cluster.read_only_kubeconfig(tmp_path / "preview.kubeconfig")
    assert not cluster.can("system:serviceaccount:default:kns-preview", "patch", "resourcequotas", "kns-cpu-job")

    def drift_check() -> subprocess.CompletedProcess:
        document = yaml.safe_load(admin)
        document["config"]["kns:cluster"]["kubeconfig"] = str(reader)
        config.write_text(yaml.safe_dump(document, sort_keys=False))
        try:
            return ci_script(stack, "scripts/ci-drift.sh", "local")
        finally:
            config.write_text(admin)

    clean = drift_check()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "ci-drift: stack local: no drift" in clean.stdout
    old = quota(cluster, "cpu-job")
    cluster.kubectl("patch", "resourcequota", "kns-quota", "-n", "kns-cpu-job", "--type", "merge",
                    "-p", json.dumps({"spec": {"hard": {"requests.cpu": "64"}}}))
    for _ in range(2):
        drifted = drift_check()
        assert drifted.returncode == 1, drifted.stdout + drifted.stderr
        assert "has drifted" in drifted.stderr and "run the up workflow by hand with converge" in drifted.stderr
        assert "drift: local: update cpu-job-quota (kubernetes:core/v1:ResourceQuota)" in drifted.stdout
        assert re.search(r"### Job `cpu-job`.*\n(.*\n)*.*`~` update \| `ResourceQuota` \| `kns-cpu-job/kns-quota` \| "
                         r"`spec.hard\[\"requests.cpu\"\]`", drifted.stdout), drifted.stdout
        assert (stack.root / "build" / "drift-local.md").read_text() in drifted.stdout
        assert quota(cluster, "cpu-job")["spec"]["hard"]["requests.cpu"] == "64"
    converged = ci_script(stack, "scripts/ci-up.sh", "local", "--converge")
    assert converged.returncode == 0, converged.stdout[-3000:] + converged.stderr[-3000:]
    assert quota(cluster, "cpu-job")["spec"]["hard"] == old["spec"]["hard"]
    recorded = subprocess.run(["./kns", "applied", "--stack", "local"], cwd=stack.root, env=stack.env,
                              capture_output=True, text=True, check=True)
    assert recorded.stdout.strip() == commit
    again = drift_check()
    assert again.returncode == 0, again.stdout + again.stderr
    never_resuspended(jobs, cluster)


# ---- a LimitRange deleted by hand ------------------------------------------------------------


def test_a_limit_range_deleted_by_hand_is_shown_under_its_entry_and_recreated(stack, cluster, jobs):
    """Deleted in a Job's, a schedule's, a namespace entry's and a queued Job's namespace:
    each entry previews the create of its own LimitRange, and `up --refresh` makes it again,
    as the program declares it."""
    entries = ("cpu-job", "nightly", "sandbox", "queued-anywhere")
    before = {e: cluster.get("limitrange", "kns-defaults", "-n", f"kns-{e}") for e in entries}
    for entry in entries:
        cluster.kubectl("delete", "limitrange", "kns-defaults", "-n", f"kns-{entry}")

    assert changes(drift_preview(stack)) == {
        entry: {("create", "LimitRange", f"{entry}-defaults", ())} for entry in entries
    }
    repair(stack)
    for entry, old in before.items():
        now = cluster.get("limitrange", "kns-defaults", "-n", f"kns-{entry}")
        assert now["spec"] == old["spec"], entry
        assert now["metadata"]["uid"] != old["metadata"]["uid"], entry  # made again by `up`
    never_resuspended(jobs, cluster)
    assert_no_drift(stack)


# ---- node labels and taints changed by hand --------------------------------------------------


def node_state(cluster: Cluster, name: str) -> tuple[dict, list]:
    node = cluster.get("node", name)
    return node["metadata"].get("labels", {}), node["spec"].get("taints", [])


def test_node_labels_and_taints_changed_by_hand_are_shown_under_the_platform_and_restored(stack, cluster, jobs):
    """On each static pool, a label or taint the pool puts on its node: the pool label
    removed (compute), the cluster label overwritten (compute, the other node), the GPU
    taint removed (a100), the system taint's value changed and a taint added beside it
    (system: a tainted pool owns the node's whole taint list, docs/node-pools.md). Node
    pools belong to no entry: each shows under Platform as an update of that node's
    NodePatch, and no entry changes."""
    names = [n for n, _, _ in NODES]
    before = {name: node_state(cluster, name) for name in names}
    assert before["gpu-node-1"][0]["kns.io/pool"] == "a100"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in before["gpu-node-1"][1]
    cluster.kubectl("label", "node", "cpu-node-1", "kns.io/pool-")
    cluster.kubectl("label", "node", "cpu-node-2", "--overwrite", "kns.io/cluster=elsewhere")
    cluster.kubectl("taint", "node", "gpu-node-1", "nvidia.com/gpu:NoSchedule-")
    cluster.kubectl("taint", "node", "sys-node-1", "--overwrite", "kns.io/system=false:NoSchedule")
    cluster.kubectl("taint", "node", "sys-node-1", "handmade=1:PreferNoSchedule")
    assert "kns.io/pool" not in node_state(cluster, "cpu-node-1")[0]
    assert not [t for t in node_state(cluster, "gpu-node-1")[1] if t["key"] == "nvidia.com/gpu"]

    found = changes(drift_preview(stack))
    assert set(found) == {"Platform"}, found
    rows = {(op, kind, name): fields for op, kind, name, fields in found["Platform"]}
    assert set(rows) == {("update", "NodePatch", name) for name in
                         ("compute.cpu-node-1", "compute.cpu-node-2", "a100.gpu-node-1", "system.sys-node-1")}, rows
    assert rows[("update", "NodePatch", "compute.cpu-node-1")] == ('metadata.labels["kns.io/pool"]',)
    assert rows[("update", "NodePatch", "compute.cpu-node-2")] == ('metadata.labels["kns.io/cluster"]',)
    for name in ("a100.gpu-node-1", "system.sys-node-1"):
        fields = rows[("update", "NodePatch", name)]
        assert fields and all(f.startswith("spec.taints") for f in fields), rows
    repair(stack)
    for name in names:
        assert node_state(cluster, name) == before[name], name
    never_resuspended(jobs, cluster)
    assert_no_drift(stack)


# ---- the program: what a controller owns is not compared (Pulumi mocks) ---------------------


@pytest.fixture
def registered(monkeypatch):
    """(type, logical name) -> the registration request: the options reach the engine in it,
    which the mock monitor sees."""
    return registration_requests(monkeypatch)


def test_a_queued_jobs_suspend_is_kueues_and_nothing_else_is_ignored(registered):
    """Every queued Job (queued by its own key or a profile) ignores exactly `spec.suspend`,
    and is still created suspended; CronJobs (Kueue manages the Jobs they make, not them),
    unqueued Jobs and every other object ignore nothing."""
    run = run_program(QUEUED_CONFIG)
    ignored = {key: list(request.ignoreChanges) for key, request in registered.items()}
    jobs = {r.name: r for r in run.of_type("kubernetes:batch/v1:Job")}
    assert set(jobs) == {"etl", "train", "own-queue"}
    for name, job in jobs.items():
        assert ignored[("kubernetes:batch/v1:Job", name)] == KUEUE_OWNED_JOB_FIELDS == ["spec.suspend"]
        assert job.inputs["spec"]["suspend"] is True
    assert run.of_type("kubernetes:batch/v1:CronJob")
    others = {key: value for key, value in ignored.items() if key[0] != "kubernetes:batch/v1:Job" and value}
    assert others == {}

    registered.clear()
    plain = run_program(without_queueing(QUEUED_CONFIG))
    ignored = {key: list(request.ignoreChanges) for key, request in registered.items()}
    assert {r.name for r in plain.of_type("kubernetes:batch/v1:Job")} == set(jobs)
    assert {key: value for key, value in ignored.items() if value} == {}


def test_only_a_job_is_replaced_by_deleting_it_first(registered):
    """A Job's template is immutable and its name fixed: the program asks the engine to
    delete it before creating its replacement (queued or not); nothing else is, so every
    other object is still replaced new-first."""
    for config in (QUEUED_CONFIG, dev_stack_config()):
        registered.clear()
        run = run_program(config)
        jobs = {("kubernetes:batch/v1:Job", r.name) for r in run.of_type("kubernetes:batch/v1:Job")}
        assert jobs and run.of_type("kubernetes:batch/v1:CronJob")
        assert {key for key, request in registered.items() if request.deleteBeforeReplace} == jobs


def test_every_object_on_the_cluster_owns_the_fields_it_declares():
    """Without `pulumi.com/patchForce`, a field changed by hand belongs to kubectl's field
    manager and `up --refresh` stops on an apply conflict instead of restoring it: every
    Kubernetes object of the dev stack and of a stack that installs Kueue carries it, and
    the annotations an object had before are kept."""
    for run in (run_program(dev_stack_config()), run_program(QUEUED_CONFIG)):
        objects = [r for r in run.kubernetes if r.custom]
        assert len(objects) > 40
        for obj in objects:
            assert obj.metadata["annotations"][FORCE_ANNOTATION] == "true", (obj.type, obj.name)
    job = run_program(dev_stack_config()).named("kubernetes:batch/v1:Job", "train-resnet")
    assert job.metadata["annotations"]["pulumi.com/skipAwait"] == "true"


# ---- the summary of a refreshed preview --------------------------------------------------------


def test_the_summary_of_a_refreshed_preview_shows_only_what_the_update_would_do():
    """`preview --refresh --json` lists a `refresh` step (a read) for every resource before
    the step the update takes: only the latter is a change, so an entry whose objects
    are as declared is unchanged, and a drifted one shows the update or create that
    restores it."""
    entry_type = f"urn:pulumi:local::kns-platform::{tokens.JOB}"

    def steps(urn: str, op: str = "same", **extra) -> list[dict]:
        return [{"op": "refresh", "urn": urn}, {"op": op, "urn": urn, **extra}]

    def child(entry: str, kind: str, suffix: str) -> str:
        return f"{entry_type}${tokens.JOB_NAMESPACE}$kubernetes:core/v1:{kind}::{entry}-{suffix}"

    preview = {"changeSummary": {"same": 5, "update": 1, "create": 1}, "steps": [
        *(step for entry in ("clean", "raised", "deleted") for step in steps(f"{entry_type}::{entry}")),
        *steps(child("clean", "ResourceQuota", "quota")),
        *steps(child("raised", "ResourceQuota", "quota"), "update",
               detailedDiff={'spec.hard["requests.cpu"]': {"kind": "update"}}),
        *steps(child("deleted", "LimitRange", "defaults"), "create"),
    ]}
    summary = SUMMARY.summarise(preview, "local")
    assert changes(summary) == {
        "raised": {("update", "ResourceQuota", "raised-quota", ('spec.hard["requests.cpu"]',))},
        "deleted": {("create", "LimitRange", "deleted-defaults", ())},
    }
    assert {s.title: s.same for s in summary.entries} == {"clean": 2, "raised": 1, "deleted": 1}
    assert "refresh" not in SUMMARY.render(summary)


# ---- `./kns up ENTRY...`: one entry applied on a stack of 20 (issue 33) ------------------------
#
# A second stack on the same control plane: its own project copy and backend, its own node
# and pool, no scheduler and no queue, so nothing of it meets the drift stack's objects.

MANY_NODE = ("many-node-1", 32, 0)
MANY_CLUSTER = "kns-many"


def many_config(kubeconfig: Path) -> dict:
    """16 Jobs and 4 schedules (cron on 1 January: none fires during the test)."""
    jobs = [{"name": f"t-{i:02}", "user": "bob", "image": "busybox:1.37", "cpu": 0.1, "memory": 64,
             "env": {"RUN": str(i)}} for i in range(16)]
    schedules = [{"name": f"s-{i:02}", "user": "eve", "image": "busybox:1.37", "schedule": f"{i} 3 1 1 *",
                  "timeZone": "Etc/UTC", "cpu": 0.1, "memory": 64} for i in range(4)]
    return {
        "kns:cluster": {"name": MANY_CLUSTER, "kubeconfig": str(kubeconfig)},
        "kns:nodePools": [{"name": "many", "role": "compute", "nodes": [MANY_NODE[0]]}],
        "kns:packingScheduler": {"enabled": False},
        "kns:jobs": jobs,
        "kns:schedules": schedules,
    }


@pytest.fixture(scope="module")
def many(cluster, tmp_path_factory):
    """The 20-entry stack, brought up in full with a plain `pulumi up` (which records the
    shared sections' digests, config/fingerprint.py)."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(node_manifest(*MANY_NODE)))
    return brought_up(cluster, tmp_path_factory.mktemp("many") / "kns-platform", many_config(cluster.kubeconfig))


MANY_KINDS = "namespaces,limitranges,resourcequotas,serviceaccounts,roles,rolebindings,jobs.batch,cronjobs.batch"
# Controllers write these objects' status (a Job's pods, a quota's usage): their
# resourceVersion moves without any apply, so what the stack wrote is compared instead.
STATUS_WRITTEN = ("Job", "ResourceQuota")


def many_objects(cluster: Cluster) -> dict[tuple[str, str, str], dict]:
    """Every object of the 20-entry stack on the cluster, by (kind, namespace, name)."""
    items = cluster.get(MANY_KINDS, "-A", "-l", f"kns.io/cluster={MANY_CLUSTER}", "--show-managed-fields")["items"]
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in items}


def written(obj: dict) -> dict:
    """What says an object was not touched: its uid, and its resourceVersion, or, for an
    object a controller writes the status of, its generation and the managedFields entries
    of the stack's own field manager (their time moves with any apply)."""
    meta = obj["metadata"]
    if obj["kind"] not in STATUS_WRITTEN:
        return {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
    mine = [m for m in meta.get("managedFields") or [] if m.get("manager", "").startswith("pulumi")]
    assert mine, (obj["kind"], meta["name"], meta.get("managedFields"))
    return {"uid": meta["uid"], "generation": meta.get("generation"), "applied": mine}


def entry_of(key: tuple[str, str, str]) -> str:
    return key[1].removeprefix("kns-") if key[1] else key[2].removeprefix("kns-")


def kns_up(stack: Stack, *names: str) -> subprocess.CompletedProcess:
    """`./kns up NAME...` on the stack's project copy, with its backend and passphrase."""
    return subprocess.run([sys.executable, "-m", "kns_cli", "up", "--project-dir", str(stack.root), "--stack",
                           "local", *names], cwd=ROOT, env={**stack.env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=900)


def state_entries(stack: Stack) -> set[str]:
    deployment = json.loads(stack.pulumi("stack", "export").stdout)
    return set(up_module.read_state(deployment).entries)


def config_entries(stack: Stack) -> set[str]:
    config = yaml.safe_load((stack.root / "Pulumi.local.yaml").read_text())["config"]
    return {e["name"] for key in ("kns:jobs", "kns:schedules") for e in config.get(key) or []}


def assert_others_untouched(before: dict, after: dict, touched: set[str]) -> None:
    """Every object of every entry but `touched` is still there, not written since `before`
    (each entry has at least its Namespace, LimitRange, quota, ServiceAccount, Role,
    RoleBinding and Job or CronJob: a listing that lost objects fails here)."""
    others = {key: written(obj) for key, obj in before.items() if entry_of(key) not in touched}
    entries = {entry_of(key) for key in others}
    assert len(entries) >= 19 and len(others) >= 7 * len(entries), (len(entries), len(others))
    assert set(others) <= set(after), sorted(set(others) - set(after))
    assert {key: written(after[key]) for key in others} == others


def test_kns_up_adds_changes_and_removes_one_entry_of_20_and_leaves_the_others_untouched(many, cluster):
    """Each of the three changes applied with `./kns up` alone: the entry's objects are
    created, updated or deleted; every other entry's objects keep their uid and are not
    written (resourceVersion, or what the stack's field manager applied); the state holds
    every entry of the config; and a full `pulumi preview --expect-no-changes` is clean."""
    assert len(config_entries(many)) == 20 and state_entries(many) == config_entries(many)

    def bystander(schedule: str):
        return lambda c: next(s for s in c["kns:schedules"] if s["name"] == "s-00").update(schedule=schedule)

    def apply(name: str, edit, check) -> None:
        """`./kns up name` after `edit`, with a change to another entry (s-00) pending: it
        stays unapplied (s-00's CronJob untouched) until the config is put back."""
        before = many_objects(cluster)
        many.edit(edit)
        many.edit(bystander("30 3 1 1 *"))
        done = kns_up(many, name)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"kns up: stack local, 1 entry ({name}" in done.stderr, done.stderr
        assert "Not applied (--target): the platform and the" in done.stdout, done.stdout
        after = many_objects(cluster)
        check(before, after)
        assert_others_untouched(before, after, {name})
        assert after[("CronJob", "kns-s-00", "s-00")]["spec"]["schedule"] == "0 3 1 1 *"
        assert state_entries(many) == config_entries(many)
        pending = many.pulumi("preview", "--expect-no-changes", check=False)
        assert pending.returncode != 0 and "s-00" in pending.stdout, pending.stdout[-2000:]
        many.edit(bystander("0 3 1 1 *"))
        many.pulumi("preview", "--expect-no-changes")

    def added(before, after):
        new = {key for key in after if entry_of(key) == "t-new"}
        assert {key[0] for key in new} >= {"Namespace", "LimitRange", "ResourceQuota", "Job"}, new
        assert not any(entry_of(key) == "t-new" for key in before)

    apply("t-new", lambda c: c["kns:jobs"].append(
        {"name": "t-new", "user": "bob", "image": "busybox:1.37", "cpu": 0.1, "memory": 64}), added)

    def changed(before, after):
        key = ("CronJob", "kns-s-02", "s-02")
        assert before[key]["spec"]["schedule"] == "2 3 1 1 *" and after[key]["spec"]["schedule"] == "7 4 1 1 *"
        assert after[key]["metadata"]["uid"] == before[key]["metadata"]["uid"]  # updated in place

    apply("s-02", lambda c: next(s for s in c["kns:schedules"] if s["name"] == "s-02").update(schedule="7 4 1 1 *"),
          changed)

    def replaced(before, after):
        key = ("Job", "kns-t-03", "t-03")
        assert after[key]["metadata"]["uid"] != before[key]["metadata"]["uid"]  # a new Job
        cpu = after[key]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        assert cpu == "300m", after[key]["spec"]["template"]

    # A Job's pod template is immutable: changing the entry's cpu replaces the Job (deleted
    # first: the new one has the same name).
    apply("t-03", lambda c: next(j for j in c["kns:jobs"] if j["name"] == "t-03").update(cpu=0.3), replaced)

    def removed(before, after):
        assert any(entry_of(key) == "t-05" for key in before)
        left = {key: obj for key, obj in after.items() if entry_of(key) == "t-05"}
        # The namespace may still be terminating (its controller empties it): it is going.
        assert all(obj["metadata"].get("deletionTimestamp") for obj in left.values()), sorted(left)

    apply("t-05", lambda c: c.update({"kns:jobs": [j for j in c["kns:jobs"] if j["name"] != "t-05"]}), removed)
    assert "t-05" not in state_entries(many) and "t-new" in state_entries(many)


def test_kns_up_refuses_a_shared_change_and_applies_nothing(many, cluster):
    """A change to a shared section (node pools, profiles) or to the program's files since
    the last full `up`: refused before the engine runs, naming what changed; the cluster and
    the state stay as they were."""
    before = many_objects(cluster)
    history = len(json.loads(many.pulumi("stack", "history", "--json").stdout))
    original = (many.root / "Pulumi.local.yaml").read_text()
    many.edit(lambda c: (c["kns:nodePools"][0].update(labels={"team": "ml"}),
                         c.update({"kns:profiles": {"bob": {"maxCpu": 8}}}),
                         c["kns:jobs"][0].update(cpu=0.2)))
    done = kns_up(many, "t-00")
    assert done.returncode == up_module.REFUSED, done.stdout + done.stderr
    assert ("kns up: refused, nothing was applied: shared sections changed since the last full `up`: "
            "kns:nodePools, kns:profiles; every entry depends on them. Apply the whole stack with "
            "`KNS_STACK=local make up`") in done.stderr, done.stderr
    (many.root / "Pulumi.local.yaml").write_text(original)
    program_file = many.root / "plan" / "manifests.py"
    program_file.write_text(program_file.read_text() + "\n# a change to the program\n")
    try:
        done = kns_up(many, "t-00")
        assert done.returncode == up_module.REFUSED, done.stdout + done.stderr
        assert ("shared section changed since the last full `up`: program (the program's files); every entry "
                "depends on it") in done.stderr, done.stderr
    finally:
        program_file.write_text(program_file.read_text().removesuffix("\n# a change to the program\n"))
    assert {k: written(o) for k, o in many_objects(cluster).items()} == {k: written(o) for k, o in before.items()}
    assert len(json.loads(many.pulumi("stack", "history", "--json").stdout)) == history


def test_an_entry_that_becomes_a_schedule_keeps_its_namespace_and_its_new_cronjob(many, cluster):
    """An entry moved between `kns:jobs` and `kns:schedules` (its kind changes, its name and
    namespace do not), applied by a full `up` and back by `./kns up`: the namespace it keeps
    is never deleted (had the engine taken it for another entry's, the deletion of the old
    one would empty the new one), the Job goes, the CronJob stays, and nothing else moves."""
    name, namespace = "t-09", "kns-t-09"
    before = many_objects(cluster)

    def to_schedule(config):
        job = next(j for j in config["kns:jobs"] if j["name"] == name)
        config["kns:jobs"].remove(job)
        config["kns:schedules"].append({**job, "schedule": "9 4 1 1 *", "timeZone": "Etc/UTC"})

    many.edit(to_schedule)
    many.up()
    after = many_objects(cluster)
    assert ("Job", namespace, name) not in after
    assert after[("CronJob", namespace, name)]["spec"]["schedule"] == "9 4 1 1 *"
    assert after[("Namespace", "", namespace)]["metadata"]["uid"] == before[("Namespace", "", namespace)]["metadata"]["uid"]
    assert not after[("Namespace", "", namespace)]["metadata"].get("deletionTimestamp")
    assert_others_untouched(before, after, {name})
    many.pulumi("preview", "--expect-no-changes")

    def to_job(config):
        schedule = next(s for s in config["kns:schedules"] if s["name"] == name)
        config["kns:schedules"].remove(schedule)
        config["kns:jobs"].append({k: v for k, v in schedule.items() if k not in ("schedule", "timeZone")})

    many.edit(to_job)
    done = kns_up(many, name)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    back = many_objects(cluster)
    assert ("CronJob", namespace, name) not in back and ("Job", namespace, name) in back
    assert back[("Namespace", "", namespace)]["metadata"]["uid"] == before[("Namespace", "", namespace)]["metadata"]["uid"]
    assert not back[("Namespace", "", namespace)]["metadata"].get("deletionTimestamp")
    assert_others_untouched(before, back, {name})
    assert state_entries(many) == config_entries(many)
    many.pulumi("preview", "--expect-no-changes")


# ---- entry stacks (docs/entry-stacks.md): the 20-entry stack split, last of the module -------


def with_make(stack: Stack) -> None:
    """What `make up` and `make outputs` run (scripts/up.sh, its helpers, kns_cli, the policy
    pack), in the stack's project copy as a checkout has them."""
    for name in ("kns_cli", "policy", "versions.env", "requirements.txt"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, stack.root / name)
    (stack.root / "scripts" / "lib").mkdir(parents=True)
    for name in ("up.sh", "preview-summary.py", "lib/engine.sh"):
        shutil.copy2(ROOT / "scripts" / name, stack.root / "scripts" / name)
    (stack.root / "scripts" / "toolchain.sh").write_text(f"#!/usr/bin/env bash\necho {script('toolchain.sh')}\n")
    (stack.root / ".venv").symlink_to(ROOT / ".venv")


def make(stack: Stack, target: str) -> subprocess.CompletedProcess:
    """`KNS_STACK=local make TARGET`: what the Makefile runs for it."""
    return subprocess.run(["bash", "scripts/up.sh", target], cwd=stack.root, env={**stack.env, "KNS_STACK": "local"},
                          capture_output=True, text=True, timeout=1800)


def split_state(stack: Stack, count: int) -> dict[str, set[str]]:
    """Each Pulumi stack of the split stack -> the entries its state holds."""
    return {name: set(up_module.read_state(json.loads(stack.pulumi("stack", "export", "--stack", name).stdout)).entries)
            for name in stacks.stacks("local", count)}


def assert_clean_everywhere(stack: Stack, count: int) -> None:
    for name in stacks.stacks("local", count):
        stack.pulumi("preview", "--expect-no-changes", "--stack", name, *stacks.config_arguments(name))


def test_a_stack_split_into_entry_stacks_keeps_every_object_and_kns_up_applies_one_entry_stack(many, cluster):
    """kns:state.entryStacks set on the applied 20-entry stack: `make up` refuses until
    `./kns restack` has moved the entries' state into the entry stacks; after that `make
    up` runs the stack and its three entry stacks and changes no object on the cluster (UIDs
    and resourceVersions kept). Then `./kns up` adds, changes and removes one entry each in
    the entry stack that holds it, every other object untouched, and a preview of every
    stack is clean after each; `make outputs` shows every entry."""
    count = 3
    with_make(many)
    before = many_objects(cluster)
    history = len(json.loads(many.pulumi("stack", "history", "--json").stdout))
    many.edit(lambda c: c.update({"kns:state": {"entryStacks": count}}))

    refused = make(many, "up")
    assert refused.returncode != 0 and "Run `./kns restack --stack local`" in refused.stderr, refused.stderr[-3000:]
    assert "20 entries are in another stack" in refused.stderr, refused.stderr[-3000:]
    assert len(json.loads(many.pulumi("stack", "history", "--json").stdout)) == history

    moved = subprocess.run([sys.executable, "-m", "kns_cli", "restack", "--project-dir", str(many.root), "--stack",
                            "local"], cwd=ROOT, env={**many.env, "PYTHONPATH": str(ROOT)}, capture_output=True,
                           text=True, timeout=900)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert "kns restack: stack local (3 entry stacks): moved 20 entries" in moved.stdout, moved.stdout
    held = split_state(many, count)
    assert held["local"] == set() and set().union(*held.values()) == config_entries(many)
    assert all(stacks.holder("local", name, count) == where for where, names in held.items() for name in names)

    done = make(many, "up")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in stacks.stacks("local", count):
        assert f"Update of stack {name}: " in done.stdout, done.stdout[-3000:]
    assert not re.search(r"to (create|update|delete|replace)", done.stdout), done.stdout[-3000:]
    after = many_objects(cluster)
    assert {k: written(o) for k, o in after.items()} == {k: written(o) for k, o in before.items()}
    assert_clean_everywhere(many, count)

    def apply(name: str, edit) -> tuple[dict, dict]:
        was = many_objects(cluster)
        many.edit(edit)
        done = kns_up(many, name)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        holder = stacks.holder("local", name, count)
        assert f"kns up: stack {holder}, 1 entry ({name}" in done.stderr, done.stderr
        now = many_objects(cluster)
        assert_others_untouched(was, now, {name})
        state = split_state(many, count)
        assert set().union(*state.values()) == config_entries(many) and state["local"] == set()
        assert_clean_everywhere(many, count)
        return was, now

    _, now = apply("t-split", lambda c: c["kns:jobs"].append(
        {"name": "t-split", "user": "bob", "image": "busybox:1.37", "cpu": 0.1, "memory": 64}))
    assert ("Job", "kns-t-split", "t-split") in now
    was, now = apply("s-01", lambda c: next(s for s in c["kns:schedules"] if s["name"] == "s-01").update(
        schedule="8 5 1 1 *"))
    key = ("CronJob", "kns-s-01", "s-01")
    assert now[key]["spec"]["schedule"] == "8 5 1 1 *" and now[key]["metadata"]["uid"] == was[key]["metadata"]["uid"]
    _, now = apply("t-07", lambda c: c.update({"kns:jobs": [j for j in c["kns:jobs"] if j["name"] != "t-07"]}))
    assert all(obj["metadata"].get("deletionTimestamp") for key, obj in now.items() if entry_of(key) == "t-07")

    outputs = make(many, "outputs")
    assert outputs.returncode == 0, outputs.stderr[-3000:]
    shown = json.loads(outputs.stdout[outputs.stdout.index("{"):])
    assert set(shown["namespaces"]) == config_entries(many) and "nodePools" in shown
