"""`kns explain`: what each entry becomes, read off the program's plan objects.

Every fact comes from the `WorkloadPlan` the program builds (`plan_workload`) and the
manifests in it; nothing is derived differently here. Per-container requests and limits
are those of the pod as finally built (profiles, ratios and `jsonOverrides` applied),
and the pod totals are what one pod counts against the quota, both as the planner's
accounting settled them (plan/accounting.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Optional, Sequence

from chrono import calendar, moments
from config import reservations, rules
from config.quantity import human_of, kind_for_resource, parse, scale
from config.platform import PlatformConfig
from plan import accounting, fits, manifests, network, queues, wait
from plan.model import WorkloadPlan
from plan.reservations import ReservationPlan
from plan.stackplan import StackPlan
from plan.nodepools import autoscale_summary

from . import runs as runs_module
from .starts import HORIZON, StartCheck, check_starts

NEXT_RUNS = 3


def queue_facts(planned: StackPlan, plan: WorkloadPlan, lines: list[queues.Line]) -> Optional[dict[str, Any]]:
    """The entry's queue: its quota on the pools the entry may use, what one of its Jobs
    asks, and why a prescaled warm-up may start late (docs/queueing.md)."""
    cfg = planned.config
    queue = planned.queues.get(plan.entry.name)
    if queue is None:
        return None
    pools = [p for p in queues.pools_of(plan, queue) if p in queue.quota] if plan.pod_spec is not None else list(queue.quota)
    requests = queues.workload_requests(plan)
    facts: dict[str, Any] = {
        "name": queue.name,
        "cohort": queue.cohort,
        "quota": {pool: dict(queue.quota[pool]) for pool in pools},
        "requests": {r: queues.show(r, a) for r, a in requests.items()},
        "warnings": queues.warnings(cfg, plan, lines),
    }
    if cfg.workers:
        # A site (docs/multicluster.md): where MultiKueue may run its Jobs, and where each
        # pool of its quota is.
        facts["workers"] = planned.workers.get(plan.entry.name, [])
        facts["poolWorkers"] = {pool: cfg.pool_worker.get(pool) for pool in pools}
    return facts


def worker_facts(cfg: PlatformConfig, plan: WorkloadPlan,
                 per_worker: Optional[dict[str, dict[str, str]]]) -> Optional[dict[str, Any]]:
    """A distributed entry's workers (docs/distributed.md): how many, where the leader is,
    what they ask together, each limit the gang meets with its headroom (plan/fits.py),
    and a warning when nothing starts them together."""
    entry = plan.entry
    if not entry.distributed:
        return None
    total = {side: {r: scale(a, entry.workers, kind_for_resource(r)) for r, a in amounts.items()}
             for side, amounts in (per_worker or {}).items()}
    warnings = []
    if not entry.queued:
        warnings.append(f"{entry.workers} workers without a queue start as they fit, not together: set queue so "
                        "that Kueue admits all of them at once or none (docs/distributed.md)")
    return {
        "count": entry.workers,
        "leader": manifests.leader_address(plan, "<the run's Job>" if plan.is_schedule else entry.name)
        + f":{entry.leader_port or rules.LEADER_PORT_DEFAULT}",
        "service": entry.name,
        "restart": entry.restart_workers,
        "topology": entry.topology.model_dump() if entry.topology else None,
        "total": total,
        "limits": [fits.describe(limit) for limit in fits.limits(cfg, plan)],
        "warnings": warnings,
    }


JOB_FIELDS = ("backoffLimit", "backoffLimitPerIndex", "activeDeadlineSeconds", "ttlSecondsAfterFinished")


def job_facts(plan: WorkloadPlan) -> Optional[dict[str, Any]]:
    """How each of the entry's Jobs retries and expires, as built (the Job, or the first
    CronJob's jobTemplate): the fields a user tunes with backoffLimit, activeDeadlineSeconds
    and ttlHours."""
    for manifest in plan.objects.values():
        if manifest["kind"] in ("Job", "CronJob"):
            spec = manifest["spec"]["jobTemplate"]["spec"] if manifest["kind"] == "CronJob" else manifest["spec"]
            return {key: spec[key] for key in JOB_FIELDS if key in spec}
    return None


def _job_text(job: dict[str, Any]) -> str:
    parts = []
    if "backoffLimitPerIndex" in job:
        parts.append(f"each worker retried {job['backoffLimitPerIndex']} times (backoffLimitPerIndex)")
    else:
        # Kubernetes' default when the Job leaves it out.
        parts.append(f"backoffLimit {job.get('backoffLimit', 6)}")
    if "activeDeadlineSeconds" in job:
        parts.append(f"stopped after {job['activeDeadlineSeconds']}s (activeDeadlineSeconds)")
    if "ttlSecondsAfterFinished" in job:
        seconds = job["ttlSecondsAfterFinished"]
        parts.append(f"deleted {_duration(seconds)} after it finishes (ttlSecondsAfterFinished {seconds})")
    return "; ".join(parts)


def _duration(seconds: int) -> str:
    if seconds and seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds and seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def start_facts(check: Optional[StartCheck]) -> Optional[dict[str, Any]]:
    """A prescaled schedule on a queue: whether its start is guaranteed, and why not
    (docs/queueing.md, "Start times on a busy queue")."""
    if check is None:
        return None
    return {"guaranteed": check.guaranteed, "priority": check.priority, "value": check.value,
            "prioritySource": check.source, "preempts": check.preempts, "reasons": check.why(),
            "lateRuns": [moments.shown(start, check.zone) for start in sorted(check.late)], "reservation": check.reservation}


def entry_facts(planned: StackPlan, plan: WorkloadPlan, lines: Optional[list[queues.Line]] = None,
                starts: Optional[dict[str, StartCheck]] = None) -> dict[str, Any]:
    """Everything `explain` shows about one entry at the plan's instant, JSON-ready. `lines`:
    the stack's queue usage (plan/queues.py), for the queue warnings; `starts`: the stack's
    start checks."""
    cfg, entry = planned.config, plan.entry
    pod = plan.pod_spec
    containers: list[dict[str, Any]] = []
    totals = None
    images: list[str] = []
    if pod is not None:
        account = accounting.of(plan)
        assert account is not None
        normal, normal_init = account.containers, account.init_containers
        for raw, amounts, init in [*((c, a, True) for c, a in zip(pod.get("initContainers") or [], normal_init)),
                                   *((c, a, False) for c, a in zip(pod.get("containers") or [], normal))]:
            containers.append({
                "name": raw.get("name"),
                "init": init,
                "wait": init and raw.get("name") == wait.NAME,
                "image": raw.get("image"),
                "requests": amounts["requests"],
                "limits": amounts["limits"],
            })
            if raw.get("image") and raw.get("image") not in images and not (init and raw.get("name") == wait.NAME):
                images.append(raw["image"])
        totals = {"requests": account.requests, "limits": account.limits}
        # GPU devices of a DRA pool, per device class (docs/gpus.md): each pod's own, or one
        # claim all the entry's pods share.
        if account.devices:
            totals["devices"] = dict(account.devices)
        if account.shared_devices:
            totals["sharedDevices"] = dict(account.shared_devices)
    facts: dict[str, Any] = {
        "name": entry.name,
        "kind": "schedule" if plan.is_schedule else "job",
        "type": entry.type,
        "configPath": cfg.paths.get(entry.name),
        "user": entry.user,
        "groups": list(entry.groups),
        "namespace": plan.namespace,
        "objects": [f"{m['kind']}/{name}" for name, m in plan.objects.items()]
        + ([f"Service/{entry.name}"] if plan.service else []),
        "nodePool": plan.pool.name if plan.pool else None,
        "nodePoolAutoscale": autoscale_summary(plan.pool) if plan.pool else None,
        "schedulerName": (pod or {}).get("schedulerName", plan.scheduler_name),
        "profileRules": list(plan.profile_rules),
        "podSecurity": plan.pod_security,
        "images": images,
        "containers": containers,
        "podTotals": totals,
        "limitRange": plan.limit_range,
        "quota": plan.quota,
        "tolerations": list((pod or {}).get("tolerations") or []),
        "nodeSelector": dict((pod or {}).get("nodeSelector") or {}),
        "job": job_facts(plan),
        "queue": queue_facts(planned, plan, lines or []),
        "workers": worker_facts(cfg, plan, totals),
        "priority": ({"name": entry.priority, "source": cfg.priority_sources.get(entry.name)}
                     if entry.priority is not None else None),
        "start": start_facts((starts or {}).get(entry.name)),
        "reservation": entry_reservation(planned, plan),
        "budgets": entry_budgets(planned, plan, planned.now),
        "network": {"isolation": cfg.network.isolation, "policy": (plan.network_policy or {}).get(
                        "metadata", {}).get("name"),
                    "admits": network.admits(cfg.network, entry.allow_from), "reaches": network.reaches(cfg.network)},
    }
    if facts["start"] is not None and facts["start"]["guaranteed"] and facts["queue"] is not None:
        # The verdict counts who may hold the queue at warm-up; what it can preempt does not delay it.
        facts["queue"]["warnings"] = []
    if plan.is_schedule:
        schedule = entry
        facts["schedule"] = {
            "cron": schedule.schedule,
            "timeZone": schedule.time_zone,
            "warmUpMinutes": plan.primers.lead if plan.primers else None,
            "primerSchedules": list(plan.primers.schedules) if plan.primers else [],
            "nextRuns": [
                {"start": moments.shown(run.start, schedule.time_zone),
                 "primer": moments.shown(run.primer, schedule.time_zone) if run.primer else None}
                for run in runs_module.next_runs(plan, NEXT_RUNS, planned.now)
            ],
        }
    return facts


def reservation_facts(planned: StackPlan, reserved: ReservationPlan) -> dict[str, Any]:
    """A reservation (docs/reservations.md): what it holds, who may use it, its state at the
    plan's instant and next windows (in its zone), and which queues borrow it between windows."""
    item, phase, window = reserved.reservation, reserved.phase, reserved.window
    zone = item.zone()
    cohort, users = reserved.lent_to, reserved.pool_queues
    return {
        "name": item.name,
        "pool": item.pool,
        "holds": {r: reservations.show(r, a) for r, a in reserved.holds.items()},
        "who": {"users": list(item.users), "groups": list(item.groups), "entries": list(item.entries),
                "using": [e.entry for e in reserved.entries]},
        "when": ({"schedule": item.schedule, "timeZone": item.time_zone, "duration": item.duration}
                 if item.recurring else {"start": moments.shown(item.start), "end": moments.shown(item.end)}),
        "warmUpMinutes": item.warm_up_minutes,
        "atEnd": item.at_end,
        "stateNow": phase,
        "window": calendar.describe(window, zone) if window else None,
        "nextWindows": [calendar.describe(w, zone) for w in calendar.next_windows(item.calendar(), planned.now)],
        "lentTo": ({"cohort": cohort, "queues": users} if cohort else None),
    }


