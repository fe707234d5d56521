"""Queueing end to end (docs/queueing.md): the `local` stack with queueing on
(tests/e2e/Pulumi.queueing.yaml) through the real engine, against a local control plane
where Kueue's manager (built from its Go module at the pinned version) runs as a process
with its webhooks registered, so Jobs are admitted as in a real cluster; kwok runs the
pods (an annotated pod completes `run-for` after it starts).

Every assertion reads what persists: objects recorded by watches started before `pulumi
up`, the server's timestamps in them, and Kueue's Workload conditions.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from config.karpenter import duration_seconds
from config.quantity import parse
from kns_cli import explain
from kns_cli import stack as kns_stack
from kns_testing.cluster import Cluster, local_cluster, node_manifest, script
from kns_testing.dra import resource_slice
from kns_testing.kueue import program_configuration, start_kueue
from kns_testing.pace import slack
from kns_testing.program import ROOT
from kns_testing.reservations import SwitchKubelet
from kns_testing.stacks import Stack, condition, is_true, project, server_time, up_with_schedules_ahead
from kns_testing.watch import Watch
from plan.reservation_switch import EDGE_WAIT_SECONDS, edge_schedule
from plan.stackplan import plan_stack

# Pool resv of the reservations' stack (the scenario below, on the same control plane and
# Kueue): three nodes of 2 GPUs.
RESV_GPUS = 2
RESV_NODES = [("resv-node-1", 16, RESV_GPUS), ("resv-node-2", 16, RESV_GPUS), ("resv-node-3", 16, RESV_GPUS)]
NODES = [*RESV_NODES, ("sys-node-1", 8, 0), ("cpu-node-1", 16, 0), ("cpu-node-2", 16, 0), ("solo-node-1", 16, 0),
         ("small-node-1", 8, 0), ("gang-node-1", 16, 0), ("tight-node-1", 8, 0), ("prio-node-1", 16, 0),
         ("flat-node-1", 16, 0)]
# kns:queueing.waitForPodsReady of the stack under test. The stack runs Kueue as a process
# (install false), started with the configuration the program renders for this setting
# (kns_testing/kueue.py program_configuration), never with a flag of the test's own.
PODS_READY = "60s"
# Pool rack's nodes (docs/distributed.md): one block, rack r1 of three nodes (first in
# line), rack r2 of four; 8 CPU each, so one 8-CPU worker per node.
RACKS = {"r1": 3, "r2": 4}
RACK_NODES = [(f"{rack}-node-{i}", rack) for rack, count in RACKS.items() for i in range(1, count + 1)]


def rack_node(name: str, rack: str) -> dict:
    node = node_manifest(name, 8, 0)
    node["metadata"]["labels"].update({"example.com/block": "b1", "example.com/rack": rack})
    return node
STACK_FILE = ROOT / "tests" / "e2e" / "Pulumi.queueing.yaml"


def run_for(entry: dict) -> float:
    """How long kwok runs the entry's pod (its kwok.x-k8s.io/run-for annotation)."""
    text = entry["annotations"]["kwok.x-k8s.io/run-for"]
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)([smh])", text))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = [node_manifest(*node) for node in NODES] + [rack_node(*node) for node in RACK_NODES]
    with local_cluster(tmp_path_factory.mktemp("queueing-cluster"), nodes) as live:
        yield live


def stack_config(cluster: Cluster) -> dict:
    text = STACK_FILE.read_text().replace("KUBECONFIG_PATH", str(cluster.kubeconfig))
    return yaml.safe_load(text)["config"]


# ---- Kueue installed by the program (before the manager process runs) --------------------


