"""Budget periods (chrono/periods.py): from one fire of the reset cron to the next, in its
zone as the CronJob controller fires it, or one grant; the expected moments are worked out
by hand from the calendar, clock changes included."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from chrono.periods import Period, Periods

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")


def at(*args: int, tz=UTC) -> datetime:
    return datetime(*args, tzinfo=tz)


@pytest.mark.parametrize("reset,zone,now,start,end", [
    # Every five minutes: the period of 10:07 is 10:05 to 10:10.
    ("*/5 * * * *", "Etc/UTC", at(2026, 11, 28, 10, 7), at(2026, 11, 28, 10, 5), at(2026, 11, 28, 10, 10)),
    # Quarterly in Paris (months 1, 4, 7, 10): from 1 October, summer time, to 1 January, winter time.
    ("0 0 1 */3 *", "Europe/Paris", at(2026, 11, 28, 12), at(2026, 10, 1, tz=PARIS), at(2027, 1, 1, tz=PARIS)),
    # Yearly: the whole calendar year.
    ("0 0 1 1 *", "Etc/UTC", at(2026, 11, 28), at(2026, 1, 1), at(2027, 1, 1)),
    # Daily at 02:30 in Paris: 02:30 does not exist on 28 March 2027 (clocks jump from 02:00
    # to 03:00), so the controller does not fire that day and the period lasts two days.
    ("30 2 * * *", "Europe/Paris", at(2027, 3, 28, 12), at(2027, 3, 27, 2, 30, tz=PARIS),
     at(2027, 3, 29, 2, 30, tz=PARIS)),
    # On a fire: the new period starts at that moment.
    ("0 * * * *", "Etc/UTC", at(2026, 11, 28, 10), at(2026, 11, 28, 10), at(2026, 11, 28, 11)),
], ids=["every 5 minutes", "quarterly in Paris", "yearly", "over spring forward", "on a fire"])
def test_a_recurring_period_runs_from_the_last_reset_to_the_next(reset, zone, now, start, end):
    periods = Periods(reset=reset, zone=zone)
    assert periods.at(now) == Period(start.astimezone(UTC), end.astimezone(UTC))
    assert periods.next_reset(now) == end.astimezone(UTC)
    assert periods.at(now).contains(now) and not periods.at(now).contains(end)


def test_a_period_just_before_its_end_is_still_that_period_and_the_next_starts_at_the_reset():
    periods = Periods(reset="0 0 1 */3 *", zone="Europe/Paris")
    end = at(2027, 1, 1, tz=PARIS).astimezone(UTC)
    assert periods.at(end - timedelta(seconds=1)).end == end
    assert periods.at(end).start == end


def test_a_grant_is_one_period_and_nothing_outside_it():
    grant = Periods(start=at(2026, 12, 1, tz=PARIS), end=at(2027, 3, 1, tz=PARIS))
    inside = Period(at(2026, 12, 1, tz=PARIS).astimezone(UTC), at(2027, 3, 1, tz=PARIS).astimezone(UTC))
    assert grant.at(at(2026, 11, 30, 22, 59)) is None
    assert grant.at(at(2026, 11, 30, 23, 0)) == inside
    assert grant.at(at(2027, 2, 28, 22, 59)) == inside
    assert grant.at(at(2027, 2, 28, 23, 0)) is None
    assert grant.next_reset(at(2027, 1, 1)) is None


def test_a_reset_that_never_fires_gives_no_period():
    assert Periods(reset="0 0 30 2 *").at(at(2026, 11, 28)) is None
    assert Periods(reset="0 0 30 2 *").next_reset(at(2026, 11, 28)) is None
