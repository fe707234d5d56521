"""A MultiKueue site on this machine, for tests and benchmarks: a manager control plane and
worker control planes (scripts/cluster-up.sh each: etcd, kube-apiserver, controller-manager,
scheduler, kwok on loopback ports), Kueue's manager as a process against each
(scripts/kueue-process.sh), the manager's configured for MultiKueue, and the objects that
connect them, written by hand (no Pulumi). docs/multicluster-notes.md has the facts behind
every object here (Kueue v0.19.2) and what a smoke run (kns_testing/multikueue_smoke.py)
showed.

    with multikueue_site(tmp, {"w1": [node_manifest("w1-node", 8, 0)], "w2": [...]}) as site:
        site.connect()                      # Secret, MultiKueueCluster per worker, config, check
        site.queues(cpu={"w1": 4, "w2": 4})  # ClusterQueue/LocalQueue pair on every side
        site.manager.apply(job)             # a Job with the queue label, dispatched to a worker

Everything started is stopped on exit (scripts/cluster-down.sh for each state dir), also
after a failure half way through the start.
"""

from __future__ import annotations

import base64
import os
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

import yaml

from config.multikueue import kubeconfig_problems
from plan import kueue_install
from plan.multikueue import CONTROLLER, KUEUE_NAMESPACE, SECRET_KEY, WORKER_RULES
from plan.queues import API_VERSION

from .cluster import Cluster, local_cluster, script

KUEUE_API = API_VERSION
# Kueue's namespace (where it reads MultiKueueCluster Secrets: scripts/kueue-process.sh sets
# its Configuration's `namespace` to it, outside a pod Kueue has no service-account
# namespace file to fall back on), the Secret key it reads, the check's controller and the
# identity's rules: the program's (plan/multikueue.py).
MULTIKUEUE_CONTROLLER = CONTROLLER
# The identity the manager uses on a worker (identity="serviceaccount") when the site is
# connected by hand: a bound token of this ServiceAccount, with WORKER_RULES only.
WORKER_SA = "multikueue"


# ---- the manager-side objects (plain manifests) -----------------------------------------------


