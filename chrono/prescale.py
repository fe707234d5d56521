"""Primer schedules: cron expressions that fire exactly W minutes before a workload's runs.

Pure (no Pulumi). Schedules mean what they mean to the CronJob controller
(chrono/kcron.py): fire times are wall-clock times in the schedule's zone, and a day field
written `*`, `?` or `*/1` is unrestricted (the "star bit"). A cron expression is a
product: a set of days (day-of-month, month, day-of-week fields) times a set of minutes of
the day (minute and hour fields).
Shifting by -W minutes splits every run into a same-day part and a part that wraps to the
previous day, so a primer set is built from:

- minutes: each part's minute set, cut into the fewest hour x minute rectangles;
- days: the workload's own days for the same-day part, and "the day before" each of them
  for the wrapped part, written as cron day fields when the calendar allows it (it does
  not for "the day before the 1st", which is the 28th, 29th, 30th or 31st).

Every result is proven before it is returned (`check`): the workload's and the primers'
fire times over 28 years, by the controller's own day rule (`kcron.Fields`, which shares
no code with the derivation), which covers every weekday and leap-year alignment up to
2099, must match exactly, with no minute fired twice. Cheaply (docs/prescaling.md, "How
fast"): a set of days of the horizon is a Python int with a bit per day (`Calendar`),
built from the calendar cells a cron day pattern can tell apart (day of month, weekday,
month), and the minutes of the day are compared a class at a time, so a proof is a few
hundred word operations instead of a walk over 10,000 days. The tests prove every
derived set again with croniter over every day and minute of the horizon
(kns_testing/cron_oracle.py).

`primers_for` adds what wall-clock equality cannot see (docs/prescaling.md): the lead
must be shorter than the shortest gap between two runs (`shortest_gap`), and no warm-up
may cross a daylight-saving change of the zone (`dst_problem`, which replays the
controller and the wait around every change in the horizon).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Optional

from . import kcron

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
    """A warm-up that cannot be honoured; the message says why, `key` is the config key
    at fault (warmUpMinutes or primerSchedule)."""

    def __init__(self, message: str, key: str = "warmUpMinutes"):
        super().__init__(message)
        self.key = key


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
        """The Kubernetes meaning of `expression` (kcron.parse): a day field None is
        unrestricted, exactly when the controller sets its star bit."""
        fields = kcron.parse(expression)
        months = None if fields.months == MONTHS else fields.months
        return cls(minutes=fields.minutes, hours=fields.hours, days=Days(fields.doms, months, fields.dows))

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
    by_minute: dict[int, int] = {}  # minute -> the hours it fires in (the transposed mask)
    for row, hours in rows.items():
        while row:
            minute = (row & -row).bit_length() - 1
            by_minute[minute] = by_minute.get(minute, 0) | hours
            row &= row - 1
    columns: dict[int, int] = {}
    for minute, hours in by_minute.items():
        columns[hours] = columns.get(hours, 0) | (1 << minute)
    groups = rows.items() if len(rows) <= len(columns) else ((m, h) for h, m in columns.items())
    out = []
    for minute_bits, hour_bits in groups:
        rect = 0
        while hour_bits:
            hour = (hour_bits & -hour_bits).bit_length() - 1
            rect |= minute_bits << (hour * 60)
            hour_bits &= hour_bits - 1
        out.append(rect)
    return sorted(out)


# ---- days: the horizon as bit sets ------------------------------------------------------


@functools.lru_cache(maxsize=None)
def horizon(start_year: int) -> tuple[date, date]:
    return date(start_year, 1, 1), date(start_year + HORIZON_YEARS, 1, 1)


def _grid_bit(dom: int, weekday: int) -> int:
    """A (day of month, weekday) cell's bit in a month's 31 x 7 grid."""
    return (dom - 1) * 7 + weekday


_ROWS = tuple(0b1111111 << _grid_bit(d, 0) if d else 0 for d in range(32))  # a day of month, every weekday
_COLUMNS = tuple(sum(1 << _grid_bit(d, w) for d in range(1, 32)) for w in range(7))  # a weekday, every day


@dataclass(frozen=True)
class Calendar:
    """The days of the horizon, first .. last inclusive, as bit positions of Python ints
    (bit i is the day first + i), so a set of days costs a few word operations instead of
    a walk over 28 years of dates. `span` covers [first, last], `clip` [first, last).

    Masks: `doms[d]`, `dows[w]`, `months[m]` (every day with that day of month, weekday,
    month), `cells[(d, w)]` (every day that is both; the calendar cells a cron day pattern
    can tell apart, with the month) and `grids[m]`, the cells that exist in month m as a
    31 x 7 grid (`_grid_bit`), and `month_doms[m]` its days of month."""

    first: date
    span: int
    clip: int
    doms: tuple[int, ...]
    dows: tuple[int, ...]
    months: tuple[int, ...]
    cells: dict
    grids: tuple[int, ...]
    month_doms: tuple[frozenset[int], ...]

    def ordinal(self, bit: int) -> int:
        return self.first.toordinal() + bit

    def day(self, bit: int) -> date:
        return date.fromordinal(self.ordinal(bit))


def _mask(bits: list[int]) -> int:
    out = bytearray((max(bits, default=0) >> 3) + 1)
    for bit in bits:
        out[bit >> 3] |= 1 << (bit & 7)
    return int.from_bytes(out, "little")


@functools.lru_cache(maxsize=8)
def calendar(start_year: int) -> Calendar:
    first, last = horizon(start_year)
    days = [first + timedelta(days=i) for i in range(last.toordinal() - first.toordinal() + 1)]
    by: dict[tuple[str, object], list[int]] = {}
    grids = [0] * 13
    for i, day in enumerate(days):
        weekday = day.isoweekday() % 7
        for key in (("d", day.day), ("w", weekday), ("m", day.month), ("c", (day.day, weekday))):
            by.setdefault(key, []).append(i)
        if day < last:
            grids[day.month] |= 1 << _grid_bit(day.day, weekday)
    return Calendar(
        first=first,
        span=(1 << len(days)) - 1,
        clip=(1 << (len(days) - 1)) - 1,
        doms=tuple(_mask(by.get(("d", d), [])) for d in range(32)),
        dows=tuple(_mask(by.get(("w", w), [])) for w in range(7)),
        months=tuple(_mask(by.get(("m", m), [])) for m in range(13)),
        cells={key[1]: _mask(bits) for key, bits in by.items() if key[0] == "c"},
        grids=tuple(grids),
        month_doms=tuple(frozenset(d for d in range(1, 32) if grid & _ROWS[d]) for grid in grids),
    )


def days_of(days: Days, cal: Calendar) -> int:
    """The days of the horizon (`Calendar.span`) that match a derivation day pattern."""
    doms = cal.span if days.doms is None else functools.reduce(int.__or__, (cal.doms[d] for d in days.doms), 0)
    dows = cal.span if days.dows is None else functools.reduce(int.__or__, (cal.dows[w] for w in days.dows), 0)
    months = cal.span if days.months is None else functools.reduce(int.__or__, (cal.months[m] for m in days.months), 0)
    both = doms & dows if days.doms is None or days.dows is None else doms | dows
    return both & months


def _lowest(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December")


def _month_cells(target: int, cal: Calendar) -> tuple[list[int], Optional[tuple[int, int, int, int]]]:
    """Per month, the 31 x 7 grid of cells whose every day is in `target`, and the first
    cell (as (first day of it that differs, its first day, dom, weekday)) whose days are
    not all in or all out, if any."""
    inside = [0] * 13
    every_month = 0
    conflict = None
    for (dom, weekday), cell in cal.cells.items():
        cell &= cal.clip
        hit = target & cell
        if not hit:
            continue
        bit = 1 << _grid_bit(dom, weekday)
        if hit == cell:
            every_month |= bit
            continue
        for month in range(1, 13):
            part = cell & cal.months[month]
            hit = target & part
            if not hit:
                continue
            if hit == part:
                inside[month] |= bit
                continue
            seen = _lowest(part)
            differs = _lowest(part & ~target if target >> seen & 1 else hit)
            if conflict is None or differs < conflict[0]:
                conflict = (differs, seen, dom, weekday)
    return [(every_month | inside[m]) & cal.grids[m] for m in range(13)], conflict


def express_days(target: int, start_year: int) -> list[Days] | str:
    """The disjoint cron day patterns whose union is `target` (a set of days of the
    horizon, `Calendar.clip`), or why none exist.

    Complete: a cron day pattern's match depends only on (month, day of month, weekday),
    and within one month any union of patterns is "day of month in D or weekday in W".
    So `target` is expressible exactly when (1) membership is a function of those three
    (month lengths and leap years can break this) and (2) in each month it equals the
    canonical D* (days whose every weekday is in) or W* (weekdays whose every day is in).
    Months with the same (D*, W*) share one pattern. Works on the calendar cells of each
    month (a 31 x 7 grid), not on the horizon's days.
    """
    cal = calendar(start_year)
    inside, conflict = _month_cells(target & cal.clip, cal)
    if conflict is not None:
        differs, seen, dom, weekday = conflict
        seen_in = bool(target >> seen & 1)
        yes, no = (cal.day(seen), cal.day(differs)) if seen_in else (cal.day(differs), cal.day(seen))
        return (
            f"{yes} and {no} are both {WEEKDAYS[weekday]} {dom} {MONTH_NAMES[yes.month - 1]}, "
            f"but only {yes} must have a primer, and a cron day pattern cannot tell them apart"
        )
    every_day: list[int] = []
    d_stars: dict[int, set[int]] = {}
    # weekday set -> clusters of (D, months); a D serves a month when D ∩ its days == D*
    clusters: dict[frozenset[int], list[tuple[set[int], list[int]]]] = {}
    for month in range(1, 13):
        grid, valid = inside[month], cal.grids[month]
        if not grid:
            continue
        d_star = {d for d in range(1, 32) if valid & _ROWS[d] and grid & _ROWS[d] == valid & _ROWS[d]}
        w_star = {w for w in range(7) if valid & _COLUMNS[w] and grid & _COLUMNS[w] == valid & _COLUMNS[w]}
        covered = functools.reduce(int.__or__, [_ROWS[d] for d in d_star] + [_COLUMNS[w] for w in w_star], 0) & valid
        if covered != grid:
            bit = _lowest(grid & ~covered)
            d, w = bit // 7 + 1, bit % 7
            return (
                f"{WEEKDAYS[w]} {d} {MONTH_NAMES[month - 1]} must have a primer but not every {d} "
                f"{MONTH_NAMES[month - 1]} nor every {WEEKDAYS[w]} in it does, and cron cannot require "
                "both a day of month and a weekday (it matches either)"
            )
        if covered == valid:
            every_day.append(month)
            continue
        d_stars[month] = d_star
        for d_set, months in clusters.setdefault(frozenset(w_star), []):
            merged = d_set | d_star
            if all(merged & cal.month_doms[m] == d_stars[m] for m in months + [month]):
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


# ---- derivation --------------------------------------------------------------------------


def derive(expression: str, lead: int, start_year: Optional[int] = None) -> list[str]:
    """The fewest cron expressions firing exactly `lead` minutes before `expression`."""
    if not 1 <= lead <= DAY:
        raise PrimerError(f"warmUpMinutes {lead} is outside 1..{DAY}")
    if kcron.never_fires(kcron.parse(expression)):
        raise PrimerError(f'"{expression}" never fires, so it has nothing to warm up')
    start_year = start_year or datetime.now().year
    return list(_derive(expression, lead, start_year))


@functools.lru_cache(maxsize=4096)
def _derive(expression: str, lead: int, start_year: int) -> tuple[str, ...]:
    cron = Cron.parse(expression)
    cal = calendar(start_year)
    same, previous = shift_minutes(cron.minute_mask(), lead)
    days_a = days_of(cron.days, cal)
    days_b = (days_a >> 1) & cal.clip  # the day before each run day
    days_a &= cal.clip
    options: list[Optional[list[tuple[int, Days]]]] = []
    reasons: list[str] = []

    def build(parts: list[tuple[int, int]]) -> Optional[list[tuple[int, Days]]]:
        """Each part: a minute mask and the days it fires on."""
        out = []
        for mask, days in parts:
            if not mask or not days:
                continue
            patterns = _express(days, start_year)
            if isinstance(patterns, str):
                reasons.append(patterns)
                return None
            out += [(rect, pattern) for rect in rectangles(mask) for pattern in patterns]
        return out

    if days_a == days_b:
        options.append(build([(same | previous, days_a)]))
    options.append(build([(same, days_a), (previous, days_b)]))
    both = days_a & days_b
    options.append(build([(same | previous, both), (same, days_a & ~both), (previous, days_b & ~both)]))
    valid = [o for o in options if o is not None]
    if not valid:
        raise PrimerError(_why(expression, lead, previous, reasons[0]))
    best = min(valid, key=len)
    result = tuple(sorted(f"{' '.join(_mask_text(rect))} {days.fields()}" for rect, days in best))
    problem = check(expression, list(result), lead, start_year)
    if problem:  # pragma: no cover - a bug in the derivation, never a user error
        raise AssertionError(f"derived primers {result} for {expression!r} -{lead}m fail the proof: {problem}")
    return result


@functools.lru_cache(maxsize=1024)
def _express(target: int, start_year: int) -> list[Days] | str:
    """express_days, cached: many schedules share their day sets."""
    return express_days(target, start_year)


def _why(expression: str, lead: int, previous: int, reason: str) -> str:
    first = _lowest(previous)
    return (
        f'no set of cron expressions fires exactly {lead} minutes before every run of "{expression}": '
        f"primers such as {first // 60:02d}:{first % 60:02d} fall on the day before their run, and {reason}. "
        "Set primerSchedule to the schedule you want, or a warm-up that keeps every primer on its run's day"
    )


# ---- the proof ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _fires(expression: str, start_year: int) -> tuple[int, int]:
    """(minute mask, days) of every fire time in [first, last), in wall-clock time: the
    minutes of the day from the minute and hour fields, the days (`Calendar.clip` bits) by
    the controller's own day rule, `kcron.Fields.day_matches`, asked once per calendar
    cell (day of month, weekday) and kept for the months the month field names. It shares
    nothing with the derivation's `Days`."""
    fields = kcron.parse(expression)
    minutes = 0
    for hour in fields.hours:
        for minute in fields.minutes:
            minutes |= 1 << (hour * 60 + minute)
    if not minutes:
        return 0, 0
    cal = calendar(start_year)
    days = 0
    for (dom, weekday), cell in cal.cells.items():
        if fields.day_matches(dom, weekday):
            days |= cell
    months = functools.reduce(int.__or__, (cal.months[m] for m in fields.months), 0)
    return minutes, days & months & cal.clip