def entry_reservation(planned: StackPlan, plan: WorkloadPlan) -> Optional[dict[str, Any]]:
    """An entry's reservation and when its Jobs can next run: at the plan's instant in a
    window (or its warm-up), else from the next warm-up."""
    reserved = planned.reservation(plan.entry.reservation)
    if reserved is None:
        return None
    item, phase, window = reserved.reservation, reserved.phase, reserved.window
    if window is not None:
        runs = f"now (window {calendar.describe(window, item.zone())})"
    else:
        upcoming = calendar.next_holds(item.calendar(), planned.now, 1)
        runs = (f"from {calendar.moment(upcoming[0].start, item.zone(), upcoming[0].window.start)}"
                f" (warm-up of the window {calendar.describe(upcoming[0].window, item.zone())})" if upcoming
                else "never: its last window is over")
    return {"name": item.name, "stateNow": phase, "canRun": runs, "atEnd": item.at_end}


def entry_budgets(planned: StackPlan, plan: WorkloadPlan, now: datetime) -> list[dict[str, Any]]:
    """The budgets that count an entry's Jobs (docs/budgets.md): those of its queue, and, for
    the use of its reservation's windows, the same ones. Whether each admits it now is the
    cluster's to say (`admitsNow`, filled by `./kns explain --live`; None offline)."""
    out = []
    for budget_plan in planned.budgets:
        budget = budget_plan.budget
        if plan.entry.queue is None or plan.entry.queue not in budget.queues:
            continue
        after = budget.periods().next_reset(now)
        out.append({"name": budget.name, "limits": dict(budget.limits), "atLimit": budget.at_limit,
                    "nextReset": moments.shown(after, budget.zone()) if after else None,
                    "reservationCharged": plan.entry.reservation is not None, "admitsNow": None, "why": None})
    return out


