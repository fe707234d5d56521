"""Warm capacity on a real autoscaler: prescaled schedules on empty Karpenter pools, against
the same schedule without prescaling, in the same run (docs/benchmarks.md section 5).

The local control plane (scripts/cluster-up.sh) with Karpenter's kwok provider
(scripts/karpenter-process.sh). The NodePools and CronJobs are the program's own (planned
from a stack config by plan/), applied with kubectl; the CronJobs are suspended, and each
run is fired as the CronJob controller fires it (`kubectl create job --from=cronjob/...`,
named `<cronjob>-<minute>`), so all runs start on the same minute boundary. Each run has
its own empty pool, so no run finds a node another one warmed.

- prescaled: the primer Job fires `warmUpMinutes` before the start; measured from the
  API server's timestamps: fire -> node Ready, fire -> pod Running, and whether the pod
  was Running on its node before the start and finished no earlier than it;
- cold (no prescaling): the plain Job fires at the start; measured: start -> pod Running,
  the delay the workload waits for a node.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from common import ROOT, recorded, table, write
from config.loader import check_config
from kns_testing.cluster import Cluster, local_cluster, script
from plan.nodepools import nodepool_manifest
from plan.planner import plan_checked

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
WARM_UP = 1  # minutes
KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}


def config(runs: int) -> dict:
    pools, schedules = [], []
    for kind in ("warm", "cold"):
        for i in range(runs):
            name = f"{kind}-{i}"
            pools.append({"name": name, "role": "compute",
                          "taints": [{"key": "kns.io/bench", "value": name, "effect": "NoSchedule"}],
                          "autoscale": {"nodeClassRef": KWOK_CLASS, "consolidation": "WhenEmpty",
                                        "consolidateAfter": "30s", "limits": {"cpu": 16},
                                        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                          "values": ["on-demand"]}]}})
            schedule = {"name": name, "user": "bench", "image": "busybox:1.37", "cpu": 2, "memory": 2048,
                        "pool": name, "schedule": "0 3 * * *", "timeZone": "Etc/UTC", "suspend": True}
            if kind == "warm":
                schedule["warmUpMinutes"] = WARM_UP
            schedules.append(schedule)
    return {"cluster": {"name": "kns-bench", "renderDir": "build/manifests/bench"}, "nodePools": pools,
            "schedules": schedules, "packingScheduler": {"enabled": False}}


def stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def condition(obj: dict, kind: str) -> float | None:
    found = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind and c["status"] == "True"]
    return stamp(found[0]["lastTransitionTime"]) if found else None


def fire(cluster: Cluster, plans: list, minute: int) -> dict[str, str]:
    """Create each entry's Job from its (first) CronJob, named for `minute` as the controller names it."""
    jobs = {}
    for plan in plans:
        cron = next(iter(plan.objects.values()))
        name = f"{plan.entry.name}-{minute}"
        cluster.kubectl("create", "job", name, f"--from=cronjob/{cron['metadata']['name']}", "-n", plan.namespace)
        jobs[plan.entry.name] = name
    return jobs


def settled(cluster: Cluster, namespace: str) -> dict | None:
    pods = cluster.get("pods", "-n", namespace)["items"]
    return pods[0] if pods and pods[0]["status"].get("phase") == "Succeeded" else None


def main() -> None:
    checked = check_config(config(RUNS), project_dir=ROOT, environ={})
    plans = plan_checked(checked).entries
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        with local_cluster(Path(tmp)) as cluster:
            script("karpenter-process.sh", str(cluster.state), "--instance-types",
                   str(ROOT / "tests" / "fixtures" / "kwok-instance-types.json"), timeout=600)
            cluster.apply(*(nodepool_manifest(pool, "kns-bench") for pool in checked.config.node_pools))
            for plan in plans:
                cluster.kubectl("create", "namespace", plan.namespace)
                cluster.apply(*plan.objects.values())
            warm = [p for p in plans if p.primers is not None]
            cold = [p for p in plans if p.primers is None]
            # the primers fire at the next minute boundary; the starts (and the cold Jobs) one warm-up later
            primer_minute = int(time.time() // 60) + 1
            time.sleep(max(0.0, primer_minute * 60 - time.time()))
            fire(cluster, warm, primer_minute)
            start = (primer_minute + WARM_UP) * 60
            time.sleep(max(0.0, start - time.time()))
            fire(cluster, cold, primer_minute + WARM_UP)
            for plan in warm + cold:
                pod = cluster.wait(lambda ns=plan.namespace: settled(cluster, ns), 300, every=2,
                                   message=f"{plan.entry.name} finished")
                job = cluster.get("jobs", "-n", plan.namespace)["items"][0]
                node = cluster.get("node", pod["spec"]["nodeName"])
                fired = stamp(job["metadata"]["creationTimestamp"])
                running = condition(pod, "Ready")
                finished = max(stamp(s["state"]["terminated"]["finishedAt"]) for s in pod["status"]["containerStatuses"])
                results.append({
                    "entry": plan.entry.name, "prescaled": plan.primers is not None, "fired": fired,
                    "start": start, "node_ready_after_fire": condition(node, "Ready") - fired,
                    "running_after_fire": running - fired, "running_after_start": running - start,
                    "on_warm_node_at_start": running < start <= finished,
                })
    primed = [r for r in results if r["prescaled"]]
    plain = [r for r in results if not r["prescaled"]]
    rows = [[r["entry"], "yes" if r["prescaled"] else "no", f"{r['node_ready_after_fire']:.0f}",
             f"{r['running_after_fire']:.0f}", f"{r['running_after_start']:+.0f}",
             "yes" if r["on_warm_node_at_start"] else "no"] for r in results]
    print(table(["entry", "prescaled", "fire->node Ready s", "fire->pod Running s", "pod Running vs start s",
                 "on a warm node at start"], rows))
    on_time = sum(r["on_warm_node_at_start"] for r in primed)
    cold_delay = statistics.mean(r["running_after_start"] for r in plain)
    warm_used = statistics.mean(r["running_after_fire"] for r in primed) / (WARM_UP * 60)
    print(f"prescaled: workload on a warm node at its start time, {on_time} of {len(primed)} runs; "
          f"warm-up used: {warm_used:.2f} of {WARM_UP} min")
    print(f"without prescaling: the workload got a node {cold_delay:.1f} s after its start (mean of {len(plain)})")
    print(f"written: {write('autoscale_warmup', {'warm_up_minutes': WARM_UP, 'results': results})}")


if __name__ == "__main__":
    with recorded("autoscale_warmup"):
        main()
