"""A budget's count over many Workloads against `kubectl get workloads -A -o json` of the
same objects, in the same run (docs/benchmarks.md section 16). Target: the count costs at
most twice the listing, at 10,000 Workloads.

The local control plane (scripts/cluster-up.sh) with only Kueue's CRDs applied (from
`KNS_BUILD_KUEUE=1 scripts/cluster-build.sh`'s share/kueue/crds): no Kueue manager and no
pods, the Workloads are objects only. Four ClusterQueues, two of them the budget's, and N
Workloads spread over five namespaces and the four queues, each created and then given a
status through the status subresource that makes it look admitted the way Kueue admits
one (`status.admission` with `resourceUsage` of `cpu`, `memory` and `nvidia.com/gpu`,
`QuotaReserved` and `Admitted` True), a third of them Finished; each carries a pod template
like a Job's, so the list is as large as a real one.

The counter runs as its CronJob's pod runs it: `python -m plan.budget_counter` with
`KNS_BUDGET`, the API server as `KUBERNETES_SERVICE_HOST`/`PORT` and a service-account
directory (token and CA) of a ServiceAccount bound to the budget's least privilege (list
Workloads; get and apply its own ClusterQueues; its ledger ConfigMap; events). Each run
lists every Workload, counts, writes the ledger (about 1 MB here) and applies its queues.
One warm-up run of each arm first (the counter's writes the ledger the later runs read,
as every run but a period's first does; kubectl's fills its discovery cache). The arms then
take turns, the order swapped every round, and the ratio is taken pair by pair: its median
is the result. Times are wall seconds of the whole process; beside them the CPU seconds
and peak memory of the client process alone (the API server's own work is in the wall time
only).

    cd bench && ../.venv/bin/python budget_count.py [workloads] [--rounds N]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlparse

import yaml

from common import ROOT, recorded, table, write
from kns_testing.cluster import Cluster, local_cluster, script

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
NAMESPACES = [f"team-{n}" for n in range(5)]
BUDGET_QUEUES = ["physics-a", "physics-b"]
QUEUES = [*BUDGET_QUEUES, "chemistry", "biology"]
BUDGET_NS = "kns-budget-physics"
ACCOUNT = "kns-budget-physics"
SPEC = {"name": "physics", "namespace": BUDGET_NS, "queues": BUDGET_QUEUES,
        "limits": {"nvidia.com/gpu": 500000.0, "cpu": 5000000.0},
        "period": {"reset": "0 0 1 * *", "zone": "Etc/UTC"}, "atLimit": "hold", "warnAt": [50, 80, 100]}
WORKERS = 16  # parallel requests while creating the Workloads


def crds(bin_dir: str) -> Path:
    """Kueue's CRDs beside the bin dir, built on first use."""
    folder = Path(bin_dir).parent / "share" / "kueue" / "crds"
    if not folder.is_dir():
        os.environ["KNS_BUILD_KUEUE"] = "1"
        folder = Path(script("cluster-build.sh")).parent / "share" / "kueue" / "crds"
    return folder


def cluster_queue(name: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": "10000"}, {"name": "memory", "nominalQuota": "100Ti"},
                    {"name": "nvidia.com/gpu", "nominalQuota": "1000"}]}]}]}}