def _atoms(masks: list[int]) -> list[int]:
    """The minutes of the union of `masks`, cut into the classes no mask splits: every
    minute of a class is in the same masks, so one minute stands for its class."""
    atoms = [functools.reduce(int.__or__, masks, 0)]
    for mask in masks:
        atoms = [part for atom in atoms for part in (atom & mask, atom & ~mask) if part]
    return atoms


def check(expression: str, primers: list[str], lead: int, start_year: Optional[int] = None) -> Optional[str]:
    """Why `primers` do not fire exactly `lead` minutes before every run of `expression`
    (and at no other time, and never twice at once), or None when they do.

    Exact over the whole horizon, a day and a minute at a time in effect: days are bit
    sets (`Calendar`), and minutes are taken a class at a time (`_atoms`: the minutes that
    are in the same run parts and primers behave alike). On day X a primer must fire at
    minute i when a run fires at i + lead on X (the same-day part) or, past midnight, on
    X + 1 (the wrapped part)."""
    start_year = start_year or datetime.now().year
    cal = calendar(start_year)
    window = cal.clip & ~1 & ~(1 << (cal.clip.bit_length() - 1))  # first + 1 .. last - 2: both neighbours known
    run_minutes, run_days = _fires(expression, start_year)
    same, previous = shift_minutes(run_minutes, lead)
    fired = [_fires(primer, start_year) for primer in primers]
    for index, (minutes, days) in enumerate(fired):
        clash = functools.reduce(int.__or__, (other & days for mask, other in fired[:index] if mask & minutes), 0)
        if clash:
            return f'"{primers[index]}" fires at a minute another primer already fires at ({cal.day(_lowest(clash))})'
    wrapped = run_days >> 1
    first_wrong = None
    for atom in _atoms([same, previous, *(minutes for minutes, _ in fired)]):
        i = _lowest(atom)
        want = (run_days if same >> i & 1 else 0) | (wrapped if previous >> i & 1 else 0)
        got = functools.reduce(int.__or__, (days for minutes, days in fired if minutes >> i & 1), 0)
        wrong = (want ^ got) & window
        if wrong and (first_wrong is None or _lowest(wrong) < first_wrong):
            first_wrong = _lowest(wrong)
    if first_wrong is None:
        return None
    day = first_wrong
    want = (same if run_days >> day & 1 else 0) | (previous if wrapped >> day & 1 else 0)
    got = functools.reduce(int.__or__, (minutes for minutes, days in fired if days >> day & 1), 0)
    missing, extra = want & ~got, got & ~want
    when = cal.day(day)
    if extra:
        minute = _lowest(extra)
        return f"fires at {when} {minute // 60:02d}:{minute % 60:02d}, which is not {lead} minutes before a run"
    minute = _lowest(missing)
    return f"does not fire at {when} {minute // 60:02d}:{minute % 60:02d}, {lead} minutes before a run"


