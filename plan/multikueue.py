"""What a MultiKueue site becomes (pure): the objects on the manager that dispatch queued
Jobs to the workers, and on each worker the identity the manager's Kueue uses there
(docs/multicluster.md).

- Each worker gets what a single cluster gets, with a ClusterQueue per queue that holds
  quota on one of its pools (the quota of those pools only), plus a ServiceAccount bound to
  MultiKueue's rules and a `service-account-token` Secret for it.
- The manager gets, per worker, a kubeconfig Secret (built from that token: self-contained,
  no exec plugin or file, which Kueue would refuse) and a MultiKueueCluster; per queue, an
  AdmissionCheck and a MultiKueueConfig naming the workers that serve it, and a ClusterQueue
  of the queue's name holding the sum of the workers' quotas on one flavor without node
  labels (placement is the worker's) and that admission check.
- Every queued entry's namespace, guard rails and LocalQueue are on the manager and on each
  worker serving its queue; its Job or CronJob only on the manager.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Optional

import yaml

from config import names, queues as queue_rules
from config.platform import PlatformConfig
from config.models import Cluster, Queue
from config.quantity import kind_for_resource, render

from .model import WorkloadPlan
from .queues import (API_VERSION, queue_of, holder_priority_manifest, cluster_queue_manifest, fit_reasons, flavor_manifest,
                     priority_class_manifest, queued_pools, topology_manifest, weight)

# The namespace Kueue reads MultiKueueCluster Secrets from, and where the manager's identity
# on a worker lives: Kueue's own (the install's; a Kueue of your own must use it too).
KUEUE_NAMESPACE = "kueue-system"
CONTROLLER = "kueue.x-k8s.io/multikueue"
SECRET_KEY = "kubeconfig"
# The manager's identity on every worker: ServiceAccount, ClusterRole, binding, token Secret.
ACCESS = "kns-multikueue"
# The manager's one ResourceFlavor: no node labels, so admission there places nothing.
FLAVOR = "kns-multikueue"
# The MultiKueue component (components/multikueue.py).
COMPONENT = "multikueue"
# What MultiKueue does on a worker (Kueue's site/static/examples/multikueue/create-multikueue-kubeconfig.sh,
# batch/Job and Workloads), and nothing more.
WORKER_RULES = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"],
     "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
]


def _metadata(name: str, cluster: str, namespace: Optional[str] = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "labels": {names.LABEL_CLUSTER: cluster, **names.MANAGED_BY}}
    if namespace is not None:
        out["namespace"] = namespace
    return out


def check_name(queue: str) -> str:
    """The AdmissionCheck and MultiKueueConfig of one queue."""
    return f"{ACCESS}-{queue}"


def secret_name(worker: str) -> str:
    """The manager's Secret holding a worker's kubeconfig, in Kueue's namespace."""
    return f"{ACCESS}-{worker}"


# ---- which worker serves what -----------------------------------------------------------


def queue_workers(cfg: PlatformConfig, queue: Queue) -> list[str]:
    """The workers that hold quota for the queue (one of its pools is theirs), in config order."""
    serving = {cfg.pool_worker[pool] for pool in queue.quota if pool in cfg.pool_worker}
    return [w.name for w in cfg.workers if w.name in serving]


def entry_workers(cfg: PlatformConfig, plan: WorkloadPlan) -> list[str]:
    """The workers a queued entry's Jobs may be dispatched to: those of its queue. Each needs
    the entry's namespace and LocalQueue, where MultiKueue creates the Job."""
    queue = queue_of(cfg, plan)
    return queue_workers(cfg, queue) if cfg.workers and queue is not None else []


def worker_queue(queue: Queue, pools: set[str]) -> Queue:
    """The queue as one worker holds it: its quota and limits on that worker's pools only."""
    def only(limits: Optional[dict[str, dict[str, str]]]) -> Optional[dict[str, dict[str, str]]]:
        kept = {pool: amounts for pool, amounts in (limits or {}).items() if pool in pools}
        return kept or None

    return queue.model_copy(update={"quota": only(queue.quota) or {}, "borrowing_limit": only(queue.borrowing_limit),
                                    "lending_limit": only(queue.lending_limit)})