# ---- any named thing of the stack ---------------------------------------------------------

# What `./kns explain NAME` may name, in the order a name used by several is shown.
KINDS = ("entry", "reservation", "pool", "queue", "priority", "budget", "worker")
# The document's key for the things of each kind.
KEYS = {"entry": "entries", "reservation": "reservations", "pool": "pools", "queue": "queues",
        "priority": "priorities", "budget": "budgets", "worker": "workers"}


def names_by_kind(planned: StackPlan) -> dict[str, list[str]]:
    """Every name of the stack, per kind (config order)."""
    cfg = planned.config
    return {"entry": [p.entry.name for p in planned.entries], "reservation": [r.name for r in cfg.reservations],
            "pool": [p.name for p in cfg.node_pools], "queue": [q.name for q in cfg.queues],
            "priority": [p.name for p in cfg.priorities], "budget": [b.name for b in cfg.budgets],
            "worker": [w.name for w in cfg.workers]}


def unknown_names(planned: StackPlan, names: Iterable[str]) -> list[str]:
    known = {name for found in names_by_kind(planned).values() for name in found}
    return [name for name in names if name not in known]


def _entries_where(planned: StackPlan, keep) -> list[str]:
    return [p.entry.name for p in planned.entries if keep(p)]


def pool_facts(planned: StackPlan, name: str) -> dict[str, Any]:
    """A node pool: its nodes or autoscaling, GPUs, where it is (a site's worker), and what
    uses it: the queues with quota on it, its reservations, the entries placed on it."""
    cfg = planned.config
    pool = cfg.pool(name)
    gpu = None
    if pool.gpu is not None:
        gpu = {"perNode": pool.gpu_per_node, "resource": pool.gpu_resource}
    return {
        "name": pool.name, "role": pool.role,
        "nodes": list(pool.static_nodes) if pool.autoscale is None else None,
        "autoscale": autoscale_summary(pool),
        "gpu": gpu,
        "worker": cfg.pool_worker.get(pool.name),
        "queues": {q.name: dict(q.quota[pool.name]) for q in cfg.queues if pool.name in q.quota},
        "reservations": [r.name for r in cfg.reservations if r.pool == pool.name],
        "entries": _entries_where(planned, lambda p: p.pool is not None and p.pool.name == pool.name),
    }


