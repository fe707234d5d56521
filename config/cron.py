"""Cron expressions: 5-field syntax checks, time zones and upcoming fire times.

Kubernetes CronJobs take standard 5-field expressions only (no seconds field), so a
6-field expression that croniter would happily accept is rejected here with a hint.
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

FIELDS = ("minute", "hour", "day of month", "month", "day of week")


def cron_problem(expression: str) -> str | None:
    """Why `expression` is not a usable 5-field cron expression, or None."""
    fields = expression.split()
    if expression.strip().startswith("@"):
        return (
            f'"{expression}" is a macro; write the 5 fields instead '
            '(for example "0 * * * *" for @hourly)'
        )
    if "TZ=" in expression or "CRON_TZ=" in expression:
        return f'"{expression}" embeds a time zone; use the timeZone field instead'
    if len(fields) != 5:
        hint = " (a seconds field is not supported)" if len(fields) == 6 else ""
        return (
            f'"{expression}" has {len(fields)} fields{hint}; a schedule needs exactly 5: '
            f"{', '.join(FIELDS)}"
        )
    if not croniter.is_valid(" ".join(fields)):
        return f'"{expression}" is not a valid cron expression'
    return None


def zone_problem(name: str) -> str | None:
    """Why `name` is not a known IANA time zone, or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f'"{name}" is not an IANA time zone (for example "Europe/Paris" or "Etc/UTC")'
    return None


def next_runs(expression: str, zone: str, count: int = 3, now: datetime | None = None) -> list[str]:
    """The next `count` fire times of `expression` in `zone`, as ISO 8601 with offset.

    Cron is evaluated in naive wall-clock time (as the CronJob controller does) and each
    time is then placed in the zone; croniter stepping over aware datetimes can land an
    hour off across a DST change. A time inside a spring-forward gap is reported at the
    instant it maps to (02:30 becomes 03:30).
    """
    tz = ZoneInfo(zone)
    start = (now or datetime.now(timezone.utc)).astimezone(tz).replace(tzinfo=None)
    it = croniter(expression, start)
    out = []
    for _ in range(count):
        wall = it.get_next(datetime)
        out.append(wall.replace(tzinfo=tz).astimezone(timezone.utc).astimezone(tz).isoformat())
    return out
