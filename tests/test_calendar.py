"""Reservation windows (config/calendar.py): computed as the CronJob controller fires, in
their zones; self-overlap; the per-pool sweep (issue 45, contract section 15)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from config.calendar import Calendar, CalendarError, Held, Window, duration, overbooked

UTC = timezone.utc
SINCE = datetime(2026, 3, 20, tzinfo=UTC)


def course(schedule: str = "0 9 * * 2", length: str = "3h") -> Calendar:
    return Calendar(schedule=schedule, zone="Europe/Paris", length=duration(length))


def test_a_weekly_window_follows_its_zone_across_the_clock_change():
    windows = course().windows(SINCE, SINCE + timedelta(days=14))
    assert [(w.start, w.end) for w in windows] == [
        (datetime(2026, 3, 24, 8, 0, tzinfo=UTC), datetime(2026, 3, 24, 11, 0, tzinfo=UTC)),   # CET
        (datetime(2026, 3, 31, 7, 0, tzinfo=UTC), datetime(2026, 3, 31, 10, 0, tzinfo=UTC)),   # CEST
    ]


def test_a_window_already_open_is_listed_and_is_the_state_now():
    now = datetime(2026, 3, 24, 9, 30, tzinfo=UTC)
    assert course().windows(now, now + timedelta(hours=1))[0].start == datetime(2026, 3, 24, 8, 0, tzinfo=UTC)
    assert course().state(now) == Window(datetime(2026, 3, 24, 8, 0, tzinfo=UTC), datetime(2026, 3, 24, 11, 0, tzinfo=UTC))
    assert course().state(datetime(2026, 3, 24, 11, 0, tzinfo=UTC)) is None  # the end is not in the window


def test_one_window():
    once = Calendar(once=Window(datetime.fromisoformat("2026-12-01T00:00:00+01:00"),
                                datetime.fromisoformat("2026-12-03T00:00:00+01:00")))
    assert len(once.windows(SINCE, SINCE + timedelta(days=366))) == 1
    assert once.windows(datetime(2026, 12, 4, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)) == []


@pytest.mark.parametrize("text,seconds", [("3h", 10800), ("90m", 5400), ("1h30m", 5400)])
def test_durations(text, seconds):
    assert duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "0h", "0m", "3 h", "-1h", "1d", "h"])
def test_bad_durations(text):
    with pytest.raises(CalendarError):
        duration(text)


def test_a_window_longer_than_the_period_runs_into_the_next():
    first, second = course("0 * * * *", "90m").runs_into_next(SINCE)
    assert second.start - first.start == timedelta(hours=1)
    assert course().runs_into_next(SINCE) is None
    # Weekdays only: Friday's window may not run into Monday's, but daily 25h does.
    assert course("0 9 * * 1-5", "24h").runs_into_next(SINCE) is None
    assert course("0 9 * * 1-5", "25h").runs_into_next(SINCE) is not None


def test_reservations_that_meet_on_a_pool_overbook_it_back_to_back_ones_do_not():
    a = Held("course", course(), {"nodes": 4})
    later = Held("lab", course("0 12 * * 2", "2h"), {"nodes": 4})  # starts when course ends
    assert overbooked({"nodes": 4}, [a, later], SINCE) is None
    clash = Held("clash", course("0 11 * * 2", "2h"), {"nodes": 1})
    found = overbooked({"nodes": 4}, [a, later, clash], SINCE)
    assert (found.first, found.second, found.resource, found.held, found.capacity) == ("course", "clash", "nodes", 5, 4)
    assert found.window.start == datetime(2026, 3, 24, 10, 0, tzinfo=UTC)
    # A one-off window meeting a recurring one, on another resource.
    challenge = Held("challenge", Calendar(once=Window(datetime(2026, 4, 7, 9, tzinfo=UTC),
                                                        datetime(2026, 4, 7, 10, tzinfo=UTC))), {"gpus": 30})
    gpu = Held("gpu-course", course(), {"gpus": 8})
    found = overbooked({"gpus": 32}, [gpu, challenge], SINCE)
    assert (found.first, found.second, found.held) == ("gpu-course", "challenge", 38)


def test_the_reservation_checks_name_both_and_the_first_window():
    from config.errors import Problems
    from config.models import NodePool, Queueing
    from config.reservations import Reservation, check_reservations
    pool = NodePool.model_validate({"name": "a100", "role": "gpu", "nodes": ["g1", "g2", "g3", "g4"],
                                    "gpu": {"vendor": "nvidia", "perNode": 8}})
    course = Reservation.model_validate({"name": "course", "pool": "a100", "nodes": 3, "schedule": "0 9 * * 2",
                                         "timeZone": "Europe/Paris", "duration": "3h"})
    challenge = Reservation.model_validate({"name": "challenge", "pool": "a100", "resources": {"nvidia.com/gpu": "16"},
                                            "start": "2026-03-31T10:00:00+02:00", "end": "2026-04-02T00:00:00+02:00"})
    problems = Problems()
    warnings = check_reservations([course, challenge], {"a100": pool}, Queueing(enabled=True), [], problems, now=SINCE)
    assert warnings == []
    (problem,) = problems.items
    assert problem.path == "kns:reservations[challenge]"
    assert problem.message == ('with reservation "course" it holds 40 nvidia.com/gpu of pool a100 at once, which has '
                               '32: first in the window 2026-03-31T10:00+02:00 to 2026-04-02T00:00+02:00')
