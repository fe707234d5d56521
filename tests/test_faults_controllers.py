"""Faults in the platform's controllers (issue 21): the packing scheduler, Karpenter and
Kueue each killed with SIGKILL (a crash, an OOM kill, a node lost under it) while work
waits on it, and started again exactly as it ran (kns_testing/faults.py). Nothing waiting
on it may be lost, and everything must converge once it is back.

A local control plane of its own (kwok nodes; Karpenter's kwok provider and Kueue's manager
as processes, as tests/test_e2e.py and tests/test_e2e_queueing.py run them) and one small
stack through the real engine; each fault adds its entries with one `up`. Every
observation is of persisted state: watches of pods, Jobs, Nodes, NodeClaims and Workloads
started before the first `up` (the order a watch delivers is the order the API server
committed), the server's timestamps and the pods' events. Every wait is derived from the
configuration under test (parallelism, a warm-up, a run-for) plus a bounded slack for the
controllers; a slow machine makes the file slower, not red.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from kns_testing.cluster import Cluster, local_cluster, node_manifest, script
from kns_testing.faults import Component
from kns_testing.kueue import start_kueue
from kns_testing.pace import slack
from kns_testing.program import ROOT
from kns_testing.stacks import Stack, condition, is_true, project, server_time, start_packing_scheduler
from kns_testing.watch import Watch

NODES = [("cpu-node-1", 16, 0), ("cpu-node-2", 16, 0), ("queue-node-1", 16, 0)]
KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
SCHEDULER = "kube-scheduler-kns-packing"  # the pids file's name of the packing scheduler process
MEASURED: dict[str, float] = {}  # printed at the end of the module: docs/benchmarks.md


def autoscaled(name: str) -> dict:
    return {"name": name, "role": "compute", "taints": [{"key": f"kns.io/{name}", "value": "true", "effect": "NoSchedule"}],
            "autoscale": {"nodeClassRef": KWOK_CLASS, "limits": {"cpu": 16}, "consolidateAfter": "30s",
                          "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}


def base_config(cluster: Cluster) -> dict:
    """The stack before any fault: pools, the packing scheduler, a queue, and a prescaled
    schedule kept suspended (the test fires its primer as the CronJob controller does)."""
    return {
        "kns:cluster": {"name": "kns-faults", "kubeconfig": str(cluster.kubeconfig)},
        "kns:nodePools": [
            {"name": "compute", "role": "compute", "nodes": ["cpu-node-1", "cpu-node-2"]},
            {"name": "queued", "role": "compute", "nodes": ["queue-node-1"],
             "taints": [{"key": "kns.io/queued", "value": "true", "effect": "NoSchedule"}]},
            autoscaled("burst"),
            autoscaled("warm"),
        ],
        "kns:queueing": {"enabled": True, "install": False},
        # 16 CPU on the queue's one 16-CPU node: two of the 8-CPU Jobs below at a time.
        "kns:queues": [{"name": "fifo", "quota": {"queued": {"cpu": 16, "memory": "64Gi"}}}],
        "kns:schedules": [{"name": "primed", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 512,
                           "pool": "warm", "schedule": "0 3 * * *", "timeZone": "Etc/UTC", "warmUpMinutes": 2,
                           "suspend": True}],
        "kns:jobs": [],
    }


# Pods of the packing scheduler (the platform's default), kept running by kwok.
PACKING_JOBS = [{"name": f"pack-{x}", "user": "eve", "image": "busybox:1.37", "cpu": 1, "memory": 512,
                 "pool": "compute", "parallelism": 3, "completions": 3,
                 "annotations": {"kwok.x-k8s.io/run-for": "1h"}} for x in "ab"]
# Alone on the empty pool `burst`, through the default scheduler so that only Karpenter's
# crash (not the packing scheduler's, at the same moment) decides when it gets a node.
BURST_JOB = {"name": "burst-job", "user": "bob", "image": "busybox:1.37", "cpu": 2, "memory": 1024, "pool": "burst",
             "schedulerName": "default-scheduler", "annotations": {"kwok.x-k8s.io/run-for": "1h"}}
# Four 8-CPU Jobs on the 16-CPU queue: two admitted, two waiting. The run-for keeps the
# admitted ones running across Kueue's crash and restart until the test ends them.
QUEUED_JOBS = [{"name": f"q-{i}", "user": "ann", "queue": "fifo", "pool": "queued", "image": "busybox:1.37", "cpu": 8,
                "memory": 1024, "annotations": {"kwok.x-k8s.io/run-for": "1h"}} for i in range(1, 5)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("faults-cluster"), [node_manifest(*node) for node in NODES]) as live:
        script("karpenter-process.sh", str(live.state), "--instance-types",
               str(ROOT / "tests" / "fixtures" / "kwok-instance-types.json"), timeout=600)
        start_kueue(live)
        yield live
    for name, value in MEASURED.items():
        print(f"measured: {name} = {value:.2f}")


@pytest.fixture(scope="module")
def watches(cluster):
    found = {kind: Watch(cluster, kind) for kind in
             ("pods", "jobs.batch", "nodes", "nodeclaims.karpenter.sh", "workloads.kueue.x-k8s.io",
              "events.events.k8s.io")}
    yield found
    for watch in found.values():
        watch.stop()


@pytest.fixture(scope="module")
def stack(cluster, watches, tmp_path_factory) -> Stack:
    live = project(tmp_path_factory, cluster, "faults", base_config(cluster))
    live.up()
    start_packing_scheduler(cluster)
    return live


# ---- helpers --------------------------------------------------------------------------------


class Tripwire:
    """Crash `component` the moment `watch` records an object `when` accepts, from a thread
    (the action that makes the object, such as `pulumi up`, may still be running). `wait`
    gives the object that tripped it."""

    def __init__(self, watch: Watch, when, component: Component):
        self._watch, self._when, self._component = watch, when, component
        self._seen = len(watch.all())  # only what happens from now on
        self._done = threading.Event()
        self.tripped: dict | None = None
        self._stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop:
            events = self._watch.all()
            for _, obj in events[self._seen:]:
                if self._when(obj):
                    self._component.crash()
                    self.tripped = obj
                    self._done.set()
                    return
            self._seen = len(events)
            time.sleep(0.02)

    def wait(self, timeout: float) -> dict:
        if not self._done.wait(timeout):
            self._stop = True
            raise AssertionError(f"timed out after {timeout}s: {self._component.name} was never tripped")
        return self.tripped


def labels(obj: dict) -> dict:
    return obj["metadata"].get("labels") or {}


def in_pool(pool: str):
    return lambda obj: labels(obj).get("karpenter.sh/nodepool") == pool


def of_namespace(watch: Watch, namespace: str) -> list[tuple[str, dict]]:
    return [(kind, obj) for kind, obj in watch.all() if obj["metadata"].get("namespace") == namespace]


def uids(watch: Watch, namespace: str) -> set[str]:
    return {obj["metadata"]["uid"] for _, obj in of_namespace(watch, namespace)}


def bound_in(watch: Watch, namespace: str) -> dict | None:
    """The first recorded version of a pod of `namespace` with a node."""
    return next((obj for _, obj in of_namespace(watch, namespace) if obj["spec"].get("nodeName")), None)


def claims_now(cluster: Cluster, pool: str) -> list[dict]:
    return [c for c in cluster.get("nodeclaims.karpenter.sh")["items"] if in_pool(pool)(c)]


def live_pool_nodes(cluster: Cluster, pool: str) -> set[str]:
    return {n["metadata"]["name"] for n in cluster.get("nodes", "-l", f"kns.io/pool={pool}")["items"]}


def micro_time(stamp: str) -> float:
    """An Event's eventTime (microseconds, set by the recording process) in epoch seconds."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def restarted(component: Component) -> float:
    """Start the crashed component again; when (epoch seconds)."""
    at = time.time()
    component.start()
    return at


