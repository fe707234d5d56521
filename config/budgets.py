"""`kns:budgets` (contract section 17, docs/budgets.md): resource-hour allocations per team
and period, the model and the checks that need the whole config (queues, queueing).

A budget limits what its queues may be admitted, in hours of each resource Kueue admitted,
within a period: recurring (`reset`, a cron of each period's start, in `timeZone`) or one
grant (`start` to `end`). Everything here is pure; the period arithmetic is chrono's.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Sequence

from pydantic import Field, model_validator

from chrono import moments, periods
from . import podspec, rules
from .errors import Problem, Problems, at, closest
from .models import CronExpr, DnsLabel, Model, Queue, QueueResourceName, Queueing, TimeZone
from .queues import covered_resources
from .reservations import Moment

Hours = Annotated[float, Field(gt=0, le=rules.BUDGET_HOURS_MAX, allow_inf_nan=False)]
Percent = Annotated[int, Field(strict=True, ge=1, le=100)]


class Budget(Model):
    """One `kns:budgets` entry."""

    name: DnsLabel
    queues: Annotated[list[DnsLabel], Field(min_length=1)]
    limits: Annotated[dict[QueueResourceName, Hours], Field(min_length=1)]
    reset: Optional[CronExpr] = None
    time_zone: TimeZone = "Etc/UTC"
    start: Moment = None
    end: Moment = None
    at_limit: Literal["hold", "stop"] = "hold"
    warn_at: list[Percent] = Field(default_factory=lambda: list(rules.BUDGET_WARN_AT_DEFAULT))
    count_every_minutes: Literal[rules.BUDGET_COUNT_EVERY] = rules.BUDGET_COUNT_EVERY_DEFAULT  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _period(self) -> "Budget":
        found: list[Problem] = []
        grant = self.start is not None or self.end is not None
        if (self.reset is not None) == grant:
            found.append(at((), rules.BUDGET_PERIOD_ONE.message))
        if grant:
            for key, value in (("start", self.start), ("end", self.end)):
                if value is None:
                    found.append(at((key,), "a grant needs start and end"))
                elif value.tzinfo is None:
                    found.append(at((key,), rules.RESERVATION_OFFSET.message))
            if self.start and self.end and self.start.tzinfo and self.end.tzinfo and self.start >= self.end:
                found.append(at(("end",), f"{moments.shown(self.end)} is not after start {moments.shown(self.start)}"))
            if "time_zone" in self.model_fields_set and self.reset is None:
                found.append(at(("timeZone",), rules.BUDGET_GRANT_ZONE.message))
        if len(set(self.warn_at)) != len(self.warn_at):
            found.append(at(("warnAt",), "lists a percentage twice"))
        twice = sorted({q for q in self.queues if self.queues.count(q) > 1})
        if twice:
            found.append(at(("queues",), f"lists {', '.join(twice)} twice"))
        podspec.raise_if_any(found)
        return self

    def zone(self) -> Optional[str]:
        """The zone its periods are shown in (a grant: its start's own offset)."""
        return self.time_zone if self.reset is not None else None

    def periods(self) -> periods.Periods:
        if self.reset is not None:
            return periods.Periods(reset=self.reset, zone=self.time_zone)
        return periods.Periods(start=self.start, end=self.end)


def check_budgets(budgets: Sequence[Budget], given: bool, queueing: Queueing, queues: Sequence[Queue],
                  broken_queues: set[str], problems: Problems) -> None:
    """Budgets need queueing; names are unique; each queue exists, and each limited resource
    is one that at least one of the budget's queues counts (its quota covers it). The
    entries' TTLs against the counting interval are checked with the entries
    (`ttl_problems`)."""
    if given and not queueing.enabled:
        problems.add("kns:budgets", rules.BUDGETS_NEED_QUEUEING.message)
    by_name = {q.name: q for q in queues}
    seen: set[str] = set()
    for budget in budgets:
        path = f"kns:budgets[{budget.name}]"
        if budget.name in seen:
            problems.add(path + ".name", f'"{budget.name}" names another budget too; budget names are unique')
            continue  # its other problems would be the first one's again
        seen.add(budget.name)
        known = [q for q in budget.queues if q in by_name]
        for queue in budget.queues:
            if queue in broken_queues:
                problems.add(f"{path}.queues", f'queue "{queue}" has problems of its own (above)')
            elif queue not in by_name:
                close = closest(queue, list(by_name))
                problems.add(f"{path}.queues", f'no queue named "{queue}"'
                             + (f'; did you mean "{close}"?' if close else f" (queues: {', '.join(by_name) or 'none'})"))
        if len(known) != len(budget.queues):
            continue  # what the queues count is judged once they all exist
        counted = {r for q in known for r in covered_resources(by_name[q].quota)}
        for resource in budget.limits:
            if resource not in counted:
                problems.add(f"{path}.limits", f'"{resource}" is counted by none of its queues '
                             f"({', '.join(sorted(counted))}): {rules.BUDGET_RESOURCE_COUNTED.message}")


def ttl_problems(budgets: Sequence[Budget], entries: Sequence[tuple[str, Optional[str], float]]
                 ) -> list[Problem]:
    """The problem of each entry (its path, queue and ttlHours) of a budget's queue
    whose finished Job is removed before the budget's next count (0: at once)."""
    found = []
    for path, queue, ttl_hours in entries:
        for budget in budgets:
            if queue is None or queue not in budget.queues:
                continue
            if ttl_hours * 60 < budget.count_every_minutes:
                found.append(Problem(f"{path}.ttlHours", f"{ttl_hours:g} h is shorter than budget {budget.name}'s "
                                     f"counting interval ({budget.count_every_minutes} min): "
                                     f"{rules.BUDGET_TTL_COUNTED.message}"))
                break
    return found
