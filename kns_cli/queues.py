"""`./kns queues`: each queue's quota per pool against what the entries that use it ask
(one Job each), so an over-subscribed queue shows before `pulumi up` (docs/queueing.md)."""

from __future__ import annotations

from typing import Any

from config.loader import PlatformConfig
from config.reservations import holdings, lending_cohort, show
from plan import multikueue, queues, reservations
from plan.model import WorkloadPlan

from .explain import table


def report(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> dict[str, Any]:
    """The JSON document of `kns queues --format json`."""
    lines = queues.usage(cfg, plans)
    out = []
    for queue in cfg.queues:
        rows = [line for line in lines if line.queue == queue.name]
        item: dict[str, Any] = {
            "name": queue.name,
            "cohort": queue.cohort,
            "entries": [p.entry.name for p in plans if p.entry.queue == queue.name],
            "lines": [{"pool": line.pool, "resource": line.resource, "quota": line.show(line.quota),
                       "borrowing": line.show(line.borrowing), "requested": line.show(line.requested),
                       "overSubscribed": line.over, "entries": line.entries} for line in rows],
        }
        if cfg.workers:
            # A site (docs/multicluster.md): the workers MultiKueue may send the queue's Jobs to,
            # and which of them holds each pool's quota.
            item["workers"] = multikueue.queue_workers(cfg, queue)
            for line in item["lines"]:
                line["worker"] = cfg.pool_worker.get(line["pool"])
        out.append(item)
    document = {"stack": cfg.stack, "enabled": cfg.queueing.enabled, "install": cfg.queueing.install, "queues": out,
                "reservations": [reservation_line(cfg, item, plans) for item in cfg.reservations]}
    if cfg.workers:
        document["workers"] = multikueue.served(cfg)
    return document


def reservation_line(cfg: PlatformConfig, item, plans: list[WorkloadPlan]) -> dict[str, Any]:
    """A reservation's queue (docs/reservations.md): its ClusterQueue in its pool's Cohort,
    what it holds, whom the Cohort lends to between windows, and the entries it admits."""
    cohort, lenders = lending_cohort(item.pool, cfg.queues)
    return {"name": item.name, "clusterQueue": reservations.cluster_queue_name(item.name),
            "cohort": reservations.pool_cohort_name(item.pool), "pool": item.pool,
            "holds": {r: show(r, a) for r, a in holdings(item, cfg.pool(item.pool)).items()},
            "lentTo": {"cohort": cohort, "queues": lenders} if cohort else None,
            "entries": [p.entry.name for p in plans if p.entry.reservation == item.name]}


def render_text(document: dict[str, Any]) -> str:
    if not document["enabled"]:
        return f"stack {document['stack']}: queueing is off (kns:queueing.enabled)\n"
    count = len(document["queues"])
    how = "installed by the program" if document["install"] else "the cluster's own (install: false)"
    blocks = [f"stack {document['stack']}: {count} queue{'' if count == 1 else 's'}, Kueue {how}"]
    for queue in document["queues"]:
        head = queue["name"] + (f"  (cohort {queue['cohort']})" if queue["cohort"] else "")
        head += f"; entries: {', '.join(queue['entries']) or 'none'}"
        site = "workers" in queue
        if site:
            head += f"; served by worker{'' if len(queue['workers']) == 1 else 's'} {', '.join(queue['workers'])}"
        rows = [[*(["worker"] if site else []), "pool", "resource", "quota", "+ borrowing", "asked", ""]]
        rows += [[*([line["worker"]] if site else []), line["pool"], line["resource"], line["quota"],
                  line["borrowing"], line["requested"],
                  "OVER-SUBSCRIBED: " + ", ".join(line["entries"]) if line["overSubscribed"] else ""]
                 for line in queue["lines"]]
        blocks.append("\n".join([head, *table(rows, "  ")]))
    for item in document.get("reservations", []):
        lent = item["lentTo"]
        between = (f"lent to cohort {lent['cohort']} ({', '.join(lent['queues'])}) between windows" if lent
                   else "lent to no queue between windows")
        blocks.append(f"reservation {item['name']}  (ClusterQueue {item['clusterQueue']} in Cohort {item['cohort']}; "
                      f"{between})\n  holds {', '.join(item['holds'].values())} of pool {item['pool']}; entries: "
                      f"{', '.join(item['entries']) or 'none'}")
    return "\n\n".join(blocks) + "\n"
