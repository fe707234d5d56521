"""Whether a prescaled schedule on a queue starts on time (docs/queueing.md, "Start times on
a busy queue").

A prescaled run's Job is created at its warm-up start (the primer) and must be admitted by
its queue then, or the warm-up, and so the start, is late. Its start is **guaranteed**
when, at every warm-up in the horizon, its queue's own quota on its pool holds it together
with every other prescaled schedule of the same or a higher priority whose window
overlaps, and whatever else may hold that quota can be preempted (or there is none);
otherwise it is **best effort**, with the reasons. What may hold the quota on its pool is
every entry of the queue pinned to that pool and every one that names no pool and fits
there (the queue may admit it on any of its pools, this one first). Nothing is guaranteed
on a held queue or on a pool whose worker is draining (its Jobs wait on the manager). A
run's window is its warm-up start to its start, or to its Job's deadline when
`activeDeadlineSeconds` is set (the Job holds its quota that long at most); windows come
from the schedules themselves (`kns_cli.runs`).
What Kueue does is read from its semantics: a Workload is admitted within the
ClusterQueue's nominal quota, borrowing is never guaranteed, `withinClusterQueue`
preempts only lower priorities, and `reclaimWithinCohort` takes lent quota back.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Optional

from chrono import moments
from config import queues as queue_rules
from config.platform import PlatformConfig
from config.models import Queue, Schedule, Workload
from config.reservations import holdings
from plan import multikueue, queues, reservations
from plan.model import WorkloadPlan

from .runs import runs_between

HORIZON = timedelta(days=28)
# Kueue's values of withinClusterQueue that let a Workload preempt lower priorities.
PREEMPTS = ("LowerPriority", "LowerOrNewerEqualPriority")
# A Workload whose Job names no WorkloadPriorityClass has priority 0 (Kueue).
NO_PRIORITY = 0


@dataclass(frozen=True)
class Window:
    """One prescaled run's hold on its queue: from its warm-up start to its end."""

    entry: str
    begin: datetime
    end: datetime
    start: datetime


@dataclass
class StartCheck:
    """One prescaled schedule on a queue: its priority, and why its start is not guaranteed.
    `reasons` hold for every run; `late` for the runs (by start) whose window others crowd."""

    entry: str
    queue: str
    pool: str
    priority: Optional[str]
    value: int
    source: Optional[str]
    preempts: bool
    reasons: list[str] = field(default_factory=list)
    late: dict[datetime, str] = field(default_factory=dict)
    # A schedule on a reservation: what admits its Jobs is the reservation, in its holds.
    reservation: Optional[str] = None
    # The schedule's timeZone: the times its reasons name are shown in it (chrono/moments.py).
    zone: str = "Etc/UTC"

    @property
    def guaranteed(self) -> bool:
        return not self.reasons and not self.late

    def run_guaranteed(self, start: datetime) -> bool:
        return not self.reasons and start not in self.late

    def why(self) -> list[str]:
        """Every reason, the first crowded run's included (with how many there are)."""
        out = list(self.reasons)
        if self.late:
            first = min(self.late)
            more = f" ({len(self.late)} runs in the next {HORIZON.days} days)" if len(self.late) > 1 else ""
            out.append(self.late[first] + more)
        return out


def value_of(cfg: PlatformConfig, entry: Workload) -> int:
    return next((p.value for p in cfg.priorities if p.name == entry.priority), NO_PRIORITY)


def prescaled_on_queue(plan: WorkloadPlan) -> bool:
    """A prescaled schedule whose Jobs its own queue admits. One on a reservation is
    admitted by the reservation's queue, in its windows (docs/reservations.md): its queue
    says nothing of its start, and `./kns explain` shows when its Jobs can run instead."""
    entry = plan.entry
    return isinstance(entry, Schedule) and plan.primers is not None and entry.queue is not None \
        and entry.reservation is None and plan.pod_spec is not None