def least_privilege() -> list[dict]:
    """The budget's ServiceAccount and what its counter calls: list every Workload, get and
    apply its own ClusterQueues, get, apply and create its ledger (by name), create events in
    `default` (a ClusterQueue's), as plan/budgets.py grants them."""
    def role(kind: str, namespace: str | None, rules: list[dict]) -> list[dict]:
        meta = {"name": ACCOUNT, **({"namespace": namespace} if namespace else {})}
        return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": meta,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": ACCOUNT},
                 "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": BUDGET_NS}]}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": BUDGET_NS}},
        *role("ClusterRole", None, [
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "patch"],
             "resourceNames": BUDGET_QUEUES}]),
        *role("Role", BUDGET_NS, [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch", "create"],
             "resourceNames": ["ledger"]}]),
        *role("Role", "default", [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]),
    ]


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def workload(i: int, now: datetime, rng: random.Random) -> tuple[dict, dict]:
    """Workload i, and the status that makes it admitted (a third of them Finished since)."""
    gpus, cpu, pods = rng.choice([0, 1, 2, 4, 8]), rng.choice([1, 2, 4, 8, 16]), rng.choice([1, 1, 1, 2, 4])
    queue = QUEUES[i % len(QUEUES)]
    requests = {"cpu": str(cpu), "memory": f"{4 * cpu}Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    container = {"name": "main", "image": "registry.example.com/research/train:2026.11", "imagePullPolicy": "IfNotPresent",
                 "command": ["python", "-m", "train", f"--run={i}"], "env": [{"name": "RUN", "value": str(i)}],
                 "resources": {"requests": requests, "limits": requests},
                 "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                     "capabilities": {"drop": ["ALL"]}}}
    template = {"metadata": {"labels": {"kns.io/job": f"run-{i}"}},
                "spec": {"restartPolicy": "Never", "containers": [container],
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-run-{i}", "namespace": NAMESPACES[i % len(NAMESPACES)],
                         "labels": {"kueue.x-k8s.io/job-uid": f"{i:08d}", "kns.io/bench": "budget"}},
            "spec": {"queueName": queue, "priority": 0, "active": True,
                     "podSets": [{"name": "main", "count": pods, "template": template}]}}
    admitted = now - timedelta(seconds=rng.randrange(60, 36 * 3600))
    usage = {"cpu": str(cpu * pods), "memory": f"{4 * cpu * pods}Gi", **({"nvidia.com/gpu": str(gpus * pods)} if gpus else {})}
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": f"Quota reserved in ClusterQueue {queue}",
         "lastTransitionTime": stamp(admitted)},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted",
         "lastTransitionTime": stamp(admitted)}]
    if i % 3 == 0:
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully",
                           "lastTransitionTime": stamp(min(now, admitted + timedelta(seconds=rng.randrange(60, 7200))))})
    status = {"status": {"conditions": conditions, "admission": {"clusterQueue": queue, "podSetAssignments": [
        {"name": "main", "count": pods, "flavors": {r: "default" for r in requests}, "resourceUsage": usage}]}}}
    return body, status


class Client:
    """Requests as the admin, one keep-alive connection per thread."""

    def __init__(self, kubeconfig: Path):
        config = yaml.safe_load(kubeconfig.read_text())
        url = urlparse(config["clusters"][0]["cluster"]["server"])
        self.host, self.port = url.hostname, url.port
        self.ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        self.token = config["users"][0]["user"]["token"]
        self.context = ssl.create_default_context(cadata=self.ca)

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)

    def send(self, connection: http.client.HTTPSConnection, method: str, path: str, body: dict, kind: str) -> None:
        connection.request(method, path, json.dumps(body), {"Authorization": f"Bearer {self.token}",
                                                            "Content-Type": kind, "Accept": "application/json"})
        response = connection.getresponse()
        answer = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {answer[:400]!r}")


def create_workloads(client: Client, count: int, now: datetime) -> float:
    """Create `count` admitted Workloads in parallel; seconds taken."""
    rng = random.Random(20261201)
    made = [workload(i, now, rng) for i in range(count)]
    shares = [made[k::WORKERS] for k in range(WORKERS)]

    def create(share: list[tuple[dict, dict]]) -> None:
        connection = client.connection()
        for body, status in share:
            meta = body["metadata"]
            client.send(connection, "POST", f"{KUEUE}/namespaces/{meta['namespace']}/workloads", body, "application/json")
            client.send(connection, "PATCH", f"{KUEUE}/namespaces/{meta['namespace']}/workloads/{meta['name']}/status",
                        status, "application/merge-patch+json")
        connection.close()
    started = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(create, shares))
    return time.perf_counter() - started


def service_account_dir(cluster: Cluster, client: Client, where: Path) -> Path:
    """What the pod's service-account mount holds: the ServiceAccount's token and the CA."""
    where.mkdir(parents=True, exist_ok=True)
    token = cluster.kubectl("create", "token", ACCOUNT, "-n", BUDGET_NS, "--duration=2h").stdout.strip()
    (where / "token").write_text(token)
    (where / "ca.crt").write_text(client.ca)
    return where


