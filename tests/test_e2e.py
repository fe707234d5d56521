"""End to end on a real control plane: etcd, kube-apiserver, kube-controller-manager, the
default kube-scheduler, the packing scheduler (as a process, with exactly the configuration
the program generated), kwok simulating the nodes of the `local` stack's static pools, and
Karpenter (its kwok cloud provider, as a process) creating the nodes of its autoscaled ones."""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import subprocess
from datetime import datetime, timedelta, timezone
from typing import Optional

import pytest
import yaml

from kns_testing import apiserver
from kns_testing.cluster import Cluster, local_cluster, node_manifest, script
from kns_testing.pace import slack
from kns_testing.program import ROOT, engine_project
from kns_testing.stacks import Stack, server_time, start_packing_scheduler, up_with_schedules_ahead
from kns_testing.watch import Watch

NODES = (
    [(f"vc-node-{i}", 16, 0) for i in range(1, 5)]
    + [(f"gpu-node-{i}", 64, 8) for i in range(1, 3)]
    + [("sys-node-1", 8, 0)]
    + [(f"cpu-node-{i}", 16, 0) for i in range(1, 3)]
)
PASSPHRASE = "kns-local-e2e"
# How long past `consolidateAfter` Karpenter may take to remove an empty node: its
# disruption loop runs every 10 s and validates a decision for up to 15 s more
# (docs/autoscaling.md), plus a scheduling round on a loaded machine.
CONSOLIDATION_SLACK = 90


def watching(cluster: Cluster, kind: str):
    """A fixture's body: a `Watch` of `kind` for the module."""
    watch = Watch(cluster, kind)
    yield watch
    watch.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("cluster"), [node_manifest(*node) for node in NODES]) as live:
        script("karpenter-process.sh", str(live.state), "--instance-types",
               str(ROOT / "tests" / "fixtures" / "kwok-instance-types.json"), timeout=600)
        yield live


@pytest.fixture(scope="module")
def jobs(cluster):
    """Every Job change from before the first `up` on (the short-TTL Job is gone soon)."""
    yield from watching(cluster, "jobs.batch")


@pytest.fixture(scope="module")
def nodes(cluster):
    """Every Node change from before the first `up` (Karpenter's nodes come and go)."""
    yield from watching(cluster, "nodes")


@pytest.fixture(scope="module")
def pods(cluster):
    yield from watching(cluster, "pods")


@pytest.fixture(scope="module")
def nodeclaims(cluster):
    yield from watching(cluster, "nodeclaims.karpenter.sh")


@pytest.fixture(scope="module")
def stack(cluster, jobs, nodes, pods, nodeclaims, tmp_path_factory):
    bin_dir = script("toolchain.sh")
    root = tmp_path_factory.mktemp("local") / "kns-platform"
    env = engine_project(root, bin_dir, PASSPHRASE, base_env=cluster.env)
    text = (ROOT / "tests" / "e2e" / "Pulumi.local.yaml").read_text().replace("KUBECONFIG_PATH", str(cluster.kubeconfig))
    (root / "Pulumi.local.yaml").write_text(text)
    live = Stack(root, env)
    live.pulumi("stack", "init", "local")
    live.up()
    start_packing_scheduler(cluster)
    return live


# ---- the stack ---------------------------------------------------------------------------


def test_every_resource_is_accepted_and_a_second_up_changes_nothing(stack, cluster):
    done = stack.pulumi("up", "--yes", "--expect-no-changes")
    assert " unchanged" in done.stdout
    namespaces = {n["metadata"]["name"] for n in cluster.get("namespaces")["items"]}
    assert {"kns-cpu-job", "kns-gpu-job", "kns-sandbox", "kns-quota-probe", "kns-system"} <= namespaces
    # Every namespace isolated on the network (docs/network.md): the API server took the
    # policies, and the second up found nothing to change in them.
    policies = {(p["metadata"]["namespace"], p["metadata"]["name"])
                for p in cluster.get("networkpolicies", "--all-namespaces")["items"]}
    assert {(n, "kns-isolation") for n in ("kns-cpu-job", "kns-gpu-job", "kns-sandbox", "kns-quota-probe",
                                           "kns-system")} <= policies
    node = cluster.get("node", "gpu-node-1")
    assert node["metadata"]["labels"]["kns.io/pool"] == "a100"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]


# ---- admission -----------------------------------------------------------------------------


def test_limit_range_defaults_fill_a_pod_without_resources(stack, cluster):
    cluster.kubectl("run", "bare", "-n", "kns-sandbox", "--image=busybox", "--restart=Never")
    resources = cluster.get("pod", "bare", "-n", "kns-sandbox")["spec"]["containers"][0]["resources"]
    assert resources == {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "200m", "memory": "256Mi"}}


def test_a_pod_over_the_quota_is_rejected(stack, cluster):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "greedy", "namespace": "kns-quota-probe"},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}]}}
    done = cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod), check=False)
    assert done.returncode != 0 and "exceeded quota" in done.stderr


