"""Prescaled schedules: primer derivation (properties and examples), the wait script as a
real process, and the CronJobs a prescaled schedule produces."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import time
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from plan import wait
from chrono import cron, kcron, prescale
from kns_testing import cron_oracle
from kns_testing.program import run_program

EXAMPLES = int(os.environ.get("KNS_HYPOTHESIS_EXAMPLES", "60"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


# ---- examples ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression, lead, expected",
    [
        ("0 0 * * 5", 10, ["50 23 * * 4"]),  # Friday 00:00 minus 10 minutes is Thursday 23:50
        ("0 0 * * 0", 30, ["30 23 * * 6"]),  # Sunday wraps to Saturday
        ("30 2 * * *", 10, ["20 2 * * *"]),
        ("0 0,12 * * *", 10, ["50 11,23 * * *"]),  # same-day and previous-day parts merge
        ("*/15 * * * *", 7, ["8-53/15 * * * *"]),
        ("0,30 9 * * *", 45, ["15,45 8 * * *"]),  # a list with a fixed hour (refused by 004)
        ("0 8-18/2 * * 1-5", 30, ["30 7-17/2 * * 1-5"]),  # a range with a step (refused by 004)
        ("0 9 * * 1-5", 600, ["0 23 * * 0-4"]),
        ("0 0 2 * *", 10, ["50 23 1 * *"]),
        ("0 0 31 * *", 30, ["30 23 30 1,3,5,7-8,10,12 *"]),  # only months that have a 31st
        ("0 0 * 1 *", 10, ["50 23 1-30 1 *", "50 23 31 12 *"]),  # New Year's Eve joins January
        ("0 0 15 * 1", 10, ["50 23 14 * 0"]),  # day-of-month OR weekday stays OR
        ("0 0 * * *", 1440, ["0 0 * * *"]),
        ("* * * * *", 1, ["* * * * *"]),
        ("5 * * * *", 10, ["55 * * * *"]),
        # the controller's star bit: */1 and ? are stars (AND with the weekday), 1-31 is not (OR)
        ("0 0 */1 * 1", 10, ["50 23 * * 0"]),
        ("0 0 ? * MON", 10, ["50 23 * * 0"]),
        ("0 0 1-31 * 1", 10, ["50 23 * * *"]),
        ("@daily", 10, ["50 23 * * *"]),
        ("@weekly", 60, ["0 23 * * 6"]),
    ],
)
def test_known_derivations(expression, lead, expected):
    assert prescale.derive(expression, lead) == expected
    assert prescale.check(expression, expected, lead) is None


@pytest.mark.parametrize(
    "expression, lead, fragment",
    [
        ("0 0 1 * *", 10, "2026-02-28 and 2032-02-28 are both Saturday 28 February"),
        ("0 0 * 3 *", 10, "are both Saturday 28 February"),
        ("0 0 * 1 1", 10, "cron cannot require both a day of month and a weekday"),
    ],
)
def test_inexpressible_shifts_explain_why_and_suggest_primer_schedule(expression, lead, fragment):
    with pytest.raises(prescale.PrimerError) as info:
        prescale.derive(expression, lead, start_year=2026)
    message = str(info.value)
    assert message.startswith(f'no set of cron expressions fires exactly {lead} minutes before every run of "{expression}"')
    assert fragment in message and "primerSchedule" in message


def test_the_proof_reads_schedules_as_the_controller_does():
    """Monday-only runs (*/1 is a star) are not warmed by a primer every night; every-day
    runs (1-31 is not a star, so the weekday is OR'ed in) are."""
    assert "which is not 10 minutes before a run" in prescale.check("0 0 */1 * 1", ["50 23 * * *"], 10, 2026)
    assert prescale.check("0 0 1-31 * 1", ["50 23 * * *"], 10, 2026) is None


def test_the_proof_rejects_wrong_primers():
    assert "fires at" in prescale.check("0 0 * * 5", ["50 23 * * *"], 10)
    assert "does not fire at 2026-01-08 23:50" in prescale.check("0 0 * * 5", [], 10, 2026)
    assert "already fires" in prescale.check("0 0 * * *", ["50 23 * * *", "50 23 * * 1"], 10)


def test_explicit_primer_schedule_is_checked_the_same_way():
    assert prescale.check_primer_schedule("0 3 * * *", "50 2 * * *") == (10, None)
    lead, problem = prescale.check_primer_schedule("0 3 * * 1-5", "50 2 * * *")
    assert lead == 10 and "not 10 minutes before a run" in problem
    lead, problem = prescale.check_primer_schedule("0 3 * * *", "50 2 * * 1-5")
    assert "does not fire" in problem


@pytest.mark.parametrize(
    "expression, gap",
    [
        ("* * * * *", 1), ("*/15 * * * *", 15), ("0 * * * *", 60), ("0 0,12 * * *", 720),
        ("30 23,1 * * *", 120),  # 23:30 to 01:30 the next day
        ("0 9 * * 1-5", 1440), ("0 12 * * 1,5", 3 * 1440),  # Friday to Monday
        ("0 0 31 * *", 31 * 1440), ("0 0 29 2 *", 1461 * 1440), ("@monthly", 28 * 1440),
        ("0 0 13 * 5", 1440),  # the 13th or a Friday: Thursday the 13th, then Friday
        ("0 0 */1 * 1", 7 * 1440), ("0 0 1-31 * 1", 1440),  # the star bit
    ],
)
def test_the_shortest_gap_between_runs_is_exact(expression, gap):
    assert prescale.shortest_gap(expression, 2026)[0] == gap


@pytest.mark.parametrize(
    "expression, lead, primer, refused",
    [
        ("0 * * * *", 59, None, False),
        ("0 * * * *", 60, None, True),
        ("0 * * * *", 90, None, True),
        ("* * * * *", 1, None, True),
        ("0 0 * * *", 1439, None, False),
        ("0 0 * * *", 1440, None, True),
        ("0 3 * * *", 1435, "5 3 * * *", True),  # a primer just after a run reads as a 23 h 55 min lead
        ("0 3 * * *", 719, "1 15 * * *", False),
        ("0 3 * * *", 720, "0 15 * * *", True),
    ],
)
def test_the_lead_must_be_shorter_than_the_period(expression, lead, primer, refused):
    problem = prescale.period_problem(expression, lead, primer, 2026)
    assert (problem is not None) == refused, problem


@pytest.mark.parametrize(
    "expression, zone, lead, refused",
    [
        ("30 1 * * *", "Europe/London", 60, True),  # the primer is skipped on the spring night
        ("0 3 * * *", "Europe/London", 120, True),  # the primer at 01:00 does not exist that night
        ("0 3 * * *", "Europe/London", 121, True),  # the real lead would be 61 minutes
        ("30 1 * * *", "America/New_York", 60, True),  # the 01:30 run fires twice, its primer once
        ("0 3 * * *", "Europe/London", 60, False),  # 02:00-03:00 exists on both nights
        ("30 1 * * *", "Europe/London", 10, False),  # primer and run skipped together, doubled together
        ("*/5 * * * *", "Europe/London", 3, True),  # the 00:57 primer's run (01:00) does not exist
        ("0 6 * * 1-5", "America/Santiago", 45, False),
        ("0 0 * * *", "America/Santiago", 10, True),  # Santiago changes at midnight
        ("30 1 * * *", "Etc/UTC", 60, False),
        ("30 1 * * *", "Asia/Kolkata", 1440, False),
    ],
)
def test_a_warm_up_must_keep_its_real_lead_across_clock_changes(expression, zone, lead, refused):
    primers = tuple(prescale.derive(expression, lead, 2026))
    problem = prescale.dst_problem(expression, primers, lead, zone, 2026)
    assert (problem is not None) == refused, problem
    if problem:
        assert problem.startswith(f"in {zone} the clocks change at ") and "or use timeZone Etc/UTC" in problem


@pytest.mark.parametrize("zone", ["Europe/London", "America/Santiago", "Africa/Casablanca", "Australia/Lord_Howe"])
@pytest.mark.parametrize("expression, lead", [
    ("30 1 * * *", 60), ("0 3 * * *", 30), ("42 2 28-31 * *", 44), ("0 0 * * 0", 90), ("15 22 1,15 * *", 200),
    ("*/30 * * * *", 10), ("5 2 * 3,4,9,10 1-5", 20),
])
def test_each_kind_of_night_is_replayed_once_with_the_same_verdict(expression, zone, lead):
    """dst_problem replays one change per kind of night; replaying every change of the
    horizon must find the same first problem (Casablanca's changes come in close pairs)."""
    try:
        primers = tuple(prescale.derive(expression, lead, 2026))
    except prescale.PrimerError:
        pytest.fail(f"{expression} -{lead}m is derivable")
    tz, seconds = kcron.zone(zone), lead * 60
    every = [prescale._replay(kcron.parse(expression), [kcron.parse(p) for p in primers], seconds, zone, tz, when)
             for when, _, _ in prescale.transitions(zone, 2026)]
    first = next(((when + min(before, after), run)
                  for (when, before, after), run in zip(prescale.transitions(zone, 2026), every) if run), None)
    problem = prescale.dst_problem.__wrapped__(expression, primers, lead, zone, 2026,
                                               datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert (problem is None) == (first is None), (problem, first)
    if first:
        assert f"runs at {first[1]:%H:%M}" in problem
        assert datetime.fromtimestamp(first[0], timezone.utc).strftime("%Y-%m-%d") in problem


def test_zones_without_dst_have_no_changes():
    assert prescale.transitions("Etc/UTC", 2026) == () and prescale.transitions("Asia/Tokyo", 2026) == ()
    london = prescale.transitions("Europe/London", 2026)
    assert len(london) == 2 * prescale.HORIZON_YEARS
    assert london[0] == (int(datetime(2026, 3, 29, 1, tzinfo=timezone.utc).timestamp()), 0, 3600)


def test_primers_for_names_the_key_at_fault():
    assert prescale.primers_for("0 3 * * *", "Etc/UTC") is None
    assert prescale.primers_for("0 3 * * *", "Etc/UTC", 10, None, 2026) == prescale.Primers(10, ("50 2 * * *",))
    assert prescale.primers_for("0 3 * * *", "Etc/UTC", None, "50 2 * * *", 2026) == prescale.Primers(10, ("50 2 * * *",))
    for args, key in [((90, None), "warmUpMinutes"), ((None, "0 * * * *"), "primerSchedule"),
                      ((None, "45 23 * * *"), "primerSchedule")]:
        with pytest.raises(prescale.PrimerError) as info:
            prescale.primers_for("0 * * * *", "Etc/UTC", *args, start_year=2026)
        assert info.value.key == key


# ---- properties ---------------------------------------------------------------------------


def _field(draw, low: int, high: int, star_weight: int = 3) -> str:
    kind = draw(st.sampled_from(["*"] * star_weight + ["value", "range", "step", "list", "range-step"]))
    if kind == "*":
        return "*"
    if kind == "value":
        return str(draw(st.integers(low, high)))
    if kind == "step":
        return f"*/{draw(st.integers(2, max(2, (high - low) // 2)))}"
    a = draw(st.integers(low, high))
    b = draw(st.integers(a, high))
    if kind == "range":
        return f"{a}-{b}"
    if kind == "range-step":
        return f"{a}-{b}/{draw(st.integers(1, max(1, b - a)))}" if b > a else str(a)
    values = sorted(draw(st.sets(st.integers(low, high), min_size=2, max_size=4)))
    return ",".join(map(str, values))


@st.composite
def cron_expressions(draw) -> str:
    minute = _field(draw, 0, 59, star_weight=1)
    hour = _field(draw, 0, 23)
    dom = _field(draw, 1, 28) if draw(st.booleans()) else _field(draw, 1, 31)
    month = _field(draw, 1, 12, star_weight=5)
    dow = _field(draw, 0, 6)
    return f"{minute} {hour} {dom} {month} {dow}"


@st.composite
def kubernetes_expressions(draw) -> str:
    """Schedules in the syntax only the CronJob controller reads this way (chrono/kcron.py):
    `*/1` and `?` are stars in a day field, `1-31` is not, names, descriptors."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@hourly"]))
    minute = draw(st.sampled_from(["0", "*/1", "?", "15,45", "5-55/10", "+7", "05"]))
    hour = draw(st.sampled_from(["0", "*", "*/1", "?", "9-17", "23", "0,12"]))
    dom = draw(st.sampled_from(["*", "*/1", "?", "1-31", "1-31/1", "13", "*/2", "1,15", "28-31"]))
    month = draw(st.sampled_from(["*", "?", "JAN", "feb-mar", "*/1", "1-12", "6"]))
    dow = draw(st.sampled_from(["*", "*/1", "?", "MON", "mon-fri", "0-6", "SUN,SAT", "5", "1-5/1"]))
    return f"{minute} {hour} {dom} {month} {dow}"


FIRST, LAST = date(2026, 1, 1), date(2054, 1, 1)


def run_days_by_croniter(expression: str) -> set[date]:
    """The days `expression` fires on by croniter: an oracle only where it agrees with the
    controller (the plain syntax of `cron_expressions`; not `*/1`, `?` or `1-31` in a day
    field, not descriptors)."""
    days = cron_oracle.fire_days(" ".join(expression.split()[2:]), FIRST, LAST + timedelta(days=1))
    return {date.fromordinal(d) for d in days}


def run_minutes_by_croniter(expression: str) -> int:
    minutes = cron_oracle.day_minutes(" ".join(expression.split()[:2]))
    assume(minutes == run_minutes_by_kubernetes(expression))  # croniter reads "17-17" as "*"
    return minutes


def run_minutes_by_kubernetes(expression: str) -> int:
    fields = kcron.parse(expression)
    return sum(1 << (h * 60 + m) for h in fields.hours for m in fields.minutes)


def run_days_by_kubernetes(expression: str) -> set[date]:
    """The days `expression` fires on by the controller's day rule (kcron.Fields), which the
    derivation's `Days` does not use."""
    fields = kcron.parse(expression)
    days, day = set(), FIRST
    while day <= LAST:
        if day.month in fields.months and fields.day_matches(day.day, day.isoweekday() % 7):
            days.add(day)
        day += timedelta(days=1)
    return days


def _witness_of_inexpressibility(run_days: set[date]) -> bool:
    """Independently of the module: the day-before set of the wrapped runs cannot be a
    union of cron day patterns. Cron day patterns depend only on (month, day, weekday),
    and within a month their union is 'day in D or weekday in W'."""
    before = {d - timedelta(days=1) for d in run_days}
    cells: dict[int, dict[tuple[int, int], bool]] = {}
    day = FIRST
    while day < LAST:
        key = (day.day, day.isoweekday() % 7)
        member = day in before
        if cells.setdefault(day.month, {}).setdefault(key, member) != member:
            return True
        day += timedelta(days=1)
    for month_cells in cells.values():
        inside = {k for k, v in month_cells.items() if v}
        d_star = {d for d, _ in month_cells if all(month_cells[k] for k in month_cells if k[0] == d)}
        w_star = {w for _, w in month_cells if all(month_cells[k] for k in month_cells if k[1] == w)}
        if {k for k in month_cells if k[0] in d_star or k[1] in w_star} != inside:
            return True
    return False


def _derivation_is_exact_or_refusal_genuine(expression: str, lead: int, run_days, run_minutes) -> None:
    """A derivation is proven twice: by the program's own proof (`prescale.check`), and by
    croniter over every day and minute of the horizon (kns_testing/cron_oracle.py), the
    runs read by `run_days`/`run_minutes`. A refusal must have a witness."""
    assume(cron.cron_problem(expression) is None)  # a schedule the loader accepts (one that fires)
    days = run_days(expression)
    try:
        primers = prescale.derive(expression, lead, start_year=2026)
    except prescale.PrimerError:
        assert _witness_of_inexpressibility(days), f"{expression} -{lead}m was refused but is expressible"
        return
    assert primers and all(kcron.problem(p) is None for p in primers)
    assert prescale.check(expression, primers, lead, 2026) is None
    runs = (run_minutes(expression), frozenset(d.toordinal() for d in days if d < LAST))
    assert cron_oracle.primers_problem(runs, primers, lead, FIRST, LAST) is None, (expression, lead, primers)


def _croniter_days(expression: str) -> set[date]:
    days = run_days_by_croniter(expression)
    assume(days == run_days_by_kubernetes(expression))  # croniter is an oracle only where it agrees
    return days


def test_the_croniter_oracle_tells_right_primers_from_wrong_ones():
    """The oracle can fail: a primer a day late, one firing twice, one missing a run."""
    runs = cron_oracle.fires("0 0 * * 5", FIRST, LAST)
    assert cron_oracle.primers_problem(runs, ["50 23 * * 4"], 10, FIRST, LAST) is None
    assert cron_oracle.primers_problem(runs, ["50 23 * * 5"], 10, FIRST, LAST) == \
        "on 2026-01-02 the primers fire at 23:50"  # a Friday: a day late
    assert cron_oracle.primers_problem(runs, [], 10, FIRST, LAST) == "on 2026-01-08 the primers do not fire at 23:50"
    assert "twice" in cron_oracle.primers_problem(runs, ["50 23 * * 4", "50 23 * * 4,6"], 10, FIRST, LAST)
    assert cron_oracle.primers_problem(runs, ["50 23 * 1-11 4"], 10, FIRST, LAST) is not None


@PROPERTY
@given(expression=cron_expressions(), lead=st.integers(1, 1440))
def test_every_derivation_is_exact_and_every_rejection_is_genuine(expression, lead):
    _derivation_is_exact_or_refusal_genuine(expression, lead, _croniter_days, run_minutes_by_croniter)


@PROPERTY
@given(expression=cron_expressions(), lead=st.integers(1, 1440))
def test_rejections_are_genuine_for_wrapping_runs(expression, lead):
    """Force runs that wrap to the previous day (midnight runs) to exercise rejections."""
    fields = expression.split()
    _derivation_is_exact_or_refusal_genuine(" ".join(["0", "0", *fields[2:]]), lead, _croniter_days,
                                           run_minutes_by_croniter)


@PROPERTY
@given(expression=kubernetes_expressions(), lead=st.integers(1, 1440))
def test_derivations_follow_the_controllers_star_bit(expression, lead):
    """`*/1`, `?`, `1-31`, names and descriptors, where croniter is no oracle: the proof
    and the witness use the controller's day rule."""
    _derivation_is_exact_or_refusal_genuine(expression, lead, run_days_by_kubernetes, run_minutes_by_kubernetes)


# ---- the wait script, as a real process -------------------------------------------------

SHELLS = [["sh", "-c"], ["busybox", "sh", "-c"]]


def _shell_ids(shell):
    return shell[0]


def run_wait(shell, job_name, lead_seconds, zone="Etc/UTC", timeout=20):
    if shutil.which(shell[0]) is None:
        pytest.fail(f"{shell[0]} is not installed; `make test` installs it (scripts/system-deps.sh)")
    env = {"PATH": os.environ["PATH"], "JOB_NAME": job_name, "JOB_NAME_LEGACY": "",
           "KNS_LEAD_SECONDS": str(lead_seconds), "KNS_TZ_OFFSETS": wait.offsets(zone)}
    started = time.time()
    done = subprocess.run([*shell, wait.SCRIPT], env=env, capture_output=True, text=True, timeout=timeout)
    return done, started, time.time()


@pytest.mark.parametrize("shell", SHELLS, ids=_shell_ids)
def test_wait_releases_within_a_second_after_the_target_never_before(shell):
    now = time.time()
    scheduled_minute = int(now // 60)
    target = now + 2.5
    lead = int(target - scheduled_minute * 60) + 1  # whole seconds: target is the next whole second
    expected = scheduled_minute * 60 + lead
    done, _, ended = run_wait(shell, f"nightly-{scheduled_minute}", lead)
    assert done.returncode == 0, done.stderr
    assert expected <= ended < expected + 1.0, (ended - expected, done.stdout)
    assert f"start {expected}" in done.stdout


@pytest.mark.parametrize("shell", SHELLS, ids=_shell_ids)
def test_a_job_started_by_hand_runs_at_once(shell):
    done, started, ended = run_wait(shell, "nightly-manual-abc12", 600)
    assert done.returncode == 0 and ended - started < 1.0
    assert "started by hand" in done.stdout


@pytest.mark.parametrize("shell", SHELLS, ids=_shell_ids)
def test_a_late_job_runs_at_once(shell):
    long_ago = int(time.time() // 60) - 120
    done, started, ended = run_wait(shell, f"nightly-{long_ago}", 600)
    assert done.returncode == 0 and ended - started < 1.0
    assert "past: starting now" in done.stdout


@pytest.mark.parametrize(
    "zone, primed_local, lead",
    [
        ("Europe/Paris", datetime(2024, 3, 31, 1, 50), 70),  # spring forward between primer and start
        ("Europe/Paris", datetime(2024, 10, 27, 1, 50), 70),  # fall back between them
        ("America/New_York", datetime(2024, 11, 2, 23, 40), 1440),  # a full day across the change
        ("Asia/Kolkata", datetime(2024, 6, 1, 23, 50), 10),
        ("Etc/UTC", datetime(2024, 2, 28, 23, 50), 10),
    ],
)
def test_wait_target_is_the_wall_clock_start_in_the_zone(zone, primed_local, lead):
    tz = ZoneInfo(zone)
    primed = int(primed_local.replace(tzinfo=tz).timestamp())
    expected = int((primed_local + timedelta(minutes=lead)).replace(tzinfo=tz).timestamp())
    done, _, _ = run_wait(["sh", "-c"], f"x-{primed // 60}", lead * 60, zone)
    assert f"start {expected} is" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "zone, primed_local, lead",
    [
        ("Europe/London", datetime(2024, 3, 31, 0, 57), 3),  # the start falls in the skipped hour
        ("Europe/London", datetime(2024, 3, 31, 0, 30), 150),  # the warm-up spans the skipped hour
        ("Europe/London", datetime(2024, 10, 27, 0, 30), 90),  # the start falls in the repeated hour
        ("America/New_York", datetime(2024, 11, 3, 0, 30), 60),
        ("Australia/Lord_Howe", datetime(2024, 10, 6, 1, 50), 20),  # a 30-minute change
    ],
)
def test_the_checks_replay_the_wait_script_exactly(zone, primed_local, lead):
    """chrono/prescale.py judges a warm-up by the script's own arithmetic: the same target."""
    tz = ZoneInfo(zone)
    primed = int(primed_local.replace(tzinfo=tz).timestamp())
    done, _, _ = run_wait(["sh", "-c"], f"x-{primed // 60}", lead * 60, zone)
    assert f"start {prescale._wait_target(primed, lead * 60, tz)} is" in done.stdout, done.stdout


def test_offsets_table_follows_the_zone():
    assert wait.offsets("Etc/UTC") == "0:0"
    paris = dict(pair.split(":") for pair in wait.offsets("Europe/Paris").split())
    spring_2024 = int(datetime(2024, 3, 31, 1, 0, tzinfo=timezone.utc).timestamp())
    assert paris[str(spring_2024)] == "7200"


# ---- the CronJobs ------------------------------------------------------------------------

BASE = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [{"name": "a100", "role": "gpu", "nodes": ["g1"], "gpu": {"vendor": "nvidia", "perNode": 8}}],
    "schedules": [{
        "name": "weekly", "image": "trainer:1", "schedule": "0 0 * * 1", "timeZone": "America/New_York",
        "cpu": 4, "memory": "16Gi", "gpus": 2, "pool": "a100",
    }],
}
CRON = "kubernetes:batch/v1:CronJob"


def test_a_prescaled_schedule_is_the_plain_cronjob_plus_the_wait():
    plain = run_program(BASE).named(CRON, "weekly").inputs
    cfg = copy.deepcopy(BASE)
    cfg["schedules"][0]["warmUpMinutes"] = 20
    run = run_program(cfg)
    primed = run.named(CRON, "weekly").inputs
    assert primed["spec"]["schedule"] == "40 23 * * 0" and primed["spec"]["timeZone"] == "America/New_York"
    pod = primed["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["name"] == "kns-wait" and init["image"] == "busybox:1.37"
    env = {e["name"]: e for e in init["env"]}
    assert env["KNS_LEAD_SECONDS"]["value"] == "1200"
    assert env["JOB_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}
    assert env["KNS_TZ_OFFSETS"]["value"] == wait.offsets("America/New_York")
    assert "serviceAccountName" not in pod and pod["automountServiceAccountToken"] is False
    # the workload holds its full requests from the moment the primer pod is scheduled
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}
    # apart from the wait and the schedule, identical to the plain CronJob
    stripped = copy.deepcopy(primed)
    del stripped["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"]
    stripped["spec"]["schedule"] = plain["spec"]["schedule"]
    del stripped["metadata"]["annotations"]
    plain_annotations = plain["metadata"].pop("annotations")
    assert stripped == plain
    # the wait needs no kube-score exception the workload container does not need already
    assert primed["metadata"]["annotations"] == {**plain_annotations, "kns.io/workload-schedule": "0 0 * * 1",
                                                 "kns.io/warm-up-minutes": "20"}
    out = run.outputs["schedules"]["weekly"]
    assert out["primerSchedules"] == ["40 23 * * 0"] and out["warmUpMinutes"] == 20
    assert len(out["nextRuns"]) == 3 and all(r.endswith(("T00:00:00-05:00", "T00:00:00-04:00")) for r in out["nextRuns"])


def test_several_primers_become_several_cronjobs_named_from_the_entry():
    cfg = copy.deepcopy(BASE)
    cfg["schedules"][0].update({"schedule": "0 0 * 1 *", "timeZone": "Etc/UTC", "warmUpMinutes": 10})
    run = run_program(cfg)
    crons = {r.name: r.inputs["spec"]["schedule"] for r in run.of_type(CRON)}
    assert crons == {"weekly": "50 23 1-30 1 *", "weekly-2": "50 23 31 12 *"}
    assert run.outputs["schedules"]["weekly"]["primerSchedules"] == ["50 23 1-30 1 *", "50 23 31 12 *"]


def test_explicit_primer_schedule_is_used_when_it_is_a_constant_lead():
    cfg = copy.deepcopy(BASE)
    cfg["schedules"][0]["primerSchedule"] = "45 23 * * 0"
    run = run_program(cfg)
    assert run.named(CRON, "weekly").inputs["spec"]["schedule"] == "45 23 * * 0"
    assert run.outputs["schedules"]["weekly"]["warmUpMinutes"] == 15


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"schedule": "0 0 1 * *", "warmUpMinutes": 10},
         'kns:schedules[weekly].warmUpMinutes: no set of cron expressions fires exactly 10 minutes before every run of "0 0 1 * *"'),
        ({"primerSchedule": "45 23 * * *"},
         'kns:schedules[weekly].primerSchedule: "45 23 * * *" is not a constant lead before every run of "0 0 * * 1"'),
    ],
)
def test_inexpressible_or_wrong_primers_are_config_errors(change, expected):
    import pulumi

    from kns_testing.program import RecordingMocks

    cfg = copy.deepcopy(BASE)
    cfg["schedules"][0].update(change)
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        run_program(cfg, mocks=mocks)
    assert expected in str(info.value)
    assert mocks.resources == []


