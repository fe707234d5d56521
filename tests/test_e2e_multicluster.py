"""A MultiKueue site end to end (docs/multicluster.md, contract section 14): one stack
through the real engine configures three local control planes, a manager and two workers
(east and west, one kwok node of 8 CPU each), each running the real Kueue built from the
pinned module (kns_testing/multicluster.py; the manager's with the configuration the program
renders for the site's `kns:queueing.multiKueue`, MULTIKUEUE below).

The site and the stack are shared by every test of the module, in file order; the last
destroys. Every assertion reads what persists: watches of pods and Jobs started before the
first `up`, Workload conditions and `status.clusterName` on the manager, Jobs' status.
Waits derive from the entries (a pod's `kwok.x-k8s.io/run-for`) and from the site's
settings (the manager's reconnect backoff, `workerLostTimeout`).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import signal
import subprocess
import time
from datetime import datetime, timezone

import pytest
import yaml

from config.names import LABEL_CLUSTER
from kns_cli import recover
from kns_testing.cluster import Cluster, node_manifest, script
from kns_testing.faults import Component
from kns_testing.kueue import program_configuration
from kns_testing.multicluster import is_true, multikueue_site
from kns_testing.pace import slack
from kns_testing.program import ROOT, engine_project
from kns_testing.stacks import Stack, up_with_schedules_ahead
from kns_testing.watch import Watch

PASSPHRASE = "kns-local-multicluster"
NAMESPACE = "kns-lab"
QUEUE = "research"
CHECK = f"kns-multikueue-{QUEUE}"
# Far longer than the outage of the unreachable-worker test (about 15 s and the manager's
# reconnect backoff, 20 s after such an outage): no Workload may be retried elsewhere then.
MULTIKUEUE = {"workerLostTimeout": "10m", "gcInterval": "30s"}
OUTAGE = 15
WARM_UP = 2


def base_config(site) -> dict:
    """Two workers of one pool each; queue research holds 4 CPU on each; `hello` a queued
    Job entry; `lab` a queued entry whose namespace takes the Jobs the tests create by hand
    (what its users would submit), with room for several 4-CPU pods."""
    east, west = site.workers["east"], site.workers["west"]
    return {
        "kns:cluster": {"name": "site", "kubeconfig": str(site.manager.kubeconfig)},
        "kns:packingScheduler": {"enabled": False},
        "kns:queueing": {"enabled": True, "install": False},
        "kns:workers": [
            {"name": "east", "kubeconfig": str(east.kubeconfig),
             "nodePools": [{"name": "east-cpu", "role": "compute", "nodes": ["east-node"]}]},
            {"name": "west", "kubeconfig": str(west.kubeconfig),
             "nodePools": [{"name": "west-cpu", "role": "compute", "nodes": ["west-node"]}]},
        ],
        "kns:queues": [{"name": QUEUE, "quota": {"east-cpu": {"cpu": "4", "memory": "16Gi"},
                                                 "west-cpu": {"cpu": "4", "memory": "16Gi"}}}],
        "kns:jobs": [
            {"name": "hello", "image": "registry.k8s.io/pause:3.10", "cpu": "1", "memory": "1Gi", "queue": QUEUE,
             "annotations": {"kwok.x-k8s.io/run-for": "20s"}},
            {"name": "lab", "image": "registry.k8s.io/pause:3.10", "cpu": "1", "memory": "1Gi", "queue": QUEUE,
             "annotations": {"kwok.x-k8s.io/run-for": "1s"},
             "limitRange": {"max": {"cpu": "4", "memory": "4Gi"}},
             "quota": {"pods": "10", "requests.cpu": "16", "limits.cpu": "16", "requests.memory": "32Gi",
                       "limits.memory": "32Gi"}},
        ],
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    state = tmp_path_factory.mktemp("multicluster")
    workers = {"east": [node_manifest("east-node", 8, 0)], "west": [node_manifest("west-node", 8, 0)]}
    # The manager's Kueue runs what the program renders for a site with these settings
    # (a stand-in site under mocks: the same kns:queueing, workers named by context).
    rendered = program_configuration({
        "kns:cluster": {"name": "site", "context": "kns-manager"},
        "kns:queueing": {"multiKueue": MULTIKUEUE},
        "kns:workers": [{"name": name, "context": f"kns-{name}", "apiServer": f"https://10.0.0.{i + 1}:6443",
                         "nodePools": [{"name": f"{name}-cpu", "role": "compute", "nodes": [f"{name}-node"]}]}
                        for i, name in enumerate(workers)]})
    assert rendered["multiKueue"] == MULTIKUEUE
    with multikueue_site(state, workers, identity="admin", manager_configuration=rendered) as live:
        assert yaml.safe_load((live.manager.state / "kueue" / "config.yaml").read_text())["multiKueue"] == MULTIKUEUE
        yield live


@pytest.fixture(scope="module")
def watches(site):
    """Pods, Jobs and Workloads on every cluster, from before the first `up`."""
    clusters = {"manager": site.manager, **site.workers}
    found = {(name, kind): Watch(cluster, kind) for name, cluster in clusters.items()
             for kind in ("pods", "jobs.batch", "workloads.kueue.x-k8s.io")}
    yield found
    for watch in found.values():
        watch.stop()


@pytest.fixture(scope="module")
def stack(site, watches, tmp_path_factory):
    root = tmp_path_factory.mktemp("site") / "kns-platform"
    env = engine_project(root, script("toolchain.sh"), PASSPHRASE, base_env=site.manager.env)
    (root / "Pulumi.local.yaml").write_text(yaml.safe_dump({"config": base_config(site)}, sort_keys=False))
    live = Stack(root, env)
    live.pulumi("stack", "init", "local")
    live.up()
    return live


def job(name: str, cpu: int, run_for: str) -> dict:
    """A Job a user of `lab` submits on the manager: its queue's label, requests = limits."""
    amounts = {"cpu": str(cpu), "memory": "1Gi"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "kns"}},
            "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {"kwok.x-k8s.io/run-for": run_for}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": amounts, "limits": amounts}}]}}}}


