"""croniter as an independent oracle for primer schedules, over the whole proof horizon.

The program proves its primers with chrono/prescale.py, on calendar cells and bit sets
(cheap enough to run on every `pulumi preview`). The tests check the same primers again
here, the slow way: every day of the 28-year horizon that croniter says a schedule fires
on, every minute of those days, compared day by day. It shares no code with the program.

croniter is an oracle only within the syntax it reads as the CronJob controller does
(chrono/kcron.py lists where they differ: `*/1`, `?` and `1-31` in day fields, names,
descriptors); for such run schedules the caller passes the run's fire times, computed by
the controller's own rule, and croniter still reads the primers, which the derivation
writes in plain syntax.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta
from typing import Optional

from croniter import croniter

DAY = 1440


@functools.lru_cache(maxsize=512)
def fire_days(day_fields: str, first: date, last: date) -> frozenset[int]:
    """Ordinals of the days in [first, last) on which `0 0 <day_fields>` fires."""
    it = croniter(f"0 0 {day_fields}", datetime.combine(first, datetime.min.time()) - timedelta(minutes=1))
    out = set()
    while (fire := it.get_next(datetime).date()) < last:
        out.add(fire.toordinal())
    return frozenset(out)


@functools.lru_cache(maxsize=512)
def day_minutes(minute_hour: str) -> int:
    """The minutes of a day `<minute_hour> * * *` fires at, as a 1440-bit mask."""
    start = datetime(2026, 1, 5)
    it = croniter(f"{minute_hour} * * *", start - timedelta(minutes=1))
    mask = 0
    while (fire := it.get_next(datetime)) < start + timedelta(days=1):
        mask |= 1 << (fire.hour * 60 + fire.minute)
    return mask


def fires(expression: str, first: date, last: date) -> tuple[int, frozenset[int]]:
    """(minutes of the day, days) of a plain-syntax schedule, by croniter."""
    minute, hour, *days = expression.split()
    return day_minutes(f"{minute} {hour}"), fire_days(" ".join(days), first, last)


def primers_problem(runs: tuple[int, frozenset[int]], primers: list[str], lead: int,
                    first: date, last: date) -> Optional[str]:
    """Why `primers` do not fire exactly `lead` minutes before every run (`runs`: minutes
    of the day and run days) on every day in (first, last - 1), or twice at one minute;
    None when they do."""
    run_minutes, run_days = runs
    expected: dict[int, int] = {}
    same = run_minutes >> lead
    previous = (run_minutes & ((1 << lead) - 1)) << (DAY - lead)
    for day in run_days:
        if same:
            expected[day] = expected.get(day, 0) | same
        if previous:
            expected[day - 1] = expected.get(day - 1, 0) | previous
    actual: dict[int, int] = {}
    for primer in primers:
        minutes, days = fires(primer, first, last)
        for day in days:
            if actual.get(day, 0) & minutes:
                return f"{primer} fires twice at one minute on {date.fromordinal(day)}"
            actual[day] = actual.get(day, 0) | minutes
    for day in range(first.toordinal() + 1, last.toordinal() - 1):
        want, got = expected.get(day, 0), actual.get(day, 0)
        if want != got:
            minute = ((want ^ got) & -(want ^ got)).bit_length() - 1
            what = "fire" if got >> minute & 1 else "do not fire"
            return f"on {date.fromordinal(day)} the primers {what} at {minute // 60:02d}:{minute % 60:02d}"
    return None