def prescaled_on_reservation(plan: WorkloadPlan) -> bool:
    entry = plan.entry
    return isinstance(entry, Schedule) and plan.primers is not None and entry.reservation is not None \
        and plan.pod_spec is not None


def _reserved_starts(cfg: PlatformConfig, plan: WorkloadPlan, plans: list[WorkloadPlan], values: dict[str, int],
                     begin: datetime, end: datetime) -> Optional[StartCheck]:
    """A prescaled schedule on a reservation (docs/reservations.md): a run starts on time
    when the reservation holds its capacity for the whole warm-up, from the primer to the
    start (each hold is `[start - warmUpMinutes, end)` of a window, chrono/calendar.py),
    and nothing of the same or a higher priority may hold it then: no other entry of the
    reservation that may run at any time, and no other prescaled schedule of it whose
    warm-up meets this one's asking, with it, more than the reservation holds."""
    entry = plan.entry
    item = cfg.reservation(entry.reservation)
    if item is None:
        return None
    value = values[entry.name]
    check = StartCheck(entry.name, reservations.cluster_queue_name(item.name), item.pool, entry.priority, value,
                       cfg.priority_sources.get(entry.name), True, reservation=item.name, zone=entry.time_zone)
    timed = {p.entry.name: p for p in plans if prescaled_on_reservation(p) and p.entry.reservation == item.name
             and p.entry.name != entry.name and values[p.entry.name] >= value}
    rivals = [other.name for other in cfg.workloads if other.name != entry.name and other.reservation == item.name
              and other.type == "pod" and values[other.name] >= value and other.name not in timed]
    if rivals:
        names = ", ".join(rivals[:3]) + (f" and {len(rivals) - 3} more" if len(rivals) > 3 else "")
        check.reasons.append(f'{len(rivals)} other entr{"y" if len(rivals) == 1 else "ies"} of the same or a higher '
                             f'priority use reservation "{item.name}" ({names}) and may hold it at any time')
    holds = item.calendar().holds(begin, end + timedelta(days=1))
    held = holdings(item, cfg.pool(item.pool))
    mine = queues.workload_requests(plan)
    theirs = [(name, w) for name, other in timed.items() for w in _windows(other, begin, end)]
    asks = {name: queues.workload_requests(other) for name, other in timed.items()}
    for window in _windows(plan, begin, end):
        if not any(hold.start <= window.begin and window.start < hold.end for hold in holds):
            check.late[window.start] = (f"its warm-up from {moments.shown(window.begin, check.zone)} is not inside a hold of reservation "
                                        f'"{item.name}" (each window from its warm-up to its end): its Job waits '
                                        "for the next")
            continue
        meeting = sorted({name for name, w in theirs if w.begin < window.end and window.begin < w.end})
        for resource, amount in held.items():
            total = mine.get(resource, Decimal(0)) + sum((asks[n].get(resource, Decimal(0)) for n in meeting),
                                                          Decimal(0))
            if total > amount:
                check.late[window.start] = (f"with {', '.join(meeting)} it asks more of reservation \"{item.name}\" "
                                            f"than it holds at {moments.shown(window.begin, check.zone)}")
                break
    return check


def _admissible(cfg: PlatformConfig, plan: Optional[WorkloadPlan], queue: Queue,
                capacity: dict[tuple[str, str, str], tuple[Decimal, Decimal]]) -> set[str]:
    """The pools the queue may admit the entry's Jobs on: the one it is pinned to, or, when
    it names none, each where one of its Jobs fits (plan/queues.py `fit_reasons`)."""
    if plan is None:
        return set()
    return {pool for pool, why in queues.fit_reasons(plan, queue, cfg.queues, capacity).items() if not why}


def _draining(check: StartCheck, cfg: PlatformConfig, pool: str) -> None:
    """On a site, the manager dispatches nothing to a draining worker: quota on its pools
    admits no run until the drain ends."""
    worker = multikueue.draining_worker(cfg, pool)
    if worker is not None:
        check.reasons.append(f"pool {pool} is on worker {worker}, which is draining (kns:workers[{worker}].drain): "
                             f"{multikueue.DRAIN_WAIT}")


