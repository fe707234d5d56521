"""A MultiKueue site (`kns:workers`, docs/multicluster.md): its config rules, and what the
program registers on which cluster, under recording Pulumi mocks. The real thing (three
control planes, Kueue on each) is tests/test_e2e_multicluster.py."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from typing import Any

import pulumi
import pytest
import yaml
from google.protobuf import json_format

from config import rules
from config.multikueue import kubeconfig_problems
from kns_cli import queues as queues_cli
from kns_testing import tokens
from kns_testing.program import ROOT, RecordingMocks, mock_token_data, registration_requests, run_program, secret_value
from kns_testing.sites import EAST_KUBECONFIG, SECRETS, TOKEN, checked, problems, site
from plan import inventory, kueue_install, targeting
from plan.planner import plan_checked
from plan.stackplan import plan_stack


# ---- config -----------------------------------------------------------------------------


def test_a_valid_site_reads_its_workers_pools_and_servers():
    result = checked(site())
    assert result.problems.items == []
    cfg = result.config
    assert [w.name for w in cfg.workers] == ["east", "west"]
    assert cfg.pool_worker == {"east-cpu": "east", "west-gpu": "west", "west-cpu": "west"}
    # east's server from its kubeconfig's current context; west's apiServer as given.
    assert cfg.worker_servers == {"east": "https://10.1.0.1:6443", "west": "https://10.2.0.1:6443"}


def test_every_problem_of_a_site_is_reported_at_once_at_its_place():
    config = site(nodePools=[{"name": "east-cpu", "role": "compute", "nodes": ["m-1"]}],
                  jobs=[{"name": "loose", "image": "busybox:1.36", "cpu": "1"},
                        {"name": "on-manager", "image": "busybox:1.36", "cpu": "1", "queue": "batch",
                         "pool": "east-cpu"}])
    config["workers"][1]["context"] = "JARVICE-upstream "
    config["workers"].append({"name": "north", "nodePools": []})
    config["workers"].append({"name": "south", "context": "kns-manager", "apiServer": "http://10.3.0.1"})
    found = problems(config, secret=("credentials",))
    assert found == {
        "kns:workers[north]": "a worker needs context or kubeconfig (how Pulumi reaches it): exactly one",
        "kns:workers[south].apiServer": "is not the URL the manager's Kueue dials to reach the worker: "
                                        "https://<host>[:port]",
        "kns:workers[east].nodePools[east-cpu].name": '"east-cpu" names a pool of another cluster too '
                                                      "(kns:nodePools[east-cpu]); pool names are unique across the site",
        "kns:workers[east].kubeconfig": "a worker's kubeconfig text is a credential: store it as a secret (`pulumi "
                                        "config set --secret --path 'kns:workers[0].kubeconfig' ...`)",
        "kns:workers[west].context": '"JARVICE-upstream " is listed in kns:cluster.forbiddenContexts: the KNS needs '
                                     "cluster-admin and must own a dedicated cluster, never the JARVICE upstream one",
        "kns:queues[research].quota.east-cpu": "is a pool of the manager (kns:nodePools), which runs no workload on a "
                                               "site with kns:workers: name a worker's pool",
        "kns:queues[batch].quota.east-cpu": "is a pool of the manager (kns:nodePools), which runs no workload on a "
                                            "site with kns:workers: name a worker's pool",
        "kns:jobs[loose].queue": "on a site with kns:workers an entry's Jobs run on a worker, and only queued Jobs "
                                 "reach one (MultiKueue dispatches them): give it a queue",
        "kns:jobs[on-manager].pool": "is a pool of the manager (kns:nodePools), which runs no workload on a site with "
                                     "kns:workers: name a worker's pool",
    }


def test_a_site_needs_queueing_and_holds_at_most_twenty_workers():
    config = site(queueing={"enabled": False})
    config["workers"] += [{"name": f"w{i}", "context": f"kns-w{i}", "apiServer": f"https://10.9.0.{i}"}
                          for i in range(19)]
    found = [(p.path, p.message) for p in checked(config).problems.items]
    assert ("kns:workers", "21 workers: a MultiKueueConfig lists at most 20 clusters") in found
    assert ("kns:workers", "workers run the queued entries MultiKueue dispatches: set kns:queueing.enabled: "
                           "true") in found


def rendered_site(out: str) -> dict[str, Any]:
    """docs/multicluster.md's site as a new user tries it without its clusters: renderDir,
    the kubeconfigs left as written (no file, no context needed)."""
    return site(cluster={"name": "site", "renderDir": out})


def test_a_site_renders_offline_one_directory_per_cluster(tmp_path):
    """Rendered, the manager and each worker write their objects into renderDir/<cluster>,
    as one cluster renders into renderDir; no kubeconfig or context is read, and the
    manager's kubeconfig for a worker names its apiServer or `https://<worker>.invalid`
    with a placeholder token, never a credential."""
    config = rendered_site(str(tmp_path / "out"))
    config["workers"][0]["kubeconfig"] = str(tmp_path / "no-such-file.yaml")  # never read
    result = checked(config, environ={"KUBECONFIG": str(tmp_path / "nothing")})
    assert result.problems.items == []
    assert result.config.worker_servers == {"east": "https://east.invalid", "west": "https://10.2.0.1:6443"}
    run = run_program(config, secret_keys=("credentials",))
    providers = {r.name: r.inputs for r in run.of_type("pulumi:providers:kubernetes")}
    assert {name: inputs.get("renderYamlToDirectory") for name, inputs in providers.items()} == {
        "site-kubernetes": str(tmp_path / "out" / "site"), "east-kubernetes": str(tmp_path / "out" / "east"),
        "west-kubernetes": str(tmp_path / "out" / "west")}
    assert not any("kubeconfig" in inputs or "context" in inputs for inputs in providers.values())
    for worker, server in (("east", "https://east.invalid"), ("west", "https://10.2.0.1:6443")):
        text = secret_value(run.named("kubernetes:core/v1:Secret", f"{worker}-kubeconfig").inputs["stringData"])[
            "kubeconfig"]
        document = yaml.safe_load(text)
        assert document["clusters"][0]["cluster"]["server"] == server
        assert document["users"][0]["user"]["token"] == "rendered-offline-pulumi-up-puts-the-worker-token-here"


def test_a_rendered_sites_worker_may_not_share_the_managers_name(tmp_path):
    config = rendered_site(str(tmp_path / "out"))
    config["workers"][0]["name"] = "site"
    found = problems(config)
    assert found["kns:workers[site].name"] == ('"site" is kns:cluster.name too: a rendered site writes each cluster '
                                               "into a directory of renderDir named after it")


def test_a_kubeconfig_kueue_could_not_use_as_a_server_is_refused_without_showing_it(tmp_path):
    bad = EAST_KUBECONFIG.replace("https://10.1.0.1:6443", "https://under_score:6443")
    config = site()
    config["workers"][0]["kubeconfig"] = bad
    message = problems(config)["kns:workers[east]"]
    assert message.startswith("the server of its kubeconfig's current context cannot be the one the manager dials")
    assert message.endswith("set apiServer (the URL the manager's Kueue dials to reach the worker: https://<host>[:port])")
    assert "under_score" not in message and TOKEN not in message
    unreadable = site()
    unreadable["workers"][0]["kubeconfig"] = f"apiVersion: v1\nusers: [{{token: {TOKEN}\n"
    message = problems(unreadable)["kns:workers[east].kubeconfig"]
    assert message.startswith("inline kubeconfig ") and TOKEN not in message


@pytest.mark.parametrize("url, secret", [("https://ops:pa55w0rd-XYZ@10.2.0.1:6443", "pa55w0rd-XYZ"),
                                         (f"https://{TOKEN}@10.2.0.1:6443", TOKEN),
                                         (f"https://:{TOKEN}@10.2.0.1", TOKEN),
                                         (f"https://10.2.0.1:6443?access_token={TOKEN}", TOKEN)])
def test_a_server_url_with_credentials_is_refused_without_repeating_them(url, secret):
    """The server reaches the plan and the state in plain text: credentials in it are
    refused, with the secret-based way, whether written as apiServer or found as the server
    of the worker's kubeconfig."""
    config = site()
    config["workers"][1]["apiServer"] = url
    config["workers"][0]["kubeconfig"] = EAST_KUBECONFIG.replace("https://10.1.0.1:6443", url)
    result = checked(config)
    found = {p.path: p.message for p in result.problems.items}
    assert found["kns:workers[west].apiServer"].startswith("may hold a credential")
    assert "pulumi config set --secret --path 'kns:workers[1].kubeconfig'" in found["kns:workers[west].apiServer"]
    assert "pulumi config set --secret --path 'kns:workers[0].kubeconfig'" in found["kns:workers[east]"]
    assert found["kns:workers[east]"].startswith("the server of its kubeconfig's current context cannot be the one the "
                                                 "manager dials (may hold a credential")
    assert not [m for m in found.values() if secret in m]


