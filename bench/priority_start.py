"""Start lateness of a prescaled run's Job on a full queue, with and without priority, against
the same Job on a queue with room, in the same run (docs/benchmarks.md section 12).

The local control plane (scripts/cluster-up.sh) with one kwok node of 16 CPU and Kueue's
manager as a process (kns_testing.kueue). One ClusterQueue of 16 CPU, preemption
`withinClusterQueue: LowerPriority`, WorkloadPriorityClasses `batch` (100) and `report`
(1000), as the program writes them (plan/queues.py). The measured Job stands for a primer:
8 CPU, created suspended with the queue and priority labels, its lateness = its pod's
binding (the scheduler's `Scheduled` event, microsecond eventTime) - the moment just before
the Job's create (the same host's clock): what a warm-up loses before it can begin. Arms, in
turn, N runs each, every run on an empty queue first:

- room: the queue is empty; the Job has priority `report`;
- priority: two 8-CPU `batch` Jobs fill the queue first (admitted, pods Running); the Job
  has priority `report`, so Kueue preempts one of them;
- no priority: the same full queue; the Job has priority `batch`, so it waits until a batch
  Job ends, which this benchmark makes happen HOLD seconds after the Job's creation (on a
  real queue, whenever a Job ends: the lateness is unbounded).

Every wait polls the objects it waits for; the only sleep is the hold above.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

from common import recorded, table, write
from kns_testing.cluster import Cluster, local_cluster, node_manifest
from kns_testing.kueue import start_kueue

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
HOLD = 10  # seconds a full queue without priority is kept full after the Job's creation
NAMESPACE = "bench-priority"
QUEUE = "bench"
API = "kueue.x-k8s.io/v1beta2"
OBJECTS = [
    {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "batch"}, "value": 100},
    {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "report"}, "value": 1000},
    {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": QUEUE},
     "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
              "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": [
                  {"name": "cpu", "nominalQuota": "16"}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}},
    {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NAMESPACE},
     "spec": {"clusterQueue": QUEUE}},
]


def job(name: str, priority: str, run_for: str) -> dict:
    labels = {"kueue.x-k8s.io/queue-name": QUEUE, "kueue.x-k8s.io/priority-class": priority, "kns.io/bench": "prio"}
    pod = {"metadata": {"labels": {"kns.io/bench": "prio"}, "annotations": {"kwok.x-k8s.io/run-for": run_for}},
           "spec": {"restartPolicy": "Never", "containers": [
               {"name": "work", "image": "busybox:1.37", "resources": {"requests": {"cpu": "8", "memory": "1Gi"}}}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {"suspend": True, "backoffLimit": 0, "template": pod}}


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pods(cluster: Cluster, job_name: str) -> list[dict]:
    return [p for p in cluster.get("pods", "-n", NAMESPACE)["items"]
            if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == job_name]


def running_since(cluster: Cluster, job_name: str) -> float | None:
    """When the Job's (first) pod became Ready, by the server's clock."""
    for pod in pods(cluster, job_name):
        for condition in pod.get("status", {}).get("conditions", []):
            if condition["type"] == "Ready" and condition["status"] == "True":
                return stamp(condition["lastTransitionTime"])
    return None


def create(cluster: Cluster, manifest: dict) -> float:
    """Create the object; the host's time just before."""
    before = time.time()
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(manifest))
    return before


def scheduled_at(cluster: Cluster, job_name: str) -> float | None:
    """When the scheduler bound the Job's (first) pod: its Scheduled event's eventTime."""
    names = {p["metadata"]["name"] for p in pods(cluster, job_name)}
    times = [stamp(e["eventTime"]) for e in cluster.get("events", "-n", NAMESPACE)["items"]
             if e.get("reason") == "Scheduled" and e.get("eventTime") and e["involvedObject"]["name"] in names]
    return min(times, default=None)


def end(cluster: Cluster, job_name: str) -> None:
    """End the Job's running pod now (kwok's pod-complete-after reads run-for)."""
    for pod in pods(cluster, job_name):
        if pod["status"].get("phase") == "Running":
            cluster.kubectl("annotate", "pod", "-n", NAMESPACE, pod["metadata"]["name"], "--overwrite",
                            "kwok.x-k8s.io/run-for=0s")


def empty(cluster: Cluster) -> None:
    cluster.kubectl("delete", "jobs", "-n", NAMESPACE, "--all", "--cascade=foreground", "--wait=true")
    cluster.wait(lambda: not cluster.get("pods", "-n", NAMESPACE)["items"]
                 and not cluster.get("workloads", "-n", NAMESPACE)["items"], 120, every=0.2, message="queue empty")


def trial(cluster: Cluster, arm: str, run: int) -> dict:
    if arm != "room":
        fillers = [f"batch-{run}-{k}" for k in range(2)]
        for name in fillers:
            create(cluster, job(name, "batch", "1h"))
        cluster.wait(lambda: all(running_since(cluster, n) for n in fillers), 120, every=0.2,
                     message="the batch Jobs running")
    name = f"{arm.replace(' ', '-')}-{run}"
    created = create(cluster, job(name, "batch" if arm == "no priority" else "report", "1h"))
    if arm == "no priority":
        cluster.wait(lambda: time.time() >= created + HOLD, HOLD + 5, every=0.1, message="the hold")
        end(cluster, fillers[0])
    cluster.wait(lambda: running_since(cluster, name) and scheduled_at(cluster, name), 120 + HOLD, every=0.1,
                 message=f"{name} running")
    late = scheduled_at(cluster, name) - created
    preempted = sum(1 for w in cluster.get("workloads", "-n", NAMESPACE)["items"]
                    if any(c["type"] == "Preempted" and c["status"] == "True" for c in w["status"].get("conditions", [])))
    empty(cluster)
    return {"arm": arm, "run": run, "late": late, "preempted": preempted}


def main() -> None:
    arms = ["room", "priority", "no priority"]
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        with local_cluster(Path(tmp), [node_manifest("prio-node-1", 16, 0)]) as cluster:
            start_kueue(cluster)
            cluster.kubectl("create", "namespace", NAMESPACE)
            cluster.apply(*OBJECTS)
            cluster.wait(lambda: any(c["type"] == "Active" and c["status"] == "True" for c in
                                     cluster.get("clusterqueue", QUEUE).get("status", {}).get("conditions", [])),
                         60, every=0.2, message="ClusterQueue active")
            for run in range(RUNS):
                for arm in arms if run % 2 == 0 else list(reversed(arms)):
                    results.append(trial(cluster, arm, run))
    mean = {arm: statistics.mean(r["late"] for r in results if r["arm"] == arm) for arm in arms}
    rows = [[arm, RUNS, f"{mean[arm]:.2f}", f"{max(r['late'] for r in results if r['arm'] == arm):.2f}",
             str(sum(r["preempted"] for r in results if r["arm"] == arm))] for arm in arms]
    print(table(["8-CPU Job on a 16-CPU queue", "runs", "create -> pod bound, mean s", "max s",
                 "Workloads preempted"], rows))
    print(f"on a full queue with priority the Job's pod is bound {mean['priority']:.2f} s after its create against "
          f"{mean['room']:.2f} s on an empty queue (ratio {mean['priority'] / mean['room']:.2f}); without priority it "
          f"waits until a batch Job ends ({mean['no priority']:.2f} s here, where one ends after {HOLD} s)")
    print(f"written: {write('priority_start', {'runs': RUNS, 'hold': HOLD, 'results': results})}")


if __name__ == "__main__":
    with recorded("priority_start"):
        main()
