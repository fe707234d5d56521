"""The queue fit check at scale (docs/queueing.md, "What is checked"): the checks and the
plan of a stack of pool-less queued entries on 64 queues x 64 pools in one cohort, the
case where every entry may use every pool and every queue lends to every other, against
the same entries on one queue of one pool, in the same process (best of 3, turns taken).
The check should grow with the entries, not with entries x queues: the ratio at 2,000
entries stays near the ratio at 500."""

from __future__ import annotations

import sys
from typing import Any

from common import measure_interleaved, recorded, table, write
from config.loader import check_config
from kns_testing.program import ROOT
from plan.planner import plan_checked

SIZES = [int(a) for a in sys.argv[1:]] or [500, 2000]
QUEUES = POOLS = 64


def stack(entries: int, queues: int, pools: int) -> dict[str, Any]:
    return {
        "cluster": {"name": "kns-bench", "renderDir": "out"},
        "nodePools": [{"name": f"p{i}", "role": "compute", "nodes": [f"n{i}"]} for i in range(pools)],
        "queueing": {"enabled": True},
        "queues": [{"name": f"q{i}", "cohort": "all",
                    "quota": {f"p{j}": {"cpu": 8, "memory": "32Gi"} for j in range(pools)}} for i in range(queues)],
        "jobs": [{"name": f"j{i}", "user": "bob", "image": "busybox:1.37", "cpu": 1, "memory": 512,
                  "queue": f"q{i % queues}"} for i in range(entries)],
    }


def checked(config: dict[str, Any]) -> int:
    plans = plan_checked(check_config(config, project_dir=ROOT, environ={})).entries
    return len(plans)


def main() -> None:
    rows, results = [], []
    for size in SIZES:
        wide, narrow = stack(size, QUEUES, POOLS), stack(size, 1, 1)
        assert checked(wide) == checked(narrow) == size
        runs = measure_interleaved({"wide": lambda: checked(wide), "narrow": lambda: checked(narrow)})
        ratio = runs["wide"]["cpu_seconds"] / runs["narrow"]["cpu_seconds"]
        results.append({"entries": size, "queues": QUEUES, "pools": POOLS, **runs, "time_ratio": ratio})
        rows.append([size, f"{runs['wide']['cpu_seconds']:.2f}", f"{runs['narrow']['cpu_seconds']:.2f}",
                     f"{ratio:.2f}", f"{1000 * runs['wide']['cpu_seconds'] / size:.2f}"])
    print(table(["entries", f"{QUEUES} queues x {POOLS} pools CPU s", "1 queue x 1 pool CPU s", "ratio",
                 "CPU ms/entry"], rows))
    print(f"written: {write('queue_fit', {'results': results})}")


if __name__ == "__main__":
    with recorded("queue_fit"):
        main()