def workload(cluster: Cluster, namespace: str, job_name: str) -> dict | None:
    """The Workload of a Job on that cluster: owned by it or named after it (a worker's copy)."""
    done = cluster.kubectl("get", "workloads", "-n", namespace, "-o", "json", check=False)
    for item in (yaml.safe_load(done.stdout)["items"] if done.returncode == 0 else []):
        owners = item["metadata"].get("ownerReferences", [])
        if any(o.get("kind") == "Job" and o.get("name") == job_name for o in owners) \
                or item["metadata"]["name"].startswith(f"job-{job_name}-"):
            return item
    return None


def check_state(item: dict | None) -> str | None:
    for state in (item or {}).get("status", {}).get("admissionChecks", []) or []:
        if state["name"] == CHECK:
            return state["state"]
    return None


def dispatched_to(site, namespace: str, job_name: str) -> str | None:
    """The worker the manager's Workload was admitted on (its check Ready), or None."""
    item = workload(site.manager, namespace, job_name)
    if check_state(item) == "Ready" and item["status"].get("clusterName"):
        return item["status"]["clusterName"]
    return None


def pods_seen(watches, cluster: str, namespace: str, job_name: str) -> set[str]:
    return watches[(cluster, "pods")].names(lambda p: p["metadata"].get("namespace") == namespace and
                                            p["metadata"].get("labels", {}).get("job-name") == job_name)


def running(cluster: Cluster, namespace: str, job_name: str) -> list[str]:
    done = cluster.kubectl("get", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job_name}",
                           "-o", "json", check=False)
    items = yaml.safe_load(done.stdout)["items"] if done.returncode == 0 else []
    return [p["metadata"]["name"] for p in items if p["status"].get("phase") == "Running"]


def complete(cluster: Cluster, namespace: str, job_name: str) -> dict | None:
    done = cluster.kubectl("get", "job", "-n", namespace, job_name, "-o", "json", check=False)
    obj = yaml.safe_load(done.stdout) if done.returncode == 0 else None
    return obj if obj and any(c["type"] == "Complete" and c["status"] == "True"
                              for c in obj.get("status", {}).get("conditions", []) or []) else None


def run_for(entry: dict) -> float:
    return float(entry["annotations"]["kwok.x-k8s.io/run-for"].rstrip("s"))