# ---- Pod Security `restricted` in the system namespace --------------------------------------


def test_the_system_namespace_enforces_restricted_and_admits_every_platform_pod(stack, cluster):
    labels = cluster.get("namespace", "kns-system")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    # The deployment and replicaset controllers create the schedulers' pods through
    # admission; a refused pod never exists, and its ReplicaSet records ReplicaFailure.
    # Pods persist (kwok keeps them running), so waiting for them only depends on the
    # replicas asked for, plus the controllers' slack.
    expected = {"kns-packing": stack.entry_value("kns:packingScheduler", "replicas", 1),
                "kns-scheduler": stack.entry_value("kns:knsScheduler", "replicas", 1)}

    def admitted():
        pods = pods_of(cluster, "kns-system")
        counts = {name: len([p for p in pods if p["metadata"]["labels"].get("app.kubernetes.io/name") == name])
                  for name in expected}
        return counts if counts == expected else None

    cluster.wait(admitted, slack(floor=180), every=2, message="the schedulers' pods created in kns-system")
    for replica_set in cluster.get("replicasets", "-n", "kns-system")["items"]:
        conditions = replica_set.get("status", {}).get("conditions", [])
        assert not [c for c in conditions if c["type"] == "ReplicaFailure"], replica_set["metadata"]["name"]
    for pod in pods_of(cluster, "kns-system"):
        for container in pod["spec"]["containers"]:
            security = {**pod["spec"].get("securityContext", {}), **container.get("securityContext", {})}
            assert security["runAsNonRoot"] is True and security["runAsUser"] > 0, pod["metadata"]["name"]


def test_a_pod_that_is_not_restricted_is_refused_in_the_system_namespace(stack, cluster):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "not-restricted", "namespace": "kns-system"},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.37",
                                    "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}
    done = cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod), check=False)
    assert done.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in done.stderr, done.stderr
    assert "runAsNonRoot" in done.stderr and "allowPrivilegeEscalation" in done.stderr
    assert not [p for p in pods_of(cluster, "kns-system") if p["metadata"]["name"] == "not-restricted"]


# ---- placement and Jobs --------------------------------------------------------------------


def pods_of(cluster, namespace: str) -> list[dict]:
    return cluster.get("pods", "-n", namespace)["items"]


def test_gpu_job_runs_only_on_gpu_nodes_and_cpu_job_off_tainted_pools(stack, cluster):
    gpu = cluster.wait(lambda: [p for p in pods_of(cluster, "kns-gpu-job") if p["spec"].get("nodeName")], slack(),
                       message="gpu-job pod scheduled")
    assert {p["spec"]["nodeName"] for p in gpu} <= {"gpu-node-1", "gpu-node-2"}
    cpu = cluster.wait(lambda: [p for p in pods_of(cluster, "kns-cpu-job") if p["spec"].get("nodeName")], slack(),
                       message="cpu-job pod scheduled")
    assert {p["spec"]["nodeName"] for p in cpu} <= {"cpu-node-1", "cpu-node-2"}
    assert all(p["spec"]["schedulerName"] == "kns-packing" for p in gpu + cpu)


def test_a_job_completes_and_its_ttl_removes_it_no_earlier(stack, cluster, jobs):
    ttl = round(stack.entry("kns:jobs", "ttl-job")["ttlHours"] * 3600)

    def deleted():
        return next((obj for kind, obj in jobs.of("kns-ttl-job", "ttl-job") if kind == "DELETED"), None)

    # The TTL clock starts when the Job completes; the controllers get a minute of slack.
    completed = cluster.wait(
        lambda: next((obj["status"]["completionTime"] for _, obj in jobs.of("kns-ttl-job", "ttl-job")
                      if obj.get("status", {}).get("completionTime")), None),
        slack(floor=180), every=2, message="ttl-job completed")
    left = (server_time(completed) + timedelta(seconds=ttl) - datetime.now(timezone.utc)).total_seconds()
    gone = cluster.wait(deleted, slack(max(left, 0), floor=60), every=2, message="ttl-job removed by its TTL")
    assert gone["spec"]["ttlSecondsAfterFinished"] == ttl
    # The TTL controller deletes in the foreground: the deletion timestamp is when it acted.
    removed = server_time(gone["metadata"]["deletionTimestamp"])
    assert removed >= server_time(completed) + timedelta(seconds=ttl - 1), (completed, removed)  # 1 s: whole seconds
    assert not cluster.get("jobs", "-n", "kns-ttl-job")["items"]


# ---- packing -----------------------------------------------------------------------------