def lead_of(expression: str, primer: str, start_year: Optional[int] = None) -> Optional[int]:
    """The lead of an explicit primerSchedule: minutes from the last primer fire before
    the first run after the horizon's second day to that run (None beyond a day)."""
    start_year = start_year or datetime.now().year
    run_minutes, run_days = _fires(expression, start_year)
    primer_minutes, primer_days = _fires(primer, start_year)
    start = 2
    run = None
    if run_days >> start & 1 and run_minutes & ~1:  # strictly after 00:00 of the start day
        run = start * DAY + _lowest(run_minutes & ~1)
    elif run_days >> (start + 1):
        run = _lowest(run_days >> (start + 1) << (start + 1)) * DAY + _lowest(run_minutes)
    if run is None:
        return None
    for lead in range(1, DAY + 1):
        day, minute = divmod(run - lead, DAY)
        if primer_days >> day & 1 and primer_minutes >> minute & 1:
            return lead
    return None


def check_primer_schedule(expression: str, primer: str, start_year: Optional[int] = None) -> tuple[Optional[int], Optional[str]]:
    """(lead, None) if `primer` precedes every run by one constant lead and fires at no
    other time; otherwise (lead or None, why not)."""
    lead = lead_of(expression, primer, start_year)
    if lead is None:
        return None, f'"{primer}" does not fire in the day before every run of "{expression}"'
    problem = check(expression, [primer], lead, start_year)
    return lead, problem


