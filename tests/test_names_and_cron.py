"""Naming rules and cron checks (pure, no Pulumi)."""

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chrono import cron, kcron
from config import names


@pytest.mark.parametrize("value", ["a", "train-resnet", "x" * 40, "a1-b2"])
def test_valid_entry_names(value):
    assert names.dns1123_label_problem(value, 40) is None


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("Train", "not a DNS-1123 label"),
        ("train_resnet", "not a DNS-1123 label"),
        ("-train", "not a DNS-1123 label"),
        ("train-", "not a DNS-1123 label"),
        ("", "not a DNS-1123 label"),
        ("x" * 41, "41 characters long; at most 40"),
    ],
)
def test_invalid_entry_names(value, fragment):
    assert fragment in names.dns1123_label_problem(value, 40)


def test_label_keys_and_values():
    assert names.label_key_problem("kns.io/pool") is None
    assert names.label_key_problem("team") is None
    assert "invalid prefix" in names.label_key_problem("Bad_Prefix/x")
    assert "not a valid key" in names.label_key_problem("a/-x")
    assert names.label_value_problem("") is None
    assert names.label_value_problem("alice.smith") is None
    assert "not a valid label value" in names.label_value_problem("alice smith")


def test_namespace_and_owner():
    assert names.namespace_name("kns-", "train") == "kns-train"
    assert names.owner_label("alice") == "alice"
    assert names.owner_label(None) == "platform"


@pytest.mark.parametrize("expr", [
    "30 2 * * *", "*/5 * * * 1-5", "0 0 1 1 *", "0 6 * * MON", "0 0 */1 * 1", "0 0 ? * sun", "05 +3 * * *",
    "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "0 0 29 2 *",
])
def test_valid_cron(expr):
    """What the CronJob controller accepts (chrono/kcron.py), descriptors included."""
    assert cron.cron_problem(expr) is None


@pytest.mark.parametrize(
    "expr, message",
    [
        ("0 0 * * * *", '"0 0 * * * *" has 6 fields (a seconds field is not supported); a schedule needs exactly 5: '
                        "minute, hour, day of month, month, day of week"),
        ("0 0 * *", '"0 0 * *" has 4 fields; a schedule needs exactly 5: minute, hour, day of month, month, day of week'),
        ("61 * * * *", '"61 * * * *" is not a valid cron expression: "61" in the minute field: 61 is above the maximum 59'),
        ("CRON_TZ=UTC 0 0 * * *", '"CRON_TZ=UTC 0 0 * * *" embeds a time zone; use the timeZone field instead'),
        # what croniter accepts and the API server refuses (issue 16, class 10)
        ("0 0 L * *", '"0 0 L * *" is not a valid cron expression: "L" in the day-of-month field: "L" is not '
                      "supported (Kubernetes cron has no L, W, #, H or R)"),
        ("0 0 15W * *", '"0 0 15W * *" is not a valid cron expression: "15W" in the day-of-month field: "15W" is not '
                        "supported (Kubernetes cron has no L, W, #, H or R)"),
        ("0 0 * * 5#3", '"0 0 * * 5#3" is not a valid cron expression: "5#3" in the day-of-week field: "5#3" is not '
                        "supported (Kubernetes cron has no L, W, #, H or R)"),
        ("R * * * *", '"R * * * *" is not a valid cron expression: "R" in the minute field: "R" is not supported '
                      "(Kubernetes cron has no L, W, #, H or R)"),
        ("0 23-1 * * *", '"0 23-1 * * *" is not a valid cron expression: "23-1" in the hour field: the range starts '
                         "after it ends"),
        ("0 0 * * 7", '"0 0 * * 7" is not a valid cron expression: "7" in the day-of-week field: 7 is above the '
                      "maximum 6 (Sunday is 0 or SUN)"),
        ("@every 1h", '"@every 1h" is a fixed interval, not a calendar schedule; write the 5 fields'),
        ("@Daily", '"@Daily" is not a known descriptor (@yearly, @annually, @monthly, @weekly, @daily, @midnight, '
                   "@hourly); descriptors are lower case"),
        ("", '"" is not a valid cron expression: the schedule is empty'),
        # accepted by the API server, but no Job would ever be created (class 1)
        ("0 0 30 2 *", '"0 0 30 2 *" never fires: February has no day 30; Kubernetes would accept it and never run it'),
        ("0 0 31 4,6,9,11 *", '"0 0 31 4,6,9,11 *" never fires: April, June, September and November have no day 31; '
                              "Kubernetes would accept it and never run it"),
        ("0 0 30,31 2 *", '"0 0 30,31 2 *" never fires: February has no day 30 or 31; Kubernetes would accept it and '
                          "never run it"),
        ("0 0 , * *", '"0 0 , * *" never fires: its day-of-month field matches no day; Kubernetes would accept it '
                      "and never run it"),
        ("0 0 * * ,", '"0 0 * * ," never fires: its day-of-week field matches no day; Kubernetes would accept it '
                      "and never run it"),
        (", 0 * * *", '", 0 * * *" never fires: its minute field matches no minute; Kubernetes would accept it and '
                      "never run it"),
    ],
)
def test_invalid_cron(expr, message):
    assert cron.cron_problem(expr) == message


