"""Naming rules and cron checks (pure, no Pulumi)."""

from datetime import datetime, timezone

import pytest

from config import cron, names


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


@pytest.mark.parametrize("expr", ["30 2 * * *", "*/5 * * * 1-5", "0 0 1 1 *", "0 6 * * MON"])
def test_valid_cron(expr):
    assert cron.cron_problem(expr) is None


@pytest.mark.parametrize(
    "expr, fragment",
    [
        ("0 0 * * * *", "has 6 fields (a seconds field is not supported)"),
        ("0 0 * *", "has 4 fields"),
        ("61 * * * *", "is not a valid cron expression"),
        ("@hourly", "is a macro"),
        ("CRON_TZ=UTC 0 0 * * *", "embeds a time zone"),
    ],
)
def test_invalid_cron(expr, fragment):
    assert fragment in cron.cron_problem(expr)


def test_zones():
    assert cron.zone_problem("Europe/Paris") is None
    assert "not an IANA time zone" in cron.zone_problem("Mars/Olympus")


def test_next_runs_are_in_the_schedule_zone():
    now = datetime(2026, 3, 28, 12, 0, tzinfo=timezone.utc)  # Paris moves to CEST on 29 March
    runs = cron.next_runs("30 2 * * *", "Europe/Paris", 3, now)
    assert runs[0] == "2026-03-29T03:30:00+02:00"  # 02:30 does not exist that night
    assert runs[1] == "2026-03-30T02:30:00+02:00"
    assert runs[2] == "2026-03-31T02:30:00+02:00"


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
