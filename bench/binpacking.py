"""Bin-packing on the local control plane: a stream of small pods followed by full-node pods,
through the default scheduler and through the packing scheduler (the configuration the
program generates), against a first-fit-decreasing optimum computed here."""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

from common import recorded, table, write
from config.models import PackingScheduler
from plan.schedulers import scheduler_configuration_yaml
from kns_testing.cluster import Cluster, local_cluster, node_manifest, script

SCENARIOS = {
    # name: (nodes, per-node capacity, resource, small pods, large pods)
    "cpu": (10, 16, "cpu", 64, 10),
    "gpu": (4, 8, "nvidia.com/gpu", 12, 4),
}


def ffd_optimum(capacity: int, nodes: int, small: int, large: int) -> tuple[int, int]:
    """Nodes the small pods need, packed first-fit-decreasing, and the large pods that then fit."""
    used = math.ceil(small / capacity)
    return used, min(large, nodes - used)


def pod(name: str, scheduler: str, resource: str, amount: int, gpu: bool) -> dict:
    spec = {"schedulerName": scheduler, "nodeSelector": {"bench": "gpu" if gpu else "cpu"},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {resource: str(amount)},
                                                                           "limits": {resource: str(amount)}}}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "bench"}, "spec": spec}


def run_stream(cluster: Cluster, scheduler: str, scenario: str) -> dict:
    nodes, capacity, resource, small, large = SCENARIOS[scenario]
    gpu = resource != "cpu"
    cluster.kubectl("delete", "pods", "--all", "-n", "bench", "--wait=true")
    for i in range(small):
        cluster.apply(pod(f"small-{i}", scheduler, resource, 1, gpu))
    cluster.wait(lambda: sum(1 for p in cluster.get("pods", "-n", "bench")["items"] if p["spec"].get("nodeName")) == small,
                 300, message=f"{small} small pods placed by {scheduler}")
    for i in range(large):
        cluster.apply(pod(f"large-{i}", scheduler, resource, capacity, gpu))
    time.sleep(15)  # let both schedulers try every large pod at least once
    pods = cluster.get("pods", "-n", "bench")["items"]
    small_nodes = {p["spec"]["nodeName"] for p in pods if p["metadata"]["name"].startswith("small") and p["spec"].get("nodeName")}
    large_placed = sum(1 for p in pods if p["metadata"]["name"].startswith("large") and p["spec"].get("nodeName"))
    return {"nodes_used": len(small_nodes), "large_placed": large_placed}


def main() -> None:
    manifests = []
    for scenario, (nodes, capacity, resource, _, _) in SCENARIOS.items():
        for n in range(nodes):
            node = node_manifest(f"{scenario}-node-{n}", capacity if resource == "cpu" else 64,
                                 capacity if resource != "cpu" else 0)
            node["metadata"]["labels"]["bench"] = scenario
            manifests.append(node)
    with tempfile.TemporaryDirectory() as tmp:
        with local_cluster(Path(tmp), manifests) as cluster:
            state = cluster.state
            cluster.kubectl("create", "namespace", "bench")
            config = state / "packing.yaml"
            config.write_text(scheduler_configuration_yaml(
                PackingScheduler(weights={"cpu": 1, "memory": 1, "nvidia.com/gpu": 5}), "kube-system"))
            script("scheduler-process.sh", str(state), str(config), timeout=300)
            rows, results = [], []
            for scenario, (nodes, capacity, _, small, large) in SCENARIOS.items():
                best_nodes, best_large = ffd_optimum(capacity, nodes, small, large)
                for scheduler in ("default-scheduler", "kns-packing"):
                    got = run_stream(cluster, scheduler, scenario)
                    results.append({"scenario": scenario, "scheduler": scheduler, **got,
                                    "optimum_nodes": best_nodes, "optimum_large": best_large})
                    rows.append([scenario, scheduler, got["nodes_used"], best_nodes,
                                 f"{got['nodes_used'] / best_nodes:.2f}", got["large_placed"], best_large,
                                 f"{got['large_placed'] / best_large:.2f}" if best_large else "-"])
    print(table(["stream", "scheduler", "nodes used", "optimum", "ratio", "large placed", "optimum", "ratio"], rows))
    print(f"written: {write('binpacking', {'results': results})}")


if __name__ == "__main__":
    with recorded("binpacking"):
        main()
