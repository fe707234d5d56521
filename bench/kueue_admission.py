"""Admission through Kueue: what queueing a Job costs, against the same Job without a queue,
in the same run (docs/benchmarks.md section 6).

The local control plane (scripts/cluster-up.sh) with a few kwok nodes and Kueue's manager as
a process (scripts/kueue-process.sh, through kns_testing.kueue). One ResourceFlavor, one
ClusterQueue (all namespaces, quota for every Job of the run) and a LocalQueue in namespace
`bench-queued`; namespace `bench-plain` has no queue. Queued Jobs are created suspended with
the `kueue.x-k8s.io/queue-name` label, plain ones unsuspended without it; both request
100m CPU and 64Mi and their pods run for a few seconds (`kwok.x-k8s.io/run-for`).

- latency: Jobs one at a time, queued and plain alternately, each created once the pod of
  the one before exists; latency = pod creationTimestamp - Job creationTimestamp (the API
  server's, whole seconds). Each create starts at a random offset into the second, so the
  mean of the whole-second differences estimates the true mean without the rounding bias.
  Kueue's own events (microsecond eventTime) break the queued path down: Workload created ->
  admitted (QuotaReserved) -> Job started (unsuspended) -> pod Scheduled;
- throughput: a burst of N Jobs in one `kubectl create`, through the queue and without it,
  alternately, each burst on a quiet cluster (the one before finished): first Job created ->
  last pod created (whole seconds, same offsets), and, from microsecond events, how long
  Kueue took to admit the burst's Workloads and the scheduler to see its pods.

Every wait polls the objects it waits for; the only sleeps are the offsets above.
"""

from __future__ import annotations

import random
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

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30  # latency: Jobs per arm
BURST = int(sys.argv[2]) if len(sys.argv) > 2 else 50  # throughput: Jobs per burst
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3  # throughput: bursts per arm
NODES = 4  # kwok nodes of 16 CPU
RUN_FOR = "5s"
REQUESTS = {"cpu": "100m", "memory": "64Mi"}
QUEUED, PLAIN = "bench-queued", "bench-plain"
ARMS = {QUEUED: "queued", PLAIN: "plain"}
QUEUE = "bench"

