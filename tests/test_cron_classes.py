"""Issue 16, the cron and time-zone classes, through both doors: the real `__main__.py`
under recording Pulumi mocks and `./kns validate` must stop on the same problem lines,
path-qualified, without a traceback, before a single resource is registered
(docs/validation.md, "Schedules and time zones").

One rule per class (chrono/cron.py, chrono/prescale.py), and several members of each
here, so a new member of a class is caught by the rule rather than by an example:

1. a schedule that never fires;                     2. a time-zone directory;
10. syntax croniter reads and Kubernetes refuses;   11. `*/1` is a star in a day field;
12. a warm-up that crosses a daylight-saving change; 13. a lead not shorter than the period;
14. host-dependent zone names.
"""

from __future__ import annotations

import copy
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional
from zoneinfo import ZoneInfo

import pulumi
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chrono import kcron
from kns_cli import cli, runs, stack
from kns_testing.program import ROOT, RecordingMocks, run_program, without_places

CRON = "kubernetes:batch/v1:CronJob"
HEAD = "kns-platform: invalid configuration, {n} problem{s}; nothing was applied:"
BASE = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [{"name": "cpu", "role": "compute", "nodes": ["c1"]}],
    "schedules": [{"name": "nightly", "image": "report:1", "schedule": "30 2 * * *", "cpu": 1, "memory": "1Gi"}],
}
S = "kns:schedules[nightly]"
NEVER = "; Kubernetes would accept it and never run it"
UNSUPPORTED = "is not supported (Kubernetes cron has no L, W, #, H or R)"
EXAMPLE = '(for example "Europe/Paris" or "Etc/UTC")'
HOST_FILE = ("is a file of the machine that reads it, not an IANA time zone, so its meaning depends on the host "
             f"and the API server may refuse it: name the zone {EXAMPLE}")
PERIOD = ("each primer would fire before the previous run, while its Job still holds the pod, and under "
          "concurrencyPolicy Forbid (the default) every other run is lost. The lead must be shorter than the "
          "shortest gap between two consecutive runs")


# The checks' horizon starts on 1 January of the current year (chrono/prescale.py); the
# night a message cites is the next one crossed from now, this year's or next year's.
YEAR = datetime.now().year


def change_day(zone: str, month: int, now: Optional[datetime] = None) -> str:
    """The local date of `zone`'s next clock change in `month` from `now` (this year's, or
    next year's once it is past), found independently of the program (zoneinfo, in steps
    of a quarter of an hour, when changes happen)."""
    tz, now = ZoneInfo(zone), now or datetime.now(timezone.utc)
    for year in (now.year, now.year + 1):
        moment = datetime(year, month, 1, tzinfo=timezone.utc)
        while moment.month == month:
            step = moment + timedelta(minutes=15)
            before, after = (m.astimezone(tz).utcoffset() for m in (moment, step))
            if before != after and step >= now:
                return (step + min(before, after)).date().isoformat()
            moment = step
    raise AssertionError(f"no clock change in {zone} in month {month} after {now}")


def test_the_night_a_warm_up_message_cites_is_the_next_one_crossed():
    """The horizon starts on January 1st; a night already past this year is not the one
    to act on: the message cites the next crossed one, the spring gap of next year in
    the autumn."""
    from chrono import prescale
    primers = tuple(prescale.derive("30 1 * * *", 60, 2026))

    def cite(now: datetime) -> str:
        return prescale.dst_problem.__wrapped__("30 1 * * *", primers, 60, "Europe/London", 2026, now)

    autumn, winter = datetime(2026, 11, 28, tzinfo=timezone.utc), datetime(2026, 1, 10, tzinfo=timezone.utc)
    assert "(2027-03-28: 01:00-02:00 does not exist)" in cite(autumn)
    assert change_day("Europe/London", 3, autumn) == "2027-03-28"
    assert "(2026-03-29: 01:00-02:00 does not exist)" in cite(winter)
    assert change_day("Europe/London", 3, winter) == "2026-03-29"


def config_with(**changes) -> dict:
    config = copy.deepcopy(BASE)
    config["schedules"][0].update(changes)
    return config


