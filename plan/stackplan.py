"""The plan of a whole stack for one run, made once and carried: every entry's plan, each
reservation's objects, the Cohorts of the pools reservations hold part of (as of the run's
one instant), and what each entry is tied to beyond its own plan (its queue, the workers
its Jobs may be dispatched to, its reservation's plan). Whatever registers (`__main__.py`,
plan/inventory.py), judges (plan/guardrails.py) or explains (`./kns explain`) an entry
reads these instead of deriving them from the config again, so that one run cannot see two
different instants or two different plans of one reservation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from chrono import clock
from config.platform import PlatformConfig
from config.models import Queue

from . import budgets, multikueue, queues, reservations
from .budgets import BudgetPlan
from .model import WorkloadPlan
from .reservations import ReservationPlan


@dataclass
class StackPlan:
    config: PlatformConfig
    entries: list[WorkloadPlan]
    now: datetime
    reservations: list[ReservationPlan] = field(default_factory=list)
    cohorts: list[dict[str, Any]] = field(default_factory=list)
    # Entry name -> its queue (None: not queued), and the workers its Jobs may go to.
    queues: dict[str, Optional[Queue]] = field(default_factory=dict)
    workers: dict[str, list[str]] = field(default_factory=dict)
    budgets: list[BudgetPlan] = field(default_factory=list)
    # Entry name -> the objects of its namespace that tie it to the queues: its LocalQueue
    # (None: not queued), and its reservation's LocalQueue and the switch's RoleBinding there
    # (created in the reservation's phase at `now`).
    local_queues: dict[str, Optional[dict[str, Any]]] = field(default_factory=dict)
    reserved_objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def reservation(self, name: Optional[str]) -> Optional[ReservationPlan]:
        """The plan of the reservation named `name` (an entry's `reservation`), if any."""
        return next((r for r in self.reservations if r.name == name), None)

    def entry(self, name: str) -> Optional[WorkloadPlan]:
        return next((p for p in self.entries if p.entry.name == name), None)


def plan_stack(cfg: PlatformConfig, entries: list[WorkloadPlan], now: Optional[datetime] = None) -> StackPlan:
    """What the whole stack needs beyond each entry's plan, computed once for `now` (the
    run's instant; default: the clock's)."""
    now = now or clock.now()
    planned = StackPlan(cfg, entries, now, reservations.plan_reservations(cfg, entries, now),
                        reservations.pool_cohorts(cfg, now),
                        {p.entry.name: queues.queue_of(cfg, p) for p in entries},
                        {p.entry.name: multikueue.entry_workers(cfg, p) for p in entries},
                        budgets.plan_budgets(cfg, entries))
    for plan in entries:
        name = plan.entry.name
        planned.local_queues[name] = queues.local_queue_manifest(plan) if plan.entry.queue is not None else None
        reserved = planned.reservation(plan.entry.reservation)
        planned.reserved_objects[name] = [] if reserved is None else reservations.entry_objects(
            cfg, reserved, next(e for e in reserved.entries if e.entry == name))
    return planned