# Kueue's API, v1beta2: every resource a pod requests must be a coveredResource of the
# ClusterQueue (else the Workload stays pending, "resource memory unavailable in
# ClusterQueue"); `pods` counts one per pod. Quota here: every Job of the run at once.
KUEUE_OBJECTS = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": QUEUE},
     "spec": {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
              "resourceGroups": [{"coveredResources": ["cpu", "memory", "pods"],
                                  "flavors": [{"name": "default", "resources": [
                                      {"name": "cpu", "nominalQuota": "64"},
                                      {"name": "memory", "nominalQuota": "256Gi"},
                                      {"name": "pods", "nominalQuota": "1000"}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": QUEUED},
     "spec": {"clusterQueue": QUEUE}},
]


def job(name: str, namespace: str, group: str) -> dict:
    queued = namespace == QUEUED
    metadata = {"name": name, "namespace": namespace, "labels": {"kns.io/bench": group}}
    if queued:
        metadata["labels"]["kueue.x-k8s.io/queue-name"] = QUEUE
    pod = {"metadata": {"labels": {"kns.io/bench": group}, "annotations": {"kwok.x-k8s.io/run-for": RUN_FOR}},
           "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "work", "image": "busybox:1.37", "resources": {"requests": REQUESTS}}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"suspend": queued, "backoffLimit": 0, "template": pod}}


def stamp(text: str) -> float:
    """An API timestamp (creationTimestamp, or an event's microsecond eventTime) in seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def items(cluster: Cluster, kind: str, namespace: str, group: str | None = None) -> list[dict]:
    selector = ["-l", f"kns.io/bench={group}"] if group else []
    return cluster.get(kind, "-n", namespace, *selector)["items"]


def create(cluster: Cluster, *jobs: dict) -> None:
    cluster.kubectl("create", "-f", "-", input="\n---\n".join(yaml.safe_dump(j) for j in jobs))


def first_pods(cluster: Cluster, namespace: str, group: str) -> dict[str, float]:
    """Job name -> creation of its first pod."""
    created: dict[str, float] = {}
    for pod in items(cluster, "pods", namespace, group):
        name = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        created[name] = min(created.get(name, float("inf")), stamp(pod["metadata"]["creationTimestamp"]))
    return created


def ready(cluster: Cluster) -> bool:
    cq = cluster.get("clusterqueue", QUEUE)
    lq = cluster.get("localqueue", QUEUE, "-n", QUEUED)
    active = lambda obj: any(c["type"] == "Active" and c["status"] == "True"  # noqa: E731
                             for c in obj.get("status", {}).get("conditions", []))
    return active(cq) and active(lq)


def latency(cluster: Cluster) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {QUEUED: [], PLAIN: []}
    for i in range(RUNS):
        for namespace in (QUEUED, PLAIN) if i % 2 == 0 else (PLAIN, QUEUED):
            name = f"latency-{i}"
            time.sleep(random.random())  # a random offset into the second: see the module docstring
            create(cluster, job(name, namespace, "latency"))
            cluster.wait(lambda ns=namespace, n=name: n in first_pods(cluster, ns, "latency"), 120, every=0.1,
                         message=f"a pod of {namespace}/{name}")
    for namespace in (QUEUED, PLAIN):
        pods = first_pods(cluster, namespace, "latency")
        events = cluster.get("events", "-n", namespace)["items"]
        workloads = {w["metadata"]["name"]: w["metadata"]["ownerReferences"][0]["name"]
                     for w in cluster.get("workloads", "-n", namespace)["items"]} if namespace == QUEUED else {}
        fine: dict[tuple[str, str], float] = {}  # (job, reason) -> eventTime, for events that carry one
        for e in events:
            if not e.get("eventTime"):
                continue
            obj = e["involvedObject"]
            owner = {"Job": obj["name"], "Workload": workloads.get(obj["name"]),
                     "Pod": obj["name"].rsplit("-", 1)[0]}.get(obj["kind"])
            if owner:
                key = (owner, e["reason"])
                fine[key] = min(fine.get(key, float("inf")), stamp(e["eventTime"]))
        for j in items(cluster, "jobs", namespace, "latency"):
            name = j["metadata"]["name"]
            row = {"job": name, "seconds": pods[name] - stamp(j["metadata"]["creationTimestamp"])}
            steps = [fine.get((name, reason)) for reason in ("CreatedWorkload", "QuotaReserved", "Started", "Scheduled")]
            if namespace == QUEUED and None not in steps:  # events are best effort: one may be missing
                created, admitted, started, scheduled = steps
                row.update(workload_to_admitted=admitted - created, admitted_to_started=started - admitted,
                           started_to_scheduled=scheduled - started, workload_to_scheduled=scheduled - created)
            results[namespace].append(row)
    return results


def burst(cluster: Cluster, namespace: str, group: str) -> dict:
    time.sleep(random.random())  # a random offset into the second: see the module docstring
    create(cluster, *(job(f"{group}-{k}", namespace, group) for k in range(BURST)))
    cluster.wait(lambda: len(first_pods(cluster, namespace, group)) == BURST, 600, every=0.2,
                 message=f"a pod for each of the {BURST} Jobs of {group}")
    pods = first_pods(cluster, namespace, group)
    # The burst's pods are <job>-<suffix>, its Workloads job-<job>-<suffix>.
    events = [e for e in cluster.get("events", "-n", namespace)["items"]
              if e.get("eventTime") and e["involvedObject"]["name"].startswith((f"{group}-", f"job-{group}-"))]
    scheduled = [stamp(e["eventTime"]) for e in events if e["reason"] == "Scheduled"]
    admitted = [stamp(e["eventTime"]) for e in events if e["reason"] == "QuotaReserved"]
    jobs = [stamp(j["metadata"]["creationTimestamp"]) for j in items(cluster, "jobs", namespace, group)]
    # The next burst starts on a quiet cluster: every Job of this one finished.
    done = lambda: all(any(c["type"] == "Complete" and c["status"] == "True"  # noqa: E731
                           for c in j.get("status", {}).get("conditions", []))
                       for j in items(cluster, "jobs", namespace, group))
    cluster.wait(done, 600, every=0.5, message=f"the {BURST} Jobs of {group} complete")
    return {"burst": group, "arm": ARMS[namespace], "jobs_created_over": max(jobs) - min(jobs),
            "first_job_to_last_pod": max(pods.values()) - min(jobs),
            "first_to_last_pod_scheduled": max(scheduled) - min(scheduled),
            "first_to_last_admitted": max(admitted) - min(admitted) if admitted else None}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with local_cluster(Path(tmp), [node_manifest(f"kueue-node-{n}", 16, 0) for n in range(NODES)]) as cluster:
            start_kueue(cluster)
            for namespace in (QUEUED, PLAIN):
                cluster.kubectl("create", "namespace", namespace)
            cluster.apply(*KUEUE_OBJECTS)
            cluster.wait(lambda: ready(cluster), 60, every=0.2, message="ClusterQueue and LocalQueue active")
            lat = latency(cluster)
            bursts = []
            for r in range(ROUNDS):
                for namespace in (QUEUED, PLAIN) if r % 2 == 0 else (PLAIN, QUEUED):
                    bursts.append(burst(cluster, namespace, f"burst-{ARMS[namespace]}-{r}"))

    queued, plain = lat[QUEUED], lat[PLAIN]
    mean = lambda rows, key: statistics.mean(r[key] for r in rows)  # noqa: E731
    rows = [[ARMS[ns], len(lat[ns]), f"{mean(lat[ns], 'seconds'):.2f}",
             f"{min(r['seconds'] for r in lat[ns]):.0f}", f"{max(r['seconds'] for r in lat[ns]):.0f}"]
            for ns in (QUEUED, PLAIN)]
    print(table(["Job", "runs", "created -> pod created, mean s", "min s", "max s"], rows))
    extra = mean(queued, "seconds") - mean(plain, "seconds")
    print(f"queueing adds {extra:.2f} s per Job (server timestamps, whole seconds, mean of {RUNS} each)")
    steps = ["workload_to_admitted", "admitted_to_started", "started_to_scheduled", "workload_to_scheduled"]
    broken_down = [r for r in queued if "workload_to_scheduled" in r]
    print(table([f"queued path, Kueue's events ({len(broken_down)} Jobs)", "mean ms", "max ms"],
                [[s.replace("_to_", " -> ").replace("_", " "), f"{1000 * mean(broken_down, s):.0f}",
                  f"{1000 * max(r[s] for r in broken_down):.0f}"] for s in steps]))
    print()
    print(table(["burst", "Jobs", "Jobs created over s", "first Job -> last pod created s",
                 "first -> last Workload admitted ms", "first -> last pod Scheduled ms"],
                [[b["burst"], BURST, f"{b['jobs_created_over']:.0f}", f"{b['first_job_to_last_pod']:.0f}",
                  "-" if b["first_to_last_admitted"] is None else f"{1000 * b['first_to_last_admitted']:.0f}",
                  f"{1000 * b['first_to_last_pod_scheduled']:.0f}"] for b in bursts]))
    arm = lambda name, key: statistics.mean(b[key] for b in bursts if b["arm"] == name)  # noqa: E731
    q, p = arm("queued", "first_job_to_last_pod"), arm("plain", "first_job_to_last_pod")
    qs, ps = arm("queued", "first_to_last_pod_scheduled"), arm("plain", "first_to_last_pod_scheduled")
    ratio = f"{q / p:.2f}" if p else "n/a (plain under a second)"
    print(f"burst of {BURST}: last pod created {q:.1f} s after the first Job through Kueue, {p:.1f} s without "
          f"(mean of {ROUNDS}): ratio {ratio}; pods scheduled over {1000 * qs:.0f} ms against {1000 * ps:.0f} ms "
          f"(ratio {qs / ps:.2f}); Kueue admitted each burst's Workloads over "
          f"{1000 * arm('queued', 'first_to_last_admitted'):.0f} ms")
    print(f"written: {write('kueue_admission', {'runs': RUNS, 'burst': BURST, 'rounds': ROUNDS, 'latency': {ARMS[ns]: lat[ns] for ns in lat}, 'bursts': bursts})}")


if __name__ == "__main__":
    with recorded("kueue_admission"):
        main()