def named_queue_facts(planned: StackPlan, name: str) -> dict[str, Any]:
    """A queue: its quota per pool, cohort, preemption and hold, the entries it admits
    (their own queue or their profile's), and the budgets that count it."""
    cfg = planned.config
    queue = next(q for q in cfg.queues if q.name == name)
    return {
        "name": queue.name, "cohort": queue.cohort,
        "quota": {pool: dict(amounts) for pool, amounts in queue.quota.items()},
        "borrowingLimit": {pool: dict(a) for pool, a in (queue.borrowing_limit or {}).items()},
        "preemption": queue.preemption.model_dump(by_alias=True),
        "hold": queue.hold,
        "entries": _entries_where(planned, lambda p: p.entry.queue == queue.name),
        "budgets": [b.name for b in cfg.budgets if queue.name in b.queues],
    }


def priority_facts(planned: StackPlan, name: str) -> dict[str, Any]:
    """A priority: its value, whether it is the default, and the entries that have it."""
    item = next(p for p in planned.config.priorities if p.name == name)
    return {"name": item.name, "value": item.value, "default": item.default, "description": item.description,
            "entries": _entries_where(planned, lambda p: p.entry.priority == item.name)}


def budget_facts(planned: StackPlan, name: str, now: datetime) -> dict[str, Any]:
    """A budget: its queues, limits, period (a reset schedule or a grant) and next reset,
    what it does when spent, and the entries of its queues."""
    budget = next(b for b in planned.config.budgets if b.name == name)
    after = budget.periods().next_reset(now)
    period = ({"reset": budget.reset, "timeZone": budget.time_zone} if budget.reset is not None
              else {"start": budget.start.isoformat() if budget.start else None,
                    "end": budget.end.isoformat() if budget.end else None})
    return {"name": budget.name, "queues": list(budget.queues), "limits": dict(budget.limits), "period": period,
            "nextReset": after.isoformat() if after else None, "atLimit": budget.at_limit,
            "warnAt": list(budget.warn_at),
            "entries": _entries_where(planned, lambda p: p.entry.queue in budget.queues)}


def cluster_worker_facts(planned: StackPlan, name: str) -> dict[str, Any]:
    """A worker cluster of a MultiKueue site: how it is reached, its pools, whether it
    drains, and the queues with quota on its pools."""
    cfg = planned.config
    worker = next(w for w in cfg.workers if w.name == name)
    pools = [p.name for p in cfg.pools_of(worker.name)]
    return {"name": worker.name, "context": worker.context, "apiServer": cfg.worker_servers.get(worker.name),
            "pools": pools, "drain": worker.drain,
            "queues": [q.name for q in cfg.queues if any(pool in q.quota for pool in pools)]}


def select(plans: list[WorkloadPlan], names: Iterable[str]) -> list[WorkloadPlan]:
    """The plans of the named entries in the order asked (all of them when none is named);
    names of other kinds are left to `explain`."""
    names = list(names)
    if not names:
        return list(plans)
    by_name = {plan.entry.name: plan for plan in plans}
    return [by_name[name] for name in dict.fromkeys(names) if name in by_name]


# The section key of each kind's things in the stack file (`kns:queues[batch]: ...`).
SECTIONS = {"reservation": "reservations", "pool": "nodePools", "queue": "queues", "priority": "priorities",
            "budget": "budgets", "worker": "workers"}