def kubeconfig_secret(name: str, kubeconfig: str, namespace: str = KUEUE_NAMESPACE) -> dict:
    """The Secret a MultiKueueCluster names: the worker's kubeconfig under key `kubeconfig`,
    in Kueue's own namespace."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {SECRET_KEY: base64.b64encode(kubeconfig.encode()).decode()}}


def multikueue_cluster(name: str, secret: str) -> dict:
    """v1beta2 shape: spec.clusterSource.kubeConfig (v1beta1 had spec.kubeConfig)."""
    return {"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}}


def multikueue_config(name: str, clusters: Sequence[str]) -> dict:
    return {"apiVersion": KUEUE_API, "kind": "MultiKueueConfig", "metadata": {"name": name},
            "spec": {"clusters": list(clusters)}}


def admission_check(name: str, config: str) -> dict:
    return {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config}}}


def resource_flavor(name: str) -> dict:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(name: str, flavor: str, cpu: int, memory_gi: int, checks: Sequence[str] = ()) -> dict:
    spec: dict = {"namespaceSelector": {},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                      {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu},
                                                     {"name": "memory", "nominalQuota": f"{memory_gi}Gi"}]}]}]}
    if checks:
        # v1beta2 has no spec.admissionChecks list: the strategy (onFlavors empty = all).
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check} for check in checks]}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cluster_queue_name: str) -> dict:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue_name}}


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def queued_job(name: str, namespace_name: str, queue: str, cpu: str = "1", run_for: Optional[str] = None) -> dict:
    """A batch Job with the queue label, one pod; kwok completes it at once or, with
    `run_for` (a Go duration), that long after it runs (scripts/kwok/pod-complete-after.yaml)."""
    meta: dict = {}
    if run_for is not None:
        meta["annotations"] = {"kwok.x-k8s.io/run-for": run_for}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace_name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 0, "template": {
                "metadata": meta,
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}}


# ---- kubeconfigs Kueue accepts ------------------------------------------------------------------


def flat_kubeconfig(cluster: Cluster) -> str:
    """The cluster's admin kubeconfig as one self-contained document (`kubectl config view
    --raw --flatten --minify`: certificate data embedded, only the current context)."""
    return cluster.kubectl("config", "view", "--raw", "--flatten", "--minify").stdout


def serviceaccount_kubeconfig(worker: Cluster, duration: str = "24h") -> str:
    """A kubeconfig for a ServiceAccount of the worker (WORKER_SA in kueue-system) bound to
    WORKER_RULES only: the admin kubeconfig's server and CA data with a bound token
    (`kubectl create token`), the way a real worker would be connected."""
    worker.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": WORKER_SA, "namespace": KUEUE_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{WORKER_SA}-worker"},
         "rules": WORKER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{WORKER_SA}-worker"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{WORKER_SA}-worker"},
         "subjects": [{"kind": "ServiceAccount", "name": WORKER_SA, "namespace": KUEUE_NAMESPACE}]})
    token = worker.kubectl("create", "token", WORKER_SA, "-n", KUEUE_NAMESPACE, f"--duration={duration}").stdout.strip()
    admin = yaml.safe_load(flat_kubeconfig(worker))
    (entry,) = admin["clusters"]
    config = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": entry["name"], "cluster": {"server": entry["cluster"]["server"],
                            "certificate-authority-data": entry["cluster"]["certificate-authority-data"]}}],
              "users": [{"name": WORKER_SA, "user": {"token": token}}],
              "contexts": [{"name": "multikueue", "context": {"cluster": entry["name"], "user": WORKER_SA}}],
              "current-context": "multikueue"}
    return yaml.safe_dump(config, sort_keys=False)


# ---- the site ------------------------------------------------------------------------------------


@dataclass
class MultiKueueSettings:
    """The manager's Configuration.multiKueue (apis/config/v1beta2/configuration_types.go;
    defaults gcInterval 1m, origin "multikueue", workerLostTimeout 15m)."""
    gc_interval: str = "30s"
    origin: str = "kns-multikueue"
    worker_lost_timeout: str = "60s"

    def config_extra(self) -> dict:
        return {"multiKueue": {"gcInterval": self.gc_interval, "origin": self.origin,
                               "workerLostTimeout": self.worker_lost_timeout}}


@dataclass
class Site:
    manager: Cluster
    workers: dict[str, Cluster]
    # Per worker: the kubeconfig the manager's Kueue uses to reach it (self-contained).
    kubeconfigs: dict[str, str]
    settings: MultiKueueSettings
    timings: dict[str, float] = field(default_factory=dict)
    check: str = "multikueue"
    config_name: str = "multikueue"

    def connect(self, order: Optional[Sequence[str]] = None, timeout: float = 180) -> dict[str, float]:
        """The manager-side objects: per worker a kubeconfig Secret (in kueue-system) and a
        MultiKueueCluster; one MultiKueueConfig listing them; one AdmissionCheck. Returns when
        every MultiKueueCluster is Active and the AdmissionCheck Active; the seconds each took."""
        names = list(order or self.workers)
        started = time.monotonic()
        docs = []
        for name in names:
            docs += [kubeconfig_secret(f"{name}-kubeconfig", self.kubeconfigs[name]),
                     multikueue_cluster(name, f"{name}-kubeconfig")]
        docs += [multikueue_config(self.config_name, names), admission_check(self.check, self.config_name)]
        self.manager.apply(*docs)
        took = {}
        for kind, name in [*(("multikueuecluster", n) for n in names), ("admissioncheck", self.check)]:
            self._wait_active(kind, name, timeout)
            took[f"{kind} {name} Active"] = time.monotonic() - started
        return took

    def _wait_active(self, kind: str, name: str, timeout: float) -> None:
        try:
            self.manager.wait(lambda: is_true(self.manager.get(kind, name), "Active"), timeout,
                              message=f"{kind} {name} Active")
        except AssertionError as error:
            done = self.manager.kubectl("get", kind, name, "-o", "jsonpath={.status.conditions}", check=False)
            raise AssertionError(f"{error}; its conditions: {done.stdout or done.stderr}") from None

    def queues(self, namespace_name: str = "mk", queue: str = "mk", cpu: Mapping[str, int] | None = None,
               manager_cpu: Optional[int] = None, timeout: float = 120) -> None:
        """A ResourceFlavor, a ClusterQueue `queue` and a LocalQueue `queue` in `namespace_name`
        on every worker (cpu[worker] CPUs, 4 each by default) and on the manager (the sum of
        the workers' unless `manager_cpu`, with the MultiKueue AdmissionCheck), the namespace
        created on all sides (MultiKueue creates Jobs in the same namespace, with the same
        queue name, and makes neither). Returns when every ClusterQueue is Active."""
        cpu = dict(cpu or {name: 4 for name in self.workers})
        for name, worker in self.workers.items():
            worker.apply(namespace(namespace_name), resource_flavor("default"),
                         cluster_queue(queue, "default", cpu[name], 4 * cpu[name]),
                         local_queue(namespace_name, queue, queue))
        total = manager_cpu if manager_cpu is not None else sum(cpu.values())
        self.manager.apply(namespace(namespace_name), resource_flavor("default"),
                           cluster_queue(queue, "default", total, 4 * total, [self.check]),
                           local_queue(namespace_name, queue, queue))
        for name, live in [("manager", self.manager), *self.workers.items()]:
            live.wait(lambda: is_true(live.get("clusterqueue", queue), "Active"), timeout,
                      message=f"ClusterQueue {queue} Active on {name}")


def is_true(obj: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def condition(obj: dict, kind: str) -> Optional[dict]:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c["type"] == kind:
            return c
    return None


def start_kueue_process(cluster: Cluster, config_extra: Optional[dict] = None) -> None:
    """scripts/kueue-process.sh against the cluster (batch/job), with Configuration fields
    added (--config-extra) for the manager; Kueue is built first if missing (cached)."""
    previous = os.environ.get("KNS_BUILD_KUEUE")
    os.environ["KNS_BUILD_KUEUE"] = "1"
    try:
        script("cluster-build.sh")
    finally:
        if previous is None:
            del os.environ["KNS_BUILD_KUEUE"]
        else:
            os.environ["KNS_BUILD_KUEUE"] = previous
    args = [str(cluster.state), "--frameworks", "batch/job"]
    if config_extra:
        extra = cluster.state / "kueue-config-extra.yaml"
        extra.write_text(yaml.safe_dump(config_extra, sort_keys=False))
        args += ["--config-extra", str(extra)]
    script("kueue-process.sh", *args, timeout=600)


@contextmanager
def multikueue_site(state_dir: Path, workers: Mapping[str, Sequence[dict]], manager_nodes: Sequence[dict] = (),
                    settings: Optional[MultiKueueSettings] = None, identity: str = "serviceaccount",
                    report=print, manager_configuration: Optional[Mapping[str, Any]] = None) -> Iterator[Site]:
    """A manager and `workers` (name -> kwok node manifests), each a local control plane in
    state_dir/<name> with Kueue running; the manager's Kueue with `settings` as its
    Configuration.multiKueue. `identity` is what the manager uses on the workers:
    "serviceaccount" (a bound token of a ServiceAccount with MultiKueue's rules only) or
    "admin" (the worker's admin kubeconfig, flattened). Nothing manager-side is written yet:
    Site.connect and Site.queues do that. Every cluster is stopped on exit, however far the
    start got; `report` gets the start's timings.

    `manager_configuration`: Kueue's Configuration as the program renders it for the
    manager (kns_testing/kueue.py `program_configuration`); the manager's Kueue then runs
    every field the program owns from it (plan/kueue_install.py OWNED_FIELDS, `multiKueue`
    among them) instead of `settings`."""
    settings = settings or MultiKueueSettings()
    state_dir = Path(state_dir)
    timings: dict[str, float] = {}
    started = time.monotonic()
    stopping: list[float] = []
    try:
        with ExitStack() as stack:
            def up(name: str, nodes: Sequence[dict], extra: Optional[dict]) -> Cluster:
                t0 = time.monotonic()
                live = stack.enter_context(local_cluster(state_dir / name, nodes))
                timings[f"{name} control plane"] = time.monotonic() - t0
                t0 = time.monotonic()
                start_kueue_process(live, extra)
                timings[f"{name} kueue"] = time.monotonic() - t0
                return live

            if manager_configuration is not None:
                extra = {key: manager_configuration[key] for key in kueue_install.OWNED_FIELDS
                         if key in manager_configuration}
            else:
                extra = settings.config_extra()
            manager = up("manager", manager_nodes, extra)
            live_workers = {name: up(name, nodes, None) for name, nodes in workers.items()}
            t0 = time.monotonic()
            if identity == "serviceaccount":
                kubeconfigs = {name: serviceaccount_kubeconfig(w) for name, w in live_workers.items()}
            elif identity == "admin":
                kubeconfigs = {name: flat_kubeconfig(w) for name, w in live_workers.items()}
            else:
                raise ValueError(f"identity must be serviceaccount or admin, not {identity!r}")
            for name, text in kubeconfigs.items():
                problems = kubeconfig_problems(text)
                assert not problems, f"the kubeconfig of {name} would be refused: {problems}"
            timings["worker kubeconfigs"] = time.monotonic() - t0
            timings["site total"] = time.monotonic() - started
            report("multikueue site up: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
            try:
                yield Site(manager, live_workers, kubeconfigs, settings, timings)
            finally:
                stopping.append(time.monotonic())
    finally:
        if stopping:
            report(f"multikueue site stopped in {time.monotonic() - stopping[0]:.1f}s (logs in {state_dir})")
        else:
            report(f"multikueue site start failed after {time.monotonic() - started:.1f}s; "
                   f"what had started is stopped (logs in {state_dir})")
