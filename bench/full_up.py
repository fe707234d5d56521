"""A full `make up` of a stack in entry stacks against the same command on the same stack in
one Pulumi stack, and against `kubectl apply --server-side` / `kubectl diff --server-side`
of the same manifests, on the local control plane (scripts/cluster-up.sh, kwok nodes), at
100, 300 and 1,000 entries of bench/common.py's synthetic stack (issue 47).

Like with like: both engine arms run `make up` (`bash scripts/up.sh up`, as the Makefile
does: the platform stack, then kns_cli/fullrun.py's entry stacks side by side) on a copy of
the project; they differ only in `kns:state.entryStacks` (about PER_STACK entries per entry
stack, or none). The floor is kubectl on the manifests the engine renders for the same
stack (`kns:cluster.renderDir`, Namespaces first; bench/apply_vs_kubectl.py). Every arm runs
on a cluster of its own, brought up for it; the order of the three arms alternates from size
to size, so a drift of the machine's load falls on each arm in turn.

Per arm, after its fresh run the cluster is left to settle (each Job has its pod, each
quota its status), then:
- entry stacks: a no-change `make up` (every stack, the platform too, must say `skipped`),
  then one schedule entry's cpu changed and `make up` again (exactly the entry stack
  holding it must run the engine; every other stack must say `skipped`);
- one stack: a no-change `make up` (the stack runs: only a stack with entry stacks skips);
- kubectl: `kubectl diff --server-side` (no difference: exit 0).

The entries live in a job file (`kns:jobFiles`): with 1,000 entries in the stack file, the
config the engine hands the program (one environment variable) is over Linux's 128 KiB
limit for one variable. Results: build/bench/ and bench/results/full_up.json.

    cd bench && ../.venv/bin/python full_up.py [sizes...] [--per-stack N]
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Optional

from apply_vs_kubectl import floor, nodes, rendered, settle
from common import recorded, synthetic_config, table, write
from kns_testing.cluster import local_cluster, script
from plan import stacks
from targeted_up import STACK, Stack

PER_STACK = 100
SUMMARY = re.compile(r"^(Update|Preview) of stack (\S+): (.*)$")


def ran(lines: list[tuple[float, str]]) -> dict[str, tuple[float, bool]]:
    """Each stack a `make up` reported on: the second its summary came, and whether its
    engine ran (False: it said `skipped`)."""
    out = {}
    for at, line in lines:
        found = SUMMARY.match(line)
        if found and found.group(2) not in out:
            out[found.group(2)] = (at, not found.group(3).startswith("skipped"))
    return out


def changed_entry(config: dict) -> dict:
    """The entry whose cpu the one-entry step changes: a schedule, whose CronJob is updated
    in place (a Job entry's would be replaced)."""
    return config["schedules"][0]


def engine_arm(where: Path, bin_dir: str, config: dict, jobs: int, split: Optional[int]) -> dict:
    """Fresh `make up`, settle, no-change `make up`; with entry stacks, one entry changed too."""
    out: dict = {"entry_stacks": split}
    config = {**config, **({"state": {"entryStacks": split}} if split else {})}
    with local_cluster(where / "cluster", nodes()) as cluster:
        stack = Stack(where / "stack", bin_dir, dict(config), cluster)
        every = stacks.stacks(STACK, split)
        out["fresh"], lines = stack.make_up()
        out["fresh_reports"] = ran(lines)
        if set(out["fresh_reports"]) != set(every) or not all(run for _, run in out["fresh_reports"].values()):
            raise RuntimeError(f"fresh make up did not run every stack: {out['fresh_reports']}")
        settle(cluster, jobs, timeout=900)
        out["no_change"], lines = stack.make_up()
        out["no_change_reports"] = ran(lines)
        engines = sorted(name for name, (_, run) in out["no_change_reports"].items() if run)
        if set(out["no_change_reports"]) != set(every) or engines != ([] if split else [STACK]):
            raise RuntimeError(f"a no-change make up ran {engines}: {out['no_change_reports']}")
        if split:
            target = changed_entry(config)
            stack.entries["schedules"] = [{**entry, "cpu": entry["cpu"] + 1} if entry["name"] == target["name"] else entry
                                          for entry in stack.entries["schedules"]]
            stack.write_entries()
            out["one_changed"], lines = stack.make_up()
            out["one_changed_reports"] = ran(lines)
            engines = sorted(name for name, (_, run) in out["one_changed_reports"].items() if run)
            holder = stacks.holder(STACK, target["name"], split)
            if engines != [holder]:
                raise RuntimeError(f"one entry ({target['name']}, in {holder}) changed, but {engines} ran")
            out["one_changed_entry"], out["one_changed_stack"] = target["name"], holder
    return out


def measure(size: int, bin_dir: str, tmp: Path, per_stack: int, first: int) -> dict:
    config = synthetic_config(size)
    jobs = len(config["jobs"])
    manifests = rendered(config, bin_dir, tmp / "render")
    got: dict = {"entries": size, "objects": len(list(manifests.rglob("*.yaml")))}
    arms = [
        ("kubectl", lambda: floor(tmp / "kubectl", manifests, jobs)),
        ("entry stacks", lambda: engine_arm(tmp / "split", bin_dir, config, jobs, max(1, round(size / per_stack)))),
        ("one stack", lambda: engine_arm(tmp / "one", bin_dir, config, jobs, None)),
    ]
    arms = arms[first:] + arms[:first]
    got["order"] = [name for name, _ in arms]
    for name, run in arms:
        got[name] = run()
        print(f"{size} entries, {name}: { {k: v for k, v in got[name].items() if not k.endswith('reports')} }", flush=True)
    return got


def row(got: dict) -> list:
    split, one, floor_ = got["entry stacks"], got["one stack"], got["kubectl"]
    return [f"{got['entries']:,}", f"{got['objects']:,}", split["entry_stacks"], f"{split['fresh']:.1f}",
            f"{one['fresh']:.1f}", f"{floor_['apply']:.1f}", f"{split['fresh'] / one['fresh']:.2f}",
            f"{split['fresh'] / floor_['apply']:.2f}", f"{split['no_change']:.1f}", f"{one['no_change']:.1f}",
            f"{floor_['diff']:.1f}", f"{split['no_change'] / floor_['diff']:.2f}", f"{split['one_changed']:.1f}"]


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md section 14's table rows, from a results file (tests/test_bench_docs.py
    holds the page to bench/results/full_up.json)."""
    rows = []
    for got in payload["results"]:
        split, one, floor_ = got["entry stacks"], got["one stack"], got["kubectl"]
        rows.append(f"| {got['entries']:,} | {got['objects']:,} | {split['entry_stacks']} | {split['fresh']:.1f} | "
                    f"{one['fresh']:.1f} | {floor_['apply']:.1f} | **{split['fresh'] / one['fresh']:.2f}** | "
                    f"**{split['fresh'] / floor_['apply']:.2f}** | {split['no_change']:.1f} | {one['no_change']:.1f} | "
                    f"{floor_['diff']:.1f} | **{split['no_change'] / floor_['diff']:.2f}** | "
                    f"{split['one_changed']:.1f} |")
    return rows


HEADERS = ["entries", "objects", "entry stacks", "fresh, entry stacks s", "fresh, one stack s", "kubectl apply s",
           "entry/one", "entry/apply", "no-change, entry stacks s", "no-change, one stack s", "kubectl diff s",
           "no-change entry/diff", "one entry changed s"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 300, 1000])
    parser.add_argument("--per-stack", type=int, default=PER_STACK)
    options = parser.parse_args()
    bin_dir = script("toolchain.sh")
    results = []
    for index, size in enumerate(options.sizes):
        started = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            got = measure(size, bin_dir, Path(tmp), options.per_stack, index % 3)
        got["load_average"], got["seconds"] = os.getloadavg(), time.time() - started
        results.append(got)
        print(table(HEADERS, [row(each) for each in results]), flush=True)
    print(f"written: {write('full_up', {'results': results, 'per_stack': options.per_stack}, keep=True)}")


if __name__ == "__main__":
    with recorded("full_up"):
        main()
