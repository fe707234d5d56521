"""Primer schedules: cron expressions that fire exactly W minutes before a workload's runs.

Pure (no Pulumi). Fire times are wall-clock times in the schedule's zone, as the CronJob
controller evaluates them. A cron expression is a product: a set of days (day-of-month,
month, day-of-week fields) times a set of minutes of the day (minute and hour fields).
Shifting by -W minutes splits every run into a same-day part and a part that wraps to the
previous day, so a primer set is built from:

- minutes: each part's minute set, cut into the fewest hour x minute rectangles;
- days: the workload's own days for the same-day part, and "the day before" each of them
  for the wrapped part, written as cron day fields when the calendar allows it (it does
  not for "the day before the 1st", which is the 28th, 29th, 30th or 31st).

Every result is proven before it is returned: the workload's and the primers' fire times
are enumerated with croniter (an independent implementation) over 28 years, which covers
every weekday and leap-year alignment up to 2099, and must match exactly, with no minute
fired twice.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Optional

from croniter import croniter

DAY = 1440
HORIZON_YEARS = 28
MONTHS = frozenset(range(1, 13))
_ALL_HOURS = (1 << 24) - 1
_HOUR_ROW = (1 << 60) - 1


@dataclass(frozen=True)
class Primers:
    """A prescaled schedule's primer CronJob schedules and their lead in minutes."""

    lead: int
    schedules: tuple[str, ...]


class PrimerError(ValueError):
    """No list of cron expressions can express the shift; the message says why."""


# ---- fields ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Days:
    """Cron day fields. None means `*`, which matters: when day-of-month and day-of-week
    are both restricted, a day matches if either matches (cron's OR rule)."""

    doms: Optional[frozenset[int]] = None
    months: Optional[frozenset[int]] = None
    dows: Optional[frozenset[int]] = None

    def matches(self, day: date) -> bool:
        if self.months is not None and day.month not in self.months:
            return False
        dom_ok = self.doms is None or day.day in self.doms
        dow_ok = self.dows is None or (day.isoweekday() % 7) in self.dows
        if self.doms is None or self.dows is None:
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def fields(self) -> str:
        return " ".join(
            (
                _field(self.doms, 1, 31),
                "*" if self.months is None or self.months == MONTHS else _field(self.months, 1, 12),
                _field(self.dows, 0, 6),
            )
        )


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: Days

    @classmethod
    def parse(cls, expression: str) -> "Cron":
        fields, _ = croniter.expand(expression)
        minute, hour, dom, month, dow = (
            None if values == ["*"] else frozenset(int(v) for v in values) for values in fields
        )
        return cls(
            minutes=minute if minute is not None else frozenset(range(60)),
            hours=hour if hour is not None else frozenset(range(24)),
            days=Days(dom, month, dow),
        )

    def minute_mask(self) -> int:
        """The minutes of the day it fires at, as a 1440-bit mask."""
        mask = 0
        for hour in self.hours:
            for minute in self.minutes:
                mask |= 1 << (hour * 60 + minute)
        return mask


def _field(values: Optional[frozenset[int]], low: int, high: int) -> str:
    """Compact text for a field: `*`, `a-b/s`, or a list of ranges."""
    if values is None:
        return "*"
    ordered = sorted(values)
    if len(ordered) > 2:
        step = ordered[1] - ordered[0]
        if step > 1 and all(b - a == step for a, b in zip(ordered, ordered[1:])):
            if ordered[0] == low and ordered[-1] + step > high:
                return f"*/{step}" if high - low > 7 else f"{ordered[0]}-{ordered[-1]}/{step}"
            return f"{ordered[0]}-{ordered[-1]}/{step}"
    parts, start = [], ordered[0]
    for previous, current in zip(ordered, ordered[1:] + [None]):
        if current != previous + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = current
    return ",".join(parts)