def test_install_true_installs_kueue_under_the_platform_rules_and_destroy_removes_it(cluster, tmp_path_factory):
    config = stack_config(cluster)
    config["kns:queueing"] = {"enabled": True, "install": True}
    for key in ("kns:queues", "kns:jobs"):
        config.pop(key)
    live = project(tmp_path_factory, cluster, "install", config)
    try:
        live.up()  # the engine awaits the controller's Deployment: its pod passed Pod Security `restricted`
        crds = {c["metadata"]["name"] for c in cluster.get("crd")["items"]}
        assert {"clusterqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"} <= crds
        namespace = cluster.get("namespace", "kueue-system")
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        (pod,) = cluster.get("pods", "-n", "kueue-system")["items"]
        assert pod["spec"]["containers"][0]["image"] == "registry.k8s.io/kueue/kueue:v0.19.2"
        # It tolerates the system pool's taint (and prefers, not requires, its nodes: where it
        # runs is the scheduler's choice), and it was scheduled and became Ready.
        assert {"key": "kns.io/system", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
        assert pod["spec"].get("nodeName")
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
    finally:
        # Destroyed even when an assertion failed: its CRDs (with upstream's conversion
        # webhooks) would stand in the way of the manager process the later tests start.
        live.pulumi("destroy", "--yes")
    crds = {c["metadata"]["name"] for c in cluster.get("crd")["items"]}
    assert not [c for c in crds if c.endswith(".kueue.x-k8s.io")]
    for kind in ("clusterroles", "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "apiservices"):
        assert not [o for o in cluster.get(kind)["items"] if "kueue" in o["metadata"]["name"]], kind
    cluster.wait(lambda: cluster.kubectl("get", "namespace", "kueue-system", check=False).returncode != 0, slack(),
                 message="namespace kueue-system gone")


# ---- the queueing stack, with Kueue's manager as a process ---------------------------------


@pytest.fixture(scope="module")
def kueue_configuration(cluster) -> dict:
    """Kueue's Configuration as the program renders it for the stack with waitForPodsReady."""
    config = stack_config(cluster)
    config["kns:queueing"] = {**config["kns:queueing"], "waitForPodsReady": PODS_READY}
    rendered = program_configuration(config)
    # The devices' stack shares this Kueue: its device class mappings, as the program
    # renders them for that stack (docs/gpus.md), are the one thing it adds.
    rendered["resources"] = program_configuration(dra_config(cluster))["resources"]
    # And the fair-share stack's admission fair sharing (docs/queueing.md, "Fair share"), as
    # the program renders it: it orders only the queues that ask for it (admissionMode), so
    # the other stacks' queues admit as before. Kueue's cohort fair sharing (`fairSharing`)
    # would change how their cohorts lend, so it is left out of this shared Kueue.
    rendered["admissionFairSharing"] = program_configuration(fair_config(cluster, FAIR_SHARING))[
        "admissionFairSharing"]
    return rendered


@pytest.fixture(scope="module")
def kueue(cluster, kueue_configuration):
    start_kueue(cluster, configuration=kueue_configuration)
    return cluster


@pytest.fixture(scope="module")
def watches(kueue):
    found = {kind: Watch(kueue, kind) for kind in ("jobs.batch", "pods", "workloads.kueue.x-k8s.io")}
    yield found
    for watch in found.values():
        watch.stop()


@pytest.fixture(scope="module")
def stack(kueue, watches, tmp_path_factory):
    live = project(tmp_path_factory, kueue, "queueing", stack_config(kueue))
    live.up()
    return live


def entry(stack: Stack, name: str) -> dict:
    return stack.entry("kns:jobs", name)


def first_pod(watches, job: str) -> dict | None:
    """The first recorded version of the first pod of `job`."""
    pods = [obj for _, obj in watches["pods"].all() if obj["metadata"].get("labels", {}).get("job-name") == job]
    return min(pods, key=lambda p: p["metadata"]["creationTimestamp"]) if pods else None


def finished_at(watches, job: str) -> str | None:
    for _, obj in watches["jobs.batch"].all():
        if obj["metadata"]["name"] == job:
            for condition in obj.get("status", {}).get("conditions", []):
                if condition["type"] == "Complete" and condition["status"] == "True":
                    return condition["lastTransitionTime"]
    return None


def workload_of(watches, namespace: str) -> list[dict]:
    return [obj for _, obj in watches["workloads.kueue.x-k8s.io"].all() if obj["metadata"]["namespace"] == namespace]


# ---- prescaled reports on full queues (docs/queueing.md, "Start times on a busy queue") ------

# Two minutes of warm-up, as tests/test_e2e.py's prescaled schedule.
WARM_UP = 2
REPORTS = {"report-prio": ("prio", "prio"), "report-flat": ("noprio", "flat")}  # name: (queue, pool)


@pytest.fixture(scope="module")
def reports(stack):
    """Two prescaled 8-CPU reports primed after this `up`: report-prio on queue prio, which
    preempts lower priorities, and report-flat on noprio, which does not; each queue is full
    of batch Jobs by then. Requested by the module's first test, so the wait for the cron
    minute overlaps the other tests."""
    def set_schedules(config, start):
        config["kns:schedules"] = [
            {"name": name, "user": "ann", "queue": queue, "pool": pool, "image": "busybox:1.37", "cpu": 8,
             "memory": 1024, "schedule": f"{start.minute} {start.hour} * * *", "timeZone": "Etc/UTC",
             "warmUpMinutes": WARM_UP} for name, (queue, pool) in REPORTS.items()]

    return up_with_schedules_ahead(stack, WARM_UP, set_schedules)


def test_the_queue_objects_are_accepted_and_a_second_up_changes_nothing(stack, kueue, reports, course):
    stack.pulumi("up", "--yes", "--expect-no-changes")
    mine = ("-l", "kns.io/cluster=kns-local")  # the reservations' stack shares the cluster
    flavors = {f["metadata"]["name"]: f for f in kueue.get("resourceflavors.kueue.x-k8s.io", *mine)["items"]}
    assert set(flavors) == {"compute", "solo", "small", "rack", "gang", "tight", "prio", "flat"}
    queues = {q["metadata"]["name"]: q for q in kueue.get("clusterqueues.kueue.x-k8s.io", *mine)["items"]}
    assert set(queues) == {"solo", "few", "team-a", "team-b", "racks", "pair", "tight", "prio", "noprio"}
    classes = {c["metadata"]["name"]: c["value"]
               for c in kueue.get("workloadpriorityclasses.kueue.x-k8s.io", *mine)["items"]}
    assert classes == {"batch": 100, "report": 1000}
    for queue in queues.values():  # Kueue found every flavor and took the queue into service
        assert condition(queue, "Active")["status"] == "True", queue["status"]
    local = kueue.get("localqueues.kueue.x-k8s.io", "-n", "kns-solo-1")["items"]
    assert [q["spec"]["clusterQueue"] for q in local] == ["solo"]


def test_three_8_cpu_jobs_on_a_16_cpu_queue_two_run_and_the_third_waits_for_one_to_finish(stack, kueue, watches):
    names = ["solo-1", "solo-2", "solo-3"]
    limit = run_for(entry(stack, "solo-1")) * 2 + slack()
    kueue.wait(lambda: all(finished_at(watches, n) for n in names), limit, message="the three solo Jobs finished")
    started = sorted((first_pod(watches, n)["metadata"]["creationTimestamp"], n) for n in names)
    (first, a), (second, b), (third, late) = started
    # The third's pods were created only after one of the first two had finished, without any `up`.
    assert third >= min(finished_at(watches, a), finished_at(watches, b)), started
    assert server_time(third) - server_time(first) >= timedelta(seconds=run_for(entry(stack, late)) - 5)
    # Meanwhile its Workload waited for quota: recorded not admitted while the others ran.
    waiting = [c["message"] for w in workload_of(watches, f"kns-{late}")
               if (c := condition(w, "QuotaReserved")) is not None and c["status"] == "False"]
    assert any("insufficient" in message for message in waiting), waiting
    for name in names:  # placement came from the flavor: the pool's label, its taint tolerated
        pod = first_pod(watches, name)
        assert pod["spec"]["nodeSelector"]["kns.io/pool"] == "solo"
        assert {"key": "kns.io/solo", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    bound = {obj["spec"].get("nodeName") for _, obj in watches["pods"].all()
             if obj["metadata"]["namespace"].startswith("kns-solo-") and obj["spec"].get("nodeName")}
    assert bound == {"solo-node-1"}


def test_the_pods_limit_holds(stack, kueue, watches):
    names = ["few-1", "few-2", "few-3"]
    limit = run_for(entry(stack, "few-1")) * 2 + slack()
    kueue.wait(lambda: all(finished_at(watches, n) for n in names), limit, message="the three few Jobs finished")
    spans = [(first_pod(watches, n)["metadata"]["creationTimestamp"], finished_at(watches, n)) for n in names]
    for created, _ in spans:  # never three pods at once: at most two Jobs were running at any creation
        running = [s for s in spans if s[0] <= created < s[1]]
        assert len(running) <= 2, spans
    bound = {obj["spec"].get("nodeName") for _, obj in watches["pods"].all()
             if obj["metadata"]["namespace"].startswith("kns-few-") and obj["spec"].get("nodeName")}
    assert bound == {"small-node-1"}  # pool small's one node


def cpu_usage(cluster: Cluster, queue: str) -> tuple[str, str]:
    """(total, borrowed) CPU of a ClusterQueue, from its status."""
    status = cluster.get("clusterqueue.kueue.x-k8s.io", queue).get("status", {})
    usage = {r["name"]: r for f in status.get("flavorsUsage", []) for r in f["resources"]}
    cpu = usage.get("cpu", {})
    return cpu.get("total", "0"), cpu.get("borrowed", "0")


def admitted(workloads: list[dict]) -> bool:
    return any((c := condition(w, "Admitted")) is not None and c["status"] == "True" for w in workloads)


def test_a_queue_borrows_idle_cohort_quota_and_the_lender_reclaims_it(stack, kueue, watches):
    team_a = ["team-a-1", "team-a-2", "team-a-3"]
    kueue.wait(lambda: all(admitted(workload_of(watches, f"kns-{n}")) for n in team_a), slack(),
               message="team-a's three Jobs admitted")  # 24 CPU on a 16-CPU queue: 8 borrowed from team-b
    kueue.wait(lambda: cpu_usage(kueue, "team-a") == ("24", "8"), slack(), message="team-a uses 24 CPU, 8 borrowed")

    def add_team_b(config: dict) -> None:
        config["kns:jobs"] += [{"name": f"team-b-{i}", "user": "bob", "queue": "team-b", "pool": "compute",
                                "image": "busybox:1.37", "cpu": 8, "memory": 1024,
                                "annotations": {"kwok.x-k8s.io/run-for": "1h"}} for i in (1, 2)]

    stack.edit(add_team_b)
    stack.up()
    # team-b (reclaimWithinCohort: Any) takes its 16 back: one of team-a's borrowing Jobs is preempted.
    kueue.wait(lambda: all(admitted(workload_of(watches, f"kns-team-b-{i}")) for i in (1, 2)), slack(),
               message="team-b's Jobs admitted")
    preempted = [n for n in team_a if any((c := condition(w, "Preempted")) is not None and c["status"] == "True"
                                          for w in workload_of(watches, f"kns-{n}"))]
    assert len(preempted) == 1, preempted
    reason = condition(next(w for w in workload_of(watches, f"kns-{preempted[0]}")
                            if (c := condition(w, "Preempted")) and c["status"] == "True"), "Preempted")["reason"]
    assert reason == "InCohortReclamation"
    # The queue's status follows: team-a back to its own 16, borrowing nothing.
    kueue.wait(lambda: cpu_usage(kueue, "team-a") == ("16", "0"), slack(), message="team-a back to 16 CPU, none borrowed")


# ---- distributed entries (docs/distributed.md) ------------------------------------------


def pods_of(watches, job: str) -> dict[str, dict]:
    """The latest recorded version of each pod of `job`, by name."""
    latest: dict[str, dict] = {}
    for _, obj in watches["pods"].all():
        if obj["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == job:
            latest[obj["metadata"]["name"]] = obj
    return latest


def test_n_workers_are_indexed_pods_named_under_their_service_with_the_same_leader(stack, kueue, watches):
    kueue.wait(lambda: len(pods_of(watches, "pair-1")) + len(pods_of(watches, "pair-2")) >= 4, slack(),
               message="one pair Job's four pods")
    job = next(j for j in ("pair-1", "pair-2") if len(pods_of(watches, j)) == 4)
    namespace = f"kns-{job}"
    pods = list(pods_of(watches, job).values())
    indexes = sorted(int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]) for p in pods)
    assert indexes == [0, 1, 2, 3]
    for pod in pods:
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"{job}-{index}", job)
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        # The same leader for every worker, each its own rank: the fields the variables read.
        assert env["KNS_LEADER"]["value"] == f"$(KNS_JOB_NAME)-0.{job}.{namespace}.svc"
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == job
        assert env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        assert env["WORLD_SIZE"]["value"] == "4"

    def hostnames() -> set[str]:
        slices = kueue.get("endpointslices.discovery.k8s.io", "-n", namespace,
                           "-l", f"kubernetes.io/service-name={job}")["items"]
        return {e.get("hostname") for s in slices for e in s.get("endpoints") or []}

    kueue.wait(lambda: hostnames() == {f"{job}-{i}" for i in range(4)}, slack(),
               message=f"the Service {job} lists the four workers by hostname")


def test_four_workers_are_admitted_whole_one_job_at_a_time_never_three_and_three(stack, kueue, watches):
    names = ["pair-1", "pair-2"]
    limit = run_for(entry(stack, "pair-1")) * 2 + slack()
    kueue.wait(lambda: all(finished_at(watches, n) for n in names), limit, message="both pair Jobs finished")
    created = {n: sorted(p["metadata"]["creationTimestamp"] for p in pods_of(watches, n).values()) for n in names}
    assert all(len(times) == 4 for times in created.values()), created
    first, second = sorted(names, key=lambda n: created[n][0])
    # Room for six workers: the second Job got none of its pods until the first had finished
    # (its two free slots were not enough), then all four at once.
    assert created[second][0] >= finished_at(watches, first), created
    waiting = [c["message"] for w in workload_of(watches, f"kns-{second}")
               if (c := condition(w, "QuotaReserved")) is not None and c["status"] == "False"]
    assert any("insufficient" in message for message in waiting), waiting
    for name in names:  # one Workload per Job, its pod set of four
        (count,) = {ps["count"] for w in workload_of(watches, f"kns-{name}") for ps in w["spec"]["podSets"]}
        assert count == 4


def test_rack_topology_places_four_workers_in_one_rack_and_the_next_four_wait(stack, kueue, watches):
    names = ["spread-1", "spread-2"]
    kueue.wait(lambda: any(admitted(workload_of(watches, f"kns-{n}")) for n in names), slack(),
               message="one spread Job admitted")

    def bound(job: str) -> dict[str, str]:
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods_of(watches, job).values()
                if p["spec"].get("nodeName")}

    placed = next(n for n in names if admitted(workload_of(watches, f"kns-{n}")))
    other = next(n for n in names if n != placed)
    kueue.wait(lambda: len(bound(placed)) == 4, slack(), message=f"{placed}'s four workers bound")
    nodes = set(bound(placed).values())
    # Four nodes of rack r2, though r1's three free nodes come first: one rack, not the first four.
    assert nodes == {f"r2-node-{i}" for i in range(1, 5)}, nodes
    # The other four fit the queue (64 CPU) but no rack: r1 has three nodes. Kueue keeps
    # the Workload waiting, and no pod of it exists.
    kueue.wait(lambda: any((c := condition(w, "QuotaReserved")) is not None and c["status"] == "False"
                           for w in workload_of(watches, f"kns-{other}")), slack(),
               message=f"{other} recorded waiting")
    assert not admitted(workload_of(watches, f"kns-{other}"))
    assert pods_of(watches, other) == {}


def test_workers_that_do_not_all_become_ready_are_evicted_and_requeued_whole(stack, kueue, kueue_configuration,
                                                                             watches):
    """Two 8-CPU workers admitted on a 16-CPU queue whose pool has one 8-CPU node: one runs,
    the other stays Pending. After waitForPodsReady Kueue evicts the Workload, and the Job
    gives up both pods, the running one too: nothing half-started keeps the quota."""
    timeout = duration_seconds(kueue_configuration["waitForPodsReady"]["timeout"])
    assert timeout == duration_seconds(PODS_READY)

    def evicted() -> list[dict]:
        return [c for w in workload_of(watches, "kns-tight-2")
                if (c := condition(w, "Evicted")) is not None and c["status"] == "True"]

    kueue.wait(lambda: evicted(), timeout + slack(), message="tight-2 evicted by waitForPodsReady")
    assert evicted()[0]["reason"] == "PodsReadyTimeout", evicted()
    admitted_at = min(c["lastTransitionTime"] for w in workload_of(watches, "kns-tight-2")
                      if (c := condition(w, "Admitted")) is not None and c["status"] == "True")
    assert server_time(evicted()[0]["lastTransitionTime"]) - server_time(admitted_at) >= timedelta(seconds=timeout - 1)
    evicted_at = server_time(evicted()[0]["lastTransitionTime"])
    first = {name for name, pod in pods_of(watches, "tight-2").items()
             if server_time(pod["metadata"]["creationTimestamp"]) < evicted_at}
    assert len(first) == 2, first  # both workers of the first admission, one of them had run
    assert any(pod["spec"].get("nodeName") for name, pod in pods_of(watches, "tight-2").items() if name in first)

    def deleted() -> set[str]:
        return {obj["metadata"]["name"] for kind, obj in watches["pods"].all()
                if obj["metadata"]["name"] in first and (kind == "DELETED" or obj["metadata"].get("deletionTimestamp"))}

    kueue.wait(lambda: deleted() == first, slack(), message="both workers of the evicted admission deleted")
    # The Job went back to its queue whole: suspended again after it had run.
    suspended = [obj["spec"].get("suspend") for _, obj in watches["jobs.batch"].all()
                 if obj["metadata"]["name"] == "tight-2"]
    assert False in suspended and True in suspended[suspended.index(False):], suspended