# ---- one `up`, three clusters -------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(stack):
    """A prescaled schedule pinned to west's pool, primed a few minutes after this `up`;
    requested by the first test, so the wait for its minute overlaps the others. Its test
    runs before the outage's: a Job created while the one worker it fits on is unreachable
    is offered to the connected workers only (docs/operations.md, section 5)."""
    def set_schedule(config, start):
        config["kns:schedules"] = [{
            "name": "report", "image": "registry.k8s.io/pause:3.10", "cpu": "1", "memory": "1Gi", "queue": QUEUE,
            "pool": "west-cpu", "schedule": f"{start.minute} {start.hour} * * *", "timeZone": "Etc/UTC",
            "warmUpMinutes": WARM_UP, "annotations": {"kwok.x-k8s.io/run-for": "5s"}}]

    return up_with_schedules_ahead(stack, WARM_UP, set_schedule)


def test_one_up_configures_all_three_clusters_and_a_second_changes_nothing(site, stack, report):
    manager = site.manager
    # The kubeconfigs the program wrote from each worker's token work: Kueue connects.
    for name in ("east", "west"):
        manager.wait(lambda n=name: is_true(manager.get("multikueuecluster", n), "Active"), slack(floor=180),
                     message=f"MultiKueueCluster {name} Active")
        token = site.workers[name].get("secret", "kns-multikueue-token", "-n", "kueue-system")
        assert token["type"] == "kubernetes.io/service-account-token" and token["data"]["token"]
        secret = manager.get("secret", f"kns-multikueue-{name}", "-n", "kueue-system")
        written = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        assert written["users"][0]["user"] == {"token": base64.b64decode(token["data"]["token"]).decode()}
        assert "exec" not in json.dumps(written)
    manager.wait(lambda: is_true(manager.get("admissioncheck", CHECK), "Active"), slack(floor=180),
                 message=f"AdmissionCheck {CHECK} Active")
    for name, cluster in [("manager", manager), *site.workers.items()]:
        cluster.wait(lambda c=cluster: is_true(c.get("clusterqueue", QUEUE), "Active"), slack(floor=180),
                     message=f"ClusterQueue {QUEUE} Active on {name}")
        assert cluster.get("localqueue", "kns", "-n", NAMESPACE)["spec"]["clusterQueue"] == QUEUE
    # Jobs only on the manager; each worker has the entries' namespaces and its own pool.
    assert {j["metadata"]["name"] for j in manager.get("jobs", "-n", "kns-hello")["items"]} == {"hello"}
    for name, worker in site.workers.items():
        assert worker.get("resourcequota", "kns-quota", "-n", "kns-hello")
        assert worker.get("node", f"{name}-node")["metadata"]["labels"]["kns.io/pool"] == f"{name}-cpu"
    # The state holds no credential in plain text: the tokens are Pulumi secrets.
    state = stack.pulumi("stack", "export").stdout
    for worker in site.workers.values():
        token = base64.b64decode(worker.get("secret", "kns-multikueue-token", "-n", "kueue-system")["data"]["token"])
        assert token.decode() not in state
    stack.pulumi("preview", "--expect-no-changes", "--diff")


def test_a_queued_entry_runs_on_a_worker_and_the_manager_shows_its_completion(site, stack, watches):
    hello = stack.entry("kns:jobs", "hello")
    finished = site.manager.wait(lambda: complete(site.manager, "kns-hello", "hello"), run_for(hello) + slack(floor=180),
                                 every=2, message="the manager's Job hello Complete")
    assert finished["status"]["succeeded"] == 1
    ran = {name: pods_seen(watches, name, "kns-hello", "hello") for name in ("manager", "east", "west")}
    assert not ran["manager"], "a pod ran on the manager"
    assert len(ran["east"] | ran["west"]) == 1 and bool(ran["east"]) != bool(ran["west"]), ran
    managed = site.manager.get("job", "hello", "-n", "kns-hello")["spec"]["managedBy"]
    assert managed == "kueue.x-k8s.io/multikueue"


# ---- where MultiKueue sends Jobs ---------------------------------------------------------------


@pytest.fixture(scope="module")
def placed(site, stack):
    """fill (4 CPU) on one worker; next (2 CPU) on the other, the first one being full."""
    site.manager.apply(job("fill", 4, "1h"))
    first = site.manager.wait(lambda: dispatched_to(site, NAMESPACE, "fill"), slack(floor=180), message="fill dispatched")
    other = next(n for n in site.workers if n != first)
    site.workers[first].wait(lambda: running(site.workers[first], NAMESPACE, "fill"), slack(floor=180),
                             message=f"fill Running on {first}")
    site.manager.apply(job("next", 2, "1h"))
    second = site.manager.wait(lambda: dispatched_to(site, NAMESPACE, "next"), slack(floor=180), message="next dispatched")
    site.workers[second].wait(lambda: running(site.workers[second], NAMESPACE, "next"), slack(floor=180),
                              message=f"next Running on {second}")
    return first, other, second


