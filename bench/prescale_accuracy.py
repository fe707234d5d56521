"""Start accuracy of prescaled schedules: the real wait script, run as a process many
times with varied lateness, against the CronJob prescaler's 5-second polling, in the same run.

Error = release time - target start (for a Job created after its start: release time -
invocation, as it must run at once). Target: under one second late, never early.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from common import recorded, table, write
from plan import wait

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
SHELL = ["busybox", "sh", "-c"] if subprocess.run(["which", "busybox"], capture_output=True).returncode == 0 else ["sh", "-c"]
POLL_004 = 'while [ "$(date +%s)" -lt "$TARGET" ]; do sleep 5; done'


def release(script: list[str], env: dict[str, str]) -> float:
    subprocess.run(script, env={"PATH": os.environ["PATH"], **env}, check=True, capture_output=True, timeout=60)
    return time.time()


def case(kind: str, i: int) -> tuple[dict[str, str], float]:
    """Environment for the wait and the target instant (epoch seconds)."""
    now = time.time()
    minute = int(now // 60)
    if kind == "on time":  # the Job exists well before its start
        target = int(now) + 2 + i % 2
    elif kind == "late":  # the controller created the Job late, still before the start
        target = int(now) + 1
    else:  # created after its start: runs at once
        target = int(now) - 5 - i
    lead = target - minute * 60
    return {"JOB_NAME": f"bench-{minute}", "JOB_NAME_LEGACY": "", "KNS_LEAD_SECONDS": str(lead),
            "KNS_TZ_OFFSETS": wait.offsets("Etc/UTC")}, float(target)


def main() -> None:
    results: dict[str, list[float]] = {}
    for kind in ("on time", "late", "after the start"):
        errors = []
        for i in range(RUNS if kind != "after the start" else max(5, RUNS // 3)):
            env, target = case(kind, i)
            invoked = time.time()
            released = release([*SHELL, wait.SCRIPT], env)
            # past its start, the Job must run at once: measure from the invocation instead
            errors.append(released - (invoked if kind == "after the start" else target))
        results[kind] = errors
    polling = []
    for i in range(5):  # targets spread over the 5-second polling period
        target = int(time.time()) + 1 + i
        polling.append(release([*SHELL, POLL_004], {"TARGET": str(target)}) - target)
    results["004: 5 s polling"] = polling

    rows = []
    for kind, errors in results.items():
        rows.append([kind, len(errors), f"{statistics.mean(errors):+.3f}", f"{min(errors):+.3f}", f"{max(errors):+.3f}",
                     "yes" if min(errors) >= 0 else "NO"])
    print(f"shell: {' '.join(SHELL[:-1])}")
    print(table(["case", "runs", "mean error s", "min s", "max s", "never early"], rows))
    summary = {k: {"runs": len(v), "mean": statistics.mean(v), "min": min(v), "max": max(v)} for k, v in results.items()}
    print(f"written: {write('prescale_accuracy', {'shell': SHELL[0], 'results': summary})}")


if __name__ == "__main__":
    with recorded("prescale_accuracy"):
        main()