def concerning(warnings: Iterable[str], planned: StackPlan, names: Sequence[str], also: set[str]) -> list[str]:
    """The stack's warnings about what is asked: all of them without names; with names,
    those about a named thing (or a reservation a named entry uses, `also`) and those about
    no one thing (a section's), never another entry's or another thing's."""
    warnings = list(warnings)
    if not names:
        return warnings
    entry_paths = {plan.entry.name: planned.config.paths.get(plan.entry.name, "") for plan in planned.entries}
    owners = [(path, name) for name, path in entry_paths.items() if path]
    owners += [(f"kns:{SECTIONS[kind]}[{name}]", name) for kind, found in names_by_kind(planned).items()
               if kind in SECTIONS for name in found]
    wanted = set(names) | also
    kept = []
    for warning in warnings:
        about = [name for path, name in owners if warning.startswith((path + ":", path + ".", path + "["))]
        if not about or wanted & set(about):
            kept.append(warning)
    return kept


def explain(planned: StackPlan, names: Iterable[str] = (), now: Optional[datetime] = None) -> dict[str, Any]:
    """The JSON document of `kns explain --format json`, read from the stack's plan, whose
    instant the states and next runs are computed from: `now`, when given, is that instant
    (shown in the document), never another. Without names: every entry and reservation;
    with names, each named thing of every kind that has the name (an entry's reservation
    with it)."""
    if now is not None and now != planned.now:
        raise ValueError(f"the plan is of {planned.now.isoformat()}, not {now.isoformat()}: plan at the instant shown")
    cfg, plans = planned.config, planned.entries
    names = list(dict.fromkeys(names))
    lines = queues.usage(cfg, plans)
    starts = check_starts(cfg, plans, planned.now)
    chosen = select(plans, names)
    known = names_by_kind(planned)
    named = {kind: [n for n in names if n in known[kind]] for kind in KINDS}
    wanted = ({p.entry.reservation for p in chosen} | set(named["reservation"]) if names
              else {r.name for r in planned.reservations})
    document: dict[str, Any] = {
        "stack": cfg.stack,
        "now": moments.shown(now) if now else None,
        "entries": [entry_facts(planned, plan, lines, starts) for plan in chosen],
        "reservations": [reservation_facts(planned, r) for r in planned.reservations if r.name in wanted],
        "warnings": concerning(cfg.warnings, planned, names, {p.entry.reservation for p in chosen} - {None}),
    }
    makers = {"pool": lambda n: pool_facts(planned, n), "queue": lambda n: named_queue_facts(planned, n),
              "priority": lambda n: priority_facts(planned, n), "budget": lambda n: budget_facts(planned, n, planned.now),
              "worker": lambda n: cluster_worker_facts(planned, n)}
    for kind, make in makers.items():
        if named[kind]:
            document[KEYS[kind]] = [make(n) for n in named[kind]]
    return document


# ---- text -------------------------------------------------------------------------------


def _amounts(values: Optional[dict[str, str]]) -> str:
    return " ".join(f"{k}={v}" for k, v in (values or {}).items()) or "-"


def _quota(amounts: Optional[dict[str, Any]]) -> str:
    """Quantities by resource, as a person writes them (`config.quantity.human`)."""
    return " ".join(f"{r}={human_of(r, parse(v, kind_for_resource(r)))}" for r, v in (amounts or {}).items()) or "-"


def _toleration(item: dict[str, Any]) -> str:
    key = item.get("key", "*")
    if item.get("operator") == "Exists":
        text = f"{key} (exists)"
    else:
        text = f"{key}={item.get('value', '')}"
    if item.get("effect"):
        text += f":{item['effect']}"
    if item.get("tolerationSeconds") is not None:
        text += f" for {item['tolerationSeconds']}s"
    return text


