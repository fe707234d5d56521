"""Kubernetes CronJob schedules, exactly: the language and the fire times of the controller.

The API server accepts a schedule when github.com/robfig/cron/v3 (v3.0.1)
`cron.ParseStandard` parses it and it does not contain "TZ" (validateScheduleFormat in
k8s.io/kubernetes pkg/apis/batch/validation); the CronJob controller then parses
"TZ=<spec.timeZone> <schedule>" and steps with `SpecSchedule.Next`. This module is a
port of both, proven against robfig itself by tests/test_kcron.py (a committed table
made by tools/cron-oracle, and a live property test against the same oracle).

The language (and where it differs from croniter, which the program used before):

* exactly 5 fields: minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC,
  day of week 0-6 or SUN-SAT (names in any case); no 7 for Sunday, no L, W, #, H or R,
  no seconds field, no descending range ("23-1" is refused);
* each field is a comma list of `*`, `?` (the same as `*`, in any field), `N`, `N-M`, any
  of those followed by `/step`; `N/step` means `N-max/step`; empty list items are
  ignored, so "," is an empty field that matches nothing (the schedule never fires);
  numbers may carry a "+" sign or leading zeros ("+5", "05");
* the "star bit": a field written `*`, `?` or with a step of 1 (`*/1`) is unrestricted. If
  either day field (day of month, day of week) is unrestricted a day must match both,
  otherwise either: "0 0 */1 * 1" runs on Mondays only, "0 0 1-31 * 1" every day;
* the descriptors @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly
  (exactly so: lower case, nothing around them). robfig also accepts "@every <duration>";
  this module refuses it (a CronError whose `accepted_by_kubernetes` is True), as the
  program needs calendar fields: what this module accepts is a strict subset of what
  Kubernetes accepts, and everything Kubernetes refuses is refused.

Fire times (`next_fire`) follow robfig's `Next` step by step, including its handling of
daylight saving time, which differs from "the wall-clock time, placed in the zone":

* spring forward: a time in the skipped hour does not fire that day. "30 1 * * *" in
  Europe/London has no run on 2026-03-29 (01:00 GMT jumps to 02:00 BST): the runs are
  2026-03-28T01:30+00:00 then 2026-03-30T01:30+01:00. With a 30-minute jump
  (Australia/Lord_Howe, 02:00 -> 02:30) minutes past the jump still fire and can leak
  into the next hour: "0,45 1 * * *" fires at 02:45+11:00 on 2026-10-04.
* fall back: robfig steps the repeated hour in real time, so a time in it fires twice,
  once per offset: "30 1 * * *" in Europe/London fires at 2026-10-25T01:30+01:00 and
  again at 2026-10-25T01:30+00:00 (America/New_York likewise on 2026-11-01). With
  Lord Howe's half-hour fall back (02:00 -> 01:30) 02:00..02:29 is lost that day
  ("15 2 * * *" has no run on 2026-04-05).
  tools/cron-oracle/README.md lists these cases; all are in the committed table.
* nothing within 5 years of the start (for example "0 0 30 2 *"): `next_fire` returns
  None, where robfig returns the zero time.

Time zones: `zone` and `next_fire` take only the IANA names of the pinned tzdata package
(`zone_names`), which any API server's tz database has; a host's own files ("localtime",
"posix/...", "right/...") and directories ("Europe") are a CronError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "CronError",
    "Fields",
    "parse",
    "problem",
    "next_fire",
    "next_runs",
    "never_fires",
    "zone",
    "zone_names",
]

FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_MONTH_NAMES = {n: i + 1 for i, n in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DOW_NAMES = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_NAMES = (None, None, None, _MONTH_NAMES, _DOW_NAMES)

# Go's strings.Fields splits on unicode.IsSpace; Python's str.split() also splits on
# U+001C..U+001F, which Go does not.
_GO_SPACE = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


class CronError(ValueError):
    """A schedule this module refuses. `str(err)` is a short message for a person.

    `accepted_by_kubernetes` is True only for what Kubernetes accepts but this module
    does not model ("@every <duration>").
    """

    def __init__(self, message: str, accepted_by_kubernetes: bool = False):
        super().__init__(message)
        self.message = message
        self.accepted_by_kubernetes = accepted_by_kubernetes

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Fields:
    """A parsed schedule. `doms`/`dows` None means that day field has the star bit
    (written `*`, `?` or `*/1`): unrestricted, and the day rule becomes AND."""

    minutes: frozenset
    hours: frozenset
    doms: frozenset | None
    months: frozenset
    dows: frozenset | None
    _dom_set: frozenset = field(init=False, repr=False, compare=False)
    _dow_set: frozenset = field(init=False, repr=False, compare=False)
    _both: bool = field(init=False, repr=False, compare=False)
    _never: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "_dom_set", frozenset(range(1, 32)) if self.doms is None else self.doms)
        set_(self, "_dow_set", frozenset(range(7)) if self.dows is None else self.dows)
        set_(self, "_both", self.doms is None or self.dows is None)
        set_(self, "_never", never_fires(self))

    def day_matches(self, day: int, go_weekday: int) -> bool:
        """robfig's dayMatches: `go_weekday` counts from Sunday = 0."""
        dom = day in self._dom_set
        dow = go_weekday in self._dow_set
        return (dom and dow) if self._both else (dom or dow)

    def matches(self, wall: datetime) -> bool:
        """Whether the wall-clock time `wall` (its own fields; seconds ignored) is in the
        schedule."""
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and self.day_matches(wall.day, (wall.weekday() + 1) % 7)
        )