def test_one_failed_worker_fails_the_whole_job_and_its_other_workers_are_removed(stack, kueue, watches):
    """Worker 1 of fail-3 exits 1 (scripts/kwok/pod-fail-worker.yaml): with whole-Job failure
    (backoffLimit 0) the Job fails at once, retries no index, and its running workers go."""
    def failed() -> list[dict]:
        return [c for _, obj in watches["jobs.batch"].all() if obj["metadata"]["name"] == "fail-3"
                for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"]

    kueue.wait(lambda: failed(), slack(), message="fail-3 failed")
    assert failed()[0]["reason"] == "BackoffLimitExceeded", failed()
    pods = pods_of(watches, "fail-3")
    index = {name: p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for name, p in pods.items()}
    assert sorted(index.values()) == ["0", "1", "2"], index  # no second pod for worker 1: no retry
    assert next(p for n, p in pods.items() if index[n] == "1")["status"]["phase"] == "Failed"
    others = {n for n in pods if index[n] != "1"}

    def removed() -> set[str]:
        return {obj["metadata"]["name"] for kind, obj in watches["pods"].all()
                if obj["metadata"]["name"] in others and (kind == "DELETED" or obj["metadata"].get("deletionTimestamp"))}

    kueue.wait(lambda: removed() == others, slack(), message="fail-3's other workers removed")


def start_verdict(stack: Stack, name: str, now: datetime) -> dict:
    """What `./kns explain` says of the entry's start, offline, from the stack's config."""
    cfg, plans = kns_stack.load_stack(stack.root, "local")
    (facts,) = explain.explain(plan_stack(cfg, plans, now), [name], now=now)["entries"]
    return facts["start"]


def end_pod(kueue: Cluster, namespace: str) -> None:
    """End the Running pod of a batch Job now (kwok's pod-complete-after reads run-for)."""
    (pod,) = [p for p in kueue.get("pods", "-n", namespace)["items"] if p["status"].get("phase") == "Running"]
    kueue.kubectl("annotate", "pod", "-n", namespace, pod["metadata"]["name"], "--overwrite",
                  "kwok.x-k8s.io/run-for=0s")


def reserved_at(watches, namespace: str) -> list[datetime]:
    """Each time a Workload of the namespace got quota (its QuotaReserved turning True)."""
    times = {c["lastTransitionTime"] for w in workload_of(watches, namespace)
             if (c := condition(w, "QuotaReserved")) is not None and c["status"] == "True"}
    return sorted(map(server_time, times))


def test_a_prescaled_report_preempts_a_batch_job_at_warm_up_and_starts_on_time(stack, kueue, watches, reports):
    """Queue prio (16 CPU, preemption LowerPriority) is full of two 8-CPU batch Jobs. At the
    report's warm-up its primer Job's Workload (priority report) preempts one of them, its
    pod is Running before the start and its workload container starts at the start; the
    preempted Job goes back to its queue (not deleted), is admitted again once the report
    is done, and completes."""
    start, primer = reports
    assert start_verdict(stack, "report-prio", primer - timedelta(minutes=1))["guaranteed"] is True
    namespace = "kns-report-prio"

    def ran() -> dict | None:
        return next((obj for _, obj in watches["pods"].all() if obj["metadata"]["namespace"] == namespace
                     and obj["status"].get("phase") == "Succeeded"), None)

    pod = kueue.wait(ran, max((start - datetime.now(timezone.utc)).total_seconds(), 0) + slack(), every=1,
                     message="report-prio ran")
    # admitted at warm-up time, by preemption
    (reserved, *_) = reserved_at(watches, namespace)
    assert primer <= reserved < start, (primer, reserved, start)
    preempted = [ns for ns in ("kns-prio-1", "kns-prio-2")
                 if any(is_true(w, "Preempted") for w in workload_of(watches, ns))]
    assert len(preempted) == 1, preempted
    (victim,) = preempted
    evicted = next(c for w in workload_of(watches, victim) if (c := condition(w, "Evicted")) and c["status"] == "True")
    assert evicted["reason"] == "Preempted" and server_time(evicted["lastTransitionTime"]) >= primer, evicted
    # Running on a node before the start; its container started at the start (kwok's primed stage)
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    assert server_time(conditions["PodScheduled"]["lastTransitionTime"]) < start, conditions
    ready = [server_time(c["lastTransitionTime"]) for kind, obj in watches["pods"].all()
             if obj["metadata"]["name"] == pod["metadata"]["name"]
             for c in obj["status"].get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"]
    assert ready and min(ready) < start, (ready, start)
    (state,) = [s["state"]["terminated"] for s in pod["status"]["containerStatuses"]]
    assert abs((server_time(state["startedAt"]) - start).total_seconds()) <= 1, (state, start)
    # the preempted Job was requeued, not deleted, and is admitted again once the report is done
    finished = server_time(kueue.wait(lambda: next((c["lastTransitionTime"] for w in workload_of(watches, namespace)
                                                    if (c := condition(w, "Finished")) and c["status"] == "True"), None),
                                      slack(), message="report-prio's Workload finished"))
    again = kueue.wait(lambda: [t for t in reserved_at(watches, victim) if t >= finished], slack(),
                       message=f"{victim} admitted again")
    job_uids = {obj["metadata"]["uid"] for _, obj in watches["jobs.batch"].all()
                if obj["metadata"]["namespace"] == victim}
    assert len(job_uids) == 1, job_uids  # one Job from its creation on: suspended and resumed
    kueue.wait(lambda: [p for p in kueue.get("pods", "-n", victim)["items"] if p["status"].get("phase") == "Running"],
               slack(), message=f"{victim}'s pod running again")
    end_pod(kueue, victim)
    kueue.wait(lambda: finished_at(watches, victim[len("kns-"):]), slack(), message=f"{victim} completed")
    print(f"measured: report-prio admitted {(reserved - primer).total_seconds():.0f}s after its primer fired; "
          f"{victim} admitted again {(again[0] - finished).total_seconds():.0f}s after the report was done")


def test_without_preemption_the_report_waits_and_starts_late_as_explain_predicted(stack, kueue, watches, reports):
    """Queue noprio (preemption Never) is as full: `./kns explain` calls report-flat's start
    best effort, and it is: its Workload waits through the start, and runs only once a batch
    Job ends, late by that much."""
    start, primer = reports
    verdict = start_verdict(stack, "report-flat", primer - timedelta(minutes=1))
    assert verdict["guaranteed"] is False
    assert verdict["reasons"][0].startswith('queue "noprio" has no preemption (withinClusterQueue: Never)'), verdict
    namespace = "kns-report-flat"
    kueue.wait(lambda: workload_of(watches, namespace), max((primer - datetime.now(timezone.utc)).total_seconds(), 0)
               + slack(), message="report-flat's primer Workload")
    # Through the start (the config's own time), it holds no quota.
    kueue.wait(lambda: datetime.now(timezone.utc) > start + timedelta(seconds=1),
               slack((start - datetime.now(timezone.utc)).total_seconds(), floor=5), message="the start passed")
    assert reserved_at(watches, namespace) == [], workload_of(watches, namespace)[-1].get("status")
    ended = datetime.now(timezone.utc)
    end_pod(kueue, "kns-flat-1")
    pod = kueue.wait(lambda: next((obj for _, obj in watches["pods"].all() if obj["metadata"]["namespace"] == namespace
                                   and obj["status"].get("phase") == "Succeeded"), None), slack(), message="report-flat ran")
    (state,) = [s["state"]["terminated"] for s in pod["status"]["containerStatuses"]]
    late = (server_time(state["startedAt"]) - start).total_seconds()
    assert server_time(state["startedAt"]) >= ended.replace(microsecond=0), (state, ended)
    assert late > 0, state
    print(f"measured: report-flat started {late:.0f}s late")


# ---- reservations (docs/reservations.md) -------------------------------------------------
# A second stack on the same control plane and Kueue: pool resv (RESV_NODES, 6 GPUs), a
# queue with 2 GPUs of it in cohort resv-labs, and two reservations of one node (2 GPUs)
# each with the same window: course (for entry resv-lab, 1 GPU, atEnd requeue) and maint
# (no one: a maintenance window). Six 1-GPU batch Jobs fill the pool between windows, four
# of them on what the reservations lend. And pool resv-auto, autoscaled by Karpenter, with
# reservation exam (for entry resv-exam, atEnd finish). kwok runs no container: the
# switch pods' own command runs here with their own service account
# (kns_testing/reservations.py).

RESV_LEAD = 2  # warmUpMinutes
RESV_MINUTES = 4  # the window
RESV_BATCH = 6
RESV_QUEUE_GPUS = 2
RESV_NAMESPACES = {"course": "kns-res-course", "maint": "kns-res-maint", "exam": "kns-res-exam"}
KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


def minute_after(moment: datetime) -> datetime:
    return (moment + timedelta(minutes=1)).replace(second=0, microsecond=0)


def reservation_config(cluster: Cluster, start: datetime, minutes: int = RESV_MINUTES) -> dict:
    end = start + timedelta(minutes=minutes)
    window = {"start": start.isoformat(), "end": end.isoformat(), "warmUpMinutes": RESV_LEAD}
    # Every pod runs until the test ends (kwok completes a Job's pod at once otherwise).
    gpu_job = {"image": "busybox:1.37", "gpus": 1, "cpu": 1, "memory": 1024, "pool": "resv",
               "annotations": {"kwok.x-k8s.io/run-for": "2h"}}
    return {
        "kns:cluster": {"name": "kns-resv", "kubeconfig": str(cluster.kubeconfig)},
        "kns:nodePools": [{"name": "resv", "role": "gpu", "nodes": [n for n, _, _ in RESV_NODES],
                           "gpu": {"perNode": RESV_GPUS}},
                          # Autoscaled by Karpenter (kwok instance g-16x: 4 GPUs), no node until needed.
                          {"name": "resv-auto", "role": "gpu", "gpu": {"perNode": 4}, "autoscale": {
                              "nodeClassRef": KWOK_CLASS,
                              "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                "values": ["on-demand"]},
                                               {"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                "values": ["g-16x-amd64-linux"]}],
                              "limits": {"nvidia.com/gpu": 8}, "consolidation": "WhenEmpty",
                              "consolidateAfter": "30s"}}],
        "kns:packingScheduler": {"enabled": False},
        "kns:queueing": {"enabled": True, "install": False},
        "kns:queues": [{"name": "resv-batch", "cohort": "resv-labs",
                        "quota": {"resv": {"cpu": 32, "memory": "128Gi", "nvidia.com/gpu": RESV_QUEUE_GPUS}}}],
        "kns:reservations": [
            {"name": "course", "pool": "resv", "nodes": 1, **window, "entries": ["resv-lab"], "atEnd": "requeue"},
            {"name": "maint", "pool": "resv", "nodes": 1, **window},
            {"name": "exam", "pool": "resv-auto", "nodes": 1, **window, "entries": ["resv-exam"], "atEnd": "finish"}],
        "kns:jobs": [{"name": "resv-lab", "user": "ann", **gpu_job, "queue": "resv-batch", "reservation": "course"},
                     {"name": "resv-exam", "user": "ann", **gpu_job, "gpus": 2, "pool": "resv-auto",
                      "reservation": "exam"},
                     *({"name": f"resv-batch-{i}", "user": "bob", **gpu_job, "queue": "resv-batch"}
                       for i in range(1, RESV_BATCH + 1))],
    }


@dataclass
class Course:
    stack: Stack
    switches: dict[str, SwitchKubelet]
    start: datetime
    end: datetime
    lead: timedelta
    claims: Watch
    during: dict = field(default_factory=dict)  # what the window's actor saw and did


def switched(cluster: Cluster) -> dict:
    """The fields the switches own, as the cluster has them now."""
    cron = cluster.get("cronjob", "switch", "-n", RESV_NAMESPACES["course"])["spec"]
    return {"stopPolicy": cluster.get("localqueue.kueue.x-k8s.io", "kns-res", "-n", "kns-resv-lab")["spec"].get(
        "stopPolicy"), "schedule": cron.get("schedule"), "suspend": cron.get("suspend")}


def _inside_the_window(course: Course, cluster: Cluster) -> None:
    """What happens while the window is open, in time: a new batch Job, a no-change
    `pulumi up`, an `up --refresh` (what KNS_REFRESH=true and ci-up.sh --converge run; the
    refresh reads the switched fields into the state, so only ignoreChanges keeps the
    program's own values from being applied back), all recorded for the tests; then
    maint's switch stops running pods (a node down), so its end is switched late."""
    wait_until = course.start + timedelta(seconds=5)
    while datetime.now(timezone.utc) < wait_until:
        time.sleep(1)
    late = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "late-batch", "namespace": "kns-resv-batch-1", "labels": {"kueue.x-k8s.io/queue-name": "kns"}},
        "spec": {"suspend": True, "template": {"metadata": {"annotations": {"kwok.x-k8s.io/run-for": "2h"}}, "spec": {
            "restartPolicy": "Never", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "c", "image": "busybox:1.37", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]}}}}
    cluster.apply(late)
    course.during["late_created"] = datetime.now(timezone.utc)
    course.during["switched_before"] = switched(cluster)
    done = course.stack.pulumi("up", "--yes", "--expect-no-changes", check=False)
    course.during["up"] = done
    course.during["up_finished"] = datetime.now(timezone.utc)
    course.during["stop_policy"] = cluster.get("localqueue.kueue.x-k8s.io", "kns-res", "-n", "kns-resv-lab")[
        "spec"].get("stopPolicy")
    course.during["refresh"] = course.stack.pulumi("up", "--yes", "--refresh", check=False)
    course.during["refresh_finished"] = datetime.now(timezone.utc)
    course.during["switched_after"] = switched(cluster)
    course.switches["maint"].pause()
    course.during["maint_paused"] = datetime.now(timezone.utc)