# ---- the period: a lead shorter than the gap between runs --------------------------------


@functools.lru_cache(maxsize=4096)
def shortest_gap(expression: str, start_year: Optional[int] = None) -> tuple[int, datetime, datetime]:
    """The fewest wall-clock minutes between two consecutive runs of `expression`, exact
    from the fields over the horizon (every weekday and leap-year alignment), with the
    first two runs that far apart. Between days: the smallest k with a run day k days
    after another (the nearest two run days are consecutive ones), the earliest such."""
    start_year = start_year or datetime.now().year
    cal = calendar(start_year)
    mask, days = _fires(expression, start_year)  # every run day has the same minutes
    assert days, f"{expression} never fires"  # the loader refuses such schedules first
    first_day = _lowest(days)
    minutes = [i for i in range(DAY) if mask >> i & 1]
    best: Optional[tuple[int, int, int]] = None  # gap, first run, second run (minutes since bit 0)
    for a, b in zip(minutes, minutes[1:]):
        if best is None or b - a < best[0]:
            best = (b - a, first_day * DAY + a, first_day * DAY + b)
    for k in range(1, days.bit_length()):
        pairs = days & (days >> k)
        if pairs:
            d1 = _lowest(pairs)
            a, b = d1 * DAY + minutes[-1], (d1 + k) * DAY + minutes[0]
            if best is None or b - a < best[0]:
                best = (b - a, a, b)
            break
    assert best is not None, expression  # a schedule that fires runs more than once in 28 years

    def wall(minute: int) -> datetime:
        day, rest = divmod(minute, DAY)
        return datetime.combine(cal.day(day), datetime.min.time()) + timedelta(minutes=rest)

    return best[0], wall(best[1]), wall(best[2])


