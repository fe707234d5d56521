"""Reservation windows on the calendar (issue 45, contract section 15): pure functions, no
Pulumi, no cluster.

A reservation is either recurring (a Kubernetes cron expression of each window's start,
in a time zone, with a duration) or one window (`start`/`end`, RFC 3339 with an offset).
Its windows are computed the way the CronJob controller computes fire times
(chrono/kcron.py, robfig's rules: a start in a spring-forward gap does not happen that day,
one in the repeated autumn hour happens twice), so the switches the program emits as
CronJobs fire exactly at the windows listed here.

What the checks need: the windows in a horizon (366 days), whether one window runs into
the next of the same reservation, and, per pool, the first moment at which reservations
together hold more than the pool has (a sweep over window edges, not a sum).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Mapping, Optional, Sequence

from . import kcron, moments

HORIZON = timedelta(days=366)
# A duration as users write it: hours and minutes ("3h", "90m", "1h30m"), more than 0. The
# rule's one home: config/rules.py's RESERVATION_DURATION (models, schema) reads these.
DURATION_PATTERN = r"^(?:([0-9]+)h)?(?:([0-9]+)m)?$"
DURATION_MESSAGE = 'is not a duration of hours and minutes ("3h", "90m", "1h30m") more than 0'
DURATION = re.compile(DURATION_PATTERN)


class CalendarError(ValueError):
    """A window definition the calendar cannot compute (the message is user-facing)."""


def duration(text: str) -> timedelta:
    match = DURATION.fullmatch(text or "")
    if not match or not any(match.groups()):
        raise CalendarError(DURATION_MESSAGE)
    value = timedelta(hours=int(match.group(1) or 0), minutes=int(match.group(2) or 0))
    if value <= timedelta(0):
        raise CalendarError(DURATION_MESSAGE)
    return value


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    def overlaps(self, other: "Window") -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Hold:
    """When a reservation holds its capacity for one window: from its warm-up, `lead` before
    the window's start, to the window's end, [start - lead, end). The one definition every
    reader of "when is it held" uses (the overbooking sweep, the Cohort's peak, the switch's
    phase, `./kns explain`, the timeline): a warm-up takes the capacity back as surely as
    the window does."""

    window: Window
    lead: timedelta = timedelta(0)

    @property
    def start(self) -> datetime:
        return self.window.start - self.lead

    @property
    def end(self) -> datetime:
        return self.window.end

    def phase(self, now: datetime) -> Optional[str]:
        """Where `now` falls in this hold: its warm-up, its window, or outside (None)."""
        if not self.start <= now < self.end:
            return None
        return OPEN if now >= self.window.start else WARM


@dataclass(frozen=True)
class Calendar:
    """When a reservation holds its capacity: recurring (`schedule`, `zone`, `length`) or one
    window (`once`), each window held from `lead` (its warm-up) before its start."""

    schedule: Optional[str] = None
    zone: str = "Etc/UTC"
    length: Optional[timedelta] = None
    once: Optional[Window] = None
    lead: timedelta = timedelta(0)

    def windows(self, since: datetime, until: datetime) -> list[Window]:
        """Every window that is open at some moment in [since, until), in start order. A
        recurring window that started before `since` and is still open is included."""
        if self.once is not None:
            return [self.once] if self.once.overlaps(Window(since, until)) else []
        assert self.schedule is not None and self.length is not None
        fields = kcron.parse(self.schedule)
        found: list[Window] = []
        t = since - self.length
        while True:
            start = kcron.next_fire(fields, t, self.zone)
            if start is None or start >= until:
                return found
            # A duration is elapsed time: a window over a clock change is as long as any other.
            begin = start.astimezone(timezone.utc)
            window = Window(begin, begin + self.length)
            if window.end > since:
                found.append(window)
            t = start

    def holds(self, since: datetime, until: datetime) -> list[Hold]:
        """Every hold ([start - lead, end)) that meets [since, until), in start order: a
        window that opens after `until` but whose warm-up begins before it is among them."""
        return [Hold(window, self.lead) for window in self.windows(since, until + self.lead)
                if window.start - self.lead < until]

    def runs_into_next(self, since: datetime, horizon: timedelta = HORIZON) -> Optional[tuple[Window, Window]]:
        """The first window that has not ended when the next one starts (recurring only)."""
        found = self.windows(since, since + horizon)
        for first, second in zip(found, found[1:]):
            if second.start < first.end:
                return first, second
        return None

    def state(self, now: datetime) -> Optional[Window]:
        """The window open at `now`, if any."""
        return next((w for w in self.windows(now, now + timedelta(seconds=1)) if w.start <= now < w.end), None)


@dataclass(frozen=True)
class Held:
    """What one reservation holds of its pool, per resource (plain numbers in the pool's
    units: cores, bytes, devices, nodes), and when (its calendar's holds)."""

    name: str
    calendar: Calendar
    amounts: Mapping[str, float]


@dataclass(frozen=True)
class Overbooked:
    """Reservations `first` and `second` of one pool together hold more of `resource` than
    the pool has, first at `at`: when `second`'s hold of `window` begins (its warm-up, or
    the window's start without one) while `first` holds."""

    first: str
    second: str
    resource: str
    held: float
    capacity: float
    window: Window
    at: datetime

    @property
    def in_warm_up(self) -> bool:
        return self.at < self.window.start


def _edges(held: Sequence[Held], since: datetime, until: datetime) -> list[tuple[datetime, int, Held, Hold]]:
    """Every hold's begin and end in [since, until), in time order; ends sort before begins
    at the same instant, so back-to-back holds do not meet."""
    edges: list[tuple[datetime, int, Held, Hold]] = []
    for item in held:
        for hold in item.calendar.holds(since, until):
            edges += [(hold.start, 1, item, hold), (hold.end, 0, item, hold)]
    edges.sort(key=lambda edge: (edge[0], edge[1], edge[2].name))
    return edges


def overbooked(capacity: Mapping[str, float], held: Sequence[Held], since: datetime,
               horizon: timedelta = HORIZON) -> Optional[Overbooked]:
    """The first moment in [since, since + horizon) at which the reservations of one pool
    together hold more of a resource than `capacity` (the pool's size, less what is
    otherwise promised, such as its queues' quotas): a sweep over every hold's edges, so
    reservations whose holds never meet may share the same capacity."""
    open_now: dict[str, Held] = {}
    for moment, opening, item, hold in _edges(held, since, since + horizon):
        if not opening:
            open_now.pop(item.name, None)
            continue
        open_now[item.name] = item
        for resource, limit in capacity.items():
            total = sum(other.amounts.get(resource, 0) for other in open_now.values())
            if total > limit:
                others = [name for name in open_now if name != item.name]
                first = others[0] if others else item.name
                return Overbooked(first, item.name, resource, total, limit, hold.window, moment)
    return None


CLOSED, WARM, OPEN = "closed", "warm-up", "open"


def phase_at(calendar: Calendar, now: datetime) -> tuple[str, Optional[Window]]:
    """Where `now` falls: in a window's warm-up, in the window, or between windows; and that
    window (None between windows). What the switch does follows from this alone
    (plan/reservation_switch.py), so any run, on time or late, agrees."""
    for hold in calendar.holds(now, now + timedelta(seconds=1)):
        phase = hold.phase(now)
        if phase is not None:
            return phase, hold.window
    return CLOSED, None


def next_edge(calendar: Calendar, now: datetime, starts: bool = True) -> Optional[datetime]:
    """The first moment after `now` at which `phase_at` changes: a warm-up, a start (unless
    `starts` is false: where a start changes nothing) or an end."""
    edges = []
    for hold in calendar.holds(now, now + HORIZON):
        edges += [hold.start, hold.end] + ([hold.window.start] if starts else [])
    later = [edge for edge in edges if edge > now]
    return min(later) if later else None


def peak(held: Sequence[Held], since: datetime, horizon: timedelta = HORIZON) -> dict[str, float]:
    """The most the reservations hold together at any moment in [since, since + horizon),
    per resource (a sweep over their holds' edges): what a pool sets aside for them."""
    now_held: dict[str, float] = {}
    out: dict[str, float] = {}
    for _, opening, item, _ in _edges(held, since, since + horizon):
        for resource, amount in item.amounts.items():
            now_held[resource] = now_held.get(resource, 0.0) + (amount if opening else -amount)
            out[resource] = max(out.get(resource, 0.0), now_held[resource])
    return out


def next_holds(calendar: Calendar, now: datetime, count: int = 3) -> list[Hold]:
    """The hold under way now (its warm-up or window), if any, and the next ones, `count`
    in all."""
    return calendar.holds(now, now + HORIZON)[:count]


def next_windows(calendar: Calendar, now: datetime, count: int = 3) -> list[Window]:
    """The windows of `next_holds`: one in its warm-up now is the first."""
    return [hold.window for hold in next_holds(calendar, now, count)]


def describe(window: Window, zone: Optional[str] = None) -> str:
    """A window as the checks and `./kns explain` show it, in the reservation's zone (a
    one-off window: in the offset its start was written with; chrono/moments.py)."""
    return f"{moments.shown(window.start, zone)} to {moments.shown(window.end, zone, window.start)}"


def moment(at: datetime, zone: Optional[str], like: datetime) -> str:
    """One instant as `describe` shows a window's edges (`like`: a one-off window's start,
    whose offset it takes)."""
    return moments.shown(at, zone, like)