@pytest.fixture(scope="module")
def course(kueue, watches, stack, tmp_path_factory):
    """The reservations' stack, its window starting RESV_LEAD minutes after room for its
    `up` (twice the queueing stack's, measured before) and its switches' first run.
    Requested by the module's first test, so the window passes while the other tests run."""
    # Karpenter with its kwok provider, for pool resv-auto (the queueing stack has no
    # autoscaled pool: Karpenter leaves its pods alone).
    script("karpenter-process.sh", str(kueue.state), "--instance-types",
           str(ROOT / "tests" / "fixtures" / "kwok-instance-types.json"), timeout=600)
    claims = Watch(kueue, "nodeclaims.karpenter.sh")
    switches = {name: SwitchKubelet(kueue, namespace) for name, namespace in RESV_NAMESPACES.items()}
    # Room for the `up`, then for the new switch's first run (within a minute) to find the
    # warm-up further off than the edge it would wait for, and one switch interval more:
    # the entry's Job waits, held, across the switch's runs before the warm-up.
    room = timedelta(seconds=2 * stack.up_seconds + EDGE_WAIT_SECONDS) + timedelta(minutes=2)
    start = minute_after(datetime.now(timezone.utc) + room + timedelta(minutes=RESV_LEAD))
    # Long enough for the window's two `up`s (a refresh reads every object: counted twice).
    minutes = max(RESV_MINUTES, math.ceil((3 * stack.up_seconds + 90) / 60))
    live = project(tmp_path_factory, kueue, "reservations", reservation_config(kueue, start, minutes))
    live.up()
    scenario = Course(live, switches, start, start + timedelta(minutes=minutes), timedelta(minutes=RESV_LEAD),
                      claims)
    actor = threading.Thread(target=_inside_the_window, args=(scenario, kueue), daemon=True)
    actor.start()
    yield scenario
    actor.join(timeout=900)
    for switch in switches.values():
        switch.stop()
    claims.stop()
    # The window's hand-made Job is no object of the stack: Kueue keeps the queue it runs in.
    kueue.kubectl("delete", "job", "late-batch", "-n", "kns-resv-batch-1", "--ignore-not-found", "--wait=false")
    live.pulumi("destroy", "--yes", check=False)


def stamp(value: str) -> datetime:
    return server_time(value)


def admitted_at(obj: dict) -> datetime | None:
    found = condition(obj, "Admitted")
    return stamp(found["lastTransitionTime"]) if found and found["status"] == "True" else None


def wait_past(moment: datetime, cluster: Cluster) -> None:
    """Until the server's clock is past `moment` (the window's edges are the server's)."""
    cluster.wait(lambda: datetime.now(timezone.utc) > moment, (moment - datetime.now(timezone.utc)).total_seconds()
                 + slack(), every=2, message=f"past {moment.isoformat()}")


def switch_runs(course: Course, name: str, phase: str) -> list:
    return [run for run in course.switches[name].runs if f'"phase": "{phase}"' in run.stdout]


def test_a_reservation_entry_waits_for_its_window_and_runs_from_warm_up(course, kueue, watches):
    warm_up = course.start - course.lead
    wait_past(course.start, kueue)
    # The warm-up switch ran on time by the calendar (the CronJob fired at the edge's minute).
    kueue.wait(lambda: switch_runs(course, "course", "warm-up"), slack(),
               message=lambda: "course's warm-up switch ran:\n" + course.switches["course"].report())
    for name in RESV_NAMESPACES:
        assert not course.switches[name].errors, course.switches[name].errors
        assert all(run.returncode == 0 for run in course.switches[name].runs), [
            (r.pod, r.stderr[-2000:]) for r in course.switches[name].runs if r.returncode]
    lab = workload_of(watches, "kns-resv-lab")
    assert lab, "resv-lab's Job has a Workload"
    times = [t for w in lab if (t := admitted_at(w)) is not None]
    assert times and min(times) >= warm_up - timedelta(seconds=1), (times, warm_up)  # never before its warm-up
    # Its Job existed before the warm-up, pending (quota not reserved) on its held queue,
    # across the switch's runs between the Job's creation and the warm-up (the hold is the
    # switch's, not a moment before its first run).
    created = stamp(kueue.get("job", "resv-lab", "-n", "kns-resv-lab")["metadata"]["creationTimestamp"])
    assert created < warm_up, (created, warm_up)
    pending = [c for w in lab if (c := condition(w, "QuotaReserved")) and c["status"] == "False"
               and stamp(c["lastTransitionTime"]) < warm_up]
    assert pending, [w.get("status") for w in lab]
    held_runs = [run for run in switch_runs(course, "course", "closed")
                 if created.timestamp() <= run.started and run.finished < warm_up.timestamp()]
    assert held_runs, course.switches["course"].report()
    pod = kueue.wait(lambda: first_pod(watches, "resv-lab"), slack(), message="resv-lab's pod")
    running = [obj for _, obj in watches["pods"].all() if obj["metadata"]["name"] == pod["metadata"]["name"]
               and obj.get("status", {}).get("phase") == "Running"]
    assert running, "resv-lab's pod ran"
    assert stamp(running[0]["status"]["startTime"]) < course.start, "resv-lab's pod started before the window"


def test_at_warm_up_kueue_reclaims_what_the_batch_jobs_borrowed_of_the_reservations(course, kueue, watches):
    warm_up = course.start - course.lead
    wait_past(course.start, kueue)
    preempted = {}
    for i in range(1, RESV_BATCH + 1):
        for workload in workload_of(watches, f"kns-resv-batch-{i}"):
            found = condition(workload, "Preempted")
            if found and found["status"] == "True":
                preempted[i] = (found["reason"], stamp(found["lastTransitionTime"]))
    # Those that borrowed the two reservations' GPUs: all reclaimed, at warm-up.
    assert len(preempted) == RESV_BATCH - RESV_QUEUE_GPUS, preempted
    assert {reason for reason, _ in preempted.values()} == {"InCohortReclamation"}, preempted
    assert all(warm_up - timedelta(seconds=1) <= at < course.start for _, at in preempted.values()), preempted
    # The maintenance window's part of the pool is held empty by its holder from warm-up.
    holder = kueue.wait(lambda: [w for w in workload_of(watches, "kns-res-maint") if admitted_at(w)], slack(),
                        message="maint's holder admitted")
    assert admitted_at(holder[0]) < course.start
    assert holder[0]["status"]["admission"]["podSetAssignments"][0]["count"] == RESV_GPUS  # one node's GPUs


