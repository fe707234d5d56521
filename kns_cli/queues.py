"""`./kns queues`: each queue's quota per pool against what the entries that use it ask
(one Job each), so an over-subscribed queue shows before `pulumi up` (docs/queueing.md)."""

from __future__ import annotations

from typing import Any

from config.platform import PlatformConfig
from config.quantity import human_of, kind_for_resource, parse
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
            # kns:queues[].hold: its ClusterQueue admits nothing new (stopPolicy Hold).
            "hold": queue.hold,
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
        for worker in cfg.workers:
            document["workers"][worker.name]["drain"] = worker.drain
    return document


# Names a text line lists before it counts the rest (`--verbose` lists them all).
LISTED = 8


def names(found: list[str], verbose: bool) -> str:
    """A list of names on one line: all with `verbose` or when few, else the first LISTED
    and a count of the rest, so a line stays readable at hundreds of entries."""
    if not found:
        return "none"
    if verbose or len(found) <= LISTED:
        return ", ".join(found)
    return f"{', '.join(found[:LISTED])} and {len(found) - LISTED} more (--verbose lists them)"


def reservation_line(cfg: PlatformConfig, item, plans: list[WorkloadPlan]) -> dict[str, Any]:
    """A reservation's queue (docs/reservations.md): its ClusterQueue in its pool's Cohort,
    what it holds, whom the Cohort lends to between windows, and the entries it admits."""
    cohort, lenders = lending_cohort(item.pool, cfg.queues)
    return {"name": item.name, "clusterQueue": reservations.cluster_queue_name(item.name),
            "cohort": reservations.pool_cohort_name(item.pool), "pool": item.pool,
            "holds": {r: show(r, a) for r, a in holdings(item, cfg.pool(item.pool)).items()},
            "lentTo": {"cohort": cohort, "queues": lenders} if cohort else None,
            "entries": [p.entry.name for p in plans if p.entry.reservation == item.name]}


def written(resource: str, amount: str) -> str:
    """A quantity of the report as a person writes it (`16.25` cores, `48.12Gi`); the JSON
    keeps the Kubernetes form."""
    return human_of(resource, parse(amount, kind_for_resource(resource)))


def render_text(document: dict[str, Any], verbose: bool = False) -> str:
    if not document["enabled"]:
        return f"stack {document['stack']}: queueing is off (kns:queueing.enabled)\n"
    count = len(document["queues"])
    how = "installed by the program" if document["install"] else "the cluster's own (install: false)"
    blocks = [f"stack {document['stack']}: {count} queue{'' if count == 1 else 's'}, Kueue {how}"]
    for queue in document["queues"]:
        head = queue["name"] + (f"  (cohort {queue['cohort']})" if queue["cohort"] else "")
        if queue.get("hold"):
            head += "; HELD (hold: true): admits nothing new"
        head += f"; entries: {names(queue['entries'], verbose)}"
        site = "workers" in queue
        if site:
            drains = document.get("workers", {})
            shown = [w + (" (draining: sent nothing new)" if drains.get(w, {}).get("drain") else "")
                     for w in queue["workers"]]
            head += f"; served by worker{'' if len(shown) == 1 else 's'} {', '.join(shown)}"
        rows = [[*(["worker"] if site else []), "pool", "resource", "quota", "+ borrowing", "asked", ""]]
        rows += [[*([line["worker"]] if site else []), line["pool"], line["resource"],
                  *(written(line["resource"], line[key]) for key in ("quota", "borrowing", "requested")),
                  "OVER-SUBSCRIBED: " + names(line["entries"], verbose) if line["overSubscribed"] else ""]
                 for line in queue["lines"]]
        blocks.append("\n".join([head, *table(rows, "  ")]))
    for item in document.get("reservations", []):
        lent = item["lentTo"]
        between = (f"lent to cohort {lent['cohort']} ({', '.join(lent['queues'])}) between windows" if lent
                   else "lent to no queue between windows")
        blocks.append(f"reservation {item['name']}  (ClusterQueue {item['clusterQueue']} in Cohort {item['cohort']}; "
                      f"{between})\n  holds {', '.join(item['holds'].values())} of pool {item['pool']}; entries: "
                      f"{names(item['entries'], verbose)}")
    return "\n\n".join(blocks) + "\n"