def minutes_text(minutes: int) -> str:
    """"45 minutes", "90 minutes (1 h 30 min)", "2880 minutes (2 days)"."""
    text = f"{minutes} minute{'s' if minutes != 1 else ''}"
    days, rest = divmod(minutes, DAY)
    hours, mins = divmod(rest, 60)
    if minutes < 60:
        return text
    parts = ([f"{days} day{'s' if days != 1 else ''}"] if days else []) + ([f"{hours} h"] if hours else []) + (
        [f"{mins} min"] if mins else [])
    return f"{text} ({' '.join(parts)})"


def period_problem(expression: str, lead: int, primer: Optional[str] = None,
                   start_year: Optional[int] = None) -> Optional[str]:
    """Why a `lead`-minute warm-up of `expression` loses runs, or None. The primer of a run
    fires `lead` minutes before it, and its Job holds a pod from then to the end of the
    run: it must fire after the previous run (lead < the shortest gap between two runs),
    or under concurrencyPolicy Forbid (the default) it is skipped, and so is its run. An
    explicit `primer` must also fire nearer to the run it warms than to the run before
    (lead < half the gap): one just after a run reads as a lead of nearly the whole gap."""
    gap, a, b = shortest_gap(expression, start_year)
    between = f'{minutes_text(gap)} between two runs of "{expression}" ({a:%Y-%m-%d %H:%M} and {b:%H:%M}'
    between += ")" if a.date() == b.date() else f" on {b:%Y-%m-%d})"
    if lead >= gap:
        what = f'"{primer}" fires {minutes_text(lead)} before each run, which' if primer else \
            f"a {lead}-minute warm-up"
        return (
            f"{what} is not shorter than the {between}: each primer would fire before the previous run, "
            "while its Job still holds the pod, and under concurrencyPolicy Forbid (the default) every other "
            "run is lost. The lead must be shorter than the shortest gap between two consecutive runs"
        )
    if primer is not None and 2 * lead >= gap:
        return (
            f'"{primer}" fires {minutes_text(gap - lead)} after a run and {minutes_text(lead)} before the next '
            f"(the shortest gap is the {between}): read as warming the next run, it leaves each run only "
            f"{minutes_text(gap - lead)} before the next primer, and under concurrencyPolicy Forbid (the default) "
            "a run still going then loses the next one. A primerSchedule must fire nearer to the run it warms "
            "than to the run before it; for so long a lead set warmUpMinutes instead"
        )
    return None