def worker_cluster_queues(cfg: PlatformConfig, worker: str) -> list[dict[str, Any]]:
    """The ClusterQueues of one worker: each queue with quota on its pools, for the site's
    namespaces (the entries' copies carry the site's cluster label). A draining worker's
    hold (Kueue's `stopPolicy: Hold`): it admits nothing new, so MultiKueue's copies there
    wait while another worker admits; what it runs goes on and reports back."""
    own = {p.name for p in cfg.pools_of(worker)}
    draining = any(w.drain for w in cfg.workers if w.name == worker)
    out = []
    for queue in cfg.queues:
        if any(pool in own for pool in queue.quota):
            manifest = cluster_queue_manifest(worker_queue(queue, own), cfg.cluster.name)
            if draining:
                manifest["spec"]["stopPolicy"] = "Hold"
            out.append(manifest)
    return out


# What a drain does to the Jobs of a draining worker's pools.
DRAIN_WAIT = "its Jobs wait on the manager until the drain ends"


def drain_warnings(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> list[str]:
    """Queued entries every pool of whose queue they fit on is on a draining worker: their
    Jobs wait on the manager until the drain ends (docs/operations.md, "Draining a worker")."""
    drained = drained_pools(cfg)
    if not drained:
        return []
    by_name = {q.name: q for q in cfg.queues}
    out = []
    for plan in plans:
        queue = by_name.get(plan.entry.queue) if plan.entry.queue else None
        if queue is None or plan.pod_spec is None or queue.hold:
            continue
        fitting = [pool for pool, why in fit_reasons(plan, queue, cfg.queues).items() if not why]
        if fitting and all(pool in drained for pool in fitting):
            where = ", ".join(f'pool "{pool}" of worker {cfg.pool_worker[pool]}' for pool in fitting)
            out.append(f"{cfg.paths[plan.entry.name]}: fits only on {where}, which is draining: {DRAIN_WAIT}")
    return out


def draining_worker(cfg: PlatformConfig, pool: str) -> Optional[str]:
    """The worker a pool is on, when that worker is draining (kns:workers[].drain)."""
    worker = cfg.pool_worker.get(pool)
    return worker if any(w.drain and w.name == worker for w in cfg.workers) else None


def drained_pools(cfg: PlatformConfig) -> set[str]:
    """The pools of the draining workers: the manager's queues no longer count them."""
    return {p.name for w in cfg.workers if w.drain for p in w.node_pools}


# ---- the manager ---------------------------------------------------------------------------


def _total(queue: Queue, limits: Optional[dict[str, dict[str, str]]], resource: str,
           every_pool: bool) -> Optional[str]:
    """The sum over the queue's pools of one resource's amounts in `limits`; with
    `every_pool`, None unless every pool of the quota sets it (a pool without a limit has none)."""
    amounts = [(limits or {}).get(pool, {}).get(resource) for pool in queue.quota]
    if every_pool and any(a is None for a in amounts):
        return None
    kind = kind_for_resource(resource)
    total = sum((queue_rules.nominal(limits or {}, pool, resource) for pool in queue.quota), Decimal(0))
    return render(total, kind)


def manager_cluster_queue(queue: Queue, cluster: str, drained: set[str] = frozenset()) -> dict[str, Any]:
    """The queue on the manager: the sum of every pool's quota (and of borrowing and lending
    limits, when every pool sets one) on the one flavor, with the queue's admission check.
    Kueue reserves that quota on the manager, then dispatches; each worker admits against
    its own pools. The pools of draining workers (`drained`) are left out of the sums."""
    covered = queue_rules.covered_resources(queue.quota)
    queue = worker_queue(queue, {pool for pool in queue.quota if pool not in drained})
    resources = []
    for resource in covered:
        item: dict[str, Any] = {"name": resource, "nominalQuota": _total(queue, queue.quota, resource, False)}
        for key, limits in (("borrowingLimit", queue.borrowing_limit), ("lendingLimit", queue.lending_limit)):
            amount = _total(queue, limits, resource, True) if limits else None
            if amount is not None:
                item[key] = amount
        resources.append(item)
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {names.LABEL_CLUSTER: cluster}},
        "resourceGroups": [{"coveredResources": covered, "flavors": [{"name": FLAVOR, "resources": resources}]}],
        "preemption": {"withinClusterQueue": queue.preemption.within_cluster_queue,
                       "reclaimWithinCohort": queue.preemption.reclaim_within_cohort},
        # v1beta2 has no spec.admissionChecks: the strategy, on every flavor.
        "admissionChecksStrategy": {"admissionChecks": [{"name": check_name(queue.name)}]},
    }
    if queue.cohort is not None:
        spec["cohortName"] = queue.cohort
    if queue.fair_sharing_weight is not None:
        spec["fairSharing"] = {"weight": weight(queue.fair_sharing_weight)}
    if queue.hold:
        spec["stopPolicy"] = "Hold"
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": _metadata(queue.name, cluster), "spec": spec}