@dataclass
class Applied:
    """What the `up` of the first two faults left behind."""

    scheduler: Component
    scheduler_crashed: float
    karpenter: Component
    karpenter_trip: Tripwire


@pytest.fixture(scope="module")
def applied(stack, cluster, watches) -> Applied:
    """One `up` for the first two faults: it adds the packing scheduler's Jobs after that
    scheduler was killed, and a Job on the empty autoscaled pool `burst` with Karpenter set
    to be killed as soon as it has made that Job's NodeClaim."""
    scheduler, karpenter = Component(cluster.state, SCHEDULER), Component(cluster.state, "karpenter")
    scheduler.crash()
    crashed = time.time()
    trip = Tripwire(watches["nodeclaims.karpenter.sh"], in_pool("burst"), karpenter)

    def add(config: dict) -> None:
        config["kns:jobs"] = config.get("kns:jobs") or []
        config["kns:jobs"] += PACKING_JOBS + [BURST_JOB]

    stack.edit(add)
    stack.up()
    return Applied(scheduler, crashed, karpenter, trip)


# ---- 1. the packing scheduler ---------------------------------------------------------------


def test_pods_waiting_for_a_crashed_packing_scheduler_are_each_bound_once_after_its_restart(stack, cluster, watches,
                                                                                              applied):
    """Pods created while the packing scheduler is down wait for it (the default scheduler
    leaves them alone); once it is started again every one of them is bound, exactly once,
    by the packing configuration, and no pod or Job was lost or replaced meanwhile."""
    pods, jobs = watches["pods"], watches["jobs.batch"]
    names = [entry["name"] for entry in PACKING_JOBS]
    namespaces = [f"kns-{name}" for name in names]
    expected = sum(stack.entry("kns:jobs", name)["parallelism"] for name in names)
    try:
        waiting = cluster.wait(lambda: (lambda found: found if len(found) == expected else None)(
            {uid for ns in namespaces for uid in uids(pods, ns)}), slack(), every=0.2,
            message=f"the Job controller created the {expected} pods")
        jobs_before = {uid for ns in namespaces for uid in uids(jobs, ns)}
        # created after the crash, by the `up` (whole seconds: the server's clock)
        created = {obj["metadata"]["creationTimestamp"] for ns in namespaces for _, obj in of_namespace(pods, ns)}
        assert min(server_time(c).timestamp() for c in created) >= int(applied.scheduler_crashed), created
        # pending because the scheduler is down: no version of any of them has a node
        assert not [ns for ns in namespaces if bound_in(pods, ns)]
        assert {obj["spec"]["schedulerName"] for ns in namespaces for _, obj in of_namespace(pods, ns)} == {"kns-packing"}
    finally:
        started = restarted(applied.scheduler)

    def all_bound():
        bound = {obj["metadata"]["uid"] for ns in namespaces for _, obj in of_namespace(pods, ns)
                 if obj["spec"].get("nodeName")}
        return bound if len(bound) >= expected else None

    cluster.wait(all_bound, slack(), every=0.1, message="every waiting pod bound after the restart")
    MEASURED["packing scheduler: restart -> all pods bound (s)"] = time.time() - started
    # the same pods and Jobs before and after: none lost, none replaced, nothing deleted
    assert {uid for ns in namespaces for uid in uids(pods, ns)} == waiting
    assert {uid for ns in namespaces for uid in uids(jobs, ns)} == jobs_before and len(jobs_before) == len(names)
    assert not [obj for ns in namespaces for kind, obj in of_namespace(pods, ns) if kind == "DELETED"]
    placed = set()
    for ns in namespaces:
        by_pod: dict[str, set[str]] = {}
        for _, obj in of_namespace(pods, ns):
            if obj["spec"].get("nodeName"):
                by_pod.setdefault(obj["metadata"]["name"], set()).add(obj["spec"]["nodeName"])
        assert all(len(nodes) == 1 for nodes in by_pod.values()), by_pod  # bound once, never moved
        placed |= {node for nodes in by_pod.values() for node in nodes}
        events = [e for e in cluster.get("events", "-n", ns)["items"] if e["reason"] == "Scheduled"]
        per_pod = {}
        for event in events:
            name = event["involvedObject"]["name"]
            per_pod[name] = per_pod.get(name, 0) + max(event.get("count") or 1, (event.get("series") or {}).get("count", 1))
        assert per_pod == {name: 1 for name in by_pod}, per_pod  # one Scheduled event each
        for _, obj in of_namespace(pods, ns):
            scheduled = condition(obj, "PodScheduled")
            if scheduled and scheduled["status"] == "True":  # bound after the restart, never before
                assert server_time(scheduled["lastTransitionTime"]).timestamp() >= int(started), (obj["metadata"]["name"],
                                                                                                  scheduled, started)
    # the restarted process is the packing scheduler with its configuration: 6 CPUs of 1-CPU
    # pods fill one 16-CPU node instead of spreading
    assert len(placed) == 1 and placed <= {"cpu-node-1", "cpu-node-2"}, placed


