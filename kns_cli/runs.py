"""When a schedule runs and when its warm-up starts, from the program's own functions.

Run times come from `chrono.cron.next_runs` (what the stack output `nextRuns` shows: the
CronJob controller's fire times); warm-up starts come from the primer schedules the
program derived (`chrono.prescale.primers_for`, kept in the plan as `plan.primers`),
evaluated with the same `next_runs`: the primer of a run is the primer CronJob's fire
`lead` minutes before the run, which the checks prove exists for every run, daylight-saving
changes included.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional

from chrono import cron
from config.models import Schedule
from plan.model import WorkloadPlan


@dataclass(frozen=True)
class Run:
    """One run of a schedule: its start and its primer (warm-up start), aware datetimes in
    the schedule's zone; `primer` is None for a schedule without warm-up."""

    start: datetime
    primer: Optional[datetime]


def _schedule(plan: WorkloadPlan) -> Schedule:
    if not isinstance(plan.entry, Schedule):
        raise TypeError(f"{plan.entry.name} is a job, not a schedule")
    return plan.entry


def primer_of(plan: WorkloadPlan, start: datetime) -> Optional[datetime]:
    """The primer fire that warms the run starting at `start` (None without warm-up)."""
    entry = _schedule(plan)
    if plan.primers is None:
        return None
    # next_runs gives the fires strictly after its reference: one minute before the primer.
    reference = start - timedelta(minutes=plan.primers.lead + 1)
    fires = [datetime.fromisoformat(fire) for p in plan.primers.schedules
             for fire in cron.next_runs(p, entry.time_zone, 1, reference)]
    return min(fires, default=None)


def next_runs(plan: WorkloadPlan, count: int = 3, now: Optional[datetime] = None) -> list[Run]:
    """The next `count` runs strictly after `now` (default: the current time), as the
    stack output `nextRuns` lists them, each with its primer."""
    entry = _schedule(plan)
    starts = cron.next_runs(entry.schedule, entry.time_zone, count, now)
    return [Run(s, primer_of(plan, s)) for s in map(datetime.fromisoformat, starts)]


def runs_between(plan: WorkloadPlan, start: datetime, end: datetime) -> list[Run]:
    """Every run starting in [start, end), each with its primer."""
    entry = _schedule(plan)
    reference = start - timedelta(seconds=1)  # next_runs is strictly after: keep a run at `start`
    count = 16
    while True:
        starts = [datetime.fromisoformat(s) for s in cron.next_runs(entry.schedule, entry.time_zone, count, reference)]
        if len(starts) < count or starts[-1] >= end:  # fewer: the schedule stops firing
            break
        count *= 2
    return [Run(s, primer_of(plan, s)) for s in starts if s < end]