# (entry changes, the problem's config path, the exact message)
CASES = {
    # 1. never fires: accepted by the API server, no Job ever
    "never fires: 30 February": (
        {"schedule": "0 0 30 2 *"}, f"{S}.schedule", f'"0 0 30 2 *" never fires: February has no day 30{NEVER}'),
    "never fires: 31st of short months": (
        {"schedule": "0 0 31 4,6,9,11 *"}, f"{S}.schedule",
        f'"0 0 31 4,6,9,11 *" never fires: April, June, September and November have no day 31{NEVER}'),
    "never fires: an empty field": (
        {"schedule": "0 0 * * ,"}, f"{S}.schedule", f'"0 0 * * ," never fires: its day-of-week field matches no day{NEVER}'),
    "never fires: a primer schedule": (
        {"primerSchedule": "20 2 30 2 *"}, f"{S}.primerSchedule",
        f'"20 2 30 2 *" never fires: February has no day 30{NEVER}'),
    # 2. a directory of the tz database
    "zone directory": (
        {"timeZone": "Europe"}, f"{S}.timeZone",
        '"Europe" is a group of time zones, not a zone: name one of them (for example "Europe/Amsterdam")'),
    "nested zone directory": (
        {"timeZone": "America/Argentina"}, f"{S}.timeZone",
        '"America/Argentina" is a group of time zones, not a zone: name one of them '
        '(for example "America/Argentina/Buenos_Aires")'),
    # 10. what croniter reads and the API server refuses
    "L": ({"schedule": "0 0 L * *"}, f"{S}.schedule",
          f'"0 0 L * *" is not a valid cron expression: "L" in the day-of-month field: "L" {UNSUPPORTED}'),
    "W": ({"schedule": "0 0 15W * *"}, f"{S}.schedule",
          f'"0 0 15W * *" is not a valid cron expression: "15W" in the day-of-month field: "15W" {UNSUPPORTED}'),
    "#": ({"schedule": "0 0 * * 5#3"}, f"{S}.schedule",
          f'"0 0 * * 5#3" is not a valid cron expression: "5#3" in the day-of-week field: "5#3" {UNSUPPORTED}'),
    "R": ({"schedule": "R 2 * * *"}, f"{S}.schedule",
          f'"R 2 * * *" is not a valid cron expression: "R" in the minute field: "R" {UNSUPPORTED}'),
    "descending range": (
        {"schedule": "0 23-1 * * *"}, f"{S}.schedule",
        '"0 23-1 * * *" is not a valid cron expression: "23-1" in the hour field: the range starts after it ends'),
    "Sunday as 7": (
        {"schedule": "0 0 * * 1-7"}, f"{S}.schedule",
        '"0 0 * * 1-7" is not a valid cron expression: "1-7" in the day-of-week field: 7 is above the maximum 6 '
        "(Sunday is 0 or SUN)"),
    "@every": ({"schedule": "@every 1h"}, f"{S}.schedule",
               '"@every 1h" is a fixed interval, not a calendar schedule; write the 5 fields'),
    "six fields": (
        {"schedule": "0 30 2 * * *"}, f"{S}.schedule",
        '"0 30 2 * * *" has 6 fields (a seconds field is not supported); a schedule needs exactly 5: minute, hour, '
        "day of month, month, day of week"),
    "L in a primer schedule": (
        {"primerSchedule": "20 2 L * *"}, f"{S}.primerSchedule",
        f'"20 2 L * *" is not a valid cron expression: "L" in the day-of-month field: "L" {UNSUPPORTED}'),
    # 12. a warm-up across a daylight-saving change
    "warm-up across spring forward": (
        {"schedule": "30 1 * * *", "timeZone": "Europe/London", "warmUpMinutes": 60}, f"{S}.warmUpMinutes",
        f"in Europe/London the clocks change at 01:00 on some nights ({change_day('Europe/London', 3)}: 01:00-02:00 "
        "does not exist); "
        "runs at 01:30 with a 60-minute warm-up would cross it: move the run or the warm-up outside 01:00-02:00, "
        "or use timeZone Etc/UTC"),
    "warm-up over the whole gap": (
        {"schedule": "0 4 * * *", "timeZone": "America/New_York", "warmUpMinutes": 150}, f"{S}.warmUpMinutes",
        f"in America/New_York the clocks change at 02:00 on some nights ({change_day('America/New_York', 3)}: "
        "02:00-03:00 does not exist); "
        "runs at 04:00 with a 150-minute warm-up would cross it: move the run or the warm-up outside 02:00-03:00, "
        "or use timeZone Etc/UTC"),
    "warm-up into the repeated hour": (  # New York's spring gap is 02:00-03:00: only the autumn night fails
        {"schedule": "30 1 * * *", "timeZone": "America/New_York", "warmUpMinutes": 60}, f"{S}.warmUpMinutes",
        f"in America/New_York the clocks change at 01:00 on some nights ({change_day('America/New_York', 11)}: "
        "01:00-02:00 happens twice); "
        "runs at 01:30 with a 60-minute warm-up would cross it: move the run or the warm-up outside 01:00-02:00, "
        "or use timeZone Etc/UTC"),
    "explicit primer in the gap": (
        {"schedule": "0 3 * * *", "timeZone": "America/New_York", "primerSchedule": "0 2 * * *"}, f"{S}.primerSchedule",
        f"in America/New_York the clocks change at 02:00 on some nights ({change_day('America/New_York', 3)}: "
        "02:00-03:00 does not exist); "
        "runs at 03:00 with a 60-minute warm-up would cross it: move the run or the warm-up outside 02:00-03:00, "
        "or use timeZone Etc/UTC"),
    # 13. a lead not shorter than the period
    "hourly with 90 minutes": (
        {"schedule": "0 * * * *", "warmUpMinutes": 90}, f"{S}.warmUpMinutes",
        'a 90-minute warm-up is not shorter than the 60 minutes (1 h) between two runs of "0 * * * *" '
        f"({YEAR}-01-01 00:00 and 01:00): {PERIOD}"),
    "every minute with 1": (
        {"schedule": "* * * * *", "warmUpMinutes": 1}, f"{S}.warmUpMinutes",
        'a 1-minute warm-up is not shorter than the 1 minute between two runs of "* * * * *" '
        f"({YEAR}-01-01 00:00 and 00:01): {PERIOD}"),
    "two runs close together": (
        {"schedule": "0,20 9 * * *", "warmUpMinutes": 20}, f"{S}.warmUpMinutes",
        'a 20-minute warm-up is not shorter than the 20 minutes between two runs of "0,20 9 * * *" '
        f"({YEAR}-01-01 09:00 and 09:20): {PERIOD}"),
    "primer as frequent as the runs": (
        {"schedule": "*/10 * * * *", "primerSchedule": "*/10 * * * *"}, f"{S}.primerSchedule",
        '"*/10 * * * *" fires 10 minutes before each run, which is not shorter than the 10 minutes between two runs '
        f'of "*/10 * * * *" ({YEAR}-01-01 00:00 and 00:10): {PERIOD}'),
    "primer five minutes after the run": (
        {"schedule": "0 3 * * *", "primerSchedule": "5 3 * * *"}, f"{S}.primerSchedule",
        '"5 3 * * *" fires 5 minutes after a run and 1435 minutes (23 h 55 min) before the next (the shortest gap '
        f'is the 1440 minutes (1 day) between two runs of "0 3 * * *" ({YEAR}-01-01 03:00 and 03:00 on {YEAR}-01-02)): '
        "read as warming the next run, it leaves each run only 5 minutes before the next primer, and under "
        "concurrencyPolicy Forbid (the default) a run still going then loses the next one. A primerSchedule must "
        "fire nearer to the run it warms than to the run before it; for so long a lead set warmUpMinutes instead"),
    # 14. host-dependent zone names
    "localtime": ({"timeZone": "localtime"}, f"{S}.timeZone", f'"localtime" {HOST_FILE}'),
    "a host path": ({"timeZone": "/etc/localtime"}, f"{S}.timeZone", f'"/etc/localtime" {HOST_FILE}'),
    "posix/": ({"timeZone": "posix/Europe/Paris"}, f"{S}.timeZone",
               '"posix/Europe/Paris" is a copy of "Europe/Paris" that only some hosts have (the API server may '
               'not): write "Europe/Paris"'),
    "right/": ({"timeZone": "right/Europe/Paris"}, f"{S}.timeZone",
               '"right/Europe/Paris" is a copy of "Europe/Paris" that only some hosts have (the API server may '
               'not): write "Europe/Paris"'),
    "Local": ({"timeZone": "Local"}, f"{S}.timeZone",
              f'"Local" would be the API server\'s own zone, which Kubernetes refuses: name the zone {EXAMPLE}'),
}