def test_the_packing_scheduler_fills_nodes_where_the_default_one_spreads(stack, cluster):
    cluster.kubectl("create", "namespace", "packing-probe")

    def small_pod(name: str, scheduler: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "packing-probe"},
                "spec": {"schedulerName": scheduler, "nodeSelector": {"kns.io/pool": "vcluster"},
                         "tolerations": [{"key": "node-role.jarvice.io/jarvice-vcluster", "operator": "Exists"}],
                         "containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}

    placements = {}
    for scheduler in ("kns-packing", "default-scheduler"):
        names = [f"{scheduler[:7]}-{i}" for i in range(8)]
        cluster.apply(*(small_pod(n, scheduler) for n in names))
        placed = cluster.wait(
            lambda: (lambda pods: pods if len(pods) == 8 else None)(
                [p for p in pods_of(cluster, "packing-probe") if p["metadata"]["name"] in names and p["spec"].get("nodeName")]),
            slack(), message=f"8 pods placed by {scheduler}")
        placements[scheduler] = {p["spec"]["nodeName"] for p in placed}
        cluster.kubectl("delete", "pods", "--all", "-n", "packing-probe", "--wait=true")
    assert len(placements["kns-packing"]) == 1, placements  # 8 CPUs fit on one 16-CPU node
    assert len(placements["default-scheduler"]) >= 3, placements


# ---- RBAC --------------------------------------------------------------------------------

RUNNER = "system:serviceaccount:{ns}:kns-runner"
RBAC = [
    # the runner of a pod entry: read pods and logs, exec, in its own namespace only
    (RUNNER.format(ns="kns-cpu-job"), "get", "pods", "kns-cpu-job", True),
    (RUNNER.format(ns="kns-cpu-job"), "list", "pods", "kns-cpu-job", True),
    (RUNNER.format(ns="kns-cpu-job"), "get", "pods/log", "kns-cpu-job", True),
    (RUNNER.format(ns="kns-cpu-job"), "create", "pods/exec", "kns-cpu-job", True),
    (RUNNER.format(ns="kns-cpu-job"), "create", "pods", "kns-cpu-job", False),
    (RUNNER.format(ns="kns-cpu-job"), "delete", "pods", "kns-cpu-job", False),
    (RUNNER.format(ns="kns-cpu-job"), "get", "secrets", "kns-cpu-job", False),
    (RUNNER.format(ns="kns-cpu-job"), "list", "secrets", "kns-cpu-job", False),
    (RUNNER.format(ns="kns-cpu-job"), "get", "pods/log", "kns-gpu-job", False),
    (RUNNER.format(ns="kns-cpu-job"), "create", "pods/exec", "kns-gpu-job", False),
    (RUNNER.format(ns="kns-cpu-job"), "get", "pods", "kns-system", False),
    (RUNNER.format(ns="kns-cpu-job"), "create", "jobs.batch", "kns-cpu-job", False),
    # a namespace entry: pods, services, configmaps in its own namespace only, no secrets
    (RUNNER.format(ns="kns-sandbox"), "create", "pods", "kns-sandbox", True),
    (RUNNER.format(ns="kns-sandbox"), "create", "services", "kns-sandbox", True),
    (RUNNER.format(ns="kns-sandbox"), "delete", "configmaps", "kns-sandbox", True),
    (RUNNER.format(ns="kns-sandbox"), "create", "pods", "kns-cpu-job", False),
    (RUNNER.format(ns="kns-sandbox"), "get", "secrets", "kns-sandbox", False),
    (RUNNER.format(ns="kns-sandbox"), "create", "roles.rbac.authorization.k8s.io", "kns-sandbox", False),
    # only the KNS account is cluster-admin
    ("system:serviceaccount:kns-system:kns-scheduler", "*", "*", None, True),
    ("system:serviceaccount:kns-system:kns-packing", "*", "*", None, False),
    (RUNNER.format(ns="kns-gpu-job"), "*", "*", None, False),
    ("system:serviceaccount:kns-system:default", "get", "secrets", "kns-system", False),
    # the packing scheduler may bind pods and read what it schedules with
    ("system:serviceaccount:kns-system:kns-packing", "create", "pods/binding", "kns-cpu-job", True),
    ("system:serviceaccount:kns-system:kns-packing", "list", "nodes", None, True),
    ("system:serviceaccount:kns-system:kns-packing", "get", "leases.coordination.k8s.io/kns-packing", "kns-system", True),
    ("system:serviceaccount:kns-system:kns-packing", "get", "secrets", "kns-cpu-job", False),
    ("system:serviceaccount:kns-system:kns-packing", "create", "clusterrolebindings.rbac.authorization.k8s.io", None, False),
]


def test_a_scheduler_whose_port_is_taken_starts_again_on_another(stack, cluster):
    """scripts/scheduler-process.sh given a port something else listens on (as happens when
    another process takes it between free_ports and the bind) starts kube-scheduler again on
    a new one (scripts/lib/ports.sh) instead of failing."""
    config = cluster.state / "kns-port-probe.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "kns-port-probe"}]}))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(["bash", str(ROOT / "scripts" / "scheduler-process.sh"), str(cluster.state), str(config)],
                              capture_output=True, text=True, timeout=600,
                              env={**cluster.env, "KNS_FIRST_PORTS": str(port)})
    pid = next(line.split()[1] for line in (cluster.state / "pids").read_text().splitlines()[::-1]
               if line.startswith("kube-scheduler-kns-port-probe "))
    os.killpg(int(pid), signal.SIGKILL)  # its own process group (scheduler-process.sh starts it with setsid)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trying again with new ports (1/5)" in done.stderr
    env = (cluster.state / "cluster.env").read_text()
    served = [line.split("=", 1)[1] for line in env.splitlines() if line.startswith("KNS_SCHEDULER_PORT_KNS_PORT_PROBE=")]
    assert served and int(served[-1]) != port