def _pool(plan: WorkloadPlan, queue: Queue) -> Optional[str]:
    pools = [p for p in queues.pools_of(plan, queue) if p in queue.quota]
    return pools[0] if len(pools) == 1 else None


def _windows(plan: WorkloadPlan, begin: datetime, end: datetime) -> list[Window]:
    entry = plan.entry
    assert isinstance(entry, Schedule) and plan.primers is not None
    hold = timedelta(seconds=entry.active_deadline_seconds or 0)
    # A run starting up to one lead after `end` has its warm-up inside the horizon.
    runs = runs_between(plan, begin, end + timedelta(minutes=plan.primers.lead))
    return [Window(entry.name, run.primer, run.start + hold, run.start) for run in runs
            if run.primer is not None and run.primer < end]


def _counted(queue: Queue, requests: dict[str, Decimal]) -> list[str]:
    covered = queue_rules.covered_resources(queue.quota)
    return [r for r in requests if r in covered]


def check_starts(cfg: PlatformConfig, plans: list[WorkloadPlan], now: Optional[datetime] = None,
                 horizon: timedelta = HORIZON) -> dict[str, StartCheck]:
    """A StartCheck for each prescaled schedule on a queue, over the warm-ups in
    [now, now + horizon)."""
    begin = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    end = begin + horizon
    by_name = {plan.entry.name: plan for plan in plans}
    prescaled = [plan for plan in plans if prescaled_on_queue(plan)]
    windows = {plan.entry.name: _windows(plan, begin, end) for plan in prescaled}
    # Once per entry, not per pair: each priority's value, each prescaled schedule's queue,
    # pool and what one run asks.
    values = {entry.name: value_of(cfg, entry) for entry in cfg.workloads}
    queue_of = {plan.entry.name: queues.queue_of(cfg, plan) for plan in prescaled}
    pools = {name: _pool(by_name[name], queue) for name, queue in queue_of.items() if queue is not None}
    asks = {name: queues.workload_requests(by_name[name]) for name in pools}
    # Each queued entry's pools, once: what it may hold is counted for every schedule of its queue.
    admissible: dict[str, set[str]] = {}
    capacity: dict[tuple[str, str, str], tuple[Decimal, Decimal]] = {}

    def admitted_on(name: str, queue: Queue) -> set[str]:
        if name not in admissible:
            admissible[name] = _admissible(cfg, by_name.get(name), queue, capacity)
        return admissible[name]

    out: dict[str, StartCheck] = {}
    for plan in plans:
        if prescaled_on_reservation(plan):
            found = _reserved_starts(cfg, plan, plans, values, begin, end)
            if found is not None:
                out[plan.entry.name] = found
    for plan in prescaled:
        entry = plan.entry
        queue = queue_of[entry.name]
        if queue is None:
            continue
        pool = pools[entry.name]
        value = values[entry.name]
        preempts = queue.preemption.within_cluster_queue in PREEMPTS
        check = StartCheck(entry.name, queue.name, pool or "", entry.priority, value,
                           cfg.priority_sources.get(entry.name), preempts, zone=entry.time_zone)
        out[entry.name] = check
        if queue.hold:
            check.reasons.append(f'queue "{queue.name}" is held (kns:queues[{queue.name}].hold): it admits nothing '
                                 "new until the hold is lifted")
        if pool is None:
            check.reasons.append(f'its Job may be admitted on any of the pools of queue "{queue.name}" '
                                 f"({', '.join(queue.quota)}): set pool so that its room can be counted")
            continue
        requests = asks[entry.name]
        counted = _counted(queue, requests)
        over = [r for r in counted if requests[r] > queue_rules.nominal(queue.quota, pool, r)]
        if over:
            r = over[0]
            check.reasons.append(f'one run asks {r} {queues.show(r, requests[r])}, more than queue "{queue.name}" '
                                 f"holds on pool {pool} ({queues.show(r, queue_rules.nominal(queue.quota, pool, r))}): "
                                 "it must borrow from its cohort, which nothing guarantees")
        _draining(check, cfg, pool)
        # Who may hold the quota on this pool: the entries pinned to it and those that name
        # no pool, which the queue may admit on any of its pools, this one first.
        sharing = [other for other in cfg.workloads
                   if other.name != entry.name and other.queue == queue.name and other.type == "pod"
                   and pool in admitted_on(other.name, queue)]
        rivals = [other for other in sharing if values[other.name] >= value and other.name not in windows]
        if rivals:
            names = ", ".join(o.name for o in rivals[:3]) + (f" and {len(rivals) - 3} more" if len(rivals) > 3 else "")
            check.reasons.append(f'{len(rivals)} other entr{"y" if len(rivals) == 1 else "ies"} of the same or a higher '
                                 f'priority on queue "{queue.name}" ({names}) may hold its quota at any time, '
                                 "and none can be preempted for it")
        lower = [other for other in sharing if values[other.name] < value]
        if lower and not preempts:
            check.reasons.append(f'queue "{queue.name}" has no preemption (withinClusterQueue: '
                                 f"{queue.preemption.within_cluster_queue}), and {len(lower)} entr"
                                 f'{"y" if len(lower) == 1 else "ies"} of lower priority may hold its quota at '
                                 "warm-up time")
        lends = queue.cohort is not None and any(
            q.cohort == queue.cohort and q.name != queue.name for q in cfg.queues) and any(
            queues.lendable(queue, pool, r) > 0 for r in counted)
        if lends and queue.preemption.reclaim_within_cohort == "Never":
            check.reasons.append(f'queue "{queue.name}" lends its idle quota to cohort "{queue.cohort}" and takes '
                                 "none back (reclaimWithinCohort: Never): a borrower may hold it at warm-up time")
        rivals = [other.name for other in sharing if other.name in windows and values[other.name] >= value]
        _crowded(check, queue, pool, requests, counted, windows, rivals, asks)
    return out


