"""Stack outputs (docs/outputs.md), computed from plans without the Pulumi runtime."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from chrono import calendar, cron, moments
from config import resolve
from config.quantity import kind_for_resource, render
from config.reservations import holdings
from config.platform import PlatformConfig
from config.models import NodePool, Schedule

from . import digests, network
from .budgets import period_spec
from .model import WorkloadPlan
from .multikueue import queue_objects, served
from .nodepools import autoscale_summary
from .schedulers import KNS_ACCOUNT


# What an entry stack exports (docs/entry-stacks.md): its own entries' part of the outputs;
# the platform stack exports the rest, and `make outputs` shows them merged.
ENTRY_OUTPUTS = ("namespaces", "schedules")


# What a full `make up` records for itself in split stacks (plan/digests.py), not the stack's.
RUN_RECORDS = (digests.CHECKED_OUTPUT, digests.DIGESTS_OUTPUT, digests.PLATFORM_OUTPUT)


def merge_outputs(platform: dict[str, Any], entry_stacks: list[dict[str, Any]]) -> dict[str, Any]:
    """The outputs of a stack spread over entry stacks, as one stack would have them."""
    merged = {key: value for key, value in platform.items() if key not in RUN_RECORDS}
    for key in ENTRY_OUTPUTS:
        merged[key] = {name: value for part in [platform, *entry_stacks]
                       for name, value in sorted((part.get(key) or {}).items())}
    return merged


def stack_outputs(cfg: PlatformConfig, plans: list[WorkloadPlan], now: Optional[datetime] = None) -> dict[str, Any]:
    schedules = {}
    for plan in plans:
        entry = plan.entry
        if isinstance(entry, Schedule):
            schedules[entry.name] = {
                "schedule": entry.schedule,
                "timeZone": entry.time_zone,
                "warmUpMinutes": plan.primers.lead if plan.primers else None,
                "primerSchedules": list(plan.primers.schedules) if plan.primers else [],
                "nextRuns": cron.next_runs(entry.schedule, entry.time_zone, 3, now),
            }
    return {
        "namespaces": {plan.entry.name: plan.namespace for plan in plans},
        "schedules": schedules,
        "packingSchedulerName": cfg.packing_scheduler.name if cfg.packing_scheduler.enabled else None,
        "knsScheduler": kns_endpoint(cfg),
        "nodePools": {pool.name: pool_output(pool) for pool in cfg.node_pools},
        "reservations": reservations_output(cfg, now),
        "budgets": budgets_output(cfg, now),
        "network": network.output(cfg.network),
        **({"queues": queues_output(cfg)} if cfg.queueing.enabled else {}),
        **({"workers": served(cfg)} if cfg.workers else {}),
    }


def _nominal(cluster_queue: dict[str, Any]) -> dict[str, dict[str, str]]:
    """A ClusterQueue's nominal quota: flavor -> resource -> amount, as it is applied."""
    return {flavor["name"]: {item["name"]: item["nominalQuota"] for item in flavor["resources"]}
            for group in cluster_queue["spec"]["resourceGroups"] for flavor in group["flavors"]}


def queues_output(cfg: PlatformConfig) -> dict[str, Any]:
    """`queues.<name>`: the queue's ClusterQueue, its cohort and its nominal quota per flavor,
    read from the ClusterQueues the program applies (plan/multikueue.py queue_objects): on
    one cluster a flavor per pool; on a site the manager's one flavor (the sum over the
    workers that are not draining), and `workers`: what each serving worker's ClusterQueue
    holds, per pool."""
    objects = queue_objects(cfg)
    manager = {cq["metadata"]["name"]: cq for cq in objects.manager[1]}
    out: dict[str, Any] = {}
    for queue in cfg.queues:
        cluster_queue = manager[queue.name]
        item: dict[str, Any] = {"clusterQueue": cluster_queue["metadata"]["name"],
                                "cohort": cluster_queue["spec"].get("cohortName"), "quota": _nominal(cluster_queue)}
        if cfg.workers:
            item["workers"] = {worker: _nominal(cq) for worker, parts in objects.workers.items()
                               for cq in parts[1] if cq["metadata"]["name"] == queue.name}
        out[queue.name] = item
    return out


def reservations_output(cfg: PlatformConfig, now: Optional[datetime] = None) -> dict[str, Any]:
    """`reservations.<name>`: its pool, what it holds, and its next windows (in its own zone,
    chrono/moments.py), the one open now first."""
    now = now or datetime.now(timezone.utc)
    out = {}
    for item in cfg.reservations:
        pool = cfg.pool(item.pool)
        out[item.name] = {
            "pool": item.pool,
            "holds": {r: render(a, kind_for_resource(r)) for r, a in holdings(item, pool).items()},
            "nextWindows": [{"start": moments.shown(w.start, item.zone()),
                             "end": moments.shown(w.end, item.zone(), w.start)}
                            for w in calendar.next_windows(item.calendar(), now)],
        }
    return out


def budgets_output(cfg: PlatformConfig, now: Optional[datetime] = None) -> dict[str, Any]:
    """`budgets.<name>`: its queues, limits (hours), period and next reset (in its zone,
    chrono/moments.py; None for a grant, which is not refilled)."""
    now = now or datetime.now(timezone.utc)
    out = {}
    for budget in cfg.budgets:
        after = budget.periods().next_reset(now)
        out[budget.name] = {"queues": list(budget.queues), "limits": dict(budget.limits),
                            "period": period_spec(budget),
                            "nextReset": moments.shown(after, budget.zone()) if after is not None else None}
    return out


def pool_output(pool: NodePool) -> dict[str, Any]:
    """`nodePools.<name>`: a static pool's nodes; an autoscaled one has none yet, and its
    NodePool and limits instead."""
    out: dict[str, Any] = {"nodes": pool.static_nodes, "taints": resolve.pool_taints(pool)}
    summary = autoscale_summary(pool)
    if summary is not None:
        out["autoscale"] = summary
    return out


def kns_endpoint(cfg: PlatformConfig) -> Optional[dict[str, Any]]:
    """Where the JARVICE upstream reaches this downstream: in-cluster service, and URL."""
    kns = cfg.kns_scheduler
    if not kns.enabled:
        return None
    service = f"{KNS_ACCOUNT}.{cfg.cluster.system_namespace}.svc:{kns.port}"
    return {
        "service": service,
        "url": f"https://{kns.jobs_domain}" if kns.ingress else None,
        "namespace": cfg.cluster.system_namespace,
    }