# ---- 2. Karpenter -------------------------------------------------------------------------


def initialized(claim: dict) -> bool:
    return is_true(claim, "Initialized")


def test_a_nodeclaim_in_flight_when_karpenter_crashes_completes_or_is_replaced_after_its_restart(cluster, watches,
                                                                                                  applied):
    """Karpenter killed the moment it made the NodeClaim for a pending pod: after the restart
    that claim completes (or is deleted and replaced), the pod lands on a node of its pool,
    no pod is replaced, and the pool converges to one claim; an instance the crash leaked
    (below) is never used."""
    pods, claims = watches["pods"], watches["nodeclaims.karpenter.sh"]
    try:
        tripped = applied.karpenter_trip.wait(slack())
        # Karpenter is dead: what the API server holds now is the state at the crash
        frozen = claims_now(cluster, "burst")
        assert frozen and not [c for c in frozen if initialized(c)], [c.get("status") for c in frozen]
        at_crash = {c["metadata"]["name"]: sorted(k["type"] for k in c.get("status", {}).get("conditions", [])
                                                  if k["status"] == "True") for c in frozen}
        print(f"NodeClaims of pool burst at the crash (conditions True): {at_crash}")
        assert not bound_in(pods, "kns-burst-job")
    finally:
        started = restarted(applied.karpenter)

    pod = cluster.wait(lambda: bound_in(pods, "kns-burst-job"), slack(), every=0.1,
                       message="the burst pod bound after Karpenter's restart")
    MEASURED["karpenter (claim in flight): restart -> pod bound (s)"] = time.time() - started
    node = pod["spec"]["nodeName"]

    def converged():
        live = claims_now(cluster, "burst")
        done = [c for c in live if initialized(c) and c["status"].get("nodeName") == node]
        return done if len(live) == 1 and done else None

    (claim,) = cluster.wait(converged, slack(), every=1, message="pool burst converged to one claim, holding the pod")
    node_labels = cluster.get("node", node)["metadata"]["labels"]
    assert node_labels["kns.io/pool"] == "burst" and node_labels["karpenter.sh/nodepool"] == "burst"
    # the claim of the crash completed, or it was deleted and the new one made after the restart
    name = tripped["metadata"]["name"]
    if claim["metadata"]["name"] != name:
        assert [kind for kind, obj in claims.of(None, name) if kind == "DELETED"], name
        assert server_time(claim["metadata"]["creationTimestamp"]).timestamp() >= int(started)
    # one pod from first to last, bound once
    assert len(uids(pods, "kns-burst-job")) == 1
    assert {obj["spec"].get("nodeName") for _, obj in of_namespace(pods, "kns-burst-job")} - {None} == {node}
    # A crash between the cloud's create and the claim's Launched status loses Karpenter's
    # record of that instance: the restart launches the claim again, and core Karpenter
    # has no collector for the first instance (cloud providers such as AWS add one; the kwok
    # provider does not). Such a node must stay inert: never registered (Karpenter's
    # `unregistered` taint keeps every pod off), no claim's, no pod ever bound to it.
    leaked = live_pool_nodes(cluster, "burst") - {node}
    ever_used = {obj["spec"].get("nodeName") for _, obj in pods.all()}
    for other in leaked:
        found = cluster.get("node", other)
        assert any(t["key"] == "karpenter.sh/unregistered" for t in found["spec"].get("taints", [])), found["spec"]
        assert found["spec"].get("providerID") != claim["status"]["providerID"] and other not in ever_used, other
    print(f"pool burst: pod on {node} (claim {claim['metadata']['name']}, tripped on {name}); "
          f"instances leaked by the crash (inert): {sorted(leaked)}")
    if leaked:
        MEASURED["karpenter: instances leaked by the crash"] = len(leaked)