def test_the_wait_fits_under_a_small_entry_limit_range():
    cfg = copy.deepcopy(BASE)
    cfg["schedules"][0].update({"cpu": "50m", "memory": 24, "gpus": 0, "pool": None, "warmUpMinutes": 5})
    del cfg["schedules"][0]["pool"]
    run = run_program(cfg)
    pod = run.named(CRON, "weekly").inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["resources"] == {
        # no ephemeral-storage request: the workload asks none (test below)
        "requests": {"cpu": "10m", "memory": "16Mi", "ephemeral-storage": "0"},
        "limits": {"cpu": "50m", "memory": "24Mi", "ephemeral-storage": "16Mi"},
    }
    limits = run.named("kubernetes:core/v1:LimitRange", "weekly-defaults").inputs["spec"]["limits"][0]
    assert limits["max"] == {"cpu": "50m", "memory": "24Mi"}


@pytest.mark.parametrize("workload, wait_requests", [
    ({"cpu": "5m", "memory": 8}, {"cpu": "5m", "memory": "8Mi", "ephemeral-storage": "0"}),
    ({"cpu": 2, "memory": 4096, "storage": 512}, {"cpu": "10m", "memory": "16Mi", "ephemeral-storage": "1Mi"}),
])
def test_the_wait_asks_no_more_than_the_workload_so_the_pod_counts_only_what_the_user_wrote(workload, wait_requests):
    """The wait runs before the workload, never beside it: capped at what the workload asks
    (zero where it asks nothing), the pod's requests, its quota and what its queue must hold
    are the workload's own (issue 29)."""
    cfg = copy.deepcopy(BASE)
    cfg["schedules"][0].update({"gpus": 0, "warmUpMinutes": 5, **workload})
    del cfg["schedules"][0]["pool"]
    plain = copy.deepcopy(cfg)
    del plain["schedules"][0]["warmUpMinutes"]
    primed, unprimed = run_program(cfg), run_program(plain)
    pod = primed.named(CRON, "weekly").inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["resources"]["requests"] == wait_requests
    primed_quota, plain_quota = (run.named("kubernetes:core/v1:ResourceQuota", "weekly-quota").inputs["spec"]["hard"]
                                 for run in (primed, unprimed))
    requests = {k: v for k, v in primed_quota.items() if not k.startswith("limits.") and v != "0"}
    assert requests == {k: v for k, v in plain_quota.items() if not k.startswith("limits.")}