def test_a_context_the_kubeconfig_does_not_hold_is_refused_even_with_an_api_server(tmp_path):
    """Pulumi reaches a worker through its context: a context the kubeconfig lacks cannot
    be mended by apiServer, which is only the URL the manager's Kueue dials."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(EAST_KUBECONFIG.replace("east-admin", "kns-west"))
    config = site()
    del config["workers"][1]["apiServer"]
    assert checked(config, environ={"KUBECONFIG": str(kubeconfig)}).config.worker_servers["west"] == \
        "https://10.1.0.1:6443"
    for api_server in (None, "https://10.2.0.1:6443"):
        config["workers"][1]["context"] = "kns-elsewhere"
        config["workers"][1].pop("apiServer", None)
        if api_server:
            config["workers"][1]["apiServer"] = api_server
        found = problems(config, environ={"KUBECONFIG": str(kubeconfig)})
        assert found["kns:workers[west].context"] == f'{kubeconfig} has no context "kns-elsewhere" (its contexts: kns-west)'
        assert "kns:workers[west]" not in found  # no advice to set apiServer


NOT_KUBECONFIGS = {
    "a mapping of something else": ("foo: bar\n", "is not a kubeconfig: it has no clusters and no contexts"),
    "a current-context it does not have": (
        EAST_KUBECONFIG.replace("current-context: east-admin", "current-context: gone"),
        'has no current-context "gone" (its contexts: east-admin)'),
    "no current-context": (EAST_KUBECONFIG.replace("current-context: east-admin", ""),
                           "sets no current-context, the context Pulumi would use (its contexts: east-admin)"),
    "a context naming no cluster it defines": (
        EAST_KUBECONFIG.replace("cluster: east\n", "cluster: nowhere\n"),
        ': context "east-admin" names cluster "nowhere", which it does not define'),
    "a cluster without a server": (EAST_KUBECONFIG.replace("server: https://10.1.0.1:6443", "insecure-skip-tls-verify: true"),
                                   ': cluster "east" (of context "east-admin") has no server'),
}


@pytest.mark.parametrize("case", sorted(NOT_KUBECONFIGS))
def test_a_kubeconfig_file_that_is_no_usable_kubeconfig_is_said_so_even_with_an_api_server(tmp_path, case):
    text, said = NOT_KUBECONFIGS[case]
    (tmp_path / "east.yaml").write_text(text)
    config = site()
    config["workers"][0]["kubeconfig"] = str(tmp_path / "east.yaml")
    for api_server in (None, "https://10.1.0.9:6443"):
        if api_server:
            config["workers"][0]["apiServer"] = api_server
        found = problems(config)
        assert found["kns:workers[east].kubeconfig"] == f"{tmp_path / 'east.yaml'}{'' if said[0] == ':' else ' '}{said}"
        assert "kns:workers[east]" not in found and "bar" not in found["kns:workers[east].kubeconfig"]
    # the stack's own cluster: the same rule for a kubeconfig it names
    config = site()
    config["cluster"] = {"name": "site", "kubeconfig": str(tmp_path / "east.yaml")}
    assert problems(config)["kns:cluster.kubeconfig"].endswith(said)


def test_a_worker_whose_kubeconfig_current_context_is_forbidden_is_refused():
    config = site()
    config["workers"][0]["kubeconfig"] = EAST_KUBECONFIG.replace("east-admin", "jarvice-upstream")
    assert problems(config)["kns:workers[east].kubeconfig"] == (
        'its current context "jarvice-upstream" is listed in kns:cluster.forbiddenContexts: a worker is a dedicated '
        "KNS cluster")


def test_kns_validate_says_what_the_program_says_of_a_bad_site(tmp_path):
    from kns_testing.doors import write_project
    config = site(jobs=[{"name": "loose", "image": "busybox:1.36", "cpu": "1"}])
    config["workers"][1]["nodePools"][0]["name"] = "east-cpu"
    del config["credentials"]
    config["workers"][0]["kubeconfig"] = "kubeconfigs/east.yaml"
    root = write_project(tmp_path / "project", config)
    (root / "kubeconfigs").mkdir()
    (root / "kubeconfigs" / "east.yaml").write_text(EAST_KUBECONFIG)
    result = subprocess.run([str(ROOT / "kns"), "validate", "--stack", "case", "--project-dir", str(root)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys=("workers",), mocks=mocks, project_dir=root, stack="case")
    assert mocks.resources == []
    text = str(info.value)
    assert result.stderr.rstrip("\n") == text
    assert "kns:workers[west].nodePools[east-cpu].name" in text and "kns:jobs[loose].queue" in text


# ---- what the program registers, and where -----------------------------------------------


@pytest.fixture
def registered(monkeypatch):
    requests = registration_requests(monkeypatch)
    mocks = RecordingMocks()
    run = run_program(site(), secret_keys=SECRETS, mocks=mocks)
    return run, requests


def provider_of(run, type_: str, name: str) -> str:
    return run.named(type_, name).provider.split("::")[3]


def test_every_object_goes_to_its_own_cluster(registered):
    run, _ = registered
    where: dict[str, set[str]] = {}
    for resource in run.kubernetes:
        where.setdefault(resource.provider.split("::")[3], set()).add(f"{resource.type.rsplit(':', 1)[1]}/{resource.name}")
    assert set(where) == {"site-kubernetes", "east-kubernetes", "west-kubernetes"}
    # Jobs only on the manager; the manager's MultiKueue objects there.
    assert {r.name for r in run.of_type("kubernetes:batch/v1:Job")} == {"train", "sweep"}
    assert all(provider_of(run, "kubernetes:batch/v1:Job", n) == "site-kubernetes" for n in ("train", "sweep"))
    for kind, name in (("MultiKueueCluster", "multikueuecluster-east"), ("MultiKueueConfig", "multikueueconfig-kns-multikueue-batch"),
                       ("AdmissionCheck", "admissioncheck-kns-multikueue-research")):
        assert provider_of(run, f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}", name) == "site-kubernetes"
    # Each worker: its pools, its Kueue, its queues, the manager's identity, the entries of its queues.
    assert "NodePatch/east-cpu.node-1" in where["east-kubernetes"] and "NodePatch/west-cpu.node-1" in where["west-kubernetes"]
    assert "NodePool/west-gpu" in where["west-kubernetes"]
    for worker in ("east", "west"):
        names = where[f"{worker}-kubernetes"]
        assert f"Deployment/{worker}-kueue-system/kueue-controller-manager" in names
        assert f"ServiceAccount/{worker}-kns-multikueue" in names and f"Secret/{worker}-kns-multikueue" in names
        assert f"ClusterQueue/{worker}-clusterqueue-research" in names
        assert f"WorkloadPriorityClass/{worker}-workloadpriorityclass-urgent" in names
        assert f"Namespace/{worker}-train" in names and f"LocalQueue/{worker}-train-queue" in names
        assert f"Secret/{worker}-train-cred-data" in names
    # batch is east's alone: its ClusterQueue, and the entries of it, only there.
    assert "ClusterQueue/east-clusterqueue-batch" in where["east-kubernetes"]
    assert not any(n.startswith(("ClusterQueue/west-clusterqueue-batch", "Namespace/west-sweep")) for n in where["west-kubernetes"])
    assert {"Namespace/east-sweep", "Service/east-sweep-workers"} <= where["east-kubernetes"]
    assert not any(kind in n for n in where["site-kubernetes"] for kind in ("NodePatch/", "NodePool/"))


def test_the_manager_queue_sums_the_workers_and_carries_its_admission_check(registered):
    run, _ = registered
    queues = {r.name: r.inputs for r in run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")}
    manager = queues["clusterqueue-research"]["spec"]
    assert manager["admissionChecksStrategy"] == {"admissionChecks": [{"name": "kns-multikueue-research"}]}
    (group,) = manager["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    (flavor,) = group["flavors"]
    assert flavor["name"] == "kns-multikueue"
    assert flavor["resources"] == [
        {"name": "cpu", "nominalQuota": "24", "borrowingLimit": "6"},
        {"name": "memory", "nominalQuota": "96Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": "4"}]
    assert manager["cohortName"] == "all"
    east = queues["east-clusterqueue-research"]["spec"]
    assert [f["name"] for f in east["resourceGroups"][0]["flavors"]] == ["east-cpu"]
    assert "admissionChecksStrategy" not in east
    flavor = run.named("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "resourceflavor-kns-multikueue").inputs
    assert flavor["spec"] == {}
    configs = {r.name: r.inputs["spec"]["clusters"] for r in run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueConfig")}
    assert configs == {"multikueueconfig-kns-multikueue-research": ["east", "west"],
                       "multikueueconfig-kns-multikueue-batch": ["east"]}
    check = run.named("kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck", "admissioncheck-kns-multikueue-batch").inputs
    assert check["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "kns-multikueue-batch"}}
    cluster = run.named("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueCluster", "multikueuecluster-west").inputs
    assert cluster["spec"] == {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                                "location": "kns-multikueue-west"}}}


def _plain_strings(value: Any, inside_secret: bool = False):
    """Every string of a serialized request, and whether it is inside a secret envelope."""
    if isinstance(value, dict):
        secret = inside_secret or value.get("4dabf18193072939515e22adb298388d") == "1b47061264138c4ac30d75fd1eb44270"
        for item in value.values():
            yield from _plain_strings(item, secret)
    elif isinstance(value, list):
        for item in value:
            yield from _plain_strings(item, inside_secret)
    elif isinstance(value, str):
        yield value, inside_secret


def test_kubeconfigs_are_secrets_and_the_managers_is_one_kueue_accepts(registered):
    run, requests = registered
    secret = run.named("kubernetes:core/v1:Secret", "east-kubeconfig")
    assert secret.metadata["name"] == "kns-multikueue-east" and secret.metadata["namespace"] == "kueue-system"
    sent = json_format.MessageToDict(requests[("kubernetes:core/v1:Secret", "east-kubeconfig")].object)
    strings = list(_plain_strings(sent))
    text = secret_value(secret.inputs["stringData"])["kubeconfig"]
    assert (text, True) in strings and (text, False) not in strings
    document = yaml.safe_load(text)
    assert kubeconfig_problems(text) == []
    # Built from east's token Secret (the token controller's data), for the server east's kubeconfig names.
    data = mock_token_data("east-kns-multikueue")
    assert document["clusters"][0]["cluster"] == {"server": "https://10.1.0.1:6443",
                                                  "certificate-authority-data": data["ca.crt"]}
    assert document["users"][0]["user"] == {"token": base64.b64decode(data["token"]).decode()}
    west = yaml.safe_load(secret_value(run.named("kubernetes:core/v1:Secret", "west-kubeconfig").inputs["stringData"])[
        "kubeconfig"])
    assert west["clusters"][0]["cluster"]["server"] == "https://10.2.0.1:6443"
    # The operator's kubeconfig reaches only east's provider, as a secret; nowhere else, nor the outputs.
    for (type_, name), request in requests.items():
        for value, in_secret in _plain_strings(json_format.MessageToDict(request.object)):
            if TOKEN in value or "token-of-" in value:
                assert in_secret, f"{type_} {name} sends a credential in plain text"
    provider = json_format.MessageToDict(requests[("pulumi:providers:kubernetes", "east-kubernetes")].object)
    assert any(TOKEN in value and in_secret for value, in_secret in _plain_strings(provider))
    assert TOKEN not in json.dumps(run.outputs, default=str) and "token-of-" not in json.dumps(run.outputs, default=str)


def test_the_token_secret_is_the_legacy_kind_the_token_controller_fills(registered):
    run, _ = registered
    token = run.named("kubernetes:core/v1:Secret", "east-kns-multikueue").inputs
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == "kns-multikueue"
    assert token["metadata"]["namespace"] == "kueue-system"
    role = run.named("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "west-kns-multikueue").inputs
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} <= {
        "create", "delete", "get", "list", "watch", "update", "patch"}
    assert {r for rule in role["rules"] for r in rule["resources"]} == {
        "jobs", "jobs/status", "workloads", "workloads/status"}


def test_the_queues_output_is_the_manager_s_queue_with_what_each_worker_holds(registered):
    run, _ = registered
    assert run.outputs["queues"] == {
        "research": {"clusterQueue": "research", "cohort": "all",
                     "quota": {"kns-multikueue": {"cpu": "24", "memory": "96Gi", "nvidia.com/gpu": "4"}},
                     "workers": {"east": {"east-cpu": {"cpu": "8", "memory": "32Gi"}},
                                 "west": {"west-gpu": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}}}},
        "batch": {"clusterQueue": "batch", "cohort": None, "quota": {"kns-multikueue": {"cpu": "4", "memory": "8Gi"}},
                  "workers": {"east": {"east-cpu": {"cpu": "4", "memory": "8Gi"}}}},
    }
    # A draining worker's pools leave the manager's sum; it still lists what it holds.
    config = site()
    config["workers"][1]["drain"] = True
    drained = run_program(config, secret_keys=SECRETS).outputs["queues"]["research"]
    assert drained["quota"] == {"kns-multikueue": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "0"}}
    assert set(drained["workers"]) == {"east", "west"}


def test_the_outputs_say_which_worker_serves_which_queue(registered):
    run, _ = registered
    assert run.outputs["workers"] == {
        "east": {"nodePools": ["east-cpu"], "queues": {"research": {"east-cpu": {"cpu": "8", "memory": "32Gi"}},
                                                         "batch": {"east-cpu": {"cpu": "4", "memory": "8Gi"}}}},
        "west": {"nodePools": ["west-gpu", "west-cpu"], "queues": {
            "research": {"west-gpu": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}}}},
    }


def _full_urns(requests: dict) -> dict[tuple[str, str], str]:
    """Each registration's URN as the engine makes it, with the parent's whole type chain
    (the mock monitor's URNs keep only the parent's last type: `_mock_urn`)."""
    by_mock: dict[str, tuple[str, str]] = {}
    out: dict[tuple[str, str], str] = {}
    pending = dict(requests)
    while pending:
        progressed = False
        for key, request in list(pending.items()):
            type_, name = key
            root = request.parent.split("::")[2] == "pulumi:pulumi:Stack"
            if not root and request.parent not in by_mock:
                continue
            chain = type_ if root else out[by_mock[request.parent]].split("::")[2] + "$" + type_
            out[key] = f"urn:pulumi:test::kns-platform::{chain}::{name}"
            by_mock[_mock_urn(request.parent, type_, name)] = key
            del pending[key]
            progressed = True
        assert progressed, f"parents never registered: {sorted(pending)[:3]}"
    return out


def _mock_urn(parent: str, type_: str, name: str) -> str:
    """pulumi.runtime.mocks.MockMonitor.make_urn."""
    head = parent.split("::")
    return "::".join([*head[:2], head[2].split("$").pop() + "$" + type_, name])


def test_the_inventory_is_what_the_program_registers_urn_for_urn(registered):
    run, requests = registered
    requests = {k: v for k, v in requests.items() if k[0] != "pulumi:pulumi:Stack"}
    urns = _full_urns(requests)
    assert len(set(urns.values())) == len(urns) == len(run.resources)
    result = checked(site())
    planned = plan_checked(result)
    listed = [targeting.urn("test", "kns-platform", item.types, item.name)
              for item in inventory.registrations(planned)]
    assert sorted(listed) == sorted(urns.values())
    assert inventory.collisions(planned) == []


def test_kns_queues_shows_the_workers_of_each_queue():
    result = checked(site())
    document = queues_cli.report(result.config, plan_checked(result).entries)
    batch = next(q for q in document["queues"] if q["name"] == "batch")
    assert batch["workers"] == ["east"] and {line["worker"] for line in batch["lines"]} == {"east"}
    text = queues_cli.render_text(document)
    assert "research  (cohort all); entries: train; served by workers east, west" in text
    assert "batch; entries: sweep; served by worker east" in text


def test_a_single_cluster_stack_registers_what_it_did_before():
    """No kns:workers: no worker, no MultiKueue object, the queue as a single cluster's."""
    config = copy.deepcopy(site())
    del config["workers"]
    config["nodePools"] = [{"name": "east-cpu", "role": "compute", "nodes": ["node-1"]},
                           {"name": "west-gpu", "role": "gpu", "gpu": {"vendor": "nvidia", "perNode": 4},
                            "nodes": ["node-2"]}]
    run = run_program(config, secret_keys=("credentials",))
    assert not [r for r in run.resources if "MultiKueue" in r.type or "AdmissionCheck" in r.type
                or r.type == tokens.WORKER]
    spec = run.named("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "clusterqueue-research").inputs["spec"]
    assert [f["name"] for f in spec["resourceGroups"][0]["flavors"]] == ["east-cpu", "west-gpu"]
    assert "admissionChecksStrategy" not in spec and "workers" not in run.outputs


# ---- docs/multicluster.md is true -----------------------------------------------------------


def test_the_documented_site_is_valid_and_its_queues_are_what_kns_queues_prints(tmp_path):
    from kns_cli.stack import load_stack
    text = (ROOT / "docs" / "multicluster.md").read_text()
    example = text[text.index("## Worked example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])
    shown = example.split("```text\n", 1)[1].split("```", 1)[0]
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "vendor").symlink_to(ROOT / "vendor")
    (tmp_path / "Pulumi.site.yaml").write_text(yaml.safe_dump(stack))
    cfg, plans = load_stack(tmp_path, "site")
    assert [w.name for w in cfg.workers] == ["east", "west"]
    assert queues_cli.render_text(queues_cli.report(cfg, plans)) == shown
    outputs = json.loads(text.split("## Outputs", 1)[1].split("```json\n", 1)[1].split("```", 1)[0])
    from plan.multikueue import served
    assert served(cfg) == outputs
    from plan.outputs import queues_output
    queues = json.loads(text.split("## Outputs", 1)[1].split("```json\n", 2)[2].split("```", 1)[0])
    assert queues_output(cfg) == queues
    from kns_cli.explain import explain, render_text
    runs_on = example.split("```text\n", 2)[2].split("```", 1)[0].strip()
    assert runs_on in render_text(explain(plan_stack(cfg, plans), ["train"]))


def test_a_draining_worker_holds_its_queues_and_the_manager_stops_counting_them():
    config = site()
    config["workers"][1]["drain"] = True
    run = run_program(config, secret_keys=SECRETS)
    queues = {r.name: r.inputs["spec"] for r in run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")}
    assert queues["west-clusterqueue-research"]["stopPolicy"] == "Hold"
    assert "stopPolicy" not in queues["east-clusterqueue-research"]
    assert "stopPolicy" not in queues["clusterqueue-research"]
    # research on the manager: east's pool alone (west-gpu no longer counted); batch unchanged.
    assert queues["clusterqueue-research"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "8", "borrowingLimit": "2"},
        {"name": "memory", "nominalQuota": "32Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": "0"}]
    # Still listed: what runs there keeps reporting to the manager.
    configs = {r.name: r.inputs["spec"]["clusters"] for r in run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueConfig")}
    assert configs["multikueueconfig-kns-multikueue-research"] == ["east", "west"]


def test_the_managers_queues_come_after_the_admission_checks_they_name(registered):
    """Kueue keeps an AdmissionCheck (its resource-in-use finalizer) while a ClusterQueue
    names it: `destroy` deletes the queue first only if the queue depends on the check."""
    _, requests = registered
    queue = requests[("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "clusterqueue-research")]
    assert any(urn.endswith("AdmissionCheck::admissioncheck-kns-multikueue-research") for urn in queue.dependencies)
    worker_queue = requests[("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "east-clusterqueue-research")]
    assert not any("MultiKueue" in urn for urn in worker_queue.dependencies)


# ---- kns:queueing.multiKueue: the manager's MultiKueue settings ----------------------------------


def kueue_configurations(run) -> dict[str, dict]:
    """Each Kueue ConfigMap's Configuration, by the ConfigMap's resource name."""
    return {r.name: yaml.safe_load(r.inputs["data"][kueue_install.CONFIG_KEY]) for r in run.resources
            if r.type == "kubernetes:core/v1:ConfigMap" and kueue_install.CONFIG_KEY in (r.inputs.get("data") or {})}


def kueue_rollout(run) -> dict[str, str]:
    return {r.name: r.inputs["spec"]["template"]["metadata"].get("annotations", {}).get(kueue_install.CONFIG_HASH)
            for r in run.resources if r.type == "kubernetes:apps/v1:Deployment"
            and r.inputs["metadata"]["name"] == "kueue-controller-manager"}


def test_the_manager_s_kueue_gets_the_multikueue_settings_and_no_worker_s_does():
    plain = run_program(site(), secret_keys=SECRETS)
    assert all("multiKueue" not in c for c in kueue_configurations(plain).values())
    run = run_program(site(queueing={"enabled": True, "install": True,
                                     "multiKueue": {"workerLostTimeout": "45m", "gcInterval": "0s"}}),
                      secret_keys=SECRETS)
    configurations = kueue_configurations(run)
    assert configurations.pop("kueue-system/kueue-manager-config")["multiKueue"] == {
        "workerLostTimeout": "45m", "gcInterval": "0s"}
    assert sorted(configurations) == ["east-kueue-system/kueue-manager-config", "west-kueue-system/kueue-manager-config"]
    assert all("multiKueue" not in c for c in configurations.values())
    # Kueue reads its configuration once, at start: a change rolls the manager's controller only.
    before, after = kueue_rollout(plain), kueue_rollout(run)
    changed = sorted(name for name in after if after[name] != before.get(name))
    assert changed == ["kueue-system/kueue-controller-manager"]
    # One setting alone: Kueue's default for the other.
    one = run_program(site(queueing={"enabled": True, "multiKueue": {"gcInterval": "2m"}}), secret_keys=SECRETS)
    assert kueue_configurations(one)["kueue-system/kueue-manager-config"]["multiKueue"] == {"gcInterval": "2m"}


@pytest.mark.parametrize("settings, expected", [
    ({"workerLostTimeout": "0s"}, {"kns:queueing.multiKueue.workerLostTimeout": rules.WORKER_LOST_TIMEOUT.message}),
    ({"workerLostTimeout": "15 min", "gcInterval": "-1m"},
     {"kns:queueing.multiKueue.workerLostTimeout": rules.WORKER_LOST_TIMEOUT.message,
      "kns:queueing.multiKueue.gcInterval": rules.GC_INTERVAL.message}),
    ({"gcInterval": "1.5m"}, {"kns:queueing.multiKueue.gcInterval": rules.GC_INTERVAL.message}),
    ({"workerLostTimeout": "15m", "lostTimeout": "1m"}, {"kns:queueing.multiKueue.lostTimeout": "unknown key"}),
])
def test_bad_multikueue_settings_are_refused_at_their_place(settings, expected):
    found = problems(site(queueing={"enabled": True, "multiKueue": settings}))
    assert set(found) == set(expected)
    for path, message in expected.items():
        assert message in found[path], found[path]


def test_multikueue_settings_need_the_installed_kueue_and_a_site():
    assert problems(site(queueing={"enabled": True, "install": False, "multiKueue": {"gcInterval": "2m"}})) == {
        "kns:queueing.multiKueue": rules.MULTIKUEUE_NEEDS_INSTALL.message}
    single = site(queueing={"enabled": True, "multiKueue": {"gcInterval": "2m"}},
                  nodePools=[{"name": "cpu", "role": "compute", "nodes": ["n1"]}],
                  queues=[{"name": "batch", "quota": {"cpu": {"cpu": "4"}}}],
                  jobs=[{"name": "j", "image": "busybox:1.36", "cpu": "1", "queue": "batch"}])
    del single["workers"]
    assert problems(single, secret=("credentials",)) == {"kns:queueing.multiKueue": rules.MULTIKUEUE_NEEDS_SITE.message}


# ---- draining: what it leaves waiting is said, a queue left with no worker refused ----------------


def test_a_drain_that_leaves_a_queue_no_worker_is_refused_unless_the_queue_is_held():
    config = site()
    config["workers"][0]["drain"] = True  # east: batch's only pool
    assert problems(config) == {"kns:workers[east].drain": (
        'leaves queue "batch" with no worker (its pools east-cpu are all on draining workers: east); '
        + rules.DRAIN_LEAVES_QUEUE.message)}
    # Both workers draining: research too, named at the last draining worker.
    config["workers"][1]["drain"] = True
    found = problems(config)
    assert set(found) == {"kns:workers[east].drain", "kns:workers[west].drain"}
    assert '"research"' in found["kns:workers[west].drain"] and "east, west" in found["kns:workers[west].drain"]
    # Held queues: accepted, and the manager's ClusterQueue holds.
    for queue in config["queues"]:
        queue["hold"] = True
    assert problems(config) == {}
    run = run_program(config, secret_keys=SECRETS)
    queues = {r.name: r.inputs["spec"] for r in run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")}
    assert queues["clusterqueue-batch"]["stopPolicy"] == "Hold" and queues["clusterqueue-research"]["stopPolicy"] == "Hold"


def test_an_entry_that_fits_only_on_a_draining_worker_is_warned_of_by_validate_explain_and_the_program():
    config = site(jobs=[*site()["jobs"],
                        {"name": "gpu-job", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi", "gpus": 2,
                         "queue": "research"},
                        {"name": "pinned", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi", "queue": "research",
                         "pool": "west-cpu"}])
    config["queues"][0]["quota"]["west-cpu"] = {"cpu": "4", "memory": "8Gi"}
    config["workers"][1]["drain"] = True  # west: the GPU pool and west-cpu
    result = checked(config)
    plan_checked(result)
    said = [w for w in result.config.warnings if "draining" in w]
    assert said == [
        'kns:jobs[gpu-job]: fits only on pool "west-gpu" of worker west, which is draining: its Jobs wait on the '
        "manager until the drain ends",
        'kns:jobs[pinned]: fits only on pool "west-cpu" of worker west, which is draining: its Jobs wait on the '
        "manager until the drain ends"]
    # `train` (research, CPU) still fits east's pool: nothing said of it.
    from kns_cli.explain import explain
    assert explain(plan_checked(checked(config)), ["gpu-job"])["warnings"] == said[:1]  # its own, not pinned's
    # The program says it too (pulumi.log.warn of the config's warnings).
    warned = []
    original = pulumi.log.warn
    pulumi.log.warn = lambda message, *args, **kwargs: warned.append(message)
    try:
        run_program(config, secret_keys=SECRETS)
    finally:
        pulumi.log.warn = original
    assert said[0] in warned and said[1] in warned
    # Not draining: no word.
    config["workers"][1]["drain"] = False
    quiet = checked(config)
    plan_checked(quiet)
    assert not [w for w in quiet.config.warnings if "draining" in w]


def test_a_sites_budget_counts_on_the_manager_which_admits(tmp_path):
    """docs/budgets.md, "On a MultiKueue site": a budget's counter and RBAC go to the
    manager (its Workloads are what is counted); no worker gets anything of it."""
    budget = {"name": "research-q", "queues": ["research"], "limits": {"nvidia.com/gpu": 1000},
              "reset": "0 0 1 */3 *"}
    run = run_program(site(budgets=[budget]), secret_keys=SECRETS)
    mine = [r for r in run.kubernetes if r.metadata.get("labels", {}).get("kns.io/budget") == "research-q"]
    assert {r.type.rsplit(":", 1)[1] for r in mine} >= {"Namespace", "CronJob", "ClusterRole", "ServiceAccount"}
    assert {r.provider.split("::")[3] for r in mine} == {"site-kubernetes"}


def test_a_prescaled_start_on_a_draining_workers_pool_is_not_guaranteed():
    """./kns explain: the manager dispatches nothing to a draining worker, so a run's Job
    on one of its pools waits; the verdict says so instead of "guaranteed"."""
    from datetime import datetime, timezone

    from kns_cli.explain import explain, render_text
    config = site()
    config["queues"][0]["quota"]["west-cpu"] = {"cpu": "4", "memory": "8Gi"}
    config["queues"][0]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    config["schedules"] = [{"name": "report", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi",
                            "queue": "research", "pool": "west-cpu", "schedule": "30 2 * * *", "warmUpMinutes": 10}]
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert explain(plan_checked(checked(config), now), ["report"], now)["entries"][0]["start"]["guaranteed"] is True
    config["workers"][1]["drain"] = True
    document = explain(plan_checked(checked(config), now), ["report"], now)
    start = document["entries"][0]["start"]
    assert start["guaranteed"] is False
    assert start["reasons"] == ["pool west-cpu is on worker west, which is draining (kns:workers[west].drain): its "
                                "Jobs wait on the manager until the drain ends"]
    (line,) = [line for line in render_text(document).splitlines() if line.startswith("  start:")]
    assert line.startswith("  start:          best effort: pool west-cpu is on worker west, which is draining")


def test_queues_show_a_held_queue_and_a_draining_worker_where_a_user_looks():
    """`./kns queues`: a queue's hold and a worker's drain are on the queue's own line."""
    from kns_cli import queues as queues_module
    config = site()
    config["workers"][1]["drain"] = True  # west
    config["queues"][1]["hold"] = True  # batch
    cfg = checked(config).config
    document = queues_module.report(cfg, plan_checked(checked(config)).entries)
    assert [q["hold"] for q in document["queues"]] == [False, True]
    assert {w: found["drain"] for w, found in document["workers"].items()} == {"east": False, "west": True}
    text = queues_module.render_text(document)
    assert "research  (cohort all); entries: train; served by workers east, west (draining: sent nothing new)" in text
    assert "batch; HELD (hold: true): admits nothing new; entries: sweep; served by worker east" in text


def test_a_queue_of_hundreds_of_entries_is_counted_on_its_line_and_listed_with_verbose():
    from kns_cli import queues as queues_module
    config = site(jobs=[{"name": f"job-{i:03}", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi",
                         "queue": "batch"} for i in range(500)])
    document = queues_module.report(checked(config).config, plan_checked(checked(config)).entries)
    line = next(line for line in queues_module.render_text(document).splitlines() if line.startswith("batch"))
    assert len(line) < 200 and "job-007 and 492 more (--verbose lists them)" in line and "job-008" not in line
    verbose = next(line for line in queues_module.render_text(document, verbose=True).splitlines()
                   if line.startswith("batch"))
    assert "job-499" in verbose and "more" not in verbose