def manager_flavor(cluster: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _metadata(FLAVOR, cluster), "spec": {}}


def admission_check(queue: str, cluster: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionCheck", "metadata": _metadata(check_name(queue), cluster),
            "spec": {"controllerName": CONTROLLER,
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                    "name": check_name(queue)}}}


def multikueue_config(queue: str, workers: list[str], cluster: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "MultiKueueConfig", "metadata": _metadata(check_name(queue), cluster),
            "spec": {"clusters": list(workers)}}


def multikueue_cluster(worker: str, cluster: str) -> dict[str, Any]:
    """v1beta2: spec.clusterSource.kubeConfig names the Secret in Kueue's namespace."""
    return {"apiVersion": API_VERSION, "kind": "MultiKueueCluster", "metadata": _metadata(worker, cluster),
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret_name(worker)}}}}


def kubeconfig_secret_metadata(worker: str, cluster: str) -> dict[str, Any]:
    return _metadata(secret_name(worker), cluster, KUEUE_NAMESPACE)


@dataclass
class QueueObjects:
    """The Queues component's objects of each cluster, in its arguments' order: flavors,
    ClusterQueues, Topologies, WorkloadPriorityClasses."""

    manager: tuple[list, list, list, list] = ([], [], [], [])
    workers: dict[str, tuple[list, list, list, list]] = field(default_factory=dict)


def queue_objects(cfg: PlatformConfig) -> QueueObjects:
    """A single cluster's queues (a flavor per pool a queue names, the queues, the Topologies
    of those pools, the priorities); on a site, the manager's (its one flavor, the summed
    queues with their admission checks, the priorities) and each worker's (its pools'
    flavors and Topologies, its share of the queues, the priorities)."""
    cluster = cfg.cluster.name
    priorities = [priority_class_manifest(p, cluster) for p in cfg.priorities]
    pools = queued_pools(cfg)
    if not cfg.workers:
        if cfg.reservations:
            priorities.append(holder_priority_manifest(cluster))
        return QueueObjects(([flavor_manifest(p, cluster) for p in pools],
                             [cluster_queue_manifest(q, cluster) for q in cfg.queues],
                             [topology_manifest(p, cluster) for p in pools if p.topology is not None], priorities))
    drained = drained_pools(cfg)
    manager = ([manager_flavor(cluster)] if cfg.queues else [],
               [manager_cluster_queue(q, cluster, drained) for q in cfg.queues],
               [], priorities)
    workers = {}
    for worker in cfg.workers:
        own = [p for p in pools if cfg.pool_worker.get(p.name) == worker.name]
        workers[worker.name] = ([flavor_manifest(p, cluster) for p in own], worker_cluster_queues(cfg, worker.name),
                                [topology_manifest(p, cluster) for p in own if p.topology is not None], priorities)
    return QueueObjects(manager, workers)