def test_a_full_worker_sends_the_next_job_to_the_other(site, placed, watches):
    first, other, second = placed
    assert second == other
    assert not pods_seen(watches, first, NAMESPACE, "next") and not pods_seen(watches, "manager", NAMESPACE, "next")


def test_with_both_full_a_job_waits_on_the_manager_and_runs_when_room_frees(site, placed, watches):
    first, other, _ = placed
    # 4 of 4 CPU on the first worker, 2 of 4 on the other: 4 more CPU fit nowhere. The
    # manager's queue (8 CPU, 6 in use) cannot even reserve it: it waits there, undispatched.
    site.manager.apply(job("waits", 4, "5s"))
    site.manager.wait(lambda: (w := workload(site.manager, NAMESPACE, "waits")) and
                      any(c["type"] == "QuotaReserved" and c["status"] == "False"
                          for c in w.get("status", {}).get("conditions", [])), slack(floor=180),
                      message="waits pending on the manager")
    assert dispatched_to(site, NAMESPACE, "waits") is None
    for name in site.workers:
        assert workload(site.workers[name], NAMESPACE, "waits") is None
    site.manager.kubectl("delete", "job", "fill", "-n", NAMESPACE, "--cascade=foreground", "--wait=true")
    where = site.manager.wait(lambda: dispatched_to(site, NAMESPACE, "waits"), slack(floor=180), message="waits dispatched")
    assert where == first
    site.manager.wait(lambda: complete(site.manager, NAMESPACE, "waits"), slack(5, floor=180), every=2,
                      message="waits Complete on the manager")
    assert pods_seen(watches, first, NAMESPACE, "waits") and not pods_seen(watches, other, NAMESPACE, "waits")


# ---- a prescaled schedule on a site ---------------------------------------------------------------


def test_a_prescaled_schedules_primer_is_dispatched_to_a_worker_and_warms_a_node_there(site, report, watches):
    start, primer = report
    manager = site.manager
    name = f"report-{int(primer.timestamp()) // 60}"
    jobs = manager.wait(lambda: manager.get("jobs", "-n", "kns-report")["items"],
                        (primer - datetime.now(timezone.utc)).total_seconds() + slack(floor=180), every=2,
                        message="the primer Job on the manager")
    assert jobs[0]["metadata"]["name"] == name
    assert manager.wait(lambda: dispatched_to(site, "kns-report", name), slack(floor=180), message="primer dispatched") == "west"
    west = site.workers["west"]
    west.wait(lambda: pods_seen(watches, "west", "kns-report", name), slack(floor=180), message="primer pod on west")
    (pod,) = [obj for _, obj in watches[("west", "pods")].all()
              if obj["metadata"].get("labels", {}).get("job-name") == name][-1:]
    assert pod["spec"]["nodeSelector"]["kns.io/pool"] == "west-cpu"
    manager.wait(lambda: [o for _, o in watches[("west", "pods")].all()
                          if o["metadata"].get("labels", {}).get("job-name") == name and o["spec"].get("nodeName")],
                 slack(floor=180), message="primer pod bound to west's node")
    assert not pods_seen(watches, "manager", "kns-report", name) and not pods_seen(watches, "east", "kns-report", name)


# ---- a worker unreachable for less than workerLostTimeout -------------------------------------------


def workloads_of(watches, cluster: str, job_name: str) -> list[dict]:
    """Every recorded version of the Workloads of `job_name` in `lab` on that cluster."""
    return [obj for _, obj in watches[(cluster, "workloads.kueue.x-k8s.io")].all()
            if obj["metadata"].get("namespace") == NAMESPACE
            and (any(o.get("kind") == "Job" and o.get("name") == job_name
                     for o in obj["metadata"].get("ownerReferences", []))
                 or obj["metadata"]["name"].startswith(f"job-{job_name}-"))]


