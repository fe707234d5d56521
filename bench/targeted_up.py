"""`./kns up ENTRY` on an N-entry stack against the same command on a stack holding no other
entry, for the same change, on the local control plane (scripts/cluster-up.sh, kwok nodes),
at 100, 300 and 1,000 entries of bench/common.py's synthetic stack (issues 33 and 44).

Like with like: both arms run the same command, `./kns up --project-dir . --stack bench
NEW` (offline validation, the toolchain check, the stack's record, the digest check, the
targeted `pulumi up --skip-preview --target ... --target-dependents` in the Pulumi stack
that holds NEW), and differ in one thing, the size of the stack around NEW:

- the N-stack: N entries, in entry stacks of about PER_STACK entries each
  (`kns:state.entryStacks: N / PER_STACK`, docs/entry-stacks.md; `--per-stack 0` keeps
  them in the one stack), applied by a full `make up` (set-up, timed, not compared), then
  left to settle (every Job has its pod, every quota its status);
- the baseline: the same platform and layout (one entry stack when the N-stack has entry
  stacks) with no entry but NEW.

Two stacks of the same platform (cluster, node pools, packing scheduler), each on a cluster
of its own (their platforms' cluster-scoped objects and node patches would collide on one).
Round after round, the entry NEW (a schedule) is added to both stacks' job files, its cpu
changed, and it is deleted; after each step both arms apply it, one right after the other,
the arm that goes first alternating from round to round, so that a drift of the machine's
load falls on both alike. A pair is one step of one round; its ratio is the N-stack's time
over the baseline's. Reported per step: each pair's ratio, their median and their spread
(lowest and highest). Both runs of a pair must change the same objects: the summary line of
NEW and the changes of the update's header (its unchanged count aside) must be the same, or
the benchmark stops.

With entry stacks the engine carries the holding entry stack's objects, about PER_STACK
entries' whatever N is: a ratio that stays flat in N says that, not more.

NEW is a schedule entry (a CronJob), whose cpu change is an update in place: a Job entry's
cpu is in the Job's pod template, which Kubernetes does not change in place, so the same
change would replace the Job (deleted, then created: docs/workloads.md) and time the
deletion too.

The entries live in a job file: with 1,000 entries in the stack file, the config the engine
hands the program (one environment variable) is over Linux's 128 KiB limit for one
variable. The results file is written to build/bench/ and, for docs/benchmarks.md section
13, to bench/results/targeted_up.json.

    cd bench && ../.venv/bin/python targeted_up.py [sizes...] [--rounds N] [--per-stack N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Optional

import yaml

from apply_vs_kubectl import nodes, settle
from common import ROOT, recorded, synthetic_config, table, write
from kns_cli.engine import engine_settings
from kns_testing.cluster import Cluster, local_cluster, script
from kns_testing.program import engine_project

PASSPHRASE = "bench"
STACK = "bench"
# The copy is a checkout of its own: the program, the policy pack, the scripts `make up`
# runs and the `./kns` it is compared with (the repository's virtualenv linked as .venv).
FILES = ("Pulumi.yaml", "__main__.py", "requirements.txt", "versions.env", "chrono", "config", "plan", "components", "vendor",
         "policy", "scripts", "kns_cli", "kns")
# A schedule entry: changing a Job entry's cpu fails under either `up` (the docstring).
NEW = {"name": "new-0", "user": "user0", "groups": ["research"], "image": "busybox:1.37", "schedule": "30 3 * * *",
       "timeZone": "Europe/Paris", "cpu": 1, "memory": 1024}
CHANGED_CPU = 2
# Entries per entry stack of the N-stack (docs/entry-stacks.md, "How many entry stacks").
PER_STACK = 100
STEPS = ("add", "change", "remove")
TUNED = engine_settings()


class Stack:
    """A copy of the project with a file backend and the stack `bench`: the platform of
    `config` on `cluster`, its entries in jobs/bench.yaml."""

    def __init__(self, where: Path, bin_dir: str, config: dict, cluster: Cluster):
        self.root = where / "kns-platform"
        env = engine_project(self.root, bin_dir, PASSPHRASE, base_env=cluster.env, files=FILES)
        # scripts/up.sh and ./kns take the engine settings from scripts/lib/engine.sh themselves.
        self.env = {key: value for key, value in env.items() if key not in TUNED}
        (self.root / ".venv").symlink_to(ROOT / ".venv")
        self.entries = {"jobs": config.pop("jobs"), "schedules": config.pop("schedules")}
        self.write_entries()
        config["jobFiles"] = ["jobs/*.yaml"]
        config["cluster"] = {"name": config["cluster"]["name"], "kubeconfig": str(cluster.kubeconfig)}
        stack = {"config": {f"kns:{key}": value for key, value in config.items()}}
        (self.root / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
        self.run(["pulumi", "stack", "init", STACK, "--non-interactive"])

    def write_entries(self) -> None:
        (self.root / "jobs").mkdir(exist_ok=True)
        (self.root / "jobs" / "bench.yaml").write_text(yaml.safe_dump(self.entries, sort_keys=False))

    def set_new(self, entry: Optional[dict]) -> None:
        """NEW as `entry` in the job file (None: no NEW)."""
        self.entries["schedules"] = [item for item in self.entries["schedules"] if item["name"] != NEW["name"]]
        if entry is not None:
            self.entries["schedules"].append(entry)
        self.write_entries()

    def run(self, command: list[str], extra: Optional[dict[str, str]] = None) -> tuple[float, list[tuple[float, str]]]:
        """Wall seconds of a command that must succeed, and each line it wrote (stdout and
        stderr) with the second it came at."""
        lines: list[tuple[float, str]] = []
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=self.root, env={**self.env, **(extra or {})}, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)

        def read(stream) -> None:
            for line in stream:
                lines.append((time.perf_counter() - start, line.rstrip("\n")))
        readers = [threading.Thread(target=read, args=(stream,)) for stream in (process.stdout, process.stderr)]
        for reader in readers:
            reader.start()
        status = process.wait(timeout=7200)
        for reader in readers:
            reader.join()
        wall = time.perf_counter() - start
        if status != 0:
            said = "\n".join(line for _, line in lines)
            raise RuntimeError(f"{' '.join(command)} failed ({status}) in {self.root}:\n{said[-8000:]}")
        return wall, sorted(lines)

    def make_up(self) -> tuple[float, list[tuple[float, str]]]:
        """What `make up` runs (the Makefile: `bash scripts/up.sh up`)."""
        return self.run(["bash", "scripts/up.sh", "up"], {"KNS_STACK": STACK})

    def kns_up(self, name: str) -> tuple[float, list[tuple[float, str]]]:
        return self.run(["./kns", "up", "--project-dir", ".", "--stack", STACK, name])


def phases(lines: list[tuple[float, str]]) -> dict[str, Optional[float]]:
    """When the engine started (`./kns up`'s line naming the targets), when it applied its
    first resource, when it ended (the summary's first line)."""
    def first(*prefixes: str) -> Optional[float]:
        return next((at for at, line in lines if line.startswith(prefixes)), None)
    return {"engine_start": first("kns up:"), "first_applied": first("applied "), "engine_end": first("Update of stack")}


def changes(lines: list[tuple[float, str]]) -> tuple[str, str]:
    """What a run changed, as its summary says: the update header's changes (without its
    unchanged count, which is the stack's size) and NEW's own line."""
    header = next((line for _, line in lines if line.startswith("Update of stack")), "")
    counted = re.sub(r",? *\d+ unchanged.*$", "", header.split(": ", 1)[-1])
    entry = next((re.sub(r"\s+", " ", line.strip()) for _, line in lines
                  if re.match(rf"\s+\S+\s+\S+\s+{re.escape(NEW['name'])}\s", line)), "")
    return counted, entry


def rounds(arms: dict[str, tuple[Stack, Callable[[], tuple[float, list]]]], count: int,
           size: int) -> tuple[dict[str, dict[str, list[float]]], list[dict]]:
    """`count` rounds of add, change, remove of NEW, each step made on both arms' stacks and
    applied by each, one right after the other, the first arm alternating by round: each
    arm's wall seconds of each step (index = round), and each run's phases and changes."""
    times: dict[str, dict[str, list[float]]] = {arm: {step: [] for step in STEPS} for arm in arms}
    runs = []
    names = list(arms)
    for round_ in range(count):
        order = names if round_ % 2 == 0 else names[::-1]
        for step, entry in (("add", NEW), ("change", {**NEW, "cpu": CHANGED_CPU}), ("remove", None)):
            changed = {}
            for arm in order:
                stack, apply = arms[arm]
                stack.set_new(entry)
                seconds, lines = apply()
                times[arm][step].append(seconds)
                marks = phases(lines)
                changed[arm] = changes(lines)
                runs.append({"arm": arm, "round": round_, "step": step, "seconds": seconds, "first": arm == order[0],
                             **marks, "changes": list(changed[arm]),
                             "said": [line for _, line in lines if line.startswith(("kns up:", "Update of stack"))]})
                shown = ", ".join(f"{key} {value:.1f}" for key, value in marks.items() if value is not None)
                print(f"  {size} entries, round {round_}, {step}, {arm}: {seconds:.1f} s ({shown}); "
                      f"{' / '.join(runs[-1]['said'])}", flush=True)
                time.sleep(2)
            if len(set(changed.values())) != 1 or not all(all(c) for c in changed.values()):
                raise RuntimeError(f"round {round_}, {step}: the arms changed different objects: {changed}")
    return times, runs


def entry_stacks(size: int, per_stack: int) -> Optional[int]:
    """The N-stack's `kns:state.entryStacks`: about `per_stack` entries each (None: 0, unsplit)."""
    return max(1, round(size / per_stack)) if per_stack else None


def measure(size: int, bin_dir: str, tmp: Path, count: int, per_stack: int) -> dict:
    """The N-stack and the baseline, each on a cluster of its own (their platforms would
    collide on one), both up while the arms take turns."""
    out: dict = {"entries": size, "entry_stacks": entry_stacks(size, per_stack)}
    config = synthetic_config(size)
    base = {**synthetic_config(0), "jobs": [], "schedules": []}
    if out["entry_stacks"] is not None:
        config["state"] = {"entryStacks": out["entry_stacks"]}
        base["state"] = {"entryStacks": 1}
    jobs = len(config["jobs"])
    with local_cluster(tmp / "cluster", nodes()) as cluster, local_cluster(tmp / "baseline-cluster", nodes()) as other:
        stack = Stack(tmp / "stack", bin_dir, config, cluster)
        out["setup_up_seconds"], _ = stack.make_up()
        print(f"{size} entries: set-up `make up` {out['setup_up_seconds']:.1f} s", flush=True)
        baseline = Stack(tmp / "baseline", bin_dir, base, other)
        out["baseline_setup_up_seconds"], _ = baseline.make_up()
        print(f"baseline (no entry but NEW): set-up `make up` {out['baseline_setup_up_seconds']:.1f} s", flush=True)
        settle(cluster, jobs, timeout=900)
        times, out["runs"] = rounds({"targeted": (stack, lambda: stack.kns_up(NEW["name"])),
                                     "baseline": (baseline, lambda: baseline.kns_up(NEW["name"]))}, count, size)
    out.update(times)
    return out


def summarise(got: dict) -> None:
    """Per step: each pair's ratio (N-stack over baseline, same round and step), their
    median and spread; the same over every pair."""
    got["pair_ratios"], got["median_ratio"], got["spread"] = {}, {}, {}
    every = []
    for step in STEPS:
        pairs = [t / b for t, b in zip(got["targeted"][step], got["baseline"][step])]
        every += pairs
        got["pair_ratios"][step] = pairs
        got["median_ratio"][step] = statistics.median(pairs)
        got["spread"][step] = [min(pairs), max(pairs)]
    got["median_ratio"]["all"] = statistics.median(every)
    got["spread"]["all"] = [min(every), max(every)]


def median_seconds(got: dict, step: str) -> dict[str, float]:
    """Each arm's median seconds of one step, or of every step ("all")."""
    return {arm: statistics.median([s for each in (STEPS if step == "all" else (step,)) for s in got[arm][each]])
            for arm in ("targeted", "baseline")}


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md section 13's table rows, from a results file (tests/test_bench_docs.py
    holds the page to bench/results/targeted_up.json)."""
    rows = []
    for got in payload["results"]:
        for step in (*STEPS, "all"):
            seconds = median_seconds(got, step)
            low, high = got["spread"][step]
            pairs = ", ".join(f"{r:.2f}" for r in (got["pair_ratios"][step] if step != "all" else []))
            rows.append(f"| {got['entries']:,} | {got['entry_stacks'] or '-'} | {step} | {seconds['targeted']:.1f} | "
                        f"{seconds['baseline']:.1f} | {pairs or '-'} | **{got['median_ratio'][step]:.2f}** | "
                        f"{low:.2f} to {high:.2f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 300, 1000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-stack", type=int, default=PER_STACK,
                        help="entries per entry stack of the N-stack; 0: no entry stacks (default: %(default)s)")
    options = parser.parse_args()
    bin_dir = script("toolchain.sh")
    results, rows = [], []
    for size in options.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            got = measure(size, bin_dir, Path(tmp), options.rounds, options.per_stack)
        summarise(got)
        for step in (*STEPS, "all"):
            seconds = median_seconds(got, step)
            low, high = got["spread"][step]
            rows.append([size, got["entry_stacks"] or "-", step, f"{seconds['targeted']:.1f}",
                         f"{seconds['baseline']:.1f}", f"{got['median_ratio'][step]:.2f}", f"{low:.2f}-{high:.2f}"])
        got["load_average"] = os.getloadavg()
        results.append(got)
        print(table(["entries", "entry stacks", "step", "median N-stack s", "median baseline s", "median ratio",
                     "spread"], rows), flush=True)
    payload = {"results": results, "entry": NEW, "changed_cpu": CHANGED_CPU, "rounds": options.rounds,
               "per_stack": options.per_stack}
    print(f"written: {write('targeted_up', payload, keep=True)}")


if __name__ == "__main__":
    with recorded("targeted_up"):
        main()