def test_inside_the_window_a_new_batch_job_waits_and_a_no_change_up_keeps_it_open(course, kueue, watches):
    wait_past(course.end, kueue)
    assert "up" in course.during, "the window's actor ran"
    done = course.during["up"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert course.during["up_finished"] < course.end, "the no-change up ran inside the window"
    assert course.during["stop_policy"] == "None"  # still open after it
    # `up --refresh` inside the window: the switched fields are still the switch's (the
    # LocalQueue open, the CronJob's next fire the end, not the program's every minute).
    done = course.during["refresh"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert course.during["refresh_finished"] < course.end, "the refreshing up ran inside the window"
    assert course.during["switched_before"] == course.during["switched_after"] == {
        "stopPolicy": "None", "schedule": edge_schedule(course.end), "suspend": False}, course.during
    late = late_workloads(watches)
    assert late, "the late batch Job has a Workload"
    times = [t for w in late if (t := admitted_at(w)) is not None]
    assert not times or min(times) >= course.end, times  # not on the reservations' capacity
    # Pending for want of the GPUs the reservations hold, said by Kueue during the window.
    said = [c for w in late if (c := condition(w, "QuotaReserved")) and c["status"] == "False"
            and "nvidia.com/gpu" in c.get("message", "") and stamp(c["lastTransitionTime"]) < course.end]
    assert said, [w.get("status") for w in late]


def late_workloads(watches) -> list[dict]:
    return [w for _, w in watches["workloads.kueue.x-k8s.io"].all() if w["metadata"]["namespace"] == "kns-resv-batch-1"
            and any(ref["name"] == "late-batch" for ref in w["metadata"].get("ownerReferences", []))]


def test_a_switch_that_missed_the_end_leaves_the_window_held_until_its_late_run_closes_it(course, kueue):
    """maint's switch stopped running pods inside the window (its node down): at the end
    the CronJob fires, nothing runs, and the holder still holds; when pods run again, the
    late run closes the window as the calendar says."""
    maint = RESV_NAMESPACES["maint"]
    wait_past(course.end, kueue)
    assert course.during.get("maint_paused") and course.during["maint_paused"] < course.end, course.during
    kueue.wait(lambda: (at := kueue.get("cronjob", "switch", "-n", maint).get("status", {}).get("lastScheduleTime"))
               and stamp(at) >= course.end, slack(), message="maint's CronJob fired its end run")
    assert kueue.kubectl("get", "job", "holder", "-n", maint, check=False).returncode == 0, \
        "the holder still holds after the end: the end was not switched"
    assert not [r for r in course.switches["maint"].runs if r.started >= course.end.timestamp()]
    resumed = time.time()
    course.switches["maint"].resume()
    runs = kueue.wait(lambda: [r for r in course.switches["maint"].runs_after(resumed) if '"phase": "closed"' in r.stdout],
                      slack(), message=lambda: "maint's late end run:\n" + course.switches["maint"].report())
    assert runs[0].returncode == 0, runs[0].stderr[-3000:]
    kueue.wait(lambda: kueue.kubectl("get", "job", "holder", "-n", maint, check=False).returncode != 0, slack(),
               message="the late run removed the holder")
    assert kueue.get("cronjob", "switch", "-n", maint)["spec"].get("suspend") is True


def test_at_the_end_requeue_evicts_the_entry_onto_its_own_queue_and_the_batch_jobs_return(course, kueue, watches):
    wait_past(course.end, kueue)
    kueue.wait(lambda: switch_runs(course, "course", "closed") and any(
        run.started >= course.end.timestamp() for run in switch_runs(course, "course", "closed")), slack(),
        message=lambda: "course's end switch ran:\n" + course.switches["course"].report())
    job = kueue.get("job", "resv-lab", "-n", "kns-resv-lab")
    kueue.wait(lambda: kueue.get("job", "resv-lab", "-n", "kns-resv-lab")["metadata"]["labels"].get(
        "kueue.x-k8s.io/queue-name") == "kns", slack(), message="resv-lab moved to its own queue")
    evicted = [condition(w, "Evicted") for w in workload_of(watches, "kns-resv-lab")]
    reasons = {(c["reason"]) for c in evicted if c and c["status"] == "True"}
    assert "LocalQueueStopped" in reasons, reasons
    assert kueue.get("job", "resv-lab", "-n", "kns-resv-lab")["metadata"]["uid"] == job["metadata"]["uid"]
    # The Jobs reclaimed at warm-up are admitted again after the end: the same Jobs.
    for i in range(1, RESV_BATCH + 1):
        namespace = f"kns-resv-batch-{i}"
        uids = {ref["uid"] for w in workload_of(watches, namespace) for ref in w["metadata"]["ownerReferences"]
                if ref["name"] == f"resv-batch-{i}"}
        assert len(uids) == 1, (namespace, uids)
    readmitted = lambda: sum(  # noqa: E731
        any((t := admitted_at(w)) is not None and t >= course.end for w in workload_of(watches, f"kns-resv-batch-{i}"))
        for i in range(1, RESV_BATCH + 1))
    kueue.wait(lambda: readmitted() >= RESV_BATCH - RESV_QUEUE_GPUS, slack(),
               message="reclaimed batch Jobs admitted again after the window")


def test_work_created_inside_the_window_is_admitted_after_it_when_room_is_made(course, kueue, watches):
    """The late batch Job waited for the window's capacity, not forever: with two of the
    pool's batch Jobs deactivated after the end, it is admitted."""
    wait_past(course.end, kueue)
    admitted = [w for _, w in watches["workloads.kueue.x-k8s.io"].all()
                if w["metadata"]["namespace"].startswith("kns-resv-batch-") and admitted_at(w) is not None
                and not any(ref["name"] == "late-batch" for ref in w["metadata"].get("ownerReferences", []))]
    names = list(dict.fromkeys((w["metadata"]["namespace"], w["metadata"]["name"]) for w in admitted))[:2]
    assert len(names) == 2, names
    for namespace, name in names:
        kueue.kubectl("patch", "workload.kueue.x-k8s.io", name, "-n", namespace, "--type=merge",
                      "-p", json.dumps({"spec": {"active": False}}))
    kueue.wait(lambda: any(admitted_at(w) for w in late_workloads(watches)), slack(),
               message=lambda: f"late-batch admitted: {[w.get('status') for w in late_workloads(watches)][-1:]}")
    times = [t for w in late_workloads(watches) if (t := admitted_at(w)) is not None]
    assert min(times) >= course.end, times


def test_on_an_autoscaled_pool_karpenter_brings_the_node_up_by_the_start_and_finish_lets_the_entry_run(
        course, kueue, watches):
    warm_up = course.start - course.lead
    wait_past(course.start, kueue)
    claims = [obj for _, obj in course.claims.all()
              if obj["metadata"].get("labels", {}).get("karpenter.sh/nodepool") == "resv-auto"]
    assert claims, "Karpenter made a node for pool resv-auto"
    made = min(stamp(c["metadata"]["creationTimestamp"]) for c in claims)
    assert warm_up - timedelta(seconds=1) <= made < course.start, (made, warm_up, course.start)
    karpenter_nodes = {c["status"]["nodeName"] for c in claims if c.get("status", {}).get("nodeName")}
    scheduled = [(obj["spec"].get("nodeName"), condition(obj, "PodScheduled")) for _, obj in watches["pods"].all()
                 if obj["metadata"]["namespace"] == "kns-resv-exam" and obj["spec"].get("nodeName")]
    assert scheduled, "resv-exam's pod was bound"
    node, bound = scheduled[0]
    assert node in karpenter_nodes and stamp(bound["lastTransitionTime"]) < course.start
    # atEnd finish: it runs on after the window; its Workload is never evicted.
    wait_past(course.end, kueue)
    kueue.wait(lambda: any(run.started >= course.end.timestamp() for run in switch_runs(course, "exam", "closed")),
               slack(), message=lambda: "exam's end switch ran:\n" + course.switches["exam"].report())
    assert not [w for w in workload_of(watches, "kns-resv-exam") if (c := condition(w, "Evicted")) and
                c["status"] == "True"]
    pods = kueue.get("pods", "-n", "kns-resv-exam")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Running"]
    assert kueue.get("localqueue.kueue.x-k8s.io", "kns-res", "-n", "kns-resv-exam")["spec"]["stopPolicy"] == "Hold"


def test_a_switch_run_late_leaves_what_the_calendar_says(course, kueue, watches):
    wait_past(course.end, kueue)
    kueue.kubectl("create", "job", "switch-late", "--from=cronjob/switch", "-n", "kns-res-maint")
    runs = kueue.wait(lambda: [r for r in course.switches["maint"].runs if r.job == "switch-late"], slack(),
                      message="the late switch ran")
    assert runs[0].returncode == 0, runs[0].stderr[-3000:]
    assert '"phase": "closed"' in runs[0].stdout
    assert kueue.kubectl("get", "job", "holder", "-n", "kns-res-maint", check=False).returncode != 0
    # Its last window is over: nothing is left to switch.
    assert kueue.get("cronjob", "switch", "-n", "kns-res-maint")["spec"].get("suspend") is True


def run_switch_at(cluster: Cluster, namespace: str, now: datetime) -> dict:
    """The deployed switch's own code and spec (its CronJob's), with a token of its own
    ServiceAccount, run as at `now` (a clock of the test's): what its run at that moment
    writes, without waiting for the calendar."""
    from kns_testing.reservations import run_token
    from plan import reservation_switch
    cron = cluster.get("cronjob", "switch", "-n", namespace)
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    spec = json.loads(next(e["value"] for e in container["env"] if e["name"] == "KNS_RESERVATION"))
    api = reservation_switch.Api(*run_token(cluster, "switch", namespace))
    moment = [now.timestamp()]
    return reservation_switch.switch(api, spec, now, sleep=lambda s: moment.__setitem__(0, moment[0] + s),
                                     clock=lambda: moment[0])


def test_an_up_that_changes_a_switched_object_leaves_what_the_switch_set(kueue, tmp_path_factory):
    """A reservation whose window is open when its stack is applied: its entry's LocalQueue
    starts open. The switch, run as at the window's end, holds it and suspends its CronJob
    (the last window is over). Then three `up`s: one without changes, one with `--refresh`
    (the switched fields read into the state), and one that changes the LocalQueue
    (`atEnd: requeue` annotates it with the entry's own queue): the LocalQueue stays as the
    switch left it. The same change is a change to what the switch is told, which replaces
    its CronJob: a new switch starts over, firing every minute."""
    from plan.reservations import BOOTSTRAP, OWN_QUEUE
    kueue.apply(node_manifest("relabel-node", 16, RESV_GPUS))
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    end = now + timedelta(hours=3)
    config = {
        "kns:cluster": {"name": "kns-relabel", "kubeconfig": str(kueue.kubeconfig)},
        "kns:nodePools": [{"name": "relabel", "role": "gpu", "nodes": ["relabel-node"], "gpu": {"perNode": RESV_GPUS}}],
        "kns:packingScheduler": {"enabled": False},
        "kns:queueing": {"enabled": True, "install": False},
        "kns:queues": [{"name": "relabel-q", "quota": {"relabel": {"cpu": 4, "memory": "8Gi", "nvidia.com/gpu": 1}}}],
        "kns:reservations": [{"name": "relabel", "pool": "relabel", "resources": {"gpus": 1}, "start": (now - timedelta(hours=1)).isoformat(),
                              "end": end.isoformat(), "entries": ["relabel-job"], "atEnd": "finish"}],
        "kns:jobs": [{"name": "relabel-job", "user": "ann", "image": "busybox:1.37", "gpus": 1, "cpu": 1,
                      "memory": 1024, "queue": "relabel-q", "reservation": "relabel",
                      "annotations": {"kwok.x-k8s.io/run-for": "2h"}}],
    }
    live = project(tmp_path_factory, kueue, "relabel", config)
    namespace, entry = "kns-res-relabel", "kns-relabel-job"

    def held() -> dict:
        queue = kueue.get("localqueue.kueue.x-k8s.io", "kns-res", "-n", entry)
        cron = kueue.get("cronjob", "switch", "-n", namespace)
        return {"stopPolicy": queue["spec"].get("stopPolicy"), "queue": queue["metadata"]["uid"],
                "ownQueue": (queue["metadata"].get("annotations") or {}).get(OWN_QUEUE),
                "suspend": cron["spec"].get("suspend"), "schedule": cron["spec"]["schedule"],
                "cron": cron["metadata"]["uid"]}
    try:
        live.up()
        assert held()["stopPolicy"] == "None"  # created open: the window is open
        done = run_switch_at(kueue, namespace, end + timedelta(minutes=1))
        assert done["phase"] == "closed" and done["next"] is None, done
        switched = held()
        assert switched["stopPolicy"] == "Hold" and switched["suspend"] is True, switched
        live.pulumi("up", "--yes", "--expect-no-changes")
        assert held() == switched
        live.pulumi("up", "--yes", "--refresh")
        assert held() == switched
        live.edit(lambda c: c["kns:reservations"][0].update(atEnd="requeue"))
        live.pulumi("up", "--yes")
        after = held()
        # The same LocalQueue, updated (annotated), still as the switch left it.
        assert after["queue"] == switched["queue"] and after["ownQueue"] == "kns", after
        assert after["stopPolicy"] == "Hold", after
        assert after["cron"] != switched["cron"] and after["schedule"] == BOOTSTRAP, after  # a new switch
    finally:
        live.pulumi("destroy", "--yes", check=False)


def test_the_switch_may_touch_only_its_own_objects(course, kueue):
    who = "system:serviceaccount:kns-res-course:switch"
    assert kueue.can(who, "patch", "localqueues.kueue.x-k8s.io/kns-res", "kns-resv-lab")
    assert not kueue.can(who, "patch", "localqueues.kueue.x-k8s.io/kns", "kns-resv-lab")
    assert not kueue.can(who, "patch", "localqueues.kueue.x-k8s.io/kns-res", "kns-resv-batch-1")
    assert kueue.can(who, "delete", "jobs.batch/holder", "kns-res-course")
    assert not kueue.can(who, "delete", "jobs.batch/other", "kns-res-course")
    assert not kueue.can(who, "patch", "cronjobs.batch/switch", "kns-res-maint")
    assert not kueue.can(who, "patch", "clusterqueues.kueue.x-k8s.io/kns-res-course")
    assert not kueue.can(who, "create", "jobs.batch", "kns-resv-lab")


# ---- GPUs as devices (docs/gpus.md): a third stack on the same control plane and Kueue -------
# kwok runs no DRA driver: the test publishes each DRA node's ResourceSlice as NVIDIA's
# driver would (kns_testing/dra.py, from tests/fixtures/nvidia-dra-devices.yaml); the real
# kube-scheduler allocates the claims, the real kube-controller-manager makes them from the
# templates, the API server's quota counts them, and Kueue counts them through the device
# class mappings the program renders.

MIG_GPU = ["1g.10gb"] * 7  # one A100 in seven 1g.10gb instances
MIG_LAYOUT = [MIG_GPU, ["3g.40gb", "3g.40gb"], *["gpu"] * 6]
DRA_NODES = {"mig-a": MIG_LAYOUT, "mig-b": MIG_LAYOUT, "mig-c": MIG_LAYOUT,
             "whole-a": ["gpu"] * 8, "whole-b": ["gpu"] * 8, "sw-a": ["gpu"] * 2}
DRA_MODEL = "NVIDIA A100-SXM4-80GB"  # the fixture's productName
MIG_PARTITIONS = [{"profile": "1g.10gb", "perGpu": 7}, {"profile": "3g.40gb", "perGpu": 2}]
LONG = {"kwok.x-k8s.io/run-for": "2h"}  # pods run until the test ends


def dra_gpu(**more) -> dict:
    return {"vendor": "nvidia", "perNode": 8, "allocation": "dra", "driver": "gpu.nvidia.com", "model": DRA_MODEL,
            **more}


def dra_config(cluster: Cluster) -> dict:
    device = {"user": "ann", "image": "busybox:1.37", "cpu": 1, "memory": 1024, "annotations": LONG}
    return {
        "kns:cluster": {"name": "kns-dra", "kubeconfig": str(cluster.kubeconfig), "kubernetesVersion": "1.36"},
        "kns:nodePools": [
            {"name": "mig-one", "role": "gpu", "nodes": ["mig-a"], "gpu": dra_gpu(partitions=MIG_PARTITIONS)},
            {"name": "mig", "role": "gpu", "nodes": ["mig-b", "mig-c"], "gpu": dra_gpu(partitions=MIG_PARTITIONS)},
            {"name": "whole", "role": "gpu", "nodes": ["whole-a", "whole-b"], "gpu": dra_gpu()},
            # Extended resources first; switched to DRA by a test.
            {"name": "switch", "role": "gpu", "nodes": ["sw-a"], "gpu": {"vendor": "nvidia", "perNode": 2}}],
        "kns:packingScheduler": {"enabled": False},
        "kns:queueing": {"enabled": True, "install": False},
        "kns:queues": [
            {"name": "mig-q", "quota": {"mig": {"cpu": 32, "memory": "64Gi", "gpu.nvidia.com/1g.10gb": 14}}},
            # Room for a gang of two 8-GPU workers and one more worker: a second gang fits
            # half way, so holding none of it is all-or-nothing, not a full queue.
            {"name": "whole-q", "quota": {"whole": {"cpu": 48, "memory": "96Gi", "gpu.nvidia.com/gpu": 24}}}],
        "kns:jobs": [
            {"name": "slices", **device, "pool": "mig-one", "gpu": {"partition": "1g.10gb"}, "parallelism": 8,
             "completions": 8},
            {"name": "notebooks", **device, "pool": "mig", "queue": "mig-q", "gpu": {"partition": "1g.10gb"},
             "parallelism": 14, "completions": 14},
            {"name": "train", **device, "pool": "whole", "queue": "whole-q", "gpus": 8, "workers": 2},
            {"name": "capped", **device, "pool": "mig", "gpu": {"partition": "3g.40gb"}, "parallelism": 2,
             "completions": 2, "quota": {"kns-mig-3g.40gb.deviceclass.resource.k8s.io/devices": "1"}},
            {"name": "switched", **device, "pool": "switch", "gpus": 1}],
    }


def dra_node(name: str) -> dict:
    # The switch pool's node offers its GPUs both ways (a device plugin and the DRA driver).
    return node_manifest(name, 32, 2 if name == "sw-a" else 0)


@dataclass
class Devices:
    stack: Stack
    watches: dict


@pytest.fixture(scope="module")
def devices(kueue, tmp_path_factory):
    """The DRA stack after its `up`; the nodes and their ResourceSlices first (the driver
    publishes before any pod asks), then, once `notebooks` holds the mig queue, a second
    queued entry that must wait (applied by a second `up`)."""
    kueue.apply(*(dra_node(name) for name in DRA_NODES))
    kueue.wait(lambda: all(n in {i["metadata"]["name"] for i in kueue.get("nodes")["items"]} for n in DRA_NODES))
    kueue.apply(*(resource_slice(name, layout) for name, layout in DRA_NODES.items()))
    found = {kind: Watch(kueue, kind) for kind in ("resourceclaims.resource.k8s.io", "events")}
    live = project(tmp_path_factory, kueue, "devices", dra_config(kueue))
    live.up()
    yield Devices(live, found)
    for watch in found.values():
        watch.stop()
    live.pulumi("destroy", "--yes", check=False)
    kueue.kubectl("delete", "resourceslices", "-l", "kns-test/dra=true", "--wait=false")


def dra_pods(cluster: Cluster, namespace: str) -> list[dict]:
    return cluster.get("pods", "-n", namespace)["items"]


def running(pods: list[dict]) -> list[dict]:
    return [p for p in pods if p["status"].get("phase") == "Running"]


def allocated(cluster: Cluster, namespace: str) -> dict[str, list[dict]]:
    """Each pod's claim's allocated devices (`status.allocation`), by pod name."""
    out = {}
    for claim in cluster.get("resourceclaims.resource.k8s.io", "-n", namespace)["items"]:
        owner = next((o["name"] for o in claim["metadata"].get("ownerReferences") or [] if o["kind"] == "Pod"), None)
        results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
        out[owner or claim["metadata"]["name"]] = results
    return out


def test_seven_one_slice_pods_get_a_slice_each_and_the_eighth_waits_for_the_scheduler(devices, kueue):
    namespace = "kns-slices"
    kueue.wait(lambda: len(running(dra_pods(kueue, namespace))) == 7, message="seven of eight pods Running")
    pods = dra_pods(kueue, namespace)
    assert len(pods) == 8
    claims = allocated(kueue, namespace)
    for pod in running(pods):
        (result,) = claims[pod["metadata"]["name"]]
        assert result["pool"] == pod["spec"]["nodeName"] == "mig-a"
        assert re.fullmatch(r"gpu-0-mig-1g10gb-19-[0-6]", result["device"]), result  # a 1g.10gb slice, never a GPU
    assert len({claims[p["metadata"]["name"]][0]["device"] for p in running(pods)}) == 7
    (waiting,) = [p for p in pods if p["status"].get("phase") != "Running"]
    assert claims[waiting["metadata"]["name"]] == []
    reason = kueue.wait(lambda: next((e for _, e in devices.watches["events"].all()
                                      if e["involvedObject"].get("name") == waiting["metadata"]["name"]
                                      and e["reason"] == "FailedScheduling"), None),
                        message="the scheduler's reason for the eighth pod")
    assert "cannot allocate all claims" in reason["message"]


def test_a_queue_with_room_for_fourteen_slices_admits_fourteen_one_slice_pods(devices, kueue):
    namespace = "kns-notebooks"
    kueue.wait(lambda: len(running(dra_pods(kueue, namespace))) == 14, message="fourteen notebooks Running")
    (workload,) = kueue.get("workloads.kueue.x-k8s.io", "-n", namespace)["items"]
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 14 and assignment["resourceUsage"]["gpu.nvidia.com/1g.10gb"] == "14"
    claims = allocated(kueue, namespace)
    assert sorted(r[0]["pool"] for r in claims.values()) == ["mig-b"] * 7 + ["mig-c"] * 7
    assert all("-mig-1g10gb-" in r[0]["device"] for r in claims.values())


def test_a_queue_admits_both_eight_gpu_workers_or_none_each_claim_holding_one_nodes_gpus(devices, kueue):
    namespace = "kns-train"
    kueue.wait(lambda: len(running(dra_pods(kueue, namespace))) == 2, message="both workers Running")
    claims = allocated(kueue, namespace)
    nodes = set()
    for pod in running(dra_pods(kueue, namespace)):
        results = claims[pod["metadata"]["name"]]
        assert len(results) == 8 and {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
        assert all(re.fullmatch(r"gpu-[0-7]", r["device"]) for r in results)
        nodes.add(pod["spec"]["nodeName"])
    assert nodes == {"whole-a", "whole-b"}
    (workload,) = kueue.get("workloads.kueue.x-k8s.io", "-n", namespace)["items"]
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 2 and assignment["resourceUsage"]["gpu.nvidia.com/gpu"] == "16"
    # A second gang of the same shape: the queue has room for one of its workers (8 of 24
    # GPUs free) and holds none of them while the first runs.
    devices.stack.edit(lambda config: config["kns:jobs"].append(
        {**next(e for e in config["kns:jobs"] if e["name"] == "train"), "name": "train-next"}))
    devices.stack.up()
    pending = kueue.wait(lambda: next(iter(kueue.get("workloads.kueue.x-k8s.io", "-n", "kns-train-next")["items"]),
                                      None), message="train-next's Workload")
    reserved = kueue.wait(lambda: condition(kueue.get("workloads.kueue.x-k8s.io", pending["metadata"]["name"], "-n",
                                                      "kns-train-next"), "QuotaReserved"),
                          message="train-next's QuotaReserved condition")
    assert reserved["status"] == "False" and "gpu.nvidia.com/gpu" in reserved["message"], reserved
    assert "8 more needed" in reserved["message"], reserved  # one worker's worth was free
    assert dra_pods(kueue, "kns-train-next") == []
    assert kueue.get("job", "train-next", "-n", "kns-train-next")["spec"]["suspend"] is True


def test_the_api_servers_quota_refuses_a_claim_beyond_the_entrys_device_quota(devices, kueue):
    namespace = "kns-capped"
    kueue.wait(lambda: len(running(dra_pods(kueue, namespace))) == 1, message="one capped pod Running")
    refused = kueue.wait(lambda: next((e for _, e in devices.watches["events"].all()
                                       if e["involvedObject"].get("namespace") == namespace
                                       and "exceeded quota" in e.get("message", "")), None),
                         message="the quota's refusal of the second claim")
    assert "kns-mig-3g.40gb.deviceclass.resource.k8s.io/devices" in refused["message"]
    assert len(kueue.get("resourceclaims.resource.k8s.io", "-n", namespace)["items"]) == 1
    used = kueue.get("resourcequota", "kns-quota", "-n", namespace)["status"]["used"]
    assert used["kns-mig-3g.40gb.deviceclass.resource.k8s.io/devices"] == "1"


def test_a_pool_switched_to_dra_previews_what_changes_and_up_changes_only_that(devices, kueue):
    namespace = "kns-switched"
    kueue.wait(lambda: len(running(dra_pods(kueue, namespace))) == 1, message="switched's pod Running")
    (pod,) = dra_pods(kueue, namespace)
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"

    def to_dra(config):
        pool = next(p for p in config["kns:nodePools"] if p["name"] == "switch")
        pool["gpu"] = dra_gpu(perNode=2)

    devices.stack.edit(to_dra)
    preview = json.loads(devices.stack.pulumi("preview", "--json").stdout)
    changed = sorted((step["op"], step["urn"].rsplit("::", 1)[1]) for step in preview["steps"]
                     if step["op"] not in ("same", "read"))
    # The pool's DeviceClass, the entry's claim template, its Job (a new pod template) and
    # its quota (devices instead of nvidia.com/gpu); nothing else.
    assert changed == [("create", "kns-switch-gpu"), ("create", "switched-gpu-claim"), ("replace", "switched"),
                       ("update", "switched-quota")], changed
    devices.stack.up()
    kueue.wait(lambda: [p for p in running(dra_pods(kueue, namespace)) if p["spec"].get("resourceClaims")],
               message="the switched entry's new pod Running with its claim")
    (pod,) = [p for p in dra_pods(kueue, namespace) if p["spec"].get("resourceClaims")]
    assert "nvidia.com/gpu" not in pod["spec"]["containers"][0]["resources"].get("limits", {})
    (result,) = allocated(kueue, namespace)[pod["metadata"]["name"]]
    assert result["pool"] == "sw-a" and re.fullmatch(r"gpu-[01]", result["device"])
    assert kueue.get("resourcequota", "kns-quota", "-n", namespace)["spec"]["hard"][
        "kns-switch-gpu.deviceclass.resource.k8s.io/devices"] == "1"
    devices.stack.pulumi("preview", "--expect-no-changes")

# ---- fair share: entries of one queue admitted least-used first (docs/queueing.md) ---------

# Past use fades slowly and is sampled every second, so a Job that ran a few seconds counts.
FAIR_SHARING = {"admission": {"usageHalfLife": "1h", "samplingInterval": "1s"}}
FAIR_NODE = ("fair-node-1", 8, 0)
FAIR_QUOTA = {"fairpool": {"cpu": 1, "memory": "1Gi"}}  # one 1-CPU Job at a time
# A team's entry: a schedule that does not fire during the test (1 January), so its namespace
# and LocalQueue are there and the team's own Jobs are what the queue sees; sized for one of
# them (team_job) at a time.
FAIR_ENTRY = {"user": "eve", "image": "busybox:1.37", "schedule": "0 0 1 1 *", "cpu": 1, "memory": 64,
              "pool": "fairpool"}


def fair_config(cluster: Cluster, fair_sharing: dict | None = None) -> dict:
    """Two queues on one pool, each with a heavy and a light team's entry: `fair` admits
    its entries least-used first (usageBased), `plain` in creation order. The Kueue is the
    module's process (install false); with `fair_sharing`, the settings it is started with."""
    queueing: dict = {"enabled": True, "install": False}
    if fair_sharing is not None:
        queueing = {"enabled": True, "fairSharing": fair_sharing}
    return {
        "kns:cluster": {"name": "kns-fair", "kubeconfig": str(cluster.kubeconfig)},
        "kns:nodePools": [{"name": "fairpool", "role": "compute", "nodes": [FAIR_NODE[0]]}],
        "kns:packingScheduler": {"enabled": False},
        "kns:queueing": queueing,
        "kns:queues": [{"name": "fair", "quota": FAIR_QUOTA, "admissionMode": "usageBased"},
                       {"name": "plain", "quota": FAIR_QUOTA}],
        "kns:schedules": [{"name": name, **FAIR_ENTRY, "queue": queue}
                          for name, queue in (("heavy", "fair"), ("light", "fair"), ("heavy-p", "plain"),
                                              ("light-p", "plain"))],
    }


@pytest.fixture(scope="module")
def fair(kueue, tmp_path_factory):
    kueue.apply(node_manifest(*FAIR_NODE))
    live = project(tmp_path_factory, kueue, "fair", fair_config(kueue))
    live.up()
    yield live
    # The teams' Jobs are theirs, not the stack's: gone first, or their Workloads would hold
    # the LocalQueues and ClusterQueues (Kueue's in-use finalizers) that destroy deletes.
    for name in ("heavy", "light", "heavy-p", "light-p"):
        kueue.kubectl("delete", "jobs", "--all", "-n", f"kns-{name}", "--wait=true", check=False)
    live.pulumi("destroy", "--yes", check=False)


def team_job(name: str, namespace: str) -> dict:
    """A 1-CPU Job a team submits to its namespace's LocalQueue (kns), running until ended."""
    container = {"name": "work", "image": "busybox:1.37",
                 "resources": {"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}},
                 "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                     "capabilities": {"drop": ["ALL"]}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "kns"}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {"kwok.x-k8s.io/run-for": "2h"}},
                "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                         "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                                             "seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [container]}}}}


def job_workload(cluster: Cluster, namespace: str, job: str) -> dict | None:
    return next((w for w in cluster.get("workloads.kueue.x-k8s.io", "-n", namespace)["items"]
                 if any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))), None)


def reserved(cluster: Cluster, namespace: str, job: str) -> bool:
    found = job_workload(cluster, namespace, job)
    return found is not None and is_true(found, "QuotaReserved")


def created_after(cluster: Cluster, namespace: str, stamp: str) -> None:
    """Until the API server stamps a new object later than `stamp` (its clock, in whole
    seconds, as Kueue orders Workloads created in one second alike)."""
    def later() -> bool:
        made = cluster.kubectl("create", "configmap", "-n", namespace, "--dry-run=server", "-o", "json",
                               "fair-clock").stdout
        return server_time(json.loads(made)["metadata"]["creationTimestamp"]) > server_time(stamp)
    cluster.wait(later, slack(), every=0.2, message=f"the server's clock past {stamp}")


def second_in_line(cluster: Cluster, heavy: str, light: str) -> str:
    """The heavy team runs a Job on the queue's whole quota until Kueue has counted its use
    (the fair queue's LocalQueue status), then submits another, and the light team one
    after it; the running Job ends. Which of the two waiting Jobs Kueue admits next."""
    cluster.apply(team_job("first", heavy))
    cluster.wait(lambda: reserved(cluster, heavy, "first"), slack(), message=f"{heavy}/first admitted")
    cluster.wait(lambda: [p for p in cluster.get("pods", "-n", heavy)["items"] if p["status"].get("phase") == "Running"],
                 slack(), message=f"{heavy}/first Running")
    if heavy == "kns-heavy":
        def used() -> bool:
            status = cluster.get("localqueues.kueue.x-k8s.io", "kns", "-n", heavy).get("status", {})
            consumed = (status.get("fairSharing", {}).get("admissionFairSharingStatus") or {}).get(
                "consumedResources") or {}
            return any(parse(str(v)) > 0 for v in consumed.values())
        cluster.wait(used, slack(), message=f"Kueue counted {heavy}'s use")
    cluster.apply(team_job("again", heavy))
    cluster.wait(lambda: job_workload(cluster, heavy, "again"), slack(), message=f"{heavy}/again queued")
    created_after(cluster, light, job_workload(cluster, heavy, "again")["metadata"]["creationTimestamp"])
    cluster.apply(team_job("mine", light))
    cluster.wait(lambda: job_workload(cluster, light, "mine"), slack(), message=f"{light}/mine queued")
    assert not reserved(cluster, heavy, "again") and not reserved(cluster, light, "mine")
    end_pod(cluster, heavy)
    cluster.wait(lambda: reserved(cluster, heavy, "again") or reserved(cluster, light, "mine"), slack(),
                 message="one of the waiting Jobs admitted")
    winner = "light" if reserved(cluster, light, "mine") else "heavy"
    assert not (reserved(cluster, heavy, "again") and reserved(cluster, light, "mine"))  # one CPU: one Job
    return winner


def test_a_usage_based_queue_admits_the_team_that_used_less_first_and_a_plain_one_in_creation_order(fair, kueue):
    """Kueue's admission fair sharing, with the Configuration the program renders for
    kns:queueing.fairSharing.admission and the queue's admissionScope the program applied:
    on `fair`, the light team's later Job is admitted before the heavy team's earlier one;
    on `plain`, the same sequence admits in creation order (the heavy team's first)."""
    spec = kueue.get("clusterqueues.kueue.x-k8s.io", "fair")["spec"]
    assert spec["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert "admissionScope" not in kueue.get("clusterqueues.kueue.x-k8s.io", "plain")["spec"]
    assert second_in_line(kueue, "kns-heavy", "kns-light") == "light"
    assert second_in_line(kueue, "kns-heavy-p", "kns-light-p") == "heavy"


# ---- budgets: resource-hours per team and period (docs/budgets.md) --------------------------
# A stack of its own on the same control plane and Kueue: pool budpool (one node, 4 GPUs),
# queues bud-hold and bud-stop, each limited by a budget of BUD_LIMIT GPU-hours per period
# (atLimit hold and stop), counted every minute. The period starts the minute the scenario
# starts and lasts BUD_PERIOD minutes (a reset cron of those two minutes). kwok runs no
# container: the counter pods' own command runs here with their own service account
# (kns_testing/reservations.py), paused for BUD_PAUSED counts at first.

BUD_NODE = ("bud-node-1", 16, 4)
BUD_PERIOD = 10
BUD_LIMIT = 0.02  # GPU-hours: 1.2 GPU-minutes
BUD_PAUSED = 3
BUD_NAMESPACES = {"hold-hours": "kns-budget-hold-hours", "stop-hours": "kns-budget-stop-hours"}


def bud_job(name: str, queue: str) -> dict:
    return {"name": name, "user": "ann", "image": "busybox:1.37", "gpus": 1, "cpu": 1, "memory": 256,
            "pool": "budpool", "queue": queue, "annotations": {"kwok.x-k8s.io/run-for": "2h"}}


def budget_config(cluster: Cluster, start: datetime, limit: float = BUD_LIMIT, more: tuple = ()) -> dict:
    reset = f"{start.minute},{(start.minute + BUD_PERIOD) % 60} * * * *"
    budget = {"limits": {"nvidia.com/gpu": limit}, "reset": reset, "timeZone": "Etc/UTC", "countEveryMinutes": 1}
    return {
        "kns:cluster": {"name": "kns-bud", "kubeconfig": str(cluster.kubeconfig)},
        "kns:nodePools": [{"name": "budpool", "role": "gpu", "nodes": [BUD_NODE[0]], "gpu": {"perNode": BUD_NODE[2]}}],
        "kns:packingScheduler": {"enabled": False},
        "kns:queueing": {"enabled": True, "install": False},
        "kns:queues": [{"name": q, "quota": {"budpool": {"cpu": 4, "memory": "4Gi", "nvidia.com/gpu": 2}}}
                       for q in ("bud-hold", "bud-stop")],
        "kns:budgets": [{"name": "hold-hours", "queues": ["bud-hold"], **budget},
                        {"name": "stop-hours", "queues": ["bud-stop"], **budget, "atLimit": "stop"}],
        "kns:jobs": [bud_job("bud-a", "bud-hold"), bud_job("bud-c", "bud-stop"), *more],
    }


def admissions(watches, namespace: str) -> list[tuple[datetime, datetime | None, float]]:
    """Each admission of the namespace's Workloads as their recorded versions show it:
    (QuotaReserved turning True, its end: Finished or Evicted turning True, GPUs admitted)."""
    out: dict[tuple[str, str], list] = {}
    for workload in workload_of(watches, namespace):
        uid = workload["metadata"]["uid"]
        held = condition(workload, "QuotaReserved")
        admission = (workload.get("status") or {}).get("admission")
        if held is not None and held["status"] == "True" and admission:
            gpus = sum(float(parse(str(a.get("resourceUsage", {}).get("nvidia.com/gpu", "0"))))
                       for a in admission["podSetAssignments"])
            out.setdefault((uid, held["lastTransitionTime"]), [server_time(held["lastTransitionTime"]), None, gpus])
        for kind in ("Finished", "Evicted"):
            ended = condition(workload, kind)
            if ended is not None and ended["status"] == "True":
                for key, item in out.items():
                    if key[0] == uid and item[1] is None and server_time(ended["lastTransitionTime"]) >= item[0]:
                        item[1] = server_time(ended["lastTransitionTime"])
    return [tuple(item) for item in out.values()]


def gpu_hours(found, since: datetime, until: datetime) -> float:
    total = 0.0
    for start, end, gpus in found:
        begin, finish = max(start, since), min(end or until, until)
        total += max(0.0, (finish - begin).total_seconds()) * gpus / 3600
    return total


def budget_events(cluster: Cluster, budget: str, reason: str) -> list[dict]:
    return [e for e in cluster.get("events", "-n", "default")["items"]
            if e["reason"] == reason and e.get("source", {}).get("component") == f"kns-budget-{budget}"]


def stop_policy(cluster: Cluster, queue: str) -> str | None:
    return cluster.get("clusterqueues.kueue.x-k8s.io", queue)["spec"].get("stopPolicy")


def kns_usage(live: Stack, *more: str) -> dict:
    done = subprocess.run([str(ROOT / "kns"), "usage", "--json", "--stack", "local", "--project-dir", str(live.root),
                           *more], env=live.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {b["name"]: b for b in json.loads(done.stdout)["budgets"]}


def ledger(cluster: Cluster, budget: str) -> dict:
    return json.loads(cluster.get("configmap", "ledger", "-n", BUD_NAMESPACES[budget])["data"]["ledger.json"])


def test_a_spent_budget_holds_or_stops_its_queues_until_its_next_period(kueue, watches, tmp_path_factory):
    """Contract section 17 on the real Kueue: counting suspended for BUD_PAUSED intervals loses
    nothing; once spent, `hold` lets the running Job finish and admits nothing new, `stop`
    evicts and requeues; the queue says which budget; `./kns usage` matches the Workloads'
    own admitted time; `up --refresh` with a changed limit loses nothing; the next period
    reopens both queues; the counter's account may stop these queues and nothing else."""
    kueue.apply(node_manifest(*BUD_NODE))
    start = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    period_end = start + timedelta(minutes=BUD_PERIOD)
    counters = {name: SwitchKubelet(kueue, namespace, prefix="counter-") for name, namespace in BUD_NAMESPACES.items()}
    for counter in counters.values():
        counter.pause()
    live = project(tmp_path_factory, kueue, "budgets", budget_config(kueue, start))
    try:
        live.up()
        # RBAC: these queues' stopPolicy, its ledger and events, a list of Workloads; nothing else.
        me = "system:serviceaccount:kns-budget-hold-hours:counter"
        assert kueue.can(me, "patch", "clusterqueues.kueue.x-k8s.io/bud-hold")
        assert not kueue.can(me, "patch", "clusterqueues.kueue.x-k8s.io/bud-stop")
        assert not kueue.can(me, "delete", "clusterqueues.kueue.x-k8s.io/bud-hold")
        assert kueue.can(me, "list", "workloads.kueue.x-k8s.io")
        assert not kueue.can(me, "patch", "workloads.kueue.x-k8s.io")
        assert kueue.can(me, "patch", "configmaps/ledger", "kns-budget-hold-hours")
        assert kueue.can(me, "create", "configmaps/ledger", "kns-budget-hold-hours")
        assert not kueue.can(me, "patch", "configmaps/counter", "kns-budget-hold-hours")
        assert not kueue.can(me, "create", "configmaps/other", "kns-budget-hold-hours")
        assert kueue.can(me, "create", "events", "default") and not kueue.can(me, "create", "events", "kns-bud-a")
        assert not kueue.can(me, "get", "secrets", "kns-bud-a")
        assert not kueue.can(me, "create", "jobs.batch", "kns-bud-a")
        for job, namespace in (("bud-a", "kns-bud-a"), ("bud-c", "kns-bud-c")):
            kueue.wait(lambda: reserved(kueue, namespace, job), slack(), message=f"{job} admitted")
        # Counting suspended: the counter pods wait (as on a node whose kubelet is down).
        paused_until = time.time() + BUD_PAUSED * 60
        kueue.wait(lambda: time.time() >= paused_until, BUD_PAUSED * 60 + slack(), every=5, message="pause")
        assert not any(c.runs for c in counters.values())
        resumed = time.time()
        for counter in counters.values():
            counter.resume()
        kueue.wait(lambda: stop_policy(kueue, "bud-hold") == "Hold" and stop_policy(kueue, "bud-stop") == "HoldAndDrain",
                   slack(60), message=lambda: "\n".join(c.report() for c in counters.values()))
        # stop: evicted and requeued; hold: still running, then runs to its end.
        kueue.wait(lambda: any(is_true(w, "Evicted") for w in workload_of(watches, "kns-bud-c")), slack(),
                   message="bud-c evicted")
        assert not any(is_true(w, "Evicted") for w in workload_of(watches, "kns-bud-a"))
        kueue.wait(lambda: not reserved(kueue, "kns-bud-c", "bud-c"), slack(), message="bud-c gave its quota back")
        assert reserved(kueue, "kns-bud-a", "bud-a")
        assert not any(is_true(w, "Evicted") for w in workload_of(watches, "kns-bud-a"))
        for queue, budget in (("bud-hold", "hold-hours"), ("bud-stop", "stop-hours")):
            said = json.loads(kueue.get("clusterqueues.kueue.x-k8s.io", queue)["metadata"]["annotations"][
                f"kns.io/budget.{budget}"])
            assert said["held"] and said["why"].startswith("spent (nvidia.com/gpu"), said
            (spent,) = budget_events(kueue, budget, "BudgetSpent")
            assert spent["involvedObject"]["name"] == queue and budget in spent["message"]
        end_pod(kueue, "kns-bud-a")
        kueue.wait(lambda: finished_at(watches, "bud-a"), slack(), message="bud-a finished")

        # What ./kns usage prints is what the Workloads' conditions say, within one interval.
        truth = gpu_hours(admissions(watches, "kns-bud-a"), start, datetime.now(timezone.utc))
        chart = live.root / "usage.svg"
        shown = kns_usage(live, "--chart", str(chart))["hold-hours"]
        assert 'id="used-0"' in chart.read_text() and 'id="limit-1"' in chart.read_text()
        assert shown["state"] == "spent" and shown["counterSays"]["held"]
        assert abs(shown["resources"]["nvidia.com/gpu"]["used"] - truth) <= 60 / 3600, (shown, truth)
        # A new Job of the spent budget waits; an `up --refresh` that also changes the limit
        # loses nothing of what was counted.
        live.edit(lambda c: c.update(budget_config(kueue, start, BUD_LIMIT * 1.25, (bud_job("bud-b", "bud-hold"),))))
        live.pulumi("up", "--refresh", "--yes")
        kueue.wait(lambda: job_workload(kueue, "kns-bud-b", "bud-b"), slack(), message="bud-b queued")
        created = time.time()
        kueue.wait(lambda: counters["hold-hours"].runs_after(created + 1), slack(60),
                   message=counters["hold-hours"].report)
        assert not reserved(kueue, "kns-bud-b", "bud-b")
        assert stop_policy(kueue, "bud-hold") == "Hold"
        # bud-a's admission, recorded whole in the ledger (closed at its Finished) across the
        # refresh and the new limit: nothing counted was lost.
        closed = sum(float(h.get("nvidia.com/gpu", 0)) for h in ledger(kueue, "hold-hours")["closed"].values())
        assert abs(closed - truth) <= 2 / 3600, (closed, truth)
        assert kns_usage(live)["hold-hours"]["resources"]["nvidia.com/gpu"]["used"] >= truth - 2 / 3600

        # The next period reopens both queues: the waiting and the requeued Jobs are admitted.
        assert datetime.now(timezone.utc) < period_end, "the scenario outran its period"
        left = (period_end - datetime.now(timezone.utc)).total_seconds()
        kueue.wait(lambda: datetime.now(timezone.utc) >= period_end, slack(left), every=5, message="period end")
        kueue.wait(lambda: reserved(kueue, "kns-bud-b", "bud-b") and reserved(kueue, "kns-bud-c", "bud-c"), slack(60),
                   message=lambda: "\n".join(c.report() for c in counters.values()))
        # The counter gave up its claim: the CRD's default again.
        assert stop_policy(kueue, "bud-hold") in (None, "None") and stop_policy(kueue, "bud-stop") in (None, "None")
        for budget in BUD_NAMESPACES:
            assert budget_events(kueue, budget, "BudgetReopened")
        assert not [r for c in counters.values() for r in c.runs if r.returncode != 0], \
            "\n".join(c.report() for c in counters.values())
    finally:
        for counter in counters.values():
            counter.stop()
        for namespace in ("kns-bud-a", "kns-bud-b", "kns-bud-c"):
            kueue.kubectl("delete", "jobs", "--all", "-n", namespace, "--wait=true", check=False)
        live.pulumi("destroy", "--yes", check=False)


def test_destroy_removes_queues_flavors_and_local_queues(stack, kueue):
    stack.pulumi("destroy", "--yes")
    mine = ("-l", "kns.io/cluster=kns-local")  # the reservations' stack shares the cluster
    assert kueue.get("workloadpriorityclasses.kueue.x-k8s.io", *mine)["items"] == []
    for kind in ("clusterqueues", "resourceflavors"):
        assert kueue.get(f"{kind}.kueue.x-k8s.io", *mine)["items"] == []
    assert kueue.get("localqueues.kueue.x-k8s.io", "--all-namespaces", *mine)["items"] == []