# ---------------------------------------------------------------------------- parsing


def _go_lower(s: str) -> str:
    # Go's strings.ToLower maps rune by rune (U+0130 to "i", where Python gives "i̇").
    return "".join("i" if c == "\u0130" else c.lower() for c in s)


def _atoi(text: str) -> int | None:
    """Go's strconv.Atoi on a 64-bit machine: ASCII digits, an optional sign, int64."""
    if not _GO_INT.fullmatch(text):
        return None
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:
        return None
    value = sign * int(digits)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _number(piece: str, expr: str, index: int, names) -> int:
    """robfig's parseIntOrName / mustParseInt (Go's strconv.Atoi, then no negatives)."""
    if names is not None and _go_lower(piece) in names:
        return names[_go_lower(piece)]
    where = f'"{expr}" in the {FIELD_NAMES[index]} field'
    value = _atoi(piece)
    if value is not None:
        if value < 0:
            raise CronError(f"{where}: {value} is negative")
        return value
    if piece == "":
        raise CronError(f"{where}: a number is missing")
    if _GO_INT.fullmatch(piece):
        raise CronError(f'{where}: "{piece}" is too large')
    if re.fullmatch(r"[0-9]*[LW#HR][0-9]*|LW|[0-9]+#[0-9]+|H\(.*", piece, re.IGNORECASE) and (
        names is None or _go_lower(piece) not in names
    ):
        return _unsupported(where, piece)
    kind = {3: "a number or a month name (JAN-DEC)", 4: "a number or a day name (SUN-SAT)"}
    raise CronError(f'{where}: "{piece}" is not {kind.get(index, "a number")}')


def _unsupported(where: str, piece: str):
    raise CronError(f'{where}: "{piece}" is not supported (Kubernetes cron has no L, W, #, H or R)')