def program_result(config: dict) -> tuple[list[str], list]:
    """(problem lines or [], resources registered) of the real program under mocks."""
    mocks = RecordingMocks()
    try:
        run_program(config, mocks=mocks)
    except pulumi.RunError as exc:
        assert mocks.resources == [], "resources were registered before the run stopped"
        return str(exc).splitlines(), mocks.resources
    return [], mocks.resources


def project(root: Path, config: dict, name: str = "broken") -> Path:
    root.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(ROOT / "vendor", root / "vendor")  # the Kueue install the program reads
    document = {"config": {f"kns:{k}": v for k, v in config.items()}}
    (root / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True),
                                              encoding="utf-8")
    return root


def validate_result(root: Path, capsys, name: str = "broken") -> tuple[int, list[str]]:
    """(exit status, problem lines) of `./kns validate`, in process."""
    code = cli.main(["validate", "--stack", name, "--project-dir", str(root)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, without_places(err).splitlines()


def expected_lines(*problems: tuple[str, str]) -> list[str]:
    n = len(problems)
    return [HEAD.format(n=n, s="s" if n != 1 else ""), *(f"  - {path}: {message}" for path, message in problems)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_member_stops_the_program_and_validate_on_the_same_line(case, tmp_path, capsys):
    changes, path, message = CASES[case]
    config = config_with(**changes)
    expected = expected_lines((path, message))
    lines, resources = program_result(config)
    assert lines == expected
    assert resources == []
    code, err = validate_result(project(tmp_path / "p", config), capsys)
    assert (code, err) == (1, expected)


def test_every_class_at_once_from_the_real_kns_command(tmp_path):
    """One entry per class: all listed together (each entry's own fields first, then the
    warm-up checks, as docs/validation.md says), by the program and by the real
    `./kns validate` process, with no class name or traceback."""
    import subprocess

    picks = ["never fires: 30 February", "zone directory", "L", "warm-up across spring forward",
             "hourly with 90 minutes", "localtime"]
    config = copy.deepcopy(BASE)
    config["schedules"] = []
    problems = []
    for i, case in enumerate(picks):
        changes, path, message = CASES[case]
        config["schedules"].append({**BASE["schedules"][0], "name": f"s{i}", **changes})
        problems.append((path.replace("[nightly]", f"[s{i}]"), message))
    prescaling = [p for p in problems if p[0].endswith((".warmUpMinutes", ".primerSchedule"))]
    expected = expected_lines(*[p for p in problems if p not in prescaling], *prescaling)
    lines, resources = program_result(config)
    assert lines == expected and resources == []
    root = project(tmp_path / "p", config)
    done = subprocess.run([str(ROOT / "kns"), "validate", "--stack", "broken", "--project-dir", str(root)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert all(line.startswith("  - Pulumi.broken.yaml:") for line in done.stderr.splitlines()[1:])
    assert without_places(done.stderr).splitlines() == expected
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr


# ---- accepted: Kubernetes' own meaning --------------------------------------------------

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)  # a Sunday


def accepted(config: dict, tmp_path: Path, capsys):
    """The program's run (it must register resources) after `./kns validate` says valid."""
    code, err = validate_result(project(tmp_path / "ok", config, "ok"), capsys, "ok")
    assert (code, err) == (0, [])
    lines, resources = program_result(config)
    assert lines == [] and resources
    return resources


@pytest.mark.parametrize(
    "schedule, primer, days",
    [
        # class 11: */1 and ? in a day field are stars, so the weekday restricts (AND): Mondays
        ("0 0 */1 * 1", "50 23 * * 0", 2),
        ("0 0 ? * MON", "50 23 * * 0", 2),
        # 1-31 is no star: day of month OR weekday, so every day
        ("0 0 1-31 * 1", "50 23 * * *", 14),
        # descriptors are calendar schedules: Sundays 00:00
        ("@weekly", "50 23 * * 6", 2),
    ],
)
def test_day_fields_mean_what_they_mean_to_the_controller(schedule, primer, days, tmp_path, capsys):
    """The primer CronJob, the runs `kns explain`/`timeline` list (nextRuns' function) and
    their warm-ups, over two weeks, follow the controller's star bit."""
    config = config_with(schedule=schedule, warmUpMinutes=10)
    resources = accepted(config, tmp_path, capsys)
    (cronjob,) = [r for r in resources if r.type == CRON]
    assert cronjob.inputs["spec"]["schedule"] == primer
    _, plans = stack.load_stack(tmp_path / "ok", "ok")
    listed = runs.runs_between(plans[0], NOW, datetime(2026, 3, 15, tzinfo=timezone.utc))
    assert len(listed) == days
    assert all(kcron.parse(schedule).matches(r.start) for r in listed)
    assert all(kcron.parse(primer).matches(r.primer) and (r.start - r.primer).total_seconds() == 600 for r in listed)


def test_next_runs_output_lists_the_controllers_runs(tmp_path, capsys):
    """nextRuns (and `kns explain`) list robfig's fire times: on the spring-forward night
    in Paris there is no 02:30, and the autumn night has two."""
    from plan.outputs import stack_outputs

    config = config_with(schedule="30 2 * * *", timeZone="Europe/Paris")
    accepted(config, tmp_path, capsys)
    cfg, plans = stack.load_stack(tmp_path / "ok", "ok")
    spring = stack_outputs(cfg, plans, datetime(2026, 3, 28, 12, tzinfo=timezone.utc))
    assert spring["schedules"]["nightly"]["nextRuns"] == [
        "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00", "2026-04-01T02:30:00+02:00"]
    autumn = [r.start.isoformat() for r in runs.next_runs(plans[0], 3, datetime(2026, 10, 24, 12, tzinfo=timezone.utc))]
    assert autumn == ["2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"]


@pytest.mark.parametrize("zone", ["Etc/UTC", "Asia/Kolkata", "Asia/Tokyo"])
def test_zones_without_dst_keep_any_warm_up(zone, tmp_path, capsys):
    config = config_with(schedule="30 1 * * *", timeZone=zone, warmUpMinutes=60)
    resources = accepted(config, tmp_path, capsys)
    assert [r.inputs["spec"]["schedule"] for r in resources if r.type == CRON] == ["30 0 * * *"]


def test_a_warm_up_that_misses_the_change_is_kept_in_a_dst_zone(tmp_path, capsys):
    config = config_with(schedule="0 6 * * 1-5", timeZone="Europe/London", warmUpMinutes=45)
    resources = accepted(config, tmp_path, capsys)
    assert [r.inputs["spec"]["schedule"] for r in resources if r.type == CRON] == ["15 5 * * 1-5"]


# ---- any text: no traceback, and both doors agree ----------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
CRONISH = st.lists(st.sampled_from(["*", "?", "0", "5", "30", "1-5", "*/1", "*/15", "23-1", "L", "W", "#", "7",
                                    "MON", "jan", ",", "-", "/", " ", "@daily", "@every", "1h", "TZ=", "31", "2"]),
                   min_size=1, max_size=12).map(" ".join)
ZONES = st.sampled_from(["Etc/UTC", "Europe/London", "America/New_York", "Europe", "localtime", "posix/Etc/UTC",
                         "Local", "Australia/Lord_Howe", "etc/utc", ""])


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(schedule=st.one_of(CRONISH, TEXT), zone=st.one_of(ZONES, TEXT),
       warm_up=st.one_of(st.none(), st.integers(1, 1440)), primer=st.one_of(st.none(), CRONISH, TEXT))
def test_any_text_for_schedule_zone_and_primer(schedule, zone, warm_up, primer, tmp_path_factory, capsys):
    changes = {"schedule": schedule, "timeZone": zone}
    if warm_up is not None:
        changes["warmUpMinutes"] = warm_up
    if primer is not None:
        changes["primerSchedule"] = primer
    config = config_with(**changes)
    lines, resources = program_result(config)
    code, err = validate_result(project(tmp_path_factory.mktemp("any") / "p", config), capsys)
    if lines:
        assert code == 1 and err == lines
        assert all(line.startswith("  - kns:schedules[nightly]") for line in lines[1:])
    else:
        assert code == 0 and err == [] and resources
