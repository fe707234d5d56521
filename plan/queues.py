"""What queueing becomes (pure): Kueue's ResourceFlavors, ClusterQueues and LocalQueues, what
each queued entry asks of its queue, and the entries Kueue could never admit
(docs/queueing.md).

Kueue admits a Job when its queue (with what the cohort lends) holds the Job's requests
on one flavor, i.e. one pool: every pod's requests (LimitRange defaults filled in, init
containers as the scheduler counts them) times the pods that run at once, and the pods
themselves when the queue counts `pods`. A request the queue cannot hold on any pool the
entry may use waits forever: that is a config error here, not a Workload pending in the
cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

from config import names, queues as queue_rules, resolve, rules
from config.errors import Problem
from config.platform import PlatformConfig
from config.models import NodePool, Priority, Queue
from config.quantity import kind_for_resource, parse, render

from . import accounting
from .model import WorkloadPlan

API_VERSION = "kueue.x-k8s.io/v1beta2"
PODS = accounting.PODS
# The program's Queues component (components/queues.py).
COMPONENT = "queues"


def _metadata(name: str, cluster: str) -> dict[str, Any]:
    return {"name": name, "labels": {names.LABEL_CLUSTER: cluster, **names.MANAGED_BY}}


def flavor_manifest(pool: NodePool, cluster: str) -> dict[str, Any]:
    """The pool as a ResourceFlavor: Kueue puts its label and tolerations on the pods it
    admits on it, so admission carries the placement."""
    spec: dict[str, Any] = {"nodeLabels": {names.LABEL_POOL: pool.name}}
    tolerations = resolve.tolerations_for(pool)
    if tolerations:
        spec["tolerations"] = tolerations
    if pool.topology is not None:
        spec["topologyName"] = pool.name
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _metadata(pool.name, cluster), "spec": spec}


def topology_manifest(pool: NodePool, cluster: str) -> dict[str, Any]:
    """The pool's `topology.levels` as the Kueue Topology its ResourceFlavor names: the
    domains Kueue places a Job's workers within (docs/distributed.md)."""
    assert pool.topology is not None
    return {"apiVersion": API_VERSION, "kind": "Topology", "metadata": _metadata(pool.name, cluster),
            "spec": {"levels": [{"nodeLabel": level} for level in pool.topology.levels]}}


def priority_class_manifest(priority: Priority, cluster: str) -> dict[str, Any]:
    """A `kns:priorities` entry as a Kueue WorkloadPriorityClass: the queued Jobs labelled
    with its name get its value (admission order, preemption; docs/queueing.md)."""
    manifest: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass",
                                "metadata": _metadata(priority.name, cluster), "value": priority.value}
    if priority.description is not None:
        manifest["description"] = priority.description
    return manifest


def holder_priority_manifest(cluster: str) -> dict[str, Any]:
    """The WorkloadPriorityClass of the reservations' holders (docs/reservations.md): below
    every priority an entry may have, so the reservation's own entries preempt them."""
    return {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass",
            "metadata": _metadata(rules.RESERVATION_HOLDER_PRIORITY, cluster), "value": rules.RESERVATION_HOLDER_VALUE,
            "description": "holds a reservation's capacity from its warm-up (docs/reservations.md)"}


def cluster_queue_manifest(queue: Queue, cluster: str) -> dict[str, Any]:
    """One resource group covering every resource the quota names, a flavor per pool in the
    quota's order (a resource the pool leaves out is 0 there), for the platform's
    namespaces."""
    covered = queue_rules.covered_resources(queue.quota)
    flavors = []
    for pool, amounts in queue.quota.items():
        resources = []
        for resource in covered:
            item = {"name": resource, "nominalQuota": amounts.get(resource, "0")}
            for key, limits in (("borrowingLimit", queue.borrowing_limit), ("lendingLimit", queue.lending_limit)):
                amount = (limits or {}).get(pool, {}).get(resource)
                if amount is not None:
                    item[key] = amount
            resources.append(item)
        flavors.append({"name": pool, "resources": resources})
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {names.LABEL_CLUSTER: cluster}},
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
        "preemption": {"withinClusterQueue": queue.preemption.within_cluster_queue,
                       "reclaimWithinCohort": queue.preemption.reclaim_within_cohort},
    }
    if queue.cohort is not None:
        spec["cohortName"] = queue.cohort
    if queue.fair_sharing_weight is not None:
        spec["fairSharing"] = {"weight": weight(queue.fair_sharing_weight)}
    if queue.hold:
        spec["stopPolicy"] = "Hold"
    if queue.admission_mode == rules.ADMISSION_MODE_USAGE_BASED:
        spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": _metadata(queue.name, cluster), "spec": spec}


def weight(value: float) -> str:
    """A fair-sharing weight as a Kubernetes quantity ("1", "0.5")."""
    return format(Decimal(str(value)).normalize(), "f")


