"""Reservation windows (config/calendar.py): computed as the CronJob controller fires, in
their zones; self-overlap; the per-pool sweep (issue 45, contract section 15)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from config.calendar import (CLOSED, OPEN, WARM, Calendar, CalendarError, Held, Window, duration, next_edge,
                             overbooked, peak, phase_at)

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


def test_the_phase_follows_warm_up_window_and_end_and_the_next_edge_is_the_next_change():
    lead = timedelta(minutes=30)
    start, end = datetime(2026, 3, 24, 8, 0, tzinfo=UTC), datetime(2026, 3, 24, 11, 0, tzinfo=UTC)
    cases = [(start - lead - timedelta(seconds=1), CLOSED, start - lead), (start - lead, WARM, start),
             (start - timedelta(seconds=1), WARM, start), (start, OPEN, end), (end - timedelta(seconds=1), OPEN, end),
             (end, CLOSED, datetime(2026, 3, 31, 7, 0, tzinfo=UTC) - lead)]
    for now, phase, edge in cases:
        found, window = phase_at(course(), lead, now)
        assert found == phase, now
        assert (window is None) == (phase == CLOSED)
        assert next_edge(course(), lead, now) == edge, now
    # Where a start changes nothing (the switch), the next edge after the warm-up is the end.
    assert next_edge(course(), lead, start - lead, starts=False) == end


def test_a_duration_is_elapsed_time_across_a_clock_change():
    night = Calendar(schedule="30 1 * * *", zone="Europe/Paris", length=duration("2h"))
    (window,) = night.windows(datetime(2026, 3, 29, 0, 0, tzinfo=UTC), datetime(2026, 3, 29, 3, 0, tzinfo=UTC))
    assert window.end - window.start == timedelta(hours=2)


def test_the_peak_is_what_is_held_at_once_not_the_sum():
    a = Held("course", course(), {"gpus": 8})
    b = Held("lab", course("0 12 * * 2", "2h"), {"gpus": 8})  # after the course: the same 8 GPUs
    assert peak([a, b], SINCE) == {"gpus": 8}
    c = Held("clash", course("0 11 * * 2", "2h"), {"gpus": 4, "cpu": 16})
    assert peak([a, b, c], SINCE) == {"gpus": 12, "cpu": 16}
    over = Held("over", Calendar(once=Window(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))),
                {"gpus": 64})
    assert peak([over], SINCE) == {}  # ended before the sweep begins: holds nothing