def _range(expr: str, index: int) -> tuple[frozenset, bool]:
    """robfig's getRange: the values of one list item, and whether it sets the star bit."""
    lo_bound, hi_bound = _BOUNDS[index]
    names = _NAMES[index]
    where = f'"{expr}" in the {FIELD_NAMES[index]} field'
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    star = False
    if low_and_high[0] in ("*", "?"):
        start, end, star = lo_bound, hi_bound, True
    else:
        start = _number(low_and_high[0], expr, index, names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _number(low_and_high[1], expr, index, names)
        else:
            raise CronError(f'{where}: too many "-"')
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step_text = range_and_step[1]
        if (_atoi(step_text) or 0) < 0:
            raise CronError(f"{where}: the step must be a positive number")
        step = _number(step_text, expr, index, None)
        if single:
            end = hi_bound
        if step > 1:
            star = False
    else:
        raise CronError(f'{where}: too many "/"')
    if start < lo_bound:
        raise CronError(f"{where}: {start} is below the minimum {lo_bound}")
    if end > hi_bound:
        hint = " (Sunday is 0 or SUN)" if index == 4 and end == 7 else ""
        raise CronError(f"{where}: {end} is above the maximum {hi_bound}{hint}")
    if start > end:
        raise CronError(f"{where}: the range starts after it ends")
    if step == 0:
        raise CronError(f"{where}: the step must be a positive number")
    return frozenset(range(start, end + 1, step)), star


def _field(text: str, index: int) -> tuple[frozenset, bool]:
    values: set = set()
    star = False
    for item in text.split(","):
        if item == "":
            continue  # Go's strings.FieldsFunc drops empty items
        bits, item_star = _range(item, index)
        values |= bits
        star = star or item_star
    return frozenset(values), star


def _go_duration_ok(text: str) -> bool:
    """Whether Go's time.ParseDuration accepts `text` (a port of Go 1.26's)."""
    s = text.encode("utf-8", "surrogatepass")
    mask = (1 << 64) - 1
    if s[:1] in (b"-", b"+"):
        s = s[1:]
    if s == b"0":
        return True
    if not s:
        return False
    units = {b"ns": 1, b"us": 10**3, "µs".encode(): 10**3, "μs".encode(): 10**3,
             b"ms": 10**6, b"s": 10**9, b"m": 60 * 10**9, b"h": 3600 * 10**9}
    d = 0
    while s:
        if not (s[:1] == b"." or b"0" <= s[:1] <= b"9"):
            return False
        v, i = 0, 0
        while i < len(s) and 48 <= s[i] <= 57:
            if v > (1 << 63) // 10:
                return False
            v = v * 10 + s[i] - 48
            if v > 1 << 63:
                return False
            i += 1
        pre = i > 0
        s = s[i:]
        f, scale, post = 0, 1.0, False
        if s[:1] == b".":
            s = s[1:]
            i, overflow = 0, False
            while i < len(s) and 48 <= s[i] <= 57:
                if not overflow:
                    if f > ((1 << 63) - 1) // 10:
                        overflow = True
                    else:
                        y = f * 10 + s[i] - 48
                        if y > 1 << 63:
                            overflow = True
                        else:
                            f, scale = y, scale * 10
                i += 1
            post = i > 0
            s = s[i:]
        if not pre and not post:
            return False
        i = 0
        while i < len(s) and not (s[i] == 46 or 48 <= s[i] <= 57):
            i += 1
        if i == 0:
            return False
        unit = units.get(s[:i])
        s = s[i:]
        if unit is None or v > (1 << 63) // unit:
            return False
        v *= unit
        if f > 0:
            v += int(float(f) * (float(unit) / scale))
            if v > 1 << 63:
                return False
        d = (d + v) & mask
        if d > 1 << 63:
            return False
    return True if text[:1] == "-" else d <= (1 << 63) - 1


def _descriptor(spec: str) -> Fields:
    """robfig's parseDescriptor, less "@every"."""
    full = (frozenset(range(60)), frozenset(range(24)), frozenset(range(1, 13)))
    zero = frozenset({0})
    if spec in ("@yearly", "@annually"):
        return Fields(zero, zero, frozenset({1}), frozenset({1}), None)
    if spec == "@monthly":
        return Fields(zero, zero, frozenset({1}), full[2], None)
    if spec == "@weekly":
        return Fields(zero, zero, None, full[2], frozenset({0}))
    if spec in ("@daily", "@midnight"):
        return Fields(zero, zero, None, full[2], None)
    if spec == "@hourly":
        return Fields(zero, full[1], None, full[2], None)
    if spec.startswith("@every "):
        duration = spec[len("@every "):]
        if _go_duration_ok(duration):
            raise CronError(
                f'"{spec}" is a fixed interval, not a calendar schedule; write the 5 fields',
                accepted_by_kubernetes=True,
            )
        raise CronError(f'"{spec}": "{duration}" is not a duration (for example 1h30m)')
    hint = ""
    if spec.lower() in _DESCRIPTORS:
        hint = "; descriptors are lower case"
    elif spec.strip() in _DESCRIPTORS:
        hint = "; remove the spaces around it"
    raise CronError(f'"{spec}" is not a known descriptor ({", ".join(_DESCRIPTORS)}){hint}')


@lru_cache(maxsize=4096)
def _parse(expression: str) -> Fields | CronError:
    try:
        if not isinstance(expression, str):
            return CronError("a schedule must be a string")
        if expression == "":
            return CronError("the schedule is empty")
        if "TZ" in expression:
            if expression.startswith(("TZ=", "CRON_TZ=")):
                return CronError(f'"{expression}" embeds a time zone; use the timeZone field instead')
            return CronError(f'"{expression}" contains "TZ", which Kubernetes refuses in a schedule')
        if expression.startswith("@"):
            return _descriptor(expression)
        parts = [p for p in _GO_SPACE.split(expression) if p]
        if len(parts) != 5:
            hint = " (a seconds field is not supported)" if len(parts) == 6 else ""
            return CronError(
                f'"{expression}" has {len(parts)} fields{hint}; a schedule needs exactly 5: '
                "minute, hour, day of month, month, day of week"
            )
        values = [_field(text, i) for i, text in enumerate(parts)]
        (minutes, _), (hours, _), (doms, dom_star), (months, _), (dows, dow_star) = values
        return Fields(minutes, hours, None if dom_star else doms, months, None if dow_star else dows)
    except CronError as err:
        return err


def parse(expression: str) -> Fields:
    """The fields of a Kubernetes CronJob schedule; CronError (a one-line message naming
    the field at fault) for anything the API server refuses, and for "@every"."""
    result = _parse(expression)
    if isinstance(result, CronError):
        raise CronError(result.message, result.accepted_by_kubernetes) from None
    return result


def problem(expression: str) -> str | None:
    """Why `expression` is not a usable schedule, or None."""
    result = _parse(expression)
    return result.message if isinstance(result, CronError) else None


# ---------------------------------------------------------------------- the calendar

_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February: leap years


def never_fires(fields: Fields) -> bool:
    """Whether no calendar day and time matches, so robfig's Next returns the zero time
    from any start (from the calendar alone, no stepping).

    With the star bit on one day field the day rule is the other field alone (the starred
    one is full), so only months x days of month matter; February 29 counts (a leap
    year is within robfig's 5-year horizon for any start from 1904 to February 2096).
    A day rule cannot single out a weekday of a month (that needs both day fields
    restricted, which makes the rule OR), so no schedule falls only in the DST gaps of
    today's zones, whose changes are on such days; a zone changing on a fixed date
    could still starve one, and `next_fire` would say so.
    """
    if not fields.minutes or not fields.hours or not fields.months:
        return True
    doms, dows = fields.doms, fields.dows
    if doms is None:
        return dows is not None and not dows
    dom_days = any(d <= _MONTH_DAYS[m] for m in fields.months for d in doms)
    if dows is None:
        return not dom_days
    return not dom_days and not dows


# ------------------------------------------------------------- robfig's Next, ported

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SECOND = timedelta(seconds=1)
_ORDINAL_1970 = date(1970, 1, 1).toordinal()


@lru_cache(maxsize=1)
def zone_names() -> frozenset[str]:
    """The IANA zone names of the pinned `tzdata` package (its `zones` list): what the API
    server's time.LoadLocation finds in any tz database. Not
    `zoneinfo.available_timezones()`, which adds files of this host ("localtime",
    "posix/...", "right/...") that the API server's host may not have."""
    text = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or name not in zone_names():
        raise CronError(f'"{name}" is not an IANA time zone (for example "Europe/Paris" or "Etc/UTC")')
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        raise CronError(f'"{name}" is not an IANA time zone (for example "Europe/Paris" or "Etc/UTC")') from None


def zone(name: str) -> ZoneInfo:
    """The zone `name` names, for a name of `zone_names()`; CronError for any other."""
    if not isinstance(name, str):
        raise CronError("a time zone must be a string")
    return _zone(name)


@lru_cache(maxsize=4096)
def _month_start(year: int, month: int) -> int:
    return (date(year, month, 1).toordinal() - _ORDINAL_1970) * 86400


def _offset(u: int, tz: ZoneInfo) -> int:
    return int(datetime.fromtimestamp(u, tz).utcoffset().total_seconds())


def _go_date(tz: ZoneInfo, year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    """Go's time.Date(...).Unix(): normalise, then resolve the wall time as Go does: the
    offset at the wall time read as UTC and, when that instant less the offset falls in
    another zone period, the offset there (so a repeated time takes the first offset,
    except where the first lookup finds offset 0; a skipped time moves by the jump)."""
    m = month - 1
    year += m // 12
    m %= 12
    local = _month_start(year, m + 1) + (day - 1) * 86400 + hour * 3600 + minute * 60 + second
    offset = _offset(local, tz)
    if offset != 0:
        # Equivalent to Go's "utc outside [start, end) of that period: look up utc".
        offset = _offset(local - offset, tz)
    return local - offset


def next_fire(fields: Fields, after: datetime, zone: str) -> datetime | None:
    """robfig's SpecSchedule.Next for a schedule parsed as "TZ=<zone> ...": the first
    fire time strictly after `after` (aware, any zone), in `zone`; None where robfig
    returns the zero time (nothing within its 5-year horizon)."""
    if after.tzinfo is None or after.utcoffset() is None:
        raise CronError("next_fire needs an aware datetime")
    tz = _zone(zone)
    if fields._never:
        return None  # robfig loops to its horizon and returns the zero time
    local = datetime.fromtimestamp
    months, hours, minutes = fields.months, fields.hours, fields.minutes
    day_matches = fields.day_matches

    u = (after - _EPOCH) // _SECOND + 1  # the upcoming whole second
    t = local(u, tz)
    year_limit = t.year + 5
    added = False
    while True:  # robfig's WRAP label
        if t.year > year_limit:
            return None
        wrap = False
        while t.month not in months:
            if not added:
                added = True
                u = _go_date(tz, t.year, t.month, 1, 0, 0, 0)
                t = local(u, tz)
            u = _go_date(tz, t.year, t.month + 1, t.day, t.hour, t.minute, t.second)
            t = local(u, tz)
            if t.month == 1:
                wrap = True
                break
        if wrap:
            continue
        while not day_matches(t.day, (t.weekday() + 1) % 7):
            if not added:
                added = True
                u = _go_date(tz, t.year, t.month, t.day, 0, 0, 0)
                t = local(u, tz)
            u = _go_date(tz, t.year, t.month, t.day + 1, t.hour, t.minute, t.second)
            t = local(u, tz)
            if t.hour != 0:  # midnight did not exist (DST): robfig nudges back to it
                u += (24 - t.hour) * 3600 if t.hour > 12 else -t.hour * 3600
                t = local(u, tz)
            if t.day == 1:
                wrap = True
                break
        if wrap:
            continue
        while t.hour not in hours:
            if not added:
                added = True
                u = _go_date(tz, t.year, t.month, t.day, t.hour, 0, 0)
                t = local(u, tz)
            u += 3600
            t = local(u, tz)
            if t.hour == 0:
                wrap = True
                break
        if wrap:
            continue
        while t.minute not in minutes:
            if not added:
                added = True
                u -= u % 60  # Truncate(time.Minute), on absolute time
                t = local(u, tz)
            # Step minute by minute, jumping over minutes that cannot match when the
            # offset is the same at both ends (no zone changes offset twice in an hour).
            step = 1
            for candidate in range(t.minute + 1, 61):
                if candidate == 60 or candidate in minutes:
                    step = candidate - t.minute
                    break
            if step > 1:
                u2 = u + 60 * step
                t2 = local(u2, tz)
                if t2.utcoffset() == t.utcoffset():
                    u, t = u2, t2
                else:
                    u += 60
                    t = local(u, tz)
            else:
                u += 60
                t = local(u, tz)
            if t.minute == 0:
                wrap = True
                break
        if wrap:
            continue
        if t.second != 0:
            # The schedule's second field is 0: robfig steps second by second to the next
            # second 0 and wraps. Jump there when the offset does not change meanwhile.
            added = True
            u2 = u + 60 - t.second
            t2 = local(u2, tz)
            if t2.utcoffset() == t.utcoffset():
                u, t = u2, t2
            else:
                while True:
                    u += 1
                    t = local(u, tz)
                    if t.second == 0:
                        break
            continue
        return t


def next_runs(expression: str, zone: str, count: int = 3, now: datetime | None = None) -> list[datetime]:
    """The next `count` fire times of `expression` in `zone` after `now` (default: the
    current time), each computed from the previous one as the controller does; fewer
    (possibly none) when the schedule stops firing within robfig's horizon."""
    fields = parse(expression)
    t = now or datetime.now(timezone.utc)
    out: list[datetime] = []
    for _ in range(count):
        nxt = next_fire(fields, t, zone)
        if nxt is None:
            break
        out.append(nxt)
        t = nxt
    return out
