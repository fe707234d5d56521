"""The instant a program run computes at: taken once, at the start of the run, and handed to
everything that depends on the time (the reservations' checks, the Cohorts' peak, the state
a new reservation LocalQueue starts in, the outputs' next runs and windows), so one run
never computes two entries at two instants on either side of a window's edge."""

from __future__ import annotations

from datetime import datetime, timezone


def now() -> datetime:
    return datetime.now(timezone.utc)
