"""How every time the product prints or exports is written (docs/outputs.md, "Times"):
ISO 8601 to the second, with the UTC offset its own zone has at that instant. A
schedule's run in the schedule's `timeZone`, a recurring reservation's window or a
budget's reset in theirs, a one-off window or a grant in the offset its start was written
with; so a time is read the way its entry was written, and two times in one sentence
never mix UTC with a local offset."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from . import kcron


def shown(at: datetime, zone: Optional[str] = None, like: Optional[datetime] = None) -> str:
    """`at` in `zone` (an IANA name), else in `like`'s offset (a one-off window's start),
    else in its own."""
    tz = kcron.zone(zone) if zone else (like.tzinfo if like is not None else at.tzinfo)
    return at.astimezone(tz).isoformat(timespec="seconds")