def timed(command: list[str], env: dict[str, str], keep: bool) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds and peak MiB of the process of a command that must
    succeed (its own rusage, through wait4: the counter's pod has a memory limit); its
    output when `keep`, else thrown away as `> /dev/null` does."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out if keep else subprocess.DEVNULL, stderr=err)
        _, code, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(code)
        out.seek(0)
        err.seek(0)
        said = out.read()
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}): {said[-2000:]}{err.read()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, said


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md's table row, from a results file."""
    median, runs = payload["median"], payload["runs"]
    ratios = [run["ratio"] for run in runs]
    return [f"| {payload['workloads']:,} | {payload['in_budget']:,} | {payload['ledger_bytes'] // 1024:,} | "
            f"{payload['rounds']} | {median['counter']:.2f} | {median['kubectl']:.2f} | **{median['ratio']:.2f}** | "
            f"{min(ratios):.2f} to {max(ratios):.2f} | {median['counter_cpu']:.2f} | {median['kubectl_cpu']:.2f} | "
            f"{median['counter_mib']:.0f} | {median['kubectl_mib']:.0f} |"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="?", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    bin_dir = script("cluster-build.sh")
    crd_dir = crds(bin_dir)
    with tempfile.TemporaryDirectory() as tmp, local_cluster(Path(tmp) / "cluster") as cluster:
        cluster.kubectl("apply", "--server-side", "-f", str(crd_dir))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=120s", "crd", "--all")
        cluster.apply(*[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in [*NAMESPACES, BUDGET_NS]])
        cluster.wait(lambda: cluster.kubectl("get", "clusterqueues", check=False).returncode == 0, 60,
                     message="the ClusterQueue API served")
        cluster.apply(*[cluster_queue(q) for q in QUEUES], *least_privilege())
        client = Client(cluster.kubeconfig)
        now = datetime.now(timezone.utc)
        created = create_workloads(client, options.workloads, now)
        listed = len(cluster.get("workloads", "-A")["items"])
        assert listed == options.workloads, f"{listed} Workloads listed, {options.workloads} created"
        print(f"{options.workloads} Workloads created in {created:.0f} s", flush=True)
        port = urlparse(yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]).port
        counter_env = {"PATH": os.environ["PATH"], "KNS_BUDGET": json.dumps(SPEC),
                       "KNS_SERVICE_ACCOUNT_DIR": str(service_account_dir(cluster, client, Path(tmp) / "serviceaccount")),
                       "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port)}
        arms = {"counter": ([sys.executable, "-m", "plan.budget_counter"], counter_env, True),
                "kubectl": (["kubectl", "get", "workloads", "-A", "-o", "json"], cluster.env, False)}
        warm = {name: timed(*arm) for name, arm in arms.items()}
        print(f"warm-up: {', '.join(f'{n} {w[0]:.2f} s' for n, w in warm.items())}; counter said: {warm['counter'][3].strip()[:300]}",
              flush=True)
        ledger = json.loads(cluster.get("configmap", "ledger", "-n", BUDGET_NS)["data"]["ledger.json"])
        in_budget = sum(1 for i in range(options.workloads) if QUEUES[i % len(QUEUES)] in BUDGET_QUEUES)
        entries = len(ledger["open"]) + len(ledger["closed"])
        assert entries == in_budget, f"the ledger has {entries} admissions, the budget's queues {in_budget}"
        ledger_bytes = len(json.dumps(ledger, sort_keys=True))
        runs: list[dict] = []
        for round_ in range(options.rounds):
            order = list(arms) if round_ % 2 == 0 else list(reversed(arms))
            run = {"round": round_, "order": order}
            for name in order:
                run[name], run[f"{name}_cpu"], run[f"{name}_mib"], _ = timed(*arms[name])
            run["ratio"] = run["counter"] / run["kubectl"]
            runs.append(run)
            print(f"round {round_}: counter {run['counter']:.2f} s, kubectl {run['kubectl']:.2f} s, ratio {run['ratio']:.2f}", flush=True)
    keys = ("counter", "kubectl", "counter_cpu", "kubectl_cpu", "counter_mib", "kubectl_mib", "ratio")
    median = {key: statistics.median(r[key] for r in runs) for key in keys}
    met = median["ratio"] <= 2
    print(table(["Workloads", "rounds", "counter s", "kubectl s", "ratio (median of pairs)", "min", "max",
                 "counter CPU s", "kubectl CPU s", "counter MiB", "kubectl MiB"],
                [[options.workloads, options.rounds, f"{median['counter']:.2f}", f"{median['kubectl']:.2f}",
                  f"{median['ratio']:.2f}", f"{min(r['ratio'] for r in runs):.2f}", f"{max(r['ratio'] for r in runs):.2f}",
                  f"{median['counter_cpu']:.2f}", f"{median['kubectl_cpu']:.2f}", f"{median['counter_mib']:.0f}",
                  f"{median['kubectl_mib']:.0f}"]]))
    print(f"target (count at most 2x the listing): {'met' if met else 'NOT met'}, {median['ratio']:.2f}")
    print(f"written: {write('budget_count', {'workloads': options.workloads, 'in_budget': in_budget, 'ledger_bytes': ledger_bytes, 'created_seconds': created, 'rounds': options.rounds, 'median': median, 'met': met, 'runs': runs}, keep=True)}")


if __name__ == "__main__":
    with recorded("budget_count"):
        main()