def test_never_fires_is_the_calendar_rule():
    """A restricted day-of-week makes the day rule OR: the 30th of February never comes,
    but Mondays of February do."""
    assert cron.cron_problem("0 0 30 2 1") is None
    assert cron.cron_problem("0 0 30 2 */1") is not None  # */1 is a star: AND, so never


@pytest.mark.parametrize("name", ["Europe/Paris", "Etc/UTC", "UTC", "America/Argentina/ComodRivadavia", "Factory"])
def test_zones(name):
    assert cron.zone_problem(name) is None


@pytest.mark.parametrize(
    "name, message",
    [
        ("Mars/Olympus", '"Mars/Olympus" is not an IANA time zone (for example "Europe/Paris" or "Etc/UTC")'),
        # a directory of the tz database (issue 16, class 2: IsADirectoryError before)
        ("Europe", '"Europe" is a group of time zones, not a zone: name one of them (for example "Europe/Amsterdam")'),
        ("America/", '"America/" is a group of time zones, not a zone: name one of them (for example "America/Adak")'),
        # host-dependent names (class 14)
        ("localtime", '"localtime" is a file of the machine that reads it, not an IANA time zone, so its meaning '
                      'depends on the host and the API server may refuse it: name the zone (for example '
                      '"Europe/Paris" or "Etc/UTC")'),
        ("/etc/localtime", '"/etc/localtime" is a file of the machine that reads it, not an IANA time zone, so its '
                           'meaning depends on the host and the API server may refuse it: name the zone (for example '
                           '"Europe/Paris" or "Etc/UTC")'),
        ("posix/Europe/Paris", '"posix/Europe/Paris" is a copy of "Europe/Paris" that only some hosts have (the API '
                               'server may not): write "Europe/Paris"'),
        ("right/UTC", '"right/UTC" is a copy of "UTC" that only some hosts have (the API server may not): write "UTC"'),
        ("Local", '"Local" would be the API server\'s own zone, which Kubernetes refuses: name the zone (for example '
                  '"Europe/Paris" or "Etc/UTC")'),
        ("europe/paris", '"europe/paris" is not an IANA time zone (for example "Europe/Paris" or "Etc/UTC"): zone names '
                         'are case-sensitive; did you mean "Europe/Paris"?'),
        ("Europe/Paris ", '"Europe/Paris " is not an IANA time zone (for example "Europe/Paris" or "Etc/UTC"): remove '
                          'the spaces around "Europe/Paris"'),
        ("", '"" is not an IANA time zone (for example "Europe/Paris" or "Etc/UTC")'),
    ],
)
def test_zones_the_api_server_may_refuse(name, message):
    assert cron.zone_problem(name) == message
    with pytest.raises(cron.CronError):
        cron.zone(name)


def test_only_the_bundled_tz_database_counts():
    """The zone list is the pinned tzdata package's, not this host's files."""
    import importlib.resources

    names = kcron.zone_names()
    listed = importlib.resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    assert names == frozenset(listed) and len(names) > 500
    assert "localtime" not in names and not any(name.startswith(("posix/", "right/")) for name in names)
    assert all(cron.zone(name).key == name for name in sorted(names))