def test_rbac_matrix(stack, cluster):
    results = [(who, verb, resource, ns, cluster.can(who, verb, resource, ns), allowed)
               for who, verb, resource, ns, allowed in RBAC]
    wrong = [r for r in results if r[4] != r[5]]
    assert len(results) >= 20 and not wrong, wrong


# ---- autoscaled pools (Karpenter) --------------------------------------------------------


def pool_node_names(nodes: Watch, pool: str) -> set[str]:
    return nodes.names(lambda n: (n["metadata"].get("labels") or {}).get("kns.io/pool") == pool)


def recorded_pods(pods: Watch, namespace: str) -> dict[str, dict]:
    """The last recorded version of each pod of `namespace` the watch saw, deleted or not: a
    completed pod may be gone before the test looks (its node consolidated, then the pod
    garbage-collected; or deleted by the taint manager reading a node's taints from a stale
    cache the moment it was bound, kubernetes/kubernetes#119862)."""
    last: dict[str, dict] = {}
    for _, obj in pods.all():
        if obj["metadata"].get("namespace") == namespace:
            last[obj["metadata"]["name"]] = obj
    return last


def bound_pod(cluster, pods: Watch, namespace: str) -> dict:
    return cluster.wait(lambda: next((p for p in recorded_pods(pods, namespace).values() if p["spec"].get("nodeName")), None),
                        slack(floor=240), every=2, message=f"the pod watch saw a pod of {namespace} bound to a node")


