"""How long an e2e test waits for what it cannot time itself (a controller's reaction, a
pod's start): its slack, derived from what the test configures and from how slow this
machine is in this very run (issue 44, item 11), not a fixed number.

Each `pulumi up` of a test stack (tests/test_e2e.py `Stack.up`) and each control-plane
start (kns_testing/cluster.py `local_cluster`) is a measurement of the machine's pace. A
wait may take what the test configured (a timeout, a run time, a warm-up lead) plus
FACTOR times the slowest such measurement of the run, and never less than its floor (the
fixed slack the tests had before, so a fast machine waits as long as it always did).
"""

from __future__ import annotations

FACTOR = 4
FLOOR = 120.0

_measured: list[float] = []


def measured(seconds: float) -> None:
    """Record how long one `up` or control-plane start took in this run."""
    _measured.append(seconds)


def slowest() -> float:
    return max(_measured, default=0.0)


def slack(*configured: float, floor: float = FLOOR) -> float:
    """The longest a wait may take: the configured durations plus the machine's slack."""
    return sum(configured) + max(floor, FACTOR * slowest())
