"""Primer derivation and proof per schedule (chrono/prescale.py `primers_for`, what the
program and `./kns validate` run for every prescaled entry), over 1,000 real-world
schedules with warm-ups from 1 to 120 minutes, each from cold caches as in a fresh run (best of 3).
Baseline in the same run: croniter's enumeration of the same 28 years (the tests' oracle,
kns_testing/cron_oracle.py) on a sample of the accepted schedules."""

from __future__ import annotations

import random
import statistics
import sys
import time

from common import recorded, table, write
from chrono import prescale
from kns_testing import cron_oracle

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
BASELINE_SAMPLE = 40
YEAR = 2026

ZONES = ["Etc/UTC"] * 6 + ["Europe/Paris", "Europe/London", "America/New_York", "America/Los_Angeles",
                           "Asia/Tokyo", "Australia/Sydney", "America/Santiago"]


def real_world(rng: random.Random) -> str:
    """A schedule of the kinds crontabs and CronJobs hold: daily, weekdays, weekly,
    monthly, every N minutes or hours, business hours, twice a day, quarterly, yearly,
    weekends, month ends, descriptors."""
    m, h = rng.randrange(60), rng.randrange(24)
    kinds = [
        lambda: f"{m} {h} * * *", lambda: f"{m} {h} * * 1-5", lambda: f"{m} {h} * * {rng.randrange(7)}",
        lambda: f"{m} {h} {rng.randint(1, 28)} * *", lambda: f"*/{rng.choice([5, 10, 15, 20, 30])} * * * *",
        lambda: f"{m} */{rng.choice([2, 3, 4, 6, 8, 12])} * * *", lambda: f"{m} 8-18 * * 1-5",
        lambda: f"0,30 9-17 * * 1-5", lambda: f"{m} {h},{(h + 12) % 24} * * *",
        lambda: f"{m} {h} 1 1,4,7,10 *", lambda: f"{m} {h} {rng.randint(1, 28)} {rng.randint(1, 12)} *",
        lambda: f"{m} {h} * * 0,6", lambda: f"{m} {h} 28-31 * *", lambda: f"{m} {h} 1,15 * *",
        lambda: rng.choice(["@daily", "@hourly", "@weekly", "@monthly", "@midnight", "@yearly"]),
        lambda: f"{m} {h} * * 1,3,5", lambda: f"{m} {h} 1-7 * 1",
    ]
    weights = [20, 14, 8, 8, 6, 5, 4, 3, 5, 2, 2, 3, 2, 3, 4, 2, 1]
    return rng.choices(kinds, weights)[0]()


def corpus(count: int, seed: int = 20) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    return [(real_world(rng), rng.choice(ZONES), rng.randint(1, 120)) for _ in range(count)]


def prove(expression: str, zone: str, lead: int, repeat: int = 3) -> tuple[float, bool]:
    """Best of `repeat` runs, each from cold caches; and whether the schedule is accepted."""
    times = []
    for _ in range(repeat):
        prescale.clear_caches()
        start = time.perf_counter()
        try:
            prescale.primers_for(expression, zone, lead, None, YEAR)
            accepted = True
        except prescale.PrimerError:
            accepted = False
        times.append(time.perf_counter() - start)
    return min(times), accepted


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    schedules = corpus(COUNT)
    prescale.clear_caches(per_process=True)
    start = time.perf_counter()
    prescale.calendar(YEAR)
    for zone in set(ZONES):
        prescale.transitions(zone, YEAR)
    once = time.perf_counter() - start  # per run of the program, not per schedule
    seconds, accepted = [], []
    for expression, zone, lead in schedules:
        elapsed, ok = prove(expression, zone, lead)
        seconds.append(elapsed)
        if ok:
            accepted.append((expression, zone, lead))
    first, last = prescale.horizon(YEAR)
    sample = accepted[:: max(1, len(accepted) // BASELINE_SAMPLE)][:BASELINE_SAMPLE]
    ours, oracle = [], []
    for expression, zone, lead in sample:
        primers = list(prescale.primers_for(expression, zone, lead, None, YEAR).schedules)
        cron_oracle.fire_days.cache_clear()
        cron_oracle.day_minutes.cache_clear()
        ours.append(prove(expression, zone, lead)[0])
        begin = time.perf_counter()
        fields = prescale.kcron.parse(expression)
        runs = (sum(1 << (h * 60 + m) for h in fields.hours for m in fields.minutes),
                frozenset(first.toordinal() + i for i in range(last.toordinal() - first.toordinal())
                          if prescale._fires(expression, YEAR)[1] >> i & 1))
        assert cron_oracle.primers_problem(runs, primers, lead, first, last) is None
        oracle.append(time.perf_counter() - begin)
    ms = [1000 * s for s in seconds]
    rows = [[len(schedules), len(accepted), f"{statistics.median(ms):.2f}", f"{percentile(ms, 0.9):.2f}",
             f"{percentile(ms, 0.99):.2f}", f"{max(ms):.2f}", f"{100 * sum(m < 2 for m in ms) / len(ms):.1f}%",
             f"{1000 * once:.0f}"]]
    print(table(["schedules", "accepted", "median ms", "p90 ms", "p99 ms", "max ms", "under 2 ms",
                 "per run ms (calendar, zones)"], rows))
    ratio = sum(oracle) / sum(ours)
    print(f"\ncroniter over the same 28 years (the tests' oracle), {len(sample)} accepted schedules: "
          f"{1000 * statistics.mean(oracle):.0f} ms each, {ratio:.0f}x the program's proof "
          f"({1000 * statistics.mean(ours):.2f} ms each)")
    print(f"written: {write('primer_proof', {'schedules': len(schedules), 'accepted': len(accepted), 'ms': ms, 'per_run_ms': 1000 * once, 'oracle_sample_ms': [1000 * s for s in oracle], 'ours_sample_ms': [1000 * s for s in ours], 'oracle_ratio': ratio})}")


if __name__ == "__main__":
    with recorded("primer_proof"):
        main()