def pending_then_provisioned(cluster, pod: dict) -> list[str]:
    """The reasons of the pod's first FailedScheduling (from its scheduler), Nominated (from
    Karpenter) and Scheduled events, in the order they happened."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    scheduler = pod["spec"]["schedulerName"]
    events = [e for e in cluster.get("events", "-n", namespace)["items"] if e["involvedObject"].get("name") == name]

    def source(event: dict) -> str:
        return event.get("reportingComponent") or (event.get("source") or {}).get("component", "")

    def first(reason: str, reporter: str):
        times = [e.get("eventTime") or e.get("firstTimestamp") for e in events
                 if e["reason"] == reason and source(e).startswith(reporter)]
        return min(times) if times else None

    found = {"FailedScheduling": first("FailedScheduling", scheduler), "Nominated": first("Nominated", "karpenter"),
             "Scheduled": first("Scheduled", scheduler)}
    assert all(found.values()), (found, [(e["reason"], source(e), e["message"][:120]) for e in events])
    return sorted(found, key=lambda reason: found[reason])


def registered_version(cluster, nodes: Watch, name: str) -> dict:
    """The first version of a Karpenter node without Karpenter's own `unregistered` taint
    (from then on pods can land on it), once the node watch has seen it."""
    def registered(version: dict) -> bool:
        return not any(t["key"] == "karpenter.sh/unregistered" for t in version["spec"].get("taints", []))

    return cluster.wait(lambda: next((v for v in versions(nodes, name) if registered(v)), None), slack(floor=60),
                        message=f"the node watch saw {name} registered")


def versions(watch: Watch, name: str) -> list[dict]:
    return [obj for _, obj in watch.of(None, name)]


def test_a_job_on_an_empty_autoscaled_pool_waits_for_karpenter_and_lands_on_its_templated_node(
        stack, cluster, nodes, pods, nodeclaims):
    pool = stack.entry("kns:nodePools", "burst")
    pod = bound_pod(cluster, pods, "kns-burst-job")
    node_name = pod["spec"]["nodeName"]
    registered_version(cluster, nodes, node_name)
    cluster.wait(lambda: [o for _, o in nodeclaims.all() if o.get("status", {}).get("nodeName") == node_name],
                 slack(floor=60),
                 message="the NodeClaim watch saw the node's claim")
    # it was pending first (its scheduler found no node), Karpenter nominated a new node, then
    # the scheduler bound it: the pod's events, which the API server keeps
    assert pending_then_provisioned(cluster, pod) == ["FailedScheduling", "Nominated", "Scheduled"]
    # the node is Karpenter's, made for this pool after the pod existed
    claims = [obj for _, obj in nodeclaims.all() if obj.get("status", {}).get("nodeName") == node_name]
    assert claims and claims[0]["metadata"]["labels"]["karpenter.sh/nodepool"] == "burst"
    seen = versions(nodes, node_name)
    assert seen and server_time(seen[0]["metadata"]["creationTimestamp"]) >= server_time(
        pod["metadata"]["creationTimestamp"])
    # labelled from the NodePool template in every version from its creation, tainted by the
    # time Karpenter lifts its own `unregistered` taint (before any pod can land), and never
    # written by the program (a static pool's nodes are patched by pulumi)
    registered = 0
    for version in seen:
        labels = version["metadata"]["labels"]
        assert labels["kns.io/pool"] == "burst" and labels["kns.io/cluster"] == "kns-local", labels
        taints = version["spec"].get("taints", [])
        if not any(t["key"] == "karpenter.sh/unregistered" for t in taints):
            registered += 1
            assert {"key": "kns.io/burst", "value": "true", "effect": "NoSchedule"} in taints, version
        assert not [m for m in version["metadata"].get("managedFields", []) if "pulumi" in m["manager"]], version
    assert registered, seen
    assert pool["autoscale"]["nodeClassRef"]["kind"] == "KWOKNodeClass"
    # nothing of another pool ever ran on an autoscaled pool's node
    for autoscaled in ("burst", "spare", "warm", "capped", "h100"):
        names = pool_node_names(nodes, autoscaled)
        strays = {(obj["metadata"]["namespace"], obj["metadata"]["name"]) for _, obj in pods.all()
                  if obj["spec"].get("nodeName") in names
                  and (obj["spec"].get("nodeSelector") or {}).get("kns.io/pool") != autoscaled}
        assert not strays, (autoscaled, strays)


def test_both_schedulers_get_nodes_from_karpenter(stack, cluster, nodes, pods):
    placed = {}
    for namespace, pool in (("kns-burst-job", "burst"), ("kns-burst-default", "spare")):
        pod = bound_pod(cluster, pods, namespace)
        placed[pod["spec"]["schedulerName"]] = pod["spec"]["nodeName"]
        # each pod is alone on its empty pool: its scheduler's Unschedulable verdict is what made Karpenter act
        assert pending_then_provisioned(cluster, pod) == ["FailedScheduling", "Nominated", "Scheduled"]
        assert pod["spec"]["nodeName"] in pool_node_names(nodes, pool), (pod["spec"]["nodeName"], pool)
    assert set(placed) == {"kns-packing", "default-scheduler"}


def test_a_gpu_job_on_an_empty_autoscaled_gpu_pool_gets_a_gpu_node(stack, cluster, nodes, pods):
    pod = bound_pod(cluster, pods, "kns-gpu-burst-job")
    node = registered_version(cluster, nodes, pod["spec"]["nodeName"])
    assert node["metadata"]["labels"]["kns.io/pool"] == "h100"
    assert node["metadata"]["labels"]["nvidia.com/gpu"] == "present"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) >= 2


def test_n_workers_on_an_empty_autoscaled_pool_get_n_nodes_from_karpenter(stack, cluster, nodes, nodeclaims, pods):
    """multi-burst (docs/distributed.md): two 3-CPU workers on a pool of 4-CPU nodes, so each
    needs a node of its own; Karpenter brings up two, one per worker, both for the pool."""
    workers = stack.entry("kns:jobs", "multi-burst")["workers"]

    def placed() -> dict[str, str] | None:
        bound = {name: p["spec"]["nodeName"] for name, p in recorded_pods(pods, "kns-multi-burst").items()
                 if p["spec"].get("nodeName")}
        return bound if len(bound) == workers else None

    bound = cluster.wait(placed, slack(floor=240), every=2, message="every worker of multi-burst bound")
    assert len(set(bound.values())) == workers, bound
    cluster.wait(lambda: set(bound.values()) <= pool_node_names(nodes, "multi"), slack(floor=60),
                 message="the node watch saw the workers' nodes labelled for pool multi")
    claimed = {o["status"]["nodeName"] for _, o in nodeclaims.all()
               if o.get("status", {}).get("nodeName") in set(bound.values())
               and o["metadata"]["labels"]["karpenter.sh/nodepool"] == "multi"}
    assert claimed == set(bound.values())


def test_autoscaled_pools_consolidate_back_to_zero_once_their_pods_are_done(stack, cluster, nodes, pods):
    for pool, namespaces in (("burst", ("kns-burst-job",)), ("spare", ("kns-burst-default",)),
                             ("h100", ("kns-gpu-burst-job",))):
        after = parse_duration(stack.entry("kns:nodePools", pool)["autoscale"]["consolidateAfter"])
        names = pool_node_names(nodes, pool)
        assert names, pool
        finished = []
        for namespace in namespaces:
            done = cluster.wait(lambda ns=namespace: [p for _, p in pods.all() if p["metadata"].get("namespace") == ns
                                                      and p["status"].get("phase") == "Succeeded"],
                                slack(floor=240), every=2, message=f"the pod watch saw a pod of {namespace} completed")
            finished += [server_time(s["state"]["terminated"]["finishedAt"]) for p in done
                         for s in p["status"]["containerStatuses"]]
        last = max(finished)
        left = (last + timedelta(seconds=after + CONSOLIDATION_SLACK) - datetime.now(timezone.utc)).total_seconds()
        cluster.wait(lambda: not [n for n in cluster.get("nodes", "-l", f"kns.io/pool={pool}")["items"]],
                     slack(max(left, 0), floor=30), every=2, message=f"pool {pool} back to zero nodes")
        for name in names:
            deleted = [server_time(obj["metadata"]["deletionTimestamp"]) for _, obj in nodes.of(None, name)
                       if obj["metadata"].get("deletionTimestamp")]
            assert deleted, name
            assert min(deleted) <= last + timedelta(seconds=after + CONSOLIDATION_SLACK), (pool, name, last, deleted)


def parse_duration(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    total, number = 0, ""
    for char in text:
        if char.isdigit():
            number += char
        else:
            total, number = total + int(number) * units[char], ""
    return total


def test_limits_hold_a_burst_over_the_limit_leaves_the_excess_pending(stack, cluster, nodes):
    limit = int(stack.entry("kns:nodePools", "capped")["autoscale"]["limits"]["cpu"])
    cluster.kubectl("create", "namespace", "capped-probe")
    names = [f"burst-{i}" for i in range(7)]
    cluster.apply(*({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "namespace": "capped-probe"},
                     "spec": {"nodeSelector": {"kns.io/pool": "capped"},
                              "tolerations": [{"key": "kns.io/capped", "operator": "Exists"}],
                              "containers": [{"name": "c", "image": "busybox",
                                              "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}}
                    for n in names))

    instance_cpu = 4  # c-4x-amd64-linux, the pool's one instance type: two 1.5-CPU pods per node

    def claims() -> list[dict]:
        return [c for c in cluster.get("nodeclaims")["items"] if c["metadata"]["labels"]["karpenter.sh/nodepool"] == "capped"]

    def settled():
        """Every node Karpenter made is full and every pod still pending has been told by
        Karpenter that the limit stops it (it dedupes that event per pod for minutes, so its
        time says nothing): nothing more will be launched."""
        made = claims()
        pods = pods_of(cluster, "capped-probe")
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = {p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")}
        told = {e["involvedObject"]["name"] for e in cluster.get("events", "-n", "capped-probe")["items"]
                if e["reason"] == "FailedScheduling" and e["message"].startswith("Failed to schedule pod")
                and "limit" in e["message"]}
        full = made and len(bound) == 2 * len(made)
        return (made, pending) if full and pending and pending <= told else None

    made, pending = cluster.wait(settled, slack(floor=300), every=3, message="Karpenter stopped at the pool's limit")
    assert len(made) * instance_cpu <= limit, made
    assert len(pending) >= len(names) - 2 * len(made) >= len(names) - 2 * (limit // instance_cpu) > 0
    cluster.kubectl("delete", "namespace", "capped-probe", "--wait=false")


# ---- a prescaled schedule ----------------------------------------------------------------

# Two minutes: Karpenter's node must be up well within the warm-up even on a loaded machine.
WARM_UP = 2


@pytest.fixture(scope="module")
def primed(stack):
    """The `primed` schedule, on the empty autoscaled pool `warm`, primed after this `up`."""
    def set_schedule(config, start):
        schedules = [s for s in config.get("kns:schedules", []) if s["name"] not in ("primed", "primed-pair")]
        one = {"user": "bob", "image": "busybox:1.37", "cpu": "1", "memory": 512, "pool": "warm",
               "schedule": f"{start.minute} {start.hour} * * *", "timeZone": "Etc/UTC", "warmUpMinutes": WARM_UP}
        # and a distributed one (docs/distributed.md): two workers primed together
        config["kns:schedules"] = schedules + [{"name": "primed", **one}, {"name": "primed-pair", "workers": 2, **one}]

    return up_with_schedules_ahead(stack, WARM_UP, set_schedule)


def test_the_primer_job_is_named_for_the_minute_the_wait_expects(stack, cluster, primed):
    start, primer = primed
    cron = cluster.get("cronjob", "primed", "-n", "kns-primed")
    assert cron["spec"]["schedule"] == f"{primer.minute} {primer.hour} * * *"
    # A Job, once created, stays: the schedule has no TTL and the next run is a day away.
    jobs = cluster.wait(lambda: cluster.get("jobs", "-n", "kns-primed")["items"],
                        slack((primer - datetime.now(timezone.utc)).total_seconds()), every=2,
                        message="the CronJob controller created the primer Job")
    name = jobs[0]["metadata"]["name"]
    assert name == f"primed-{int(primer.timestamp()) // 60}"
    pod_labels = cluster.wait(lambda: [p["metadata"]["labels"] for p in pods_of(cluster, "kns-primed")], slack(),
                              message="primer pod")
    assert pod_labels[0]["batch.kubernetes.io/job-name"] == name  # what the wait reads


def test_a_prescaled_schedule_warms_its_empty_autoscaled_pool_before_the_start(stack, cluster, nodes, pods, primed):
    start, primer = primed
    # the run: its pod completes at the start (kwok's stage for primed pods, docs/testing.md)
    done = cluster.wait(lambda: [p for p in pods_of(cluster, "kns-primed") if p["status"].get("phase") == "Succeeded"],
                        slack((start - datetime.now(timezone.utc)).total_seconds(), floor=180), every=2,
                        message="the primed run completed")
    (pod,) = done
    name = pod["metadata"]["name"]
    node_name = pod["spec"]["nodeName"]
    assert node_name in pool_node_names(nodes, "warm")
    # the pool had no node before the primer; its node was made for the primer, before the start
    created = {n: server_time(versions(nodes, n)[0]["metadata"]["creationTimestamp"])
               for n in pool_node_names(nodes, "warm")}
    assert all(primer <= at for at in created.values()), (primer, created)
    assert created[node_name] < start, (created, start)
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    bound = server_time(conditions["PodScheduled"]["lastTransitionTime"])
    running = [server_time(c["lastTransitionTime"]) for _, obj in pods.of("kns-primed", name)
               for c in obj["status"].get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"]
    assert primer <= bound < start and running and min(running) < start, (bound, running, start)
    # the pod that ran at the start is the one that held the node from the primer on: one pod,
    # bound once, finished no earlier than the start
    assert [n for n in {obj["spec"].get("nodeName") for _, obj in pods.of("kns-primed", name)} if n] == [node_name]
    finished = max(server_time(s["state"]["terminated"]["finishedAt"]) for s in pod["status"]["containerStatuses"])
    assert finished >= start, (finished, start)
    assert len(pods_of(cluster, "kns-primed")) == 1
    # not consolidated while the pod waited, and back to zero once it is done
    deletions = [server_time(obj["metadata"]["deletionTimestamp"]) for _, obj in nodes.of(None, node_name)
                 if obj["metadata"].get("deletionTimestamp")]
    assert all(d >= finished for d in deletions), (deletions, finished)
    after = parse_duration(stack.entry("kns:nodePools", "warm")["autoscale"]["consolidateAfter"])
    left = (finished + timedelta(seconds=after + CONSOLIDATION_SLACK) - datetime.now(timezone.utc)).total_seconds()
    cluster.wait(lambda: not cluster.get("nodes", "-l", "kns.io/pool=warm")["items"], slack(max(left, 0), floor=30),
                 every=2,
                 message="pool warm back to zero nodes")
    template = cluster.get("cronjob", "primed", "-n", "kns-primed")["spec"]["jobTemplate"]["spec"]["template"]
    assert template["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"


def test_a_prescaled_distributed_schedule_has_every_worker_on_a_warm_node_before_the_start(
        stack, cluster, nodes, pods, primed):
    """primed-pair: both workers of the primer Job are bound to nodes of pool warm and Running
    (held by the wait) before the start, and both end no earlier than it (kwok's primed
    stage ends each at the start the wait computes from the Job's name): they start together."""
    start, primer = primed
    def both_done() -> list[dict] | None:
        done = [p for p in pods_of(cluster, "kns-primed-pair") if p["status"].get("phase") == "Succeeded"]
        return done if len(done) == 2 else None

    done = cluster.wait(both_done, slack((start - datetime.now(timezone.utc)).total_seconds(), floor=180), every=2,
                        message="both workers of the run done")
    indexes = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in done)
    assert indexes == ["0", "1"]
    warm = pool_node_names(nodes, "warm")
    for pod in done:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] in warm
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["kns-wait"]
        running = [server_time(c["lastTransitionTime"]) for _, obj in pods.of("kns-primed-pair", name)
                   for c in obj["status"].get("conditions", []) if c["type"] == "Ready" and c["status"] == "True"]
        assert running and primer <= min(running) < start, (name, running, start)
        finished = max(server_time(s["state"]["terminated"]["finishedAt"]) for s in pod["status"]["containerStatuses"])
        assert finished >= start, (name, finished, start)


