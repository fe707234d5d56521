"""Budget periods (docs/queueing.md; a budget's `reset` and `timeZone`, or its `start` and
`end`): a recurring period runs from one fire of its reset cron, in its zone and as the
CronJob controller fires it (chrono/kcron.py), to the next; a grant is one period. What a
budget counts is the use inside the period `now` falls in, and it is refilled at its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional

from . import kcron

# How far back the period containing a moment is looked for, widest last: a reset that
# fires every few minutes is found within the first step, a yearly one within the last.
# Beyond it (a cron whose last fire was longer ago), `now` is in no period.
_LOOK_BACK = (timedelta(hours=1), timedelta(days=2), timedelta(days=63), timedelta(days=800))


@dataclass(frozen=True)
class Period:
    """[start, end) in UTC; `end` None: the reset never fires again (robfig's 5-year horizon)."""

    start: datetime
    end: Optional[datetime]

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment and (self.end is None or moment < self.end)


@dataclass(frozen=True)
class Periods:
    """A budget's periods: recurring (`reset` and `zone`) or one grant (`start`, `end`)."""

    reset: Optional[str] = None
    zone: str = "Etc/UTC"
    start: Optional[datetime] = None
    end: Optional[datetime] = None

    def at(self, now: datetime) -> Optional[Period]:
        """The period `now` falls in; None before the grant or the reset's first fire in
        the look-back, or after the grant."""
        if self.reset is None:
            assert self.start is not None and self.end is not None
            grant = Period(self.start.astimezone(timezone.utc), self.end.astimezone(timezone.utc))
            return grant if grant.contains(now) else None
        fields = kcron.parse(self.reset)
        for back in _LOOK_BACK:
            first = kcron.next_fire(fields, now - back, self.zone)
            if first is None or first > now:
                continue
            # The last fire at or before `now`, walking forward from the first one found.
            last = first
            while (following := kcron.next_fire(fields, last, self.zone)) is not None and following <= now:
                last = following
            return Period(last.astimezone(timezone.utc), following.astimezone(timezone.utc) if following else None)
        return None

    def next_reset(self, now: datetime) -> Optional[datetime]:
        """When the budget is next refilled: its period's end (a grant's end is not a refill)."""
        if self.reset is None:
            return None
        fire = kcron.next_fire(kcron.parse(self.reset), now, self.zone)
        return fire.astimezone(timezone.utc) if fire else None