def test_a_prescaled_run_starts_on_its_warm_node_though_karpenter_crashed_twice_during_the_warm_up(
        stack, cluster, watches, applied):
    """A primer fired as the CronJob controller fires it (a Job named for its minute, from the
    suspended CronJob): Karpenter is killed once the primer's NodeClaim is launched, before
    its node is in use, and again while the primed pod holds the warm node, and restarted
    each time; the run still starts at its time on the node warmed for it, which was
    neither replaced nor removed."""
    pods, claims, nodes = watches["pods"], watches["nodeclaims.karpenter.sh"], watches["nodes"]
    cron = cluster.get("cronjob", "primed", "-n", "kns-primed")
    warm_up = int(cron["metadata"]["annotations"]["kns.io/warm-up-minutes"])
    karpenter = applied.karpenter
    # killed once the cloud has made the instance (Launched), before the node is in use
    trip = Tripwire(claims, lambda obj: in_pool("warm")(obj) and is_true(obj, "Launched"), karpenter)
    minute = int(time.time() // 60)
    start = (minute + warm_up) * 60  # what the wait and kwok's primed stage compute from the name
    name = f"primed-{minute}"
    cluster.kubectl("create", "job", name, "--from=cronjob/primed", "-n", "kns-primed")
    fired = time.time()
    try:
        trip.wait(start - time.time())
        frozen = claims_now(cluster, "warm")
        print("NodeClaims of pool warm at the first crash (conditions True): " + str(
            {c["metadata"]["name"]: sorted(k["type"] for k in c.get("status", {}).get("conditions", [])
                                           if k["status"] == "True") for c in frozen}))
        assert frozen and not [c for c in frozen if initialized(c)], [c.get("status") for c in frozen]
        assert not bound_in(pods, "kns-primed")
    finally:
        first = restarted(karpenter)
    pod = cluster.wait(lambda: bound_in(pods, "kns-primed"), max(start - time.time(), 0) + slack(), every=0.1,
                       message="the primed pod bound")
    MEASURED["karpenter (warm-up claim launched): restart -> primed pod bound (s)"] = time.time() - first
    node = pod["spec"]["nodeName"]
    # the second crash, while the pod holds the node and waits for its start
    claims_before = {obj["metadata"]["name"] for _, obj in claims.all() if in_pool("warm")(obj)}
    karpenter.crash()
    second = restarted(karpenter)
    assert second < start, "the warm-up was over before the second restart"
    print(f"warm-up: fired {start - fired:.0f}s before the start, restarts {start - first:.0f}s and "
          f"{start - second:.0f}s before it")

    def finished():
        done = [obj for _, obj in of_namespace(pods, "kns-primed") if obj["status"].get("phase") == "Succeeded"]
        return done[-1] if done else None

    done = cluster.wait(finished, max(start - time.time(), 0) + slack(), every=0.5, message="the primed run completed")
    assert len(uids(pods, "kns-primed")) == 1 and done["spec"]["nodeName"] == node
    seen = [obj for _, obj in nodes.of(None, node)]
    assert seen, node
    made = seen[0]
    assert labels(made).get("kns.io/pool") == "warm", labels(made)
    assert server_time(made["metadata"]["creationTimestamp"]).timestamp() >= int(fired)  # warmed for this primer
    start_at = datetime.fromtimestamp(start, timezone.utc)
    conditions = {c["type"]: c for c in done["status"]["conditions"]}
    assert server_time(conditions["PodScheduled"]["lastTransitionTime"]) < start_at
    running = [server_time(c["lastTransitionTime"]) for _, obj in of_namespace(pods, "kns-primed")
               for c in obj["status"].get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"]
    assert running and min(running) < start_at, (running, start_at)  # warm and running before the start
    finish = max(server_time(s["state"]["terminated"]["finishedAt"]) for s in done["status"]["containerStatuses"])
    assert finish >= start_at, (finish, start_at)  # the run itself started no earlier than its time
    MEASURED["prescaled: pod Ready before the start (s)"] = (start_at - min(running)).total_seconds()
    # the warm node kept until the run was done: no claim made after the second restart
    # (nothing replaced it), and the node not deleted before the run finished
    later = {obj["metadata"]["name"] for _, obj in claims.all() if in_pool("warm")(obj)} - claims_before
    assert not later, (later, claims_before)
    deletions = [server_time(obj["metadata"]["deletionTimestamp"]) for _, obj in nodes.of(None, node)
                 if obj["metadata"].get("deletionTimestamp")]
    assert all(d >= finish for d in deletions), (deletions, finish)


# ---- 3. Kueue ---------------------------------------------------------------------------------


def queued_job(name: str, namespace: str, queue: str | None) -> dict:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "busybox:1.37", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                                    "limits": {"cpu": "100m", "memory": "64Mi"}}}]}}}}
    if queue:
        job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return job