# ---- the NodePool CRD agrees with the program's checks ------------------------------------

CRD_REFUSES = {
    # what the v1 NodePool CRD's schema and CEL rules refuse, applied to a NodePool the program
    # emitted; tests/test_autoscale.py shows the program refuses the config of each
    "operator": lambda s: s["template"]["spec"]["requirements"].append({"key": "a/b", "operator": "Equals", "values": ["x"]}),
    "In without values": lambda s: s["template"]["spec"]["requirements"].append({"key": "a/b", "operator": "In", "values": []}),
    "Gt not a number": lambda s: s["template"]["spec"]["requirements"].append({"key": "a/b", "operator": "Gt", "values": ["x"]}),
    "Gte two values": lambda s: s["template"]["spec"]["requirements"].append({"key": "a/b", "operator": "Gte", "values": ["1", "2"]}),
    "minValues over values": lambda s: s["template"]["spec"]["requirements"].append(
        {"key": "a/b", "operator": "In", "values": ["x"], "minValues": 2}),
    "minValues over 50": lambda s: s["template"]["spec"]["requirements"].append(
        {"key": "a/b", "operator": "In", "values": ["x"], "minValues": 51}),
    "karpenter.sh requirement": lambda s: s["template"]["spec"]["requirements"].append({"key": "karpenter.sh/x", "operator": "Exists"}),
    "hostname requirement": lambda s: s["template"]["spec"]["requirements"].append(
        {"key": "kubernetes.io/hostname", "operator": "Exists"}),
    "nodepool requirement": lambda s: s["template"]["spec"]["requirements"].append(
        {"key": "karpenter.sh/nodepool", "operator": "Exists"}),
    "101 requirements": lambda s: s["template"]["spec"]["requirements"].extend(
        {"key": f"a/k{i}", "operator": "Exists"} for i in range(101)),
    "karpenter.sh label": lambda s: s["template"]["metadata"]["labels"].update({"karpenter.sh/team": "a"}),
    "hostname label": lambda s: s["template"]["metadata"]["labels"].update({"kubernetes.io/hostname": "a"}),
    "empty group": lambda s: s["template"]["spec"]["nodeClassRef"].update(group=""),
    "group with a slash": lambda s: s["template"]["spec"]["nodeClassRef"].update(group="a/b"),
    "no nodeClassRef": lambda s: s["template"]["spec"].pop("nodeClassRef"),
    "consolidateAfter": lambda s: s["disruption"].update(consolidateAfter="5 minutes"),
    "expireAfter": lambda s: s["template"]["spec"].update(expireAfter="1d"),
    "consolidation policy": lambda s: s["disruption"].update(consolidationPolicy="Always"),
    "limit": lambda s: s.update(limits={"cpu": "lots"}),
    "weight 0": lambda s: s.update(weight=0),
    "weight 101": lambda s: s.update(weight=101),
}