# ---- daylight-saving time: the real lead of every run -----------------------------------

_MARGIN = 3 * 3600  # seconds of runs replayed on each side of a change


def _offset(moment: int, tz) -> int:
    return int(datetime.fromtimestamp(moment, tz).utcoffset().total_seconds())


@functools.lru_cache(maxsize=256)
def transitions(zone: str, start_year: int) -> tuple[tuple[int, int, int], ...]:
    """(instant, offset before, offset after), in epoch seconds, of every change of
    `zone`'s UTC offset in the proof horizon; none for a zone without DST."""
    tz = kcron.zone(zone)
    first, last = horizon(start_year)
    moment = int(datetime.combine(first, datetime.min.time(), timezone.utc).timestamp()) - 86400
    end = int(datetime.combine(last, datetime.min.time(), timezone.utc).timestamp()) + 86400
    out = []
    current = _offset(moment, tz)
    while moment < end:
        following = _offset(moment + 86400, tz)
        if following != current:
            low, high = moment, moment + 86400  # offset(low) == current != offset(high)
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if _offset(middle, tz) == current else (low, middle)
            out.append((high, current, _offset(high, tz)))
            current = _offset(high, tz)
            moment = high
            continue
        moment += 86400
    return tuple(out)


def _fires_between(fields: kcron.Fields, low: int, high: int, zone: str) -> list[int]:
    """The controller's fire times (epoch seconds) in [low, high] (kcron.next_fire)."""
    out = []
    moment = datetime.fromtimestamp(low - 1, timezone.utc)
    while True:
        fire = kcron.next_fire(fields, moment, zone)
        if fire is None or fire.timestamp() > high:
            return out
        out.append(int(fire.timestamp()))
        moment = fire