def local_queue_manifest(plan: WorkloadPlan) -> dict[str, Any]:
    """The LocalQueue `kns` of a queued entry's namespace."""
    assert plan.entry.queue is not None
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": names.LOCAL_QUEUE, "namespace": plan.namespace, "labels": dict(plan.labels)},
        "spec": {"clusterQueue": plan.entry.queue},
    }


def queued_pools(cfg: PlatformConfig) -> list[NodePool]:
    """Every pool some queue or reservation names, once, in config order: one ResourceFlavor each."""
    named = {pool for queue in cfg.queues for pool in queue.quota} | {r.pool for r in cfg.reservations}
    return [pool for pool in cfg.node_pools if pool.name in named]


# ---- what an entry asks of its queue ------------------------------------------------------


def pods_at_once(plan: WorkloadPlan) -> int:
    """The pods of one of the entry's Jobs that Kueue admits together (one pod set): its
    workers, or parallelism (fewer completions)."""
    account = accounting.of(plan)
    return account.pods if account is not None else plan.entry.pods_per_run


def workload_requests(plan: WorkloadPlan) -> dict[str, Decimal]:
    """What one Job of the entry asks of its queue (plan/accounting.py): the pod's requests
    as admission fills them in and its devices by Kueue's names for them, times the pods
    that run at once, and `pods` itself. Empty for an entry that runs no pod
    (`type: namespace`)."""
    account = accounting.of(plan)
    return {} if account is None else account.job_requests()


def lendable(queue: Queue, pool: str, resource: str) -> Decimal:
    """What a queue lends its cohort of one resource on one pool: its lending limit, or all
    of its quota."""
    limit = (queue.lending_limit or {}).get(pool, {}).get(resource)
    if limit is not None:
        return parse(limit, kind_for_resource(resource))
    return queue_rules.nominal(queue.quota, pool, resource)


def borrowable(queue: Queue, all_queues: list[Queue], pool: str, resource: str) -> Decimal:
    """The most a queue can borrow of one resource on one pool: what the rest of its cohort
    lends, within its own borrowing limit."""
    if queue.cohort is None:
        return Decimal(0)
    lent = sum((lendable(other, pool, resource) for other in all_queues
                if other.cohort == queue.cohort and other.name != queue.name), Decimal(0))
    limit = (queue.borrowing_limit or {}).get(pool, {}).get(resource)
    return lent if limit is None else min(lent, parse(limit, kind_for_resource(resource)))


def show(resource: str, amount: Decimal) -> str:
    return render(amount, kind_for_resource(resource))


def pools_of(plan: WorkloadPlan, queue: Queue) -> list[str]:
    """The pools of the queue an entry's Jobs may be admitted on: the pool its pod as finally
    built selects (`pool`, or a `podSpec` nodeSelector or an override on kns.io/pool: Kueue
    skips every flavor whose node labels the pod's selector contradicts), or any."""
    selected = ((plan.pod_spec or {}).get("nodeSelector") or {}).get(names.LABEL_POOL)
    if selected is not None:
        return [selected]
    return [plan.pool.name] if plan.pool is not None else list(queue.quota)


def fit_reasons(plan: WorkloadPlan, queue: Queue, all_queues: list[Queue],
                capacity: Optional[dict[tuple[str, str, str], tuple[Decimal, Decimal]]] = None) -> dict[str, list[str]]:
    """Why the queue can never hold one of the entry's Jobs, per pool the entry may use
    (an empty list: it fits there). `capacity` keeps each (queue, pool, resource)'s quota
    and borrowing across entries: what the cohort lends is summed once, not per entry, so
    the check grows with the entries, not with entries x queues."""
    capacity = {} if capacity is None else capacity
    requests = workload_requests(plan)
    covered = queue_rules.covered_resources(queue.quota)
    out: dict[str, list[str]] = {}
    for pool in pools_of(plan, queue):
        if pool not in queue.quota:
            out[pool] = [f'pool "{pool}" has no quota in it (its pools: {", ".join(queue.quota)})']
            continue
        reasons = []
        for resource, amount in requests.items():
            if resource == PODS and PODS not in covered:
                continue  # Kueue counts pods only where the queue has a quota for them
            key = (queue.name, pool, resource)
            if key not in capacity:
                capacity[key] = (queue_rules.nominal(queue.quota, pool, resource),
                                 borrowable(queue, all_queues, pool, resource))
            nominal, borrow = capacity[key]
            if amount > nominal + borrow:
                named = "" if resource in queue.quota[pool] else f" ({resource} is not in its quota: name it there)"
                reasons.append(f"{resource} {show(resource, amount)} is more than pool \"{pool}\" can hold: quota "
                               f"{show(resource, nominal)} + borrowing {show(resource, borrow)}{named}")
        out[pool] = reasons
    return out


