"""chrono.kcron against robfig/cron v3.0.1, the library of the Kubernetes API server and
CronJob controller: a committed table made by tools/cron-oracle (no Go needed), and live
property tests against the oracle itself (Go needed: they fail, not skip, without it)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chrono import kcron

ROOT = Path(__file__).resolve().parent.parent
ORACLE_SRC = ROOT / "tools" / "cron-oracle"
FIXTURE = ROOT / "tests" / "fixtures" / "cron-oracle.jsonl"
UTC = timezone.utc


def _start(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def python_answer(case: dict) -> dict:
    """What chrono.kcron says for an oracle case, in the oracle's shape; "@every" (which
    Kubernetes accepts and kcron refuses on purpose) is marked "interval"."""
    try:
        fields = kcron.parse(case["expr"])
    except kcron.CronError as err:
        if err.accepted_by_kubernetes:
            return {"ok": True, "interval": True, "error": str(err)}
        return {"ok": False, "error": str(err)}
    t = _start(case["start"])
    runs = []
    for _ in range(case["count"]):
        t = kcron.next_fire(fields, t, case["zone"])
        if t is None:
            break
        runs.append(t.isoformat())
    return {"ok": True, "never": case["count"] > 0 and not runs, "next": runs}


def assert_same(case: dict, oracle: dict) -> None:
    mine = python_answer(case)
    label = json.dumps({k: case[k] for k in ("expr", "zone", "start", "count")}, ensure_ascii=False)
    assert mine["ok"] == oracle["ok"], f"{label}: robfig {oracle}, kcron {mine}"
    if not oracle["ok"]:
        return
    if mine.get("interval"):
        assert case["expr"].startswith("@every "), f"{label}: only @every may be refused: {mine}"
        return
    assert mine["next"] == oracle["next"], f"{label}:\n robfig {oracle['next']}\n kcron  {mine['next']}"
    assert mine["never"] == oracle["never"], label


# ------------------------------------------------------------------ committed table


def fixture_rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_fixture_is_the_curated_list_answered():
    cases = [json.loads(line) for line in (ORACLE_SRC / "cases.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    rows = fixture_rows()
    assert [{k: r[k] for k in ("expr", "zone", "start", "count")} for r in rows] == cases
    assert len({r["expr"] for r in rows}) >= 150
    assert any(r["ok"] for r in rows) and any(not r["ok"] for r in rows)
    assert any(r.get("never") for r in rows)


@pytest.mark.parametrize("row", fixture_rows(), ids=lambda r: f'{r["expr"]!r}@{r["zone"]}@{r["start"]}')
def test_reproduces_the_committed_oracle_table(row):
    assert_same(row, row)


# ------------------------------------------------------------------- direct checks


def runs(expr, zone="UTC", count=3, now="2026-03-28T00:00:00Z"):
    return [t.isoformat() for t in kcron.next_runs(expr, zone, count, _start(now))]


def test_star_bit_decides_and_or():
    # */1 keeps the star bit: AND with Monday (2026-03-30 is a Monday)
    assert runs("0 0 */1 * 1") == ["2026-03-30T00:00:00+00:00", "2026-04-06T00:00:00+00:00",
                                   "2026-04-13T00:00:00+00:00"]
    # an explicit full range has none: OR, so every day
    assert runs("0 0 1-31 * 1") == ["2026-03-29T00:00:00+00:00", "2026-03-30T00:00:00+00:00",
                                    "2026-03-31T00:00:00+00:00"]
    assert kcron.parse("0 0 */1 * 1").doms is None
    assert kcron.parse("0 0 */2 * 1").doms == frozenset(range(1, 32, 2))
    assert kcron.parse("0 0 ? * ?").dows is None


def test_descriptors_and_every():
    assert kcron.parse("@daily") == kcron.parse("0 0 * * *")
    assert kcron.parse("@weekly") == kcron.parse("0 0 * * 0")
    assert kcron.parse("@yearly") == kcron.parse("0 0 1 1 *")
    assert kcron.parse("@hourly") == kcron.parse("0 * * * *")
    with pytest.raises(kcron.CronError) as err:
        kcron.parse("@every 1h")
    assert err.value.accepted_by_kubernetes
    assert str(err.value) == '"@every 1h" is a fixed interval, not a calendar schedule; write the 5 fields'
    with pytest.raises(kcron.CronError) as err:
        kcron.parse("@every 1d")
    assert not err.value.accepted_by_kubernetes


@pytest.mark.parametrize(
    "expr, message",
    [
        ("0 23-1 * * *", '"23-1" in the hour field: the range starts after it ends'),
        ("0 0 * * 7", '"7" in the day-of-week field: 7 is above the maximum 6 (Sunday is 0 or SUN)'),
        ("0 0 L * *", '"L" in the day-of-month field: "L" is not supported (Kubernetes cron has no L, W, #, H or R)'),
        ("0 0 * * 5#3", '"5#3" in the day-of-week field: "5#3" is not supported (Kubernetes cron has no L, W, #, H or R)'),
        ("*/0 * * * *", '"*/0" in the minute field: the step must be a positive number'),
        ("0 0 jan * *", '"jan" in the day-of-month field: "jan" is not a number'),
        ("0 0 * * * *", '"0 0 * * * *" has 6 fields (a seconds field is not supported); a schedule needs '
                        "exactly 5: minute, hour, day of month, month, day of week"),
        ("CRON_TZ=UTC 0 0 * * *", '"CRON_TZ=UTC 0 0 * * *" embeds a time zone; use the timeZone field instead'),
    ],
)
def test_messages_name_the_field(expr, message):
    assert kcron.problem(expr) == message
    with pytest.raises(kcron.CronError, match=re.escape(message)):
        kcron.parse(expr)


def test_matches():
    f = kcron.parse("30 2 * * 1-5")
    assert f.matches(datetime(2026, 3, 30, 2, 30))  # a Monday
    assert not f.matches(datetime(2026, 3, 29, 2, 30))  # a Sunday
    assert not f.matches(datetime(2026, 3, 30, 2, 31))
    g = kcron.parse("0 0 13 * 5")  # OR: the 13th, or a Friday
    assert g.matches(datetime(2026, 4, 13)) and g.matches(datetime(2026, 4, 17))
    assert not g.matches(datetime(2026, 4, 14))
    assert kcron.parse("0 0 */1 * 5").matches(datetime(2026, 4, 17))
    assert not kcron.parse("0 0 */1 * 5").matches(datetime(2026, 4, 13))


def test_never_fires_examples():
    for expr in ("0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 , * *", ", * * * *", "0 , * * *", "0 0 * , *",
                 "0 0 * * ,", "0 0 30 2 */1"):
        assert kcron.never_fires(kcron.parse(expr)), expr
        assert kcron.next_fire(kcron.parse(expr), _start("2026-01-01T00:00:00Z"), "UTC") is None
    for expr in ("0 0 29 2 *", "0 0 30 2 1", "0 0 31 * *"):
        assert not kcron.never_fires(kcron.parse(expr)), expr


def test_fast():
    t0 = time.perf_counter()
    for i in range(2000):
        kcron.parse(f"{i % 60} {i % 24} * * *")
    parse_each = (time.perf_counter() - t0) / 2000
    fields = kcron.parse("59 23 * * 1-5")
    start = _start("2026-03-28T00:00:00Z")
    t0 = time.perf_counter()
    for i in range(1000):
        kcron.next_fire(fields, start + timedelta(minutes=37 * i), "Europe/London")
    next_each = (time.perf_counter() - t0) / 1000
    # generous bounds for a loaded 2-core CI machine; typical is far below
    assert parse_each < 0.002 and next_each < 0.005, (parse_each, next_each)


# ------------------------------------------------------------- the live oracle


def _oracle_binary() -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH: the cron oracle (tools/cron-oracle) needs it, as CI has it")
    digest = hashlib.sha256()
    for name in ("main.go", "go.mod", "go.sum"):
        digest.update((ORACLE_SRC / name).read_bytes())
    digest.update(subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout.encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kns-platform" / "cron-oracle"
    binary = cache / digest.hexdigest()[:16] / "cron-oracle"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name(f"cron-oracle.{os.getpid()}")
        build = subprocess.run([go, "build", "-buildvcs=false", "-trimpath", "-o", str(tmp), "."],
                               cwd=ORACLE_SRC, capture_output=True, text=True)
        assert build.returncode == 0, f"go build of tools/cron-oracle failed:\n{build.stderr}"
        tmp.replace(binary)
    return binary


class Oracle:
    """One oracle process for the whole session: a line in, a line out."""

    def __init__(self, binary: Path):
        self.proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, encoding="utf-8", bufsize=1)
        self.asked = 0
        self.seen: Counter = Counter()

    def ask(self, case: dict) -> dict:
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the cron oracle exited"
        self.asked += 1
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def oracle():
    o = Oracle(_oracle_binary())
    yield o
    o.close()


ZONES = ["UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata",
         "America/Santiago", "America/Havana", "Pacific/Chatham", "Asia/Kathmandu", "Europe/Paris"]
# starts a few hours before a 2026 transition of some of those zones, and plain ones
ANCHORS = ["2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z", "2026-03-08T07:00:00Z", "2026-11-01T06:00:00Z",
           "2026-10-03T15:30:00Z", "2026-04-04T15:00:00Z", "2026-09-06T04:00:00Z", "2026-04-05T03:00:00Z",
           "2026-03-08T05:00:00Z", "2026-11-01T05:00:00Z", "2026-04-04T14:00:00Z", "2026-09-26T14:00:00Z",
           "2026-01-01T00:00:00Z", "2026-02-28T12:00:00Z", "2027-12-31T23:59:59Z"]

NUMBERS = st.integers(min_value=-1, max_value=62).map(str)
NAMES = st.sampled_from(["jan", "FEB", "Mar", "dec", "sun", "MON", "fri", "Sat", "january", "thur"])
ODD = st.sampled_from(["L", "W", "5L", "15W", "LW", "5#3", "H", "R", "", "x", "1.5", "+3", "007",
                       "*-3", "?", "*", "7", "0", "31", "32", "24", "60", "-", "/", "1-", "-1"])


@st.composite
def items(draw):
    kind = draw(st.sampled_from(["star", "num", "name", "range", "odd"]))
    if kind == "star":
        base = draw(st.sampled_from(["*", "?"]))
    elif kind == "num":
        base = draw(NUMBERS)
    elif kind == "name":
        base = draw(NAMES)
    elif kind == "range":
        base = f"{draw(st.one_of(NUMBERS, NAMES))}-{draw(st.one_of(NUMBERS, NAMES))}"
    else:
        base = draw(ODD)
    if kind != "odd" and draw(st.integers(0, 2)) == 0:
        base += "/" + draw(st.sampled_from(["0", "1", "2", "3", "5", "7", "15", "61", "-1", "", "01"]))
    return base


FIELD_DEFAULTS = [
    st.sampled_from(["0", "30", "*/15", "0,30", "*"]),
    st.sampled_from(["0", "1", "2", "*", "1-3", "*/6"]),
    st.sampled_from(["*", "?", "1", "*/1", "1-31", "15", "29", "31", "*/2"]),
    st.sampled_from(["*", "2", "*/3", "jan-jun"]),
    st.sampled_from(["*", "?", "1", "1-5", "*/1", "0", "sun,sat", "*/2"]),
]


@st.composite
def expressions(draw):
    form = draw(st.integers(0, 19))
    if form == 0:
        return draw(st.sampled_from(
            ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@Daily",
             "@reboot", "@every 1h", "@every 1x", "@every", "@daily ", " @hourly", "@every 90s",
             "TZ=UTC 0 0 * * *", "CRON_TZ=Europe/London 0 0 * * *", "0 TZ * * *", ""]))
    n = draw(st.sampled_from([5] * 8 + [4, 6, 3]))
    fields = []
    for i in range(n):
        if i < 5 and draw(st.integers(0, 2)) > 0:
            fields.append(draw(FIELD_DEFAULTS[i]))  # a plausible field: the odd one stands out
        else:
            fields.append(",".join(draw(st.lists(items(), min_size=1, max_size=3))))
    sep = draw(st.sampled_from([" ", " ", " ", "  ", "\t"]))
    return sep.join(fields)


@st.composite
def cases(draw):
    start = _start(draw(st.sampled_from(ANCHORS)))
    start += timedelta(seconds=draw(st.integers(-6 * 3600, 6 * 3600)))
    if draw(st.booleans()):
        start += timedelta(microseconds=draw(st.integers(0, 999_999)))
    return {
        "expr": draw(expressions()),
        "zone": draw(st.sampled_from(ZONES)),
        "start": start.isoformat().replace("+00:00", "Z"),
        "count": draw(st.integers(1, 6)),
    }


@settings(max_examples=300, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_agrees_with_robfig_on_generated_schedules(oracle, case):
    answer = oracle.ask(case)
    oracle.seen[("accepted" if answer["ok"] else "refused")] += 1
    oracle.seen[case["zone"]] += 1
    assert_same(case, answer)


def test_the_generated_schedules_reach_both_verdicts(oracle):
    """Runs after test_agrees_with_robfig_on_generated_schedules (file order), whose
    examples it counts: both verdicts, each well represented, and every zone."""
    assert oracle.seen, "run it with test_agrees_with_robfig_on_generated_schedules"
    assert oracle.seen["accepted"] >= 30 and oracle.seen["refused"] >= 30, oracle.seen
    assert all(oracle.seen[z] for z in ZONES), oracle.seen


DAY_DOMS = st.sampled_from(["*", "?", "*/1", "*/2", "1-31", "29", "30", "31", "30,31", "29-31", ",",
                            "1", "15/10", "31/5", "28-29"])
DAY_MONTHS = st.sampled_from(["2", "4", "6", "9", "11", "2,4", "4-6", "*", "feb", "1,3", "4,6,9,11", "2/12", ","])
DAY_DOWS = st.sampled_from(["*", "?", "*/1", ",", "1", "0-6", "*/2", "sun", "1-5"])


@settings(max_examples=200, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(dom=DAY_DOMS, month=DAY_MONTHS, dow=DAY_DOWS, time_of_day=st.sampled_from(["0 12", "30 0", ", 12", "0 ,"]),
       zone=st.sampled_from(["UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe"]),
       start=st.sampled_from(["2026-03-28T00:00:00Z", "2027-03-01T00:00:00Z", "2028-03-01T00:00:00Z"]))
def test_never_fires_agrees_with_robfig(oracle, dom, month, dow, time_of_day, zone, start):
    expr = f"{time_of_day} {dom} {month} {dow}"
    answer = oracle.ask({"expr": expr, "zone": zone, "start": start, "count": 1})
    assert answer["ok"], (expr, answer)
    assert kcron.never_fires(kcron.parse(expr)) == answer["never"], (expr, zone, start, answer)


# ---------------------------------------------------------------- the messages

CLASS_NAMES = re.compile(r"\b\w*(Error|Exception|Warning)\b|Traceback|\bobject at 0x|\bNone\b")


def test_messages_are_for_people():
    refused = [r["expr"] for r in fixture_rows() if not r["ok"]]
    refused += ["@every 2h", "0 0 * * * *", "99999999999999999999 * * * *", "0 0 * * \u2212", "\x00"]
    for expr in refused:
        message = kcron.problem(expr)
        assert message, expr
        assert not CLASS_NAMES.search(message), (expr, message)
        assert "\n" not in message and len(message) < 240, (expr, message)
        with pytest.raises(kcron.CronError) as err:
            kcron.parse(expr)
        assert str(err.value) == message
        assert err.value.__cause__ is None and err.value.__suppress_context__