def _wait_target(primed: int, lead_seconds: int, tz) -> int:
    """When the wait (plan/wait.py SCRIPT) releases a Job primed at `primed`: the lead
    added in wall-clock time, resolved with the zone's offsets as the script does."""
    wall = primed + _offset(primed, tz) + lead_seconds
    return wall - _offset(wall - _offset(primed, tz), tz)


def _replay(run_fields: kcron.Fields, primer_fields: list[kcron.Fields], seconds: int, zone: str, tz,
            when: int) -> Optional[datetime]:
    """Replay the controller and the wait around the change at `when`: the wall-clock
    time of the first run that does not start exactly `seconds` of real time after its
    primer, or None."""
    low, high = when - _MARGIN - seconds, when + _MARGIN
    starts = sorted((_wait_target(p, seconds, tz), p) for f in primer_fields
                    for p in _fires_between(f, low, high, zone))
    runs = _fires_between(run_fields, low + seconds, high + seconds, zone)

    def nominal(primed: int) -> datetime:  # the run a primer is for, in wall-clock time
        return datetime.fromtimestamp(primed, tz).replace(tzinfo=None) + timedelta(seconds=seconds)

    wanted, started = Counter(runs), Counter(t for t, _ in starts)
    wrong = (
        [(t, nominal(p)) for t, p in starts if t - p != seconds],  # a real lead that is not the lead
        [(r, datetime.fromtimestamp(r, tz)) for r in (wanted - started).elements()],  # a run not warmed
        [(t, nominal(p)) for t, p in starts if started[t] > wanted[t]],  # a start that is no run
        # a primer before the previous run (the period rule, in real time)
        [(t, nominal(p)) for (previous, _), (t, p) in zip(starts, starts[1:]) if p <= previous],
    )
    found = next((min(kind) for kind in wrong if kind), None)
    return None if found is None else found[1]


_EPOCH = date(1970, 1, 1).toordinal()
_ALONE = 5 * 86400  # seconds to the zone's nearest other change for a change to be compared with others