def test_next_runs_are_in_the_schedule_zone():
    now = datetime(2026, 3, 28, 12, 0, tzinfo=timezone.utc)  # Paris moves to CEST on 29 March
    # 02:30 does not exist that night: the controller does not fire that day
    assert cron.next_runs("30 2 * * *", "Europe/Paris", 3, now) == [
        "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00", "2026-04-01T02:30:00+02:00"]


def test_next_runs_fire_twice_in_the_repeated_hour():
    now = datetime(2026, 10, 24, 12, 0, tzinfo=timezone.utc)  # Paris moves back to CET on 25 October
    assert cron.next_runs("30 2 * * *", "Europe/Paris", 3, now) == [
        "2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"]


def test_next_runs_keep_the_star_bit():
    """`*/1` in the day of month is a star (Mondays only); `1-31` is not (every day)."""
    now = datetime(2026, 3, 1, tzinfo=timezone.utc)  # a Sunday
    assert cron.next_runs("0 0 */1 * 1", "Etc/UTC", 3, now) == [
        "2026-03-02T00:00:00+00:00", "2026-03-09T00:00:00+00:00", "2026-03-16T00:00:00+00:00"]
    assert cron.next_runs("0 0 1-31 * 1", "Etc/UTC", 3, now) == [
        "2026-03-02T00:00:00+00:00", "2026-03-03T00:00:00+00:00", "2026-03-04T00:00:00+00:00"]


@pytest.mark.parametrize(
    "zone, now, expected",
    [
        # the Friday before the spring change in Paris: Monday stays at 06:00 local
        ("Europe/Paris", datetime(2026, 3, 27, 12, tzinfo=timezone.utc),
         ["2026-03-30T06:00:00+02:00", "2026-03-31T06:00:00+02:00", "2026-04-01T06:00:00+02:00"]),
        # the Friday before the autumn change in New York
        ("America/New_York", datetime(2026, 10, 30, 12, tzinfo=timezone.utc),
         ["2026-11-02T06:00:00-05:00", "2026-11-03T06:00:00-05:00", "2026-11-04T06:00:00-05:00"]),
    ],
)
def test_next_runs_across_a_dst_change_keep_the_wall_clock(zone, now, expected):
    assert cron.next_runs("0 6 * * 1-5", zone, 3, now) == expected


def test_next_runs_are_fewer_beyond_the_controllers_horizon():
    """robfig looks 5 years ahead: after 2096-02-29 the next is 2104 (2100 is no leap year)."""
    assert cron.next_runs("0 0 29 2 *", "Etc/UTC", 3, datetime(2026, 1, 1, tzinfo=timezone.utc)) == [
        "2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00", "2036-02-29T00:00:00+00:00"]
    assert cron.next_runs("0 0 29 2 *", "Etc/UTC", 3, datetime(2096, 3, 1, tzinfo=timezone.utc)) == []


# ---- any text: only the project's own errors -----------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
CRONISH = st.lists(st.sampled_from(["*", "?", "0", "5", "30", "1-5", "*/1", "*/15", "23-1", "L", "W", "#", "7", "MON",
                                    "jan", ",", "-", "/", " ", "\t", "@daily", "@every", "1h", "TZ="]),
                   max_size=12).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=st.one_of(TEXT, CRONISH), zone=st.one_of(TEXT, st.sampled_from(sorted(kcron.zone_names())[:40])))
def test_cron_and_zone_functions_raise_only_cron_errors(text, zone):
    now = datetime(2026, 3, 28, 12, tzinfo=timezone.utc)
    problem = cron.cron_problem(text)
    assert problem is None or isinstance(problem, str)
    assert cron.zone_problem(zone) is None or isinstance(cron.zone_problem(zone), str)
    try:
        runs = cron.next_runs(text, zone, 2, now)
    except cron.CronError:
        assert problem is not None or cron.zone_problem(zone) is not None
    else:
        assert problem is None and cron.zone_problem(zone) is None and len(runs) == 2