def fit_problems(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> list[Problem]:
    """Every queued entry that its queue could never admit, under `<entry>.queue`, or under
    the entry naming the profile rule when the queue is the rule's."""
    problems = []
    capacity: dict[tuple[str, str, str], tuple[Decimal, Decimal]] = {}
    by_name = {q.name: q for q in cfg.queues}
    # An entry on a reservation that finishes its Jobs in the window never uses its own queue
    # (docs/reservations.md); one that requeues them does, after the window.
    finishing = {r.name for r in cfg.reservations if r.at_end == "finish"}
    for plan in plans:
        queue = by_name.get(plan.entry.queue) if plan.entry.queue else None
        if queue is None or plan.pod_spec is None or plan.entry.reservation in finishing:
            continue
        reasons = fit_reasons(plan, queue, cfg.queues, capacity)
        if all(reasons.values()):
            count = pods_at_once(plan)
            what = "its pod" if count == 1 else f"its {count} pods at once"
            listed = "; ".join(r for pool_reasons in reasons.values() for r in pool_reasons)
            rule = cfg.queue_rules.get(plan.entry.name)
            path, which = (cfg.paths[plan.entry.name], f'its queue "{queue.name}" (from kns:profiles[{rule}].queue)') \
                if rule else (f"{cfg.paths[plan.entry.name]}.queue", f'queue "{queue.name}"')
            problems.append(Problem(path, f"{which} can never admit {what} (Kueue would keep it waiting): {listed}"))
    return problems


# ---- the queues side by side (`./kns queues`) ---------------------------------------------


@dataclass
class Line:
    """One resource of one pool of a queue: its quota, what borrowing adds, and what the
    entries that may use it ask for (one Job each)."""

    queue: str
    pool: str
    resource: str
    quota: Decimal
    borrowing: Decimal
    requested: Decimal
    entries: list[str]

    @property
    def over(self) -> bool:
        return self.requested > self.quota + self.borrowing

    def show(self, amount: Decimal) -> str:
        return show(self.resource, amount)


def usage(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> list[Line]:
    """Each queue's quota per pool and resource against the sum of the requests of the
    entries that use it. An entry without a pool counts on every pool of its queue (Kueue
    may admit it on any)."""
    lines = []
    for queue in cfg.queues:
        asks = {p.entry.name: (p, workload_requests(p)) for p in plans
                if p.entry.queue == queue.name and p.pod_spec is not None}
        for pool in queue.quota:
            on_pool = [requests for plan, requests in asks.values() if pool in pools_of(plan, queue)]
            names = [name for name, (plan, _) in asks.items() if pool in pools_of(plan, queue)]
            for resource in queue_rules.covered_resources(queue.quota):
                amounts = [requests.get(resource, Decimal(0)) for requests in on_pool]
                lines.append(Line(queue.name, pool, resource, queue_rules.nominal(queue.quota, pool, resource),
                                  borrowable(queue, cfg.queues, pool, resource), sum(amounts, Decimal(0)),
                                  [name for name, amount in zip(names, amounts) if amount]))
    return lines


def queue_of(cfg: PlatformConfig, plan: WorkloadPlan) -> Optional[Queue]:
    return next((q for q in cfg.queues if q.name == plan.entry.queue), None)


def warnings(cfg: PlatformConfig, plan: WorkloadPlan, lines: list[Line]) -> list[str]:
    """Why a prescaled schedule's warm-up may start late because of its queue: its pod
    fits only with quota borrowed from the cohort, or the entries of its queue ask more
    than the queue holds on its pool (docs/queueing.md, "Prescaled schedules"). `lines`:
    `usage` of the whole stack."""
    queue = queue_of(cfg, plan)
    if queue is None or plan.primers is None or plan.pod_spec is None:
        return []
    out = []
    requests = workload_requests(plan)
    counted = [r for r in requests if r != PODS or PODS in queue_rules.covered_resources(queue.quota)]
    pools = [p for p in pools_of(plan, queue) if p in queue.quota]
    if pools and not any(all(requests[r] <= queue_rules.nominal(queue.quota, p, r) for r in counted) for p in pools):
        out.append(f'its pod fits queue "{queue.name}" only with quota borrowed from cohort "{queue.cohort}": '
                   "when the cohort's other queues use theirs, the primer waits and the warm-up starts late")
    for line in lines:
        if line.queue == queue.name and line.pool in pools and line.over and plan.entry.name in line.entries:
            out.append(f'queue "{queue.name}" is over-subscribed on pool "{line.pool}" ({line.resource}: '
                       f"{line.show(line.requested)} asked, {line.show(line.quota + line.borrowing)} held with "
                       "borrowing): if the others run at primer time, the warm-up starts late")
    return out