@functools.lru_cache(maxsize=1024)
def dst_problem(expression: str, primers: tuple[str, ...], lead: int, zone: str,
                start_year: Optional[int] = None, after: Optional[datetime] = None) -> Optional[str]:
    """Why the primers of `expression` in `zone` do not start every run with the same real
    lead of `lead` minutes, or None. Around every offset change of the zone in the
    horizon it replays the controller (kcron.next_fire: a primer or run in a skipped hour
    does not fire, one in a repeated hour fires twice) and the wait (the lead added in
    wall-clock time), and requires the workload starts to be exactly the controller's runs
    of `expression`, each `lead` minutes of real time after its primer.

    What a replay sees is fixed by the offsets, the local time of the change, and which
    of the local days its window covers (the margin and the lead on either side) the
    schedule and each primer fire on: a change that matches an earlier one in all of
    these, with no other change within days, has the earlier one's outcome, so each kind
    of night is replayed once.

    The night the message cites is the first crossed one from `after` on (default: now),
    the one a reader can still act on; the horizon starts on January 1st, so a night
    crossed earlier this year is cited only when none is ahead in it."""
    start_year = start_year or datetime.now().year
    ahead = int((after or datetime.now(timezone.utc)).timestamp())
    past: Optional[str] = None
    tz = kcron.zone(zone)
    run_fields = kcron.parse(expression)
    primer_fields = [kcron.parse(p) for p in primers]
    seconds = lead * 60
    cal = calendar(start_year)
    days = [_fires(expression, start_year)[1]] + [_fires(p, start_year)[1] for p in primers]
    changes = transitions(zone, start_year)
    passed: set[tuple] = set()
    for index, (when, before, later) in enumerate(changes):
        # the local days the replay's fire times can fall on (primers from `seconds` before
        # the margin, runs to `seconds` after it, in either offset)
        low = (when - _MARGIN - seconds + min(before, later)) // 86400 + _EPOCH - cal.first.toordinal()
        high = (when + _MARGIN + seconds + max(before, later)) // 86400 + _EPOCH - cal.first.toordinal()
        alone = all(abs(other[0] - when) > _ALONE for other in changes[max(index - 1, 0):index + 2] if other[0] != when)
        key = None
        if alone and 0 <= low and cal.clip >> high & 1:
            span = (1 << (high - low + 1)) - 1
            key = (before, later, (when + before) % 86400, (when + before) // 86400 - low,
                   tuple(d >> low & span for d in days))
            if key in passed:
                continue
        run = _replay(run_fields, primer_fields, seconds, zone, tz, when)
        if run is None:
            if key is not None:
                passed.add(key)
            continue
        start = datetime.fromtimestamp(when + min(before, later), timezone.utc).replace(tzinfo=None)
        stop = start + timedelta(seconds=abs(later - before))
        hours = f"{start:%H:%M}-{stop:%H:%M}"
        kind = "does not exist" if later > before else "happens twice"
        problem = (
            f"in {zone} the clocks change at {start:%H:%M} on some nights ({start:%Y-%m-%d}: {hours} {kind}); "
            f"runs at {run:%H:%M} with a {lead}-minute warm-up would cross it: move the run or the warm-up "
            f"outside {hours}, or use timeZone Etc/UTC"
        )
        if when >= ahead:
            return problem
        past = past or problem
    return past


def clear_caches(per_process: bool = False) -> None:
    """Forget every schedule's results (and with `per_process`, the calendar and the zones'
    changes too), as a fresh run of the program starts: for the benchmarks."""
    for cached in (_derive, _express, _fires, shortest_gap, dst_problem, kcron._parse):
        cached.cache_clear()
    if per_process:
        calendar.cache_clear()
        transitions.cache_clear()


# ---- a prescaled schedule ----------------------------------------------------------------


def primers_for(expression: str, zone: str, warm_up_minutes: Optional[int] = None,
                primer_schedule: Optional[str] = None, start_year: Optional[int] = None,
                now: Optional[datetime] = None) -> Optional[Primers]:
    """The primers of a schedule (None when it is not prescaled), or `PrimerError` (with
    the config key at fault) when no warm-up can start every run on time: the shift is
    inexpressible in cron, the explicit primer is not a constant lead, the lead is not
    shorter than the period (`period_problem`), or a warm-up crosses a DST change
    (`dst_problem`)."""
    if warm_up_minutes is not None:
        key, lead = "warmUpMinutes", warm_up_minutes
        problem = period_problem(expression, lead, None, start_year)
        if problem:
            raise PrimerError(problem, key)
        schedules = tuple(derive(expression, lead, start_year))
    elif primer_schedule is not None:
        key = "primerSchedule"
        lead, problem = check_primer_schedule(expression, primer_schedule, start_year)
        if problem:
            raise PrimerError(
                f'"{primer_schedule}" is not a constant lead before every run of "{expression}": {problem}', key)
        problem = period_problem(expression, lead, primer_schedule, start_year)
        if problem:
            raise PrimerError(problem, key)
        schedules = (primer_schedule,)
    else:
        return None
    problem = dst_problem(expression, schedules, lead, zone, start_year, now)
    if problem:
        raise PrimerError(problem, key)
    return Primers(lead, schedules)