def connection_objects(cfg: PlatformConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per queue, its MultiKueueConfig (the workers that serve it) and its AdmissionCheck."""
    cluster = cfg.cluster.name
    return ([multikueue_config(q.name, queue_workers(cfg, q), cluster) for q in cfg.queues],
            [admission_check(q.name, cluster) for q in cfg.queues])


# ---- the manager's identity on a worker ---------------------------------------------------


def worker_access(cluster: str) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole (WORKER_RULES), ClusterRoleBinding, and the legacy token
    Secret the token controller fills: the manager's least-privilege identity on a worker,
    valid while the Secret exists (deleting it revokes the manager's access)."""
    subject = {"kind": "ServiceAccount", "name": ACCESS, "namespace": KUEUE_NAMESPACE}
    token = _metadata(f"{ACCESS}-token", cluster, KUEUE_NAMESPACE)
    token["annotations"] = {"kubernetes.io/service-account.name": ACCESS}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(ACCESS, cluster, KUEUE_NAMESPACE),
         "automountServiceAccountToken": False},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _metadata(ACCESS, cluster),
         "rules": WORKER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _metadata(ACCESS, cluster),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ACCESS},
         "subjects": [subject]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token", "metadata": token},
    ]


# A rendered site's kubeconfig for a worker (config/multikueue.py RENDERED_SERVER): its
# token is a placeholder `pulumi up` of the applied site replaces with the worker's own.
RENDERED_TOKEN = {"token": base64.b64encode(b"rendered-offline-pulumi-up-puts-the-worker-token-here").decode(),
                  "ca.crt": ""}


def site_cluster(cfg: PlatformConfig, worker: Optional[str] = None) -> Cluster:
    """The cluster a provider of the stack reaches: the manager (`worker` None) or a worker.
    A rendered site writes each into a directory of its own under renderDir, named after
    it (`<renderDir>/<cluster>`, `<renderDir>/<worker>`); a single cluster renders into
    renderDir itself."""
    render = cfg.cluster.render_dir
    if worker is None:
        if render and cfg.workers:
            return cfg.cluster.model_copy(update={"render_dir": f"{render.rstrip('/')}/{cfg.cluster.name}"})
        return cfg.cluster
    found = next(w for w in cfg.workers if w.name == worker)
    if render:
        return Cluster(name=found.name, render_dir=f"{render.rstrip('/')}/{found.name}")
    return Cluster(name=found.name, context=found.context, kubeconfig=found.kubeconfig)


def kubeconfig_text(worker: str, server: str, data: dict[str, str]) -> str:
    """The kubeconfig the manager's Kueue uses for a worker, from the token Secret's `data`
    (base64 `ca.crt` and `token`): the server, the CA inline, the token inline; nothing Kueue
    refuses (config/multikueue.py)."""
    token = base64.b64decode(data["token"]).decode()
    document = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": worker, "cluster": {"server": server, "certificate-authority-data": data["ca.crt"]}}],
        "users": [{"name": ACCESS, "user": {"token": token}}],
        "contexts": [{"name": worker, "context": {"cluster": worker, "user": ACCESS}}],
        "current-context": worker,
    }
    return yaml.safe_dump(document, sort_keys=False)


def served(cfg: PlatformConfig) -> dict[str, dict[str, Any]]:
    """Per worker: its pools and, per queue it serves, the quota it holds (`workers` output,
    `./kns queues`)."""
    out: dict[str, dict[str, Any]] = {}
    for worker in cfg.workers:
        own = {p.name for p in worker.node_pools}
        queues = {}
        for queue in cfg.queues:
            mine = {pool: dict(amounts) for pool, amounts in queue.quota.items() if pool in own}
            if mine:
                queues[queue.name] = mine
        out[worker.name] = {"nodePools": [p.name for p in worker.node_pools], "queues": queues}
    return out