def dry_run(cluster, manifest: dict) -> subprocess.CompletedProcess:
    # JSON, as the provider sends it: YAML would let kubectl's YAML 1.1 reader turn a value
    # such as N into a boolean
    return cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(manifest), check=False)


def test_the_api_server_with_the_crd_refuses_what_the_program_refuses_and_takes_what_it_emits(stack, cluster):
    from hypothesis import HealthCheck, given, settings

    from kns_testing.program import run_program
    from kns_testing.autoscale import autoscaled_pool

    emitted = cluster.get("nodepool", "burst")
    base = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "crd-probe"},
            "spec": copy.deepcopy(emitted["spec"])}
    assert dry_run(cluster, base).returncode == 0
    accepted = []
    for case, change in CRD_REFUSES.items():
        manifest = copy.deepcopy(base)
        change(manifest["spec"])
        if dry_run(cluster, manifest).returncode == 0:
            accepted.append(case)
    assert not accepted, accepted

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pool=autoscaled_pool())
    def every_emitted_nodepool_is_accepted(pool):
        done = run_program({"cluster": {"name": "kns-local", "renderDir": "out"}, "nodePools": [pool]})
        (registered,) = done.of_type("kubernetes:karpenter.sh/v1:NodePool")
        manifest = apiserver.manifest(registered)  # as the provider sends it
        manifest["metadata"] = {**manifest["metadata"], "name": "crd-probe"}
        refused = dry_run(cluster, manifest)
        assert refused.returncode == 0, (manifest, refused.stderr)

    every_emitted_nodepool_is_accepted()


# ---- destroy -------------------------------------------------------------------------------


def test_destroy_removes_everything_including_node_labels_and_taints(stack, cluster):
    stack.pulumi("destroy", "--yes")

    def namespaces_gone():
        names = {n["metadata"]["name"] for n in cluster.get("namespaces")["items"]}
        return not any(n.startswith("kns-") for n in names)

    cluster.wait(namespaces_gone, slack(floor=180), every=2, message="kns-* namespaces deleted")
    for name, _, _ in NODES:
        node = cluster.get("node", name)
        assert "kns.io/pool" not in node["metadata"].get("labels", {})
        assert not [t for t in node["spec"].get("taints", []) if t["key"] in ("nvidia.com/gpu", "kns.io/system",
                                                                             "node-role.jarvice.io/jarvice-vcluster")]
    bindings = cluster.get("clusterrolebindings")["items"]
    assert not [b for b in bindings if b["metadata"]["name"].startswith(("kns-packing", "kns-scheduler"))]
    assert cluster.get("nodepools.karpenter.sh")["items"] == []