def copied_since(watches, cluster: str, seen: int) -> list[dict]:
    """next's Workloads created on `cluster` after its watch's first `seen` events."""
    return [obj for kind, obj in watches[(cluster, "workloads.kueue.x-k8s.io")].all()[seen:]
            if kind == "ADDED" and obj in workloads_of(watches, cluster, "next")]


def version(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_an_unreachable_worker_keeps_its_jobs_and_new_ones_go_to_the_other(site, placed, watches):
    """The worker holding `next` loses its API server for OUTAGE seconds counted from when
    the manager marks it inactive. Every version of next's Workload the manager wrote from
    before the outage until the worker is Active again (watched, not sampled) keeps its
    check Ready on that worker; no copy of it ever appears on the other worker; a Job
    created meanwhile goes to the other; and after the return, next's completion on its
    worker reaches the manager: nothing lost."""
    _, _, holder = placed  # next (2 CPU, 1h) runs there
    spare = next(n for n in site.workers if n != holder)
    worker, manager = site.workers[holder], site.manager
    before = max(map(version, workloads_of(watches, "manager", "next")))
    # MultiKueue offers a new Workload to every worker and keeps the copy of the one that
    # admits it: a copy on the spare from the dispatch is normal. From here on, none may come.
    spare_seen = len(watches[(spare, "workloads.kueue.x-k8s.io")].all())
    apiserver = Component(worker.state, "kube-apiserver")
    apiserver.crash()
    try:
        manager.wait(lambda: (c := next((c for c in manager.get("multikueuecluster", holder)["status"]
                                         ["conditions"] if c["type"] == "Active"), None)) and c["status"] == "False",
                     slack(floor=180), message=f"MultiKueueCluster {holder} inactive")
        inactive_at = time.monotonic()
        # A new Job meanwhile goes to the reachable worker.
        manager.apply(job("during", 1, "5s"))
        assert manager.wait(lambda: dispatched_to(site, NAMESPACE, "during"), slack(floor=180),
                            message="during dispatched") == spare
        time.sleep(max(0.0, inactive_at + OUTAGE - time.monotonic()))
    finally:
        apiserver.start()
    worker.wait(lambda: worker.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, slack(floor=180),
                message=f"{holder} API server ready")
    # The manager's backoff after a short outage is about 20 s (docs/multicluster-notes.md).
    manager.wait(lambda: is_true(manager.get("multikueuecluster", holder), "Active"), slack(320, floor=180),
                 every=2, message=f"MultiKueueCluster {holder} Active again")
    through = [w for w in workloads_of(watches, "manager", "next") if version(w) >= before]
    assert through and {(check_state(w), w["status"].get("clusterName")) for w in through} == {("Ready", holder)}, \
        [(version(w), check_state(w), w["status"].get("clusterName")) for w in through]
    assert not copied_since(watches, spare, spare_seen), f"next was copied to {spare}"
    assert running(worker, NAMESPACE, "next") and not running(site.workers[spare], NAMESPACE, "next")
    manager.wait(lambda: complete(manager, NAMESPACE, "during"), slack(5, floor=180), every=2, message="during Complete")
    assert not pods_seen(watches, holder, NAMESPACE, "during")
    # Nothing lost: next, ended on its worker now, completes there and its completion
    # reaches the manager's Job and Workload.
    (pod,) = running(worker, NAMESPACE, "next")
    worker.kubectl("annotate", "pod", "-n", NAMESPACE, pod, "--overwrite", "kwok.x-k8s.io/run-for=0s")
    manager.wait(lambda: complete(manager, NAMESPACE, "next"), slack(floor=180), every=2,
                 message="next's completion on the manager")
    manager.wait(lambda: any(is_true(w, "Finished") for w in workloads_of(watches, "manager", "next")),
                 slack(floor=180), message="next's Workload Finished on the manager")
    assert not copied_since(watches, spare, spare_seen) and not pods_seen(watches, spare, NAMESPACE, "next")


# ---- an up interrupted on a worker, then ./kns recover ----------------------------------------------


def test_recover_after_an_up_killed_on_a_worker_leaves_every_cluster_as_the_config_says(site, stack):
    """A new queued entry's `up` (as `make up` runs it: checkpoints off) is killed as soon as
    its namespace appears on a worker (watched from before the `up`); the entry is taken out
    of the config again. What the killed run made on the workers is in no state: `./kns
    recover` sweeps each worker through its own kubeconfig, and every cluster ends with no
    trace of the entry and a clean no-change preview."""
    entry = {"name": "stray", "image": "registry.k8s.io/pause:3.10", "cpu": "1", "memory": "1Gi", "queue": QUEUE,
             "annotations": {"kwok.x-k8s.io/run-for": "1s"}}
    stack.edit(lambda config: config["kns:jobs"].append(entry))
    clusters = {"manager": site.manager, **site.workers}
    namespaces = {name: Watch(cluster, "namespaces") for name, cluster in clusters.items()}
    try:
        env = {**stack.env, "PULUMI_SKIP_CHECKPOINTS": "true"}
        process = subprocess.Popen(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], cwd=stack.root,
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            def on_a_worker() -> list[str]:
                return [name for name in site.workers if "kns-stray" in namespaces[name].names(lambda o: True)]
            site.manager.wait(lambda: on_a_worker() or process.poll() is not None, slack(floor=300), every=0.05,
                              message="kns-stray on a worker")
            assert process.poll() is None, "the up ended before it could be cut off on a worker"
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        made = {name for name, watch in namespaces.items() if "kns-stray" in watch.names(lambda o: True)}
        assert made & set(site.workers), made
    finally:
        for watch in namespaces.values():
            watch.stop()
    stack.edit(lambda config: config.__setitem__("kns:jobs", [e for e in config["kns:jobs"] if e["name"] != "stray"]))
    state = json.loads(stack.pulumi("stack", "export").stdout)["deployment"]["resources"]
    assert not [r for r in state if "stray" in str(r.get("id", ""))], "the killed run wrote no state"
    done = subprocess.run([str(ROOT / "kns"), "recover", "--stack", "local", "--project-dir", str(stack.root)],
                          env=stack.env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"kns recover failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    for name in made & set(site.workers):
        assert f"Namespace kns-stray on worker {name}" in done.stderr, done.stderr
    for name, cluster in clusters.items():
        assert cluster.kubectl("get", "namespace", "kns-stray", "--ignore-not-found", "-o", "name").stdout.strip() == "", name
    stack.pulumi("preview", "--expect-no-changes")


# ---- destroy ---------------------------------------------------------------------------------------


def leftovers(cluster: Cluster, identities: set[tuple[str, str, str]]) -> list[str]:
    """Every object of every kind the cluster lists (in one request) that carries the site's
    cluster label or is, by group, kind and name, one the stack's state held; being
    deleted (Terminating) is still there."""
    kinds = [k for k in cluster.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
             if k != "componentstatuses"]
    listed = json.loads(cluster.kubectl("get", ",".join(kinds), "--all-namespaces", "-o", "json").stdout)
    found = []
    for obj in listed["items"]:
        meta = obj["metadata"]
        if (meta.get("labels") or {}).get(LABEL_CLUSTER) == "site" or recover.identity(obj) in identities:
            found.append(f"{obj['kind']} {recover.object_id(obj)}{' (Terminating)' if meta.get('deletionTimestamp') else ''}")
    return sorted(found)


def test_destroy_removes_everything_from_all_three(site, stack):
    """After `destroy`, on every cluster, no object of any listable kind carries the site's
    label or is one of the objects the state held (node labels are patches of nodes the
    site does not own: their labels go)."""
    state = json.loads(stack.pulumi("stack", "export").stdout)["deployment"]["resources"]
    identities = {recover.identity(r["type"], r["id"]) for r in state
                  if r["type"].startswith("kubernetes:") and not r["type"].endswith("Patch") and r.get("id")}
    kinds = {kind for _, kind, _ in identities}
    assert {"Namespace", "LimitRange", "ResourceQuota", "ClusterQueue", "LocalQueue", "ResourceFlavor",
            "AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster", "Secret", "ServiceAccount", "ClusterRole",
            "ClusterRoleBinding"} <= kinds, kinds  # the site's objects of all three clusters
    stack.pulumi("destroy", "--yes")
    clusters = {"manager": site.manager, **site.workers}
    for name, cluster in clusters.items():
        assert not leftovers(cluster, identities), (name, leftovers(cluster, identities))
    for name, worker in site.workers.items():
        assert not [k for k in worker.get("node", f"{name}-node")["metadata"]["labels"] if k.startswith("kns.io/")]
