"""Schedules and time zones as Kubernetes reads them: what is wrong with a config value,
and the upcoming fire times.

The language and the fire times are the CronJob controller's (chrono/kcron.py, a port of
robfig/cron v3 proven against it). A schedule is accepted exactly when the API server
accepts it (less "@every <duration>", which has no calendar fields) and it fires at least
once; a time zone must be an IANA name of the pinned tzdata package. Every function here
takes any text and fails, if at all, with `kcron.CronError`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional
from zoneinfo import ZoneInfo

from . import kcron, moments

CronError = kcron.CronError

MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December")
EXAMPLE_ZONES = '(for example "Europe/Paris" or "Etc/UTC")'


def cron_problem(expression: str) -> Optional[str]:
    """Why `expression` is not a schedule Kubernetes runs, or None: the API server refuses
    it, or it never fires."""
    if not isinstance(expression, str):
        return "a schedule must be a string"
    message = kcron.problem(expression)
    if message is not None:
        if message.startswith(f'"{expression}"'):
            return message
        return f'"{expression}" is not a valid cron expression: {message}'
    why = never_fires_reason(kcron.parse(expression))
    if why:
        return f'"{expression}" never fires: {why}; Kubernetes would accept it and never run it'
    return None


def _listed(words: list[str], conjunction: str) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


def never_fires_reason(fields: kcron.Fields) -> Optional[str]:
    """Why no calendar day and time matches `fields` (`kcron.never_fires`), or None.

    From the calendar alone: no zone in tzdata changes its clocks on a fixed date, so a
    schedule with a matching day and time fires in every zone (chrono/kcron.py)."""
    if not kcron.never_fires(fields):
        return None
    for name, values in (("minute", fields.minutes), ("hour", fields.hours), ("month", fields.months)):
        if not values:
            return f"its {name} field matches no {name}"
    reasons = []
    if fields.dows is not None and not fields.dows:
        reasons.append("its day-of-week field matches no day")
    if fields.doms is not None:
        if not fields.doms:
            reasons.append("its day-of-month field matches no day")
        else:
            months = [MONTH_NAMES[m - 1] for m in sorted(fields.months)]
            days = [str(d) for d in sorted(fields.doms)]
            verb = "has" if len(months) == 1 else "have"
            reasons.append(f"{_listed(months, 'and')} {verb} no day {_listed(days, 'or')}")
    return " and ".join(reasons)


def zone_problem(name: str) -> Optional[str]:
    """Why `name` is not a time zone the API server takes from any host, or None: it must
    be an IANA zone name of the pinned tzdata package (`kcron.zone_names`)."""
    if not isinstance(name, str):
        return "a time zone must be a string"
    names = kcron.zone_names()
    if name in names:
        return None
    generic = f'"{name}" is not an IANA time zone {EXAMPLE_ZONES}'
    folded = name.strip().casefold()
    if folded == "local":
        return f'"{name}" would be the API server\'s own zone, which Kubernetes refuses: name the zone {EXAMPLE_ZONES}'
    if folded in ("localtime", "posixrules") or folded.startswith("/"):
        return (f'"{name}" is a file of the machine that reads it, not an IANA time zone, so its meaning '
                f"depends on the host and the API server may refuse it: name the zone {EXAMPLE_ZONES}")
    head, _, base = name.partition("/")
    if head in ("posix", "right") and base in names:
        return (f'"{name}" is a copy of "{base}" that only some hosts have (the API server may not): '
                f'write "{base}"')
    if name.strip() in names:
        return f'{generic}: remove the spaces around "{name.strip()}"'
    inside = sorted(z for z in names if z.startswith(name.rstrip("/") + "/")) if name.strip("/") else []
    if inside:
        return f'"{name}" is a group of time zones, not a zone: name one of them (for example "{inside[0]}")'
    same = sorted(z for z in names if z.casefold() == folded)
    if same:
        return f'{generic}: zone names are case-sensitive; did you mean "{same[0]}"?'
    return generic


def zone(name: str) -> ZoneInfo:
    """The zone of a name `zone_problem` accepts; `CronError` for any other."""
    problem = zone_problem(name)
    if problem:
        raise CronError(problem)
    return kcron.zone(name)


def next_runs(expression: str, zone_name: str, count: int = 3, now: Optional[datetime] = None) -> list[str]:
    """The next `count` fire times of `expression` in `zone_name` strictly after `now`
    (default: the current time), as ISO 8601 with offset: the CronJob controller's
    (`kcron.next_fire`). A time in a spring-forward gap does not fire that day, one in the
    repeated autumn hour fires twice (once per offset); fewer than `count` when the
    schedule stops firing within the controller's 5-year horizon."""
    return [moments.shown(t, zone_name) for t in kcron.next_runs(expression, zone_name, count, now)]