def table(rows: list[list[str]], indent: str = "    ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _pool(facts: dict[str, Any]) -> str:
    if not facts["nodePool"]:
        return "- (any node)"
    auto = facts["nodePoolAutoscale"]
    if auto is None:
        return f"{facts['nodePool']} (static)"
    limits = _quota(auto["limits"]) if auto["limits"] else "no limits"
    return f"{facts['nodePool']} (autoscaled: Karpenter NodePool {auto['nodePool']}, {limits})"


def render_entry(facts: dict[str, Any]) -> list[str]:
    lines = [f"{facts['name']}  ({facts['kind']}{', type namespace' if facts['type'] == 'namespace' else ''}; "
             f"{facts['configPath']})"]
    owner = facts["user"] or "-"
    if facts["groups"]:
        owner += f" (groups: {', '.join(facts['groups'])})"
    field_rows = [
        ["namespace", facts["namespace"]],
        ["objects", ", ".join(facts["objects"]) or "- (no workload: type namespace)"],
        ["user", owner],
        ["node pool", _pool(facts)],
        ["scheduler", facts["schedulerName"] or "- (default-scheduler)"],
        ["profile rules", ", ".join(facts["profileRules"]) or "- (no rule matches)"],
        ["Pod Security", facts["podSecurity"]],
        ["images", ", ".join(facts["images"] + [f"{c['image']} (warm-up wait)" for c in facts["containers"]
                                                 if c["wait"]]) or "-"],
        ["tolerations", ", ".join(_toleration(t) for t in facts["tolerations"]) or "-"],
        ["node selector", _amounts(facts["nodeSelector"])],
    ]
    totals = facts["podTotals"] or {}
    for key, how in (("devices", "per pod"), ("sharedDevices", "shared by the entry's pods")):
        if totals.get(key):
            field_rows.append(["GPU devices", "; ".join(f"{count} of DeviceClass {device_class}"
                                                        for device_class, count in totals[key].items())
                               + f" {how} (claim kns-gpu, docs/gpus.md)"])
    if facts["job"] is not None:
        field_rows.append(["each Job", _job_text(facts["job"])])
    queue = facts["queue"]
    if queue is not None:
        held = "; ".join(f"pool {pool}: {_quota(amounts)}" for pool, amounts in queue["quota"].items())
        cohort = f", cohort {queue['cohort']}" if queue["cohort"] else ""
        field_rows.append(["queue", f"{queue['name']} (Kueue ClusterQueue{cohort}; {held or 'no quota on its pool'})"])
        if "workers" in queue:
            able = ", ".join(f"{worker} (pool {pool})" for pool, worker in queue["poolWorkers"].items())
            field_rows.append(["runs on", f"the worker MultiKueue finds room on: {able or 'none'}; dispatched to "
                                          f"the workers of its queue: {', '.join(queue['workers'])}"])
        if queue["requests"]:
            field_rows.append(["one Job asks", _quota(queue["requests"])])
    priority = facts["priority"]
    if priority is not None:
        value = f" ({priority['source']})" if priority["source"] else ""
        field_rows.append(["priority", priority["name"] + value])
    start = facts["start"]
    if start is not None:
        if start["guaranteed"] and start.get("reservation"):
            field_rows.append(["start", f"guaranteed: reservation {start['reservation']} holds its capacity through "
                                        f"every warm-up of the next {HORIZON.days} days, and it can preempt the holder"])
        elif start["guaranteed"]:
            how = ("it can preempt lower-priority work" if start["preempts"]
                   else "no lower-priority work uses its queue")
            field_rows.append(["start", f"guaranteed: its queue holds it at every warm-up of the next "
                                        f"{HORIZON.days} days with the schedules of its priority or higher, and {how}"])
        else:
            field_rows.append(["start", "best effort: " + "; ".join(start["reasons"])])
    reserved = facts.get("reservation")
    if reserved is not None:
        field_rows.append(["reservation", f"{reserved['name']} ({reserved['stateNow']}; its Jobs run "
                                          f"{reserved['canRun']}; at the end: {reserved['atEnd']})"])
    for budget in facts.get("budgets") or []:
        limits = ", ".join(f"{hours:g} h of {resource}" for resource, hours in budget["limits"].items())
        said = {None: "whether it admits now: ./kns explain --live", True: "admits now",
                False: f"admits nothing now: {budget['why']}"}[budget["admitsNow"]]
        reset = f"refilled {budget['nextReset']}" if budget["nextReset"] else "a grant"
        field_rows.append(["budget", f"{budget['name']} ({limits}; {reset}; when spent: {budget['atLimit']}; {said})"])
    reach = facts["network"]
    policy = f"NetworkPolicy {reach['policy']}" if reach["policy"] else "no NetworkPolicy"
    field_rows.append(["admits", f"{'; '.join(reach['admits'])} ({policy}, docs/network.md)"])
    field_rows.append(["reaches", "; ".join(reach["reaches"])])
    workers = facts["workers"]
    if workers is not None:
        failing = ("a failed worker fails the whole Job" if workers["restart"] == "together"
                   else "each worker retried on its own")
        field_rows.append(["workers", f"{workers['count']} (Indexed Job, Service {workers['service']}; leader "
                                      f"{workers['leader']}; {failing})"])
        if workers["topology"]:
            ask = workers["topology"]
            within = "within one" if ask["mode"] == "required" else "as close as Kueue can, preferring one"
            field_rows.append(["topology", f"{ask['level']} ({ask['mode']}: all workers {within} "
                                           f"{ask['level']} domain)"])
    lines += table([[k + ":", v] for k, v in field_rows], "  ")
    lines += [f"  warning: {w}" for w in (queue or {}).get("warnings", []) + (workers or {}).get("warnings", [])]
    if facts["containers"]:
        lines.append("  containers (after profiles and overrides):")
        rows = [["container", "requests", "limits"]]
        for c in facts["containers"]:
            label = c["name"] + (" (init, warm-up wait)" if c["wait"] else " (init)" if c["init"] else "")
            rows.append([label, _quota(c["requests"]), _quota(c["limits"])])
        totals = facts["podTotals"] or {}
        if workers is not None:
            rows.append(["each worker's pod", _quota(totals.get("requests")), _quota(totals.get("limits"))])
            rows.append([f"all {workers['count']} workers", _quota(workers["total"].get("requests")),
                         _quota(workers["total"].get("limits"))])
        else:
            rows.append(["pod total (quota)", _quota(totals.get("requests")), _quota(totals.get("limits"))])
        lines += table(rows)
    if workers is not None and workers.get("limits"):
        lines.append(f"  limits the gang meets (all {workers['count']} workers at once):")
        lines += table([["limit", "resource", "needed", "held", "headroom"]]
                       + [[item["limit"], item["resource"], item["needed"], item["held"], item["headroom"]]
                          for item in workers["limits"]])
    limit_range = facts["limitRange"]
    lines.append("  LimitRange kns-defaults (per container):")
    lines += table([[k, _quota(limit_range.get(k))] for k in ("default", "defaultRequest", "max", "min")
                     if k in limit_range])
    lines.append("  ResourceQuota kns-quota:")
    quota = facts["quota"]
    sides = {side: {k.partition(".")[2]: v for k, v in quota.items() if k.startswith(side + ".")}
             for side in ("requests", "limits")}
    other = {k: v for k, v in quota.items() if not k.startswith(("requests.", "limits."))}
    lines += table([[k, v] for k, v in other.items()] + [[side, _quota(values)] for side, values in sides.items() if values])
    schedule = facts.get("schedule")
    if schedule:
        warm = (f"{schedule['warmUpMinutes']} min; primer {', '.join(schedule['primerSchedules'])}"
                if schedule["warmUpMinutes"] is not None else "- (starts when the CronJob fires)")
        lines += table([["schedule:", f"{schedule['cron']}  ({schedule['timeZone']})"], ["warm-up:", warm]], "  ")
        lines.append("  next runs:")
        rows = [["start", "warm-up start (primer)"]]
        rows += [[run["start"], run["primer"] or "-"] for run in schedule["nextRuns"]]
        lines += table(rows)
    return lines


def render_reservation(facts: dict[str, Any]) -> list[str]:
    who = facts["who"]
    allowed = ", ".join([*(f"user {u}" for u in who["users"]), *(f"group {g}" for g in who["groups"]),
                         *(f"entry {e}" for e in who["entries"])]) or "no one (a maintenance window)"
    when = facts["when"]
    calendar_text = (f"{when['schedule']} ({when['timeZone']}) for {when['duration']}" if "schedule" in when
                     else f"{when['start']} to {when['end']}")
    lent = facts["lentTo"]
    rows = [["pool", facts["pool"]], ["holds", ", ".join(facts["holds"].values())],
            ["when", f"{calendar_text}; warm-up {facts['warmUpMinutes']} min; at the end: {facts['atEnd']}"],
            ["for", allowed], ["used by", ", ".join(who["using"]) or "-"],
            ["now", facts["stateNow"] + (f" (window {facts['window']})" if facts["window"] else "")],
            ["between windows", (f"lent to cohort {lent['cohort']} (queues {', '.join(lent['queues'])})" if lent
                                 else "lent to no queue (no queue with quota on its pool has a cohort)")]]
    lines = [f"reservation {facts['name']}"] + table([[k + ":", v] for k, v in rows], "  ")
    lines.append("  next windows:")
    lines += [f"    {w}" for w in facts["nextWindows"]] or ["    - (none left)"]
    return lines


def _listed(names: list[str]) -> str:
    return ", ".join(names) or "-"


def render_pool(facts: dict[str, Any]) -> list[str]:
    auto = facts["autoscale"]
    if auto is None:
        nodes = f"{len(facts['nodes'])} static: {', '.join(facts['nodes'])}"
    else:
        nodes = f"autoscaled by Karpenter (NodePool {auto['nodePool']}; limits {_quota(auto['limits'])})"
    rows = [["role", facts["role"]], ["nodes", nodes]]
    if facts["gpu"] is not None:
        rows.append(["GPUs", f"{facts['gpu']['perNode']} per node ({facts['gpu']['resource']})"])
    if facts["worker"]:
        rows.append(["worker", facts["worker"]])
    rows += [["queues", "; ".join(f"{q} ({_quota(a)})" for q, a in facts["queues"].items()) or "- (no quota on it)"],
             ["reservations", _listed(facts["reservations"])], ["entries", _listed(facts["entries"])]]
    return [f"pool {facts['name']}"] + table([[k + ":", v] for k, v in rows], "  ")


def render_queue(facts: dict[str, Any]) -> list[str]:
    preemption = facts["preemption"]
    rows = [["quota", "; ".join(f"pool {pool}: {_quota(a)}" for pool, a in facts["quota"].items())],
            ["cohort", facts["cohort"] or "- (borrows and lends nothing)"]]
    if facts["borrowingLimit"]:
        rows.append(["borrowing limit", "; ".join(f"pool {pool}: {_quota(a)}"
                                                  for pool, a in facts["borrowingLimit"].items())])
    rows += [["preemption", ", ".join(f"{k} {v}" for k, v in preemption.items())],
             ["held", "yes: it admits nothing new" if facts["hold"] else "no"],
             ["entries", _listed(facts["entries"])], ["budgets", _listed(facts["budgets"])]]
    return [f"queue {facts['name']}  (Kueue ClusterQueue)"] + table([[k + ":", v] for k, v in rows], "  ")


def render_priority(facts: dict[str, Any]) -> list[str]:
    rows = [["value", str(facts["value"]) + (" (the default)" if facts["default"] else "")]]
    if facts["description"]:
        rows.append(["description", facts["description"]])
    rows.append(["entries", _listed(facts["entries"])])
    return [f"priority {facts['name']}  (Kueue WorkloadPriorityClass)"] + table([[k + ":", v] for k, v in rows], "  ")


def render_budget(facts: dict[str, Any]) -> list[str]:
    period = facts["period"]
    when = (f"refilled {period['reset']} ({period['timeZone']})" if "reset" in period
            else f"a grant from {period['start']} to {period['end']}")
    rows = [["queues", _listed(facts["queues"])],
            ["limits", ", ".join(f"{hours:g} h of {resource}" for resource, hours in facts["limits"].items())],
            ["period", when + (f"; next reset {facts['nextReset']}" if facts["nextReset"] else "")],
            ["when spent", f"{facts['atLimit']} (warnings at {', '.join(f'{p:g}%' for p in facts['warnAt'])})"],
            ["entries", _listed(facts["entries"])]]
    return [f"budget {facts['name']}"] + table([[k + ":", v] for k, v in rows], "  ")


def render_worker(facts: dict[str, Any]) -> list[str]:
    rows = [["reached by", f"context {facts['context']}" if facts["context"] else "its kubeconfig"],
            ["API server", facts["apiServer"] or "-"], ["pools", _listed(facts["pools"])],
            ["draining", "yes: MultiKueue sends it nothing new" if facts["drain"] else "no"],
            ["queues", _listed(facts["queues"])]]
    return [f"worker {facts['name']}  (MultiKueue worker cluster)"] + table([[k + ":", v] for k, v in rows], "  ")


RENDERERS = {"reservations": render_reservation, "pools": render_pool, "queues": render_queue,
             "priorities": render_priority, "budgets": render_budget, "workers": render_worker}


def render_text(document: dict[str, Any]) -> str:
    blocks = ["\n".join(render_entry(facts)) for facts in document["entries"]]
    for key, render in RENDERERS.items():
        blocks += ["\n".join(render(facts)) for facts in document.get(key, [])]
    blocks += [f"warning: {w}" for w in document.get("warnings", [])]
    count = len(document["entries"])
    shown = [f"{count} entr{'y' if count == 1 else 'ies'}"] if count or not any(
        document.get(key) for key in RENDERERS) else []
    for kind, key in KEYS.items():
        if key in RENDERERS and key != "reservations" and document.get(key):
            many = len(document[key])
            shown.append(f"{many} {kind if many == 1 else key}")
    if document.get("reservations") and not count:
        many = len(document["reservations"])
        shown.insert(0, f"{many} reservation{'' if many == 1 else 's'}")
    head = f"stack {document['stack']}: {', '.join(shown)}"
    if document["now"] and count:
        head += f"; next runs after {datetime.fromisoformat(document['now']).replace(microsecond=0).isoformat()}"
    return "\n\n".join([head, *blocks]) + "\n"