def create(cluster: Cluster, manifest: dict, *flags: str):
    return cluster.kubectl("create", *flags, "-f", "-", "-o", "json", input=json.dumps(manifest), check=False)


def test_kueue_crash_keeps_admitted_jobs_running_refuses_new_jobs_and_admits_the_waiting_in_queue_order(
        stack, cluster, watches):
    """Kueue killed while its queue holds two Jobs and two wait: the admitted keep running
    until they end (never suspended, evicted or re-created); while it is down its webhooks,
    `failurePolicy: Fail`, refuse every new Job, queued or not; after the restart, as each
    admitted Job ends, the first waiting Workload in Kueue's queue order (priority, then
    creation time, ties in either order) is admitted, never more than the quota holds."""
    workloads, jobs, pods = watches["workloads.kueue.x-k8s.io"], watches["jobs.batch"], watches["pods"]
    kueue_events = watches["events.events.k8s.io"]
    names = [entry["name"] for entry in QUEUED_JOBS]
    namespaces = {f"kns-{name}" for name in names}
    quota = stack.entry("kns:queues", "fifo")["quota"]["queued"]["cpu"]
    holds = int(quota) // int(QUEUED_JOBS[0]["cpu"])  # 2 at a time
    cluster.kubectl("create", "namespace", "fault-probe")  # a namespace no queue serves

    def add(config: dict) -> None:
        config["kns:jobs"] += QUEUED_JOBS

    stack.edit(add)
    stack.up()

    def latest() -> dict[str, dict]:
        found: dict[str, dict] = {}
        for kind, obj in workloads.all():
            if obj["metadata"]["namespace"] in namespaces and kind != "DELETED":
                found[obj["metadata"]["namespace"]] = obj
        return found

    def settled():
        now = latest()
        # Kueue does not always write a Pending condition on a Workload that does not fit:
        # waiting is not holding quota while the queue is full.
        admitted = [ns for ns, w in now.items() if is_true(w, "QuotaReserved") and not is_true(w, "Finished")]
        running = [ns for ns in admitted
                   if any(obj["status"].get("phase") == "Running" for _, obj in of_namespace(pods, ns))]
        return len(now) == len(names) and len(admitted) == len(running) == holds

    try:
        cluster.wait(settled, slack(), every=0.2, message=f"{holds} Workloads admitted, their pods running, the others waiting")
    except AssertionError:
        state = {ns: [(c["type"], c["status"], c.get("reason"), c.get("message", "")[:100])
                      for c in w.get("status", {}).get("conditions", [])] for ns, w in latest().items()}
        phases = {ns: [(o["status"].get("phase"), o["spec"].get("nodeName")) for _, o in of_namespace(pods, ns)][-1:]
                  for ns in namespaces}
        raise AssertionError(f"not settled: {state} {phases}")
    kueue = Component(cluster.state, "kueue")
    kueue.crash()
    crashed = time.time()
    try:
        # the state at the crash, as the API server holds it (Kueue is gone)
        frozen = {w["metadata"]["namespace"]: w for w in cluster.get("workloads.kueue.x-k8s.io", "-A")["items"]
                  if w["metadata"]["namespace"] in namespaces}
        admitted = sorted(ns for ns, w in frozen.items() if is_true(w, "Admitted") and not is_true(w, "Finished"))
        waiting = sorted(ns for ns, w in frozen.items() if not is_true(w, "QuotaReserved"))
        assert len(admitted) == holds and len(waiting) == len(names) - holds, {
            ns: [(c["type"], c["status"], c.get("reason"), c["lastTransitionTime"], c.get("message", "")[:80])
                 for c in w.get("status", {}).get("conditions", [])] for ns, w in frozen.items()}
        for ns in admitted:  # unsuspended, its pod running
            (job,) = cluster.get("jobs", "-n", ns)["items"]
            assert job["spec"]["suspend"] is False, job["spec"]
            (pod,) = cluster.get("pods", "-n", ns)["items"]
            assert pod["status"]["phase"] == "Running", pod["status"]
        for ns in waiting:  # still suspended, no pod
            assert cluster.get("jobs", "-n", ns)["items"][0]["spec"]["suspend"] is True
            assert not cluster.get("pods", "-n", ns)["items"]
        # No Job can be created while Kueue is down, queued or not: its Job webhooks fail closed.
        for manifest in (queued_job("while-down", waiting[0], "kns"), queued_job("while-down", "fault-probe", None)):
            refused = create(cluster, manifest)
            assert refused.returncode != 0, refused.stdout
            assert 'failed calling webhook "mjob.kb.io"' in refused.stderr, refused.stderr
        MEASURED["kueue: time down (s)"] = time.time() - crashed
    finally:
        started = restarted(kueue)

    # Job creation comes back with Kueue's webhooks: a dry run of a queued Job comes back suspended.
    def answers():
        done = create(cluster, queued_job("after-restart", "fault-probe", "kns"), "--dry-run=server")
        return done.returncode == 0 and '"suspend": true' in done.stdout
    cluster.wait(answers, slack(), every=0.25, message="Kueue's webhooks answer after the restart")
    MEASURED["kueue: restart -> Job creation accepted again (s)"] = time.time() - started

    # Before any quota frees, the restarted Kueue must have set the waiting Workloads aside
    # (its first Pending event: a new process starts a new event series). Its BestEffortFIFO
    # pops the next Workload while an earlier one is set aside, so capacity freed in that
    # moment goes to whichever is in hand; once all are set aside, freed capacity requeues
    # them in queue order. The four Jobs have one shape, and Kueue (SchedulingEquivalenceHashing,
    # on by default since 0.18) sets aside every Workload of the shape it found does not fit,
    # reporting only that one.
    def tried() -> set[str]:
        return {obj["regarding"]["namespace"] for _, obj in kueue_events.all()
                if obj.get("type") == "Warning" and obj["regarding"].get("kind") == "Workload"
                and obj["regarding"].get("namespace") in waiting and micro_time(obj["eventTime"]) > crashed}

    cluster.wait(tried, slack(), every=0.25, message="the restarted Kueue set the waiting Workloads aside")
    MEASURED["kueue: restart -> waiting Workloads set aside (s)"] = time.time() - started

    # End the admitted Jobs one by one (their pods' run-for set to 0s: kwok completes them
    # at once); each end frees one Job's quota, which goes to the first waiting Workload in
    # Kueue's queue order (priority, then the Workload's creation time, to the second: ties
    # in either order), and to no other.
    ended: dict[str, float] = {}
    for ns in admitted:
        (pod,) = [obj for obj in cluster.get("pods", "-n", ns)["items"] if obj["status"].get("phase") == "Running"]
        reserved_before = {w for w in waiting if is_true(latest()[w], "QuotaReserved")}
        ended[ns] = time.time()
        cluster.kubectl("annotate", "pod", "-n", ns, pod["metadata"]["name"], "--overwrite", "kwok.x-k8s.io/run-for=0s")

        def next_reserved():
            return {w for w in waiting if is_true(latest()[w], "QuotaReserved")} - reserved_before

        admitted_now = cluster.wait(next_reserved, slack(), every=0.1, message=f"a waiting Workload admitted after {ns} ended")
        assert len(admitted_now) == 1, admitted_now
        (taken,) = admitted_now
        MEASURED.setdefault("kueue: admitted Job ended -> next waiting admitted (s)", time.time() - ended[ns])
        still = [w for w in waiting if w not in reserved_before | {taken}]
        created = {w: server_time(latest()[w]["metadata"]["creationTimestamp"]) for w in [taken, *still]}
        assert all(created[taken] <= created[w] for w in still), (taken, created)

    # Walk the Workload events in commit order: never more reserved than the quota holds.
    events = [(kind, obj) for kind, obj in workloads.all() if obj["metadata"]["namespace"] in namespaces]
    holding: dict[str, bool] = {}
    for kind, obj in events:
        ns = obj["metadata"]["namespace"]
        reserved = kind != "DELETED" and is_true(obj, "QuotaReserved") and not is_true(obj, "Finished")
        holding[ns] = reserved
        assert sum(holding.values()) <= holds, (ns, holding)
    # each waiting one got its quota only after an admitted one finished
    for ns in waiting:
        admitted_at = server_time(condition(latest()[ns], "QuotaReserved")["lastTransitionTime"])
        finishes = [server_time(c["lastTransitionTime"]) for a in admitted
                    if (c := condition(latest()[a], "Finished")) and c["status"] == "True"]
        assert finishes and min(finishes) <= admitted_at, (ns, admitted_at, finishes)
    # the admitted ones stayed admitted: never evicted or preempted, their Job never
    # suspended again, one pod each from start to end, which ran its whole run-for
    for ns in admitted:
        versions = [obj for _, obj in events if obj["metadata"]["namespace"] == ns]
        reserved = [i for i, w in enumerate(versions) if is_true(w, "QuotaReserved")]
        for w in versions[reserved[0]:]:
            assert is_true(w, "QuotaReserved") or is_true(w, "Finished"), w["status"]
            assert not is_true(w, "Evicted") and not is_true(w, "Preempted"), w["status"]
        suspends = [obj["spec"].get("suspend") for _, obj in of_namespace(jobs, ns)]
        assert True not in suspends[suspends.index(False):], suspends
        assert len(uids(pods, ns)) == 1
        assert not [obj for kind, obj in of_namespace(pods, ns) if kind == "DELETED"]
        done = cluster.wait(lambda ns=ns: next((obj for _, obj in of_namespace(pods, ns)
                                                if obj["status"].get("phase") == "Succeeded"), None),
                            slack(), every=0.5, message=f"the pod of {ns} ran to its end")
        (state,) = [s["state"]["terminated"] for s in done["status"]["containerStatuses"]]
        until = datetime.fromtimestamp(int(ended[ns]), timezone.utc)  # the server's times are whole seconds
        assert state["reason"] == "Completed" and server_time(state["finishedAt"]) >= until, (ns, until, state)