def _crowded(check: StartCheck, queue: Queue, pool: str, requests: dict[str, Decimal], counted: list[str],
             windows: dict[str, list[Window]], rivals: list[str], asks: dict[str, dict[str, Decimal]]) -> None:
    """The runs whose window overlaps those of `rivals` (the other prescaled schedules of the
    same or a higher priority the queue may admit on the same pool), when together they ask
    more than the quota."""
    if not rivals:
        return
    theirs = sorted((w for name in rivals for w in windows[name]), key=lambda w: w.begin)
    begins = [w.begin for w in theirs]
    for mine in windows[check.entry]:
        overlapping = [w for w in theirs[:bisect_left(begins, mine.end)] if w.end > mine.begin]
        # The most asked at once: at its own warm-up start, or when a rival's window begins.
        for moment in sorted({mine.begin, *(w.begin for w in overlapping if w.begin > mine.begin)}):
            active = [w for w in overlapping if w.begin <= moment < w.end]
            crowded = _over(check, queue, pool, requests, counted, asks, active, moment)
            if crowded:
                check.late[mine.start] = crowded
                break


def _over(check: StartCheck, queue: Queue, pool: str, requests: dict[str, Decimal], counted: list[str],
          asks: dict[str, dict[str, Decimal]], active: list[Window], moment: datetime) -> Optional[str]:
    if not active:
        return None
    for r in counted:
        total = requests[r] + sum((asks[w.entry].get(r, Decimal(0)) for w in active), Decimal(0))
        held = queue_rules.nominal(queue.quota, pool, r)
        if total > held:
            names = sorted({w.entry for w in active})
            return (f'{len(names)} other schedule{"s" if len(names) > 1 else ""} of the same or a higher priority '
                    f"({', '.join(names)}) hold{'' if len(names) > 1 else 's'} its queue at {moments.shown(moment, check.zone)}, during "
                    f"its warm-up, on pool {pool}: together they ask {r} {queues.show(r, total)}, "
                    f'queue "{queue.name}" holds {queues.show(r, held)}')
    return None
