"""Reservation windows (chrono/calendar.py): computed as the CronJob controller fires, in
their zones; self-overlap; the per-pool sweep (issue 45, contract section 15)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from chrono.calendar import (CLOSED, OPEN, WARM, Calendar, CalendarError, Held, Window, duration, next_edge,
                             overbooked, peak, phase_at)

UTC = timezone.utc
SINCE = datetime(2026, 3, 20, tzinfo=UTC)


def course(schedule: str = "0 9 * * 2", length: str = "3h", lead: int = 0, zone: str = "Europe/Paris") -> Calendar:
    return Calendar(schedule=schedule, zone=zone, length=duration(length), lead=timedelta(minutes=lead))


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
    warm = course(lead=30)
    start, end = datetime(2026, 3, 24, 8, 0, tzinfo=UTC), datetime(2026, 3, 24, 11, 0, tzinfo=UTC)
    cases = [(start - lead - timedelta(seconds=1), CLOSED, start - lead), (start - lead, WARM, start),
             (start - timedelta(seconds=1), WARM, start), (start, OPEN, end), (end - timedelta(seconds=1), OPEN, end),
             (end, CLOSED, datetime(2026, 3, 31, 7, 0, tzinfo=UTC) - lead)]
    for now, phase, edge in cases:
        found, window = phase_at(warm, now)
        assert found == phase, now
        assert (window is None) == (phase == CLOSED)
        assert next_edge(warm, now) == edge, now
    # Where a start changes nothing (the switch), the next edge after the warm-up is the end.
    assert next_edge(warm, start - lead, starts=False) == end


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


# One definition of when a reservation holds its capacity, [start - lead, end) (issue 57):
# the sweep, the peak and the phase all read Calendar.holds.

def test_a_warm_up_holds_the_capacity_so_back_to_back_windows_meet_in_it():
    """course holds the pool 09:00-12:00; lab holds it 12:00-14:00 with an hour's warm-up:
    from 11:00 both hold it."""
    course_held = Held("course", course(), {"gpus": 32})
    lab = Held("lab", course("0 12 * * 2", "2h", lead=60), {"gpus": 32})
    found = overbooked({"gpus": 32}, [course_held, lab], SINCE)
    assert (found.first, found.second, found.held) == ("course", "lab", 64)
    assert found.at == datetime(2026, 3, 24, 10, 0, tzinfo=UTC)  # 11:00 in Paris, CET
    assert found.window.start == datetime(2026, 3, 24, 11, 0, tzinfo=UTC) and found.in_warm_up
    assert peak([course_held, lab], SINCE) == {"gpus": 64}
    # Without the warm-up they only touch: the same 32 GPUs serve both.
    lab_cold = Held("lab", course("0 12 * * 2", "2h"), {"gpus": 32})
    assert overbooked({"gpus": 32}, [course_held, lab_cold], SINCE) is None
    assert peak([course_held, lab_cold], SINCE) == {"gpus": 32}
    # A warm-up that ends where the other's window begins does not meet it either.
    early = Held("early", course("0 7 * * 2", "1h", lead=60), {"gpus": 32})
    assert overbooked({"gpus": 32}, [early, course_held], SINCE) is None


def test_the_phase_of_back_to_back_windows_with_a_warm_up():
    lab = course("0 12 * * 2", "2h", lead=60)
    assert phase_at(lab, datetime(2026, 3, 24, 9, 59, tzinfo=UTC))[0] == CLOSED
    assert phase_at(lab, datetime(2026, 3, 24, 10, 0, tzinfo=UTC))[0] == WARM  # 11:00 Paris
    assert phase_at(lab, datetime(2026, 3, 24, 11, 0, tzinfo=UTC))[0] == OPEN


def test_a_new_york_and_a_paris_reservation_meet_only_between_the_two_clock_changes():
    """Paris 15:00-16:00 every day; New York 11:00-12:00 with a half-hour warm-up (held
    from 10:30). In winter New York's hold begins at 15:30 UTC, in summer at 14:30 UTC:
    both after Paris's window ends (15:00, 14:00 UTC). In the weeks when the US has changed
    its clocks and Europe has not (14 to 27 March 2027, 31 October to 6 November 2027), it
    begins at 14:30 UTC, inside Paris's window."""
    paris = Held("paris", course("0 15 * * *", "1h"), {"gpus": 8})
    new_york = Held("new-york", course("0 11 * * *", "1h", lead=30, zone="America/New_York"), {"gpus": 8})
    since = datetime(2027, 1, 1, tzinfo=UTC)
    found = overbooked({"gpus": 8}, [paris, new_york], since)
    assert (found.first, found.second) == ("paris", "new-york")
    assert found.at == datetime(2027, 3, 14, 14, 30, tzinfo=UTC) and found.in_warm_up
    # From the day Europe changes too they are apart again; the autumn gap is the next meeting.
    found = overbooked({"gpus": 8}, [paris, new_york], datetime(2027, 3, 28, tzinfo=UTC))
    assert found.at == datetime(2027, 10, 31, 14, 30, tzinfo=UTC)
    assert overbooked({"gpus": 8}, [paris, new_york], datetime(2027, 11, 7, 12, tzinfo=UTC),
                      timedelta(days=120)) is None
    # Without New York's warm-up they never meet, in any week: in the gap they touch.
    cold = Held("new-york", course("0 11 * * *", "1h", zone="America/New_York"), {"gpus": 8})
    assert overbooked({"gpus": 8}, [paris, cold], since) is None


def one_off(day: datetime, hour: int, hours: int, lead: int = 0) -> Calendar:
    start = day + timedelta(hours=hour)
    return Calendar(once=Window(start, start + timedelta(hours=hours)), lead=timedelta(minutes=lead))


@pytest.mark.parametrize("days, meets", [(360, True), (365, True), (370, False)])
def test_the_sweep_looks_366_days_ahead_warm_ups_included(days, meets):
    day = SINCE + timedelta(days=days)
    first = Held("first", one_off(day, 10, 2), {"gpus": 8})
    second = Held("second", one_off(day, 12, 2, lead=60), {"gpus": 8})
    found = overbooked({"gpus": 8}, [first, second], SINCE)
    assert (found is not None) == meets
    if meets:
        assert found.at == day + timedelta(hours=11)


def test_a_window_beyond_the_horizon_whose_warm_up_begins_inside_it_is_held_there():
    """The horizon ends at 00:30 on day 366; the second window opens at 01:00, its warm-up
    at 00:00: the half hour between is swept."""
    edge = SINCE + timedelta(days=366)
    first = Held("first", Calendar(once=Window(edge - timedelta(hours=1), edge + timedelta(hours=2))), {"gpus": 8})
    second = Held("second", Calendar(once=Window(edge + timedelta(minutes=60), edge + timedelta(hours=3)),
                                     lead=timedelta(minutes=60)), {"gpus": 8})
    found = overbooked({"gpus": 8}, [first, second], SINCE, timedelta(days=366, minutes=30))
    assert found is not None and found.at == edge
    assert overbooked({"gpus": 8}, [first, second], SINCE, timedelta(days=366)) is None