def _mask_text(mask: int) -> tuple[str, str]:
    """Minute and hour fields of a rectangle mask (full sets are `*`: no OR rule here)."""
    minutes = frozenset(i % 60 for i in range(DAY) if mask >> i & 1)
    hours = frozenset(i // 60 for i in range(DAY) if mask >> i & 1)
    return (
        "*" if len(minutes) == 60 else _field(minutes, 0, 59),
        "*" if len(hours) == 24 else _field(hours, 0, 23),
    )


# ---- minutes of the day -----------------------------------------------------------------


def shift_minutes(mask: int, lead: int) -> tuple[int, int]:
    """Split a minute mask shifted by -lead into (same day, previous day) masks."""
    same = mask >> lead
    previous = (mask & ((1 << lead) - 1)) << (DAY - lead)
    return same, previous


def rectangles(mask: int) -> list[int]:
    """Cut a minute mask into the fewest hour x minute products (each a cron minute and
    hour field), choosing between grouping hours by their minutes and minutes by hours."""
    if not mask:
        return []
    rows: dict[int, int] = {}
    for hour in range(24):
        row = mask >> (hour * 60) & _HOUR_ROW
        if row:
            rows[row] = rows.get(row, 0) | (1 << hour)
    columns: dict[int, int] = {}
    for minute in range(60):
        column = 0
        for hour in range(24):
            if mask >> (hour * 60 + minute) & 1:
                column |= 1 << hour
        if column:
            columns[column] = columns.get(column, 0) | (1 << minute)
    groups = rows.items() if len(rows) <= len(columns) else ((m, h) for h, m in columns.items())
    out = []
    for minute_bits, hour_bits in groups:
        rect = 0
        for hour in range(24):
            if hour_bits >> hour & 1:
                rect |= minute_bits << (hour * 60)
        out.append(rect)
    return sorted(out)


# ---- days --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def horizon(start_year: int) -> tuple[date, date]:
    return date(start_year, 1, 1), date(start_year + HORIZON_YEARS, 1, 1)


def days_of(days: Days, first: date, last: date) -> frozenset[int]:
    """Ordinals of the days in [first, last) that match."""
    out, day = set(), first
    while day < last:
        if days.matches(day):
            out.add(day.toordinal())
        day += timedelta(days=1)
    return frozenset(out)


WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December")


def express_days(target: frozenset[int], first: date, last: date) -> list[Days] | str:
    """The disjoint cron day patterns whose union is `target`, or why none exist.

    Complete: a cron day pattern's match depends only on (month, day of month, weekday),
    and within one month any union of patterns is "day of month in D or weekday in W".
    So `target` is expressible exactly when (1) membership is a function of those three
    (month lengths and leap years can break this) and (2) in each month it equals the
    canonical D* (days whose every weekday is in) or W* (weekdays whose every day is in).
    Months with the same (D*, W*) share one pattern.
    """
    cells: dict[int, dict[tuple[int, int], tuple[bool, date]]] = {m: {} for m in range(1, 13)}
    day = first
    while day < last:
        key = (day.day, day.isoweekday() % 7)
        member = day.toordinal() in target
        seen = cells[day.month].setdefault(key, (member, day))
        if seen[0] != member:
            yes, no = (seen[1], day) if seen[0] else (day, seen[1])
            return (
                f"{yes} and {no} are both {WEEKDAYS[key[1]]} {key[0]} {MONTH_NAMES[day.month - 1]}, "
                f"but only {yes} must have a primer, and a cron day pattern cannot tell them apart"
            )
        day += timedelta(days=1)
    every_day: list[int] = []
    # weekday set -> clusters of (D, months); a D serves a month when D ∩ its days == D*
    clusters: dict[frozenset[int], list[tuple[set[int], list[int]]]] = {}
    for month, month_cells in cells.items():
        inside = {k for k, (member, _) in month_cells.items() if member}
        if not inside:
            continue
        doms = {d for d, _ in month_cells}
        dows = {w for _, w in month_cells}
        d_star = {d for d in doms if all(k in inside for k in month_cells if k[0] == d)}
        w_star = {w for w in dows if all(k in inside for k in month_cells if k[1] == w)}
        covered = {k for k in month_cells if k[0] in d_star or k[1] in w_star}
        if covered != inside:
            d, w = min(inside - covered)
            return (
                f"{WEEKDAYS[w]} {d} {MONTH_NAMES[month - 1]} must have a primer but not every {d} "
                f"{MONTH_NAMES[month - 1]} nor every {WEEKDAYS[w]} in it does, and cron cannot require "
                "both a day of month and a weekday (it matches either)"
            )
        if covered == set(month_cells):
            every_day.append(month)
            continue
        for d_set, months in clusters.setdefault(frozenset(w_star), []):
            merged = d_set | d_star
            if all(merged & set(range(1, _days_in(m) + 1)) == _d_star_of(cells[m]) for m in months + [month]):
                d_set |= d_star
                months.append(month)
                break
        else:
            clusters[frozenset(w_star)].append((set(d_star), [month]))
    patterns = []
    if every_day:
        patterns.append(Days(None, None if len(every_day) == 12 else frozenset(every_day), None))
    for w_set, groups in clusters.items():
        for d_set, months in groups:
            month_field = None if len(months) == 12 else frozenset(months)
            patterns.append(Days(frozenset(d_set) or None, month_field, w_set or None))
    return sorted(patterns, key=lambda d: d.fields())


def _d_star_of(month_cells: dict[tuple[int, int], tuple[bool, date]]) -> set[int]:
    return {
        d for d in {d for d, _ in month_cells}
        if all(member for (dd, _), (member, _) in month_cells.items() if dd == d)
    }


def _days_in(month: int) -> int:
    return 29 if month == 2 else 30 if month in (4, 6, 9, 11) else 31


# ---- derivation --------------------------------------------------------------------------


def derive(expression: str, lead: int, start_year: Optional[int] = None) -> list[str]:
    """The fewest cron expressions firing exactly `lead` minutes before `expression`."""
    if not 1 <= lead <= DAY:
        raise PrimerError(f"warmUpMinutes {lead} is outside 1..{DAY}")
    start_year = start_year or datetime.now().year
    return list(_derive(" ".join(expression.split()), lead, start_year))


@functools.lru_cache(maxsize=4096)
def _derive(expression: str, lead: int, start_year: int) -> tuple[str, ...]:
    cron = Cron.parse(expression)
    first, last = horizon(start_year)
    same, previous = shift_minutes(cron.minute_mask(), lead)
    days_a = days_of(cron.days, first, last + timedelta(days=1))
    days_b = frozenset(d - 1 for d in days_a)
    window = (first.toordinal(), last.toordinal())

    def clip(days: frozenset[int]) -> frozenset[int]:
        return frozenset(d for d in days if window[0] <= d < window[1])

    days_a, days_b = clip(days_a), clip(days_b)
    options: list[list[tuple[int, Days]]] = []

    reasons: list[str] = []

    def build(parts: list[tuple[int, frozenset[int]]]) -> Optional[list[tuple[int, Days]]]:
        """Each part: a minute mask and the days it fires on."""
        out = []
        for mask, days in parts:
            if not mask or not days:
                continue
            patterns = express_days(days, first, last)
            if isinstance(patterns, str):
                reasons.append(patterns)
                return None
            out += [(rect, pattern) for rect in rectangles(mask) for pattern in patterns]
        return out

    if days_a == days_b:
        options.append(build([(same | previous, days_a)]))
    options.append(build([(same, days_a), (previous, days_b)]))
    both = days_a & days_b
    options.append(build([(same | previous, both), (same, days_a - both), (previous, days_b - both)]))
    valid = [o for o in options if o is not None]
    if not valid:
        raise PrimerError(_why(expression, lead, previous, reasons[0]))
    best = min(valid, key=len)
    result = tuple(sorted(f"{' '.join(_mask_text(rect))} {days.fields()}" for rect, days in best))
    problem = check(expression, list(result), lead, start_year)
    if problem:  # pragma: no cover - a bug in the derivation, never a user error
        raise AssertionError(f"derived primers {result} for {expression!r} -{lead}m fail the proof: {problem}")
    return result


def _why(expression: str, lead: int, previous: int, reason: str) -> str:
    first = (previous & -previous).bit_length() - 1
    return (
        f'no set of cron expressions fires exactly {lead} minutes before every run of "{expression}": '
        f"primers such as {first // 60:02d}:{first % 60:02d} fall on the day before their run, and {reason}. "
        "Set primerSchedule to the schedule you want, or a warm-up that keeps every primer on its run's day"
    )


# ---- the proof ---------------------------------------------------------------------------


def _fires(expression: str, first: date, last: date) -> dict[int, int]:
    """Day ordinal -> minute mask of every fire time in [first, last), enumerated with
    croniter: the days from the day fields, the minutes from the minute and hour fields."""
    fields = expression.split()
    minutes = 0
    it = croniter(f"{fields[0]} {fields[1]} * * *", datetime(2001, 1, 1) - timedelta(minutes=1))
    while True:
        fire = it.get_next(datetime)
        if fire.date() != date(2001, 1, 1):
            break
        minutes |= 1 << (fire.hour * 60 + fire.minute)
    out: dict[int, int] = {}
    if fields[2:] == ["*", "*", "*"]:
        # Every day: nothing about cron's day rules to prove, and 10,000 croniter steps saved.
        return {day: minutes for day in range(first.toordinal(), last.toordinal())}
    it = croniter(f"0 0 {' '.join(fields[2:])}", datetime.combine(first, datetime.min.time()) - timedelta(minutes=1))
    while True:
        fire = it.get_next(datetime)
        if fire.date() >= last:
            break
        out[fire.date().toordinal()] = minutes
    return out


def check(expression: str, primers: list[str], lead: int, start_year: Optional[int] = None) -> Optional[str]:
    """Why `primers` do not fire exactly `lead` minutes before every run of `expression`
    (and at no other time, and never twice at once), or None when they do."""
    first, last = horizon(start_year or datetime.now().year)
    window = (first.toordinal() + 1, last.toordinal() - 1)
    expected: dict[int, int] = {}
    for day, mask in _fires(expression, first, last).items():
        same, previous = shift_minutes(mask, lead)
        if same:
            expected[day] = expected.get(day, 0) | same
        if previous:
            expected[day - 1] = expected.get(day - 1, 0) | previous
    actual: dict[int, int] = {}
    for primer in primers:
        for day, mask in _fires(primer, first, last).items():
            if actual.get(day, 0) & mask:
                return f'"{primer}" fires at a minute another primer already fires at ({date.fromordinal(day)})'
            actual[day] = actual.get(day, 0) | mask
    for day in range(*window):
        want, got = expected.get(day, 0), actual.get(day, 0)
        if want != got:
            missing, extra = want & ~got, got & ~want
            when = date.fromordinal(day)
            if extra:
                minute = (extra & -extra).bit_length() - 1
                return f"fires at {when} {minute // 60:02d}:{minute % 60:02d}, which is not {lead} minutes before a run"
            minute = (missing & -missing).bit_length() - 1
            return f"does not fire at {when} {minute // 60:02d}:{minute % 60:02d}, {lead} minutes before a run"
    return None


def lead_of(expression: str, primer: str, start_year: Optional[int] = None) -> Optional[int]:
    """The lead of an explicit primerSchedule: minutes from its first fire to the first run."""
    first, _ = horizon(start_year or datetime.now().year)
    start = datetime.combine(first, datetime.min.time()) + timedelta(days=2)
    run = croniter(expression, start).get_next(datetime)
    before = croniter(primer, run).get_prev(datetime)
    lead = int((run - before).total_seconds() // 60)
    return lead if 1 <= lead <= DAY else None


def check_primer_schedule(expression: str, primer: str, start_year: Optional[int] = None) -> tuple[Optional[int], Optional[str]]:
    """(lead, None) if `primer` precedes every run by one constant lead and fires at no
    other time; otherwise (lead or None, why not)."""
    lead = lead_of(expression, primer, start_year)
    if lead is None:
        return None, f'"{primer}" does not fire in the day before every run of "{expression}"'
    problem = check(expression, [primer], lead, start_year)
    return lead, problem
