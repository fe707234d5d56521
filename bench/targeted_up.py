"""`./kns up ENTRY` on an N-entry stack against the full `make up` of a stack holding no other
entry, for the same change, on the local control plane (scripts/cluster-up.sh, kwok nodes),
at 100, 300 and 1,000 entries of bench/common.py's synthetic stack (issue 33).

Two stacks of the same platform (cluster, node pools, packing scheduler), each on a cluster
of its own (their platforms' cluster-scoped objects and node patches would collide on one):

- the N-stack: its N entries in entry stacks of about PER_STACK entries each
  (`kns:state.entryStacks: N / PER_STACK`, docs/entry-stacks.md; `--per-stack 0` keeps
  them in the one stack, as before entry stacks), applied by a full `make up` (set-up,
  timed, not compared), then left to settle (every Job has its pod, every quota its status);
- the baseline: the same platform with no entry, applied by a full `make up`.

Then, round after round, the entry NEW (a schedule) is added to both stacks' job files, its
cpu changed, and it is deleted; after each step the N-stack runs `./kns up NEW` and the
baseline `make up` (so it holds NEW alone, or nothing), the two taking turns step by step so
that the machine's load falls on both alike. A ratio is the targeted time over the
baseline's for the same step, each the best of the rounds (the medians beside them).

`./kns up` runs end to end from the project copy (`./kns up --project-dir . --stack bench
NEW`: offline validation, the toolchain check, `pulumi stack export`, the digest check, the
targeted `pulumi up --target ... --target-dependents` with the policy pack); `make up` is
`KNS_STACK=bench bash scripts/up.sh up` in the copy (`pulumi up --yes --non-interactive
--diff --policy-pack policy` with scripts/lib/engine.sh's settings, its preview first). Each
run's phases come from the moment its lines arrive: `./kns up`'s line naming the targets
(its work before the engine), the first `applied` progress line (the program and the
preview done), the summary (the engine done). The engine's own output of every run is in
the copies' build/logs/.

NEW is a schedule entry (a CronJob), whose cpu change is an update in place: a Job entry's
cpu is in the Job's pod template, which Kubernetes does not change in place, so the same
change would replace the Job (deleted, then created: docs/workloads.md) and time the
deletion too.

The entries live in a job file: with 1,000 entries in the stack file, the config the engine
hands the program (one environment variable) is over Linux's 128 KiB limit for one
variable.

    cd bench && ../.venv/bin/python targeted_up.py [sizes...] [--rounds N] [--per-stack N]
"""

from __future__ import annotations

import argparse
import os
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
FILES = ("Pulumi.yaml", "__main__.py", "requirements.txt", "versions.env", "config", "plan", "components", "vendor",
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
    """When the engine started (`./kns up` says what it runs just before; scripts/up.sh has no
    such line: its toolchain line), when it applied its first resource, when it ended (the
    summary's first line)."""
    def first(*prefixes: str) -> Optional[float]:
        return next((at for at, line in lines if line.startswith(prefixes)), None)
    return {"engine_start": first("kns up:", "toolchain:"), "first_applied": first("applied "),
            "engine_end": first("Update of stack")}


def rounds(arms: dict[str, tuple[Stack, Callable[[], tuple[float, list]]]], count: int,
           size: int) -> tuple[dict[str, dict[str, list[float]]], list[dict]]:
    """`count` rounds of add, change, remove of NEW, each step made on every arm's stack and
    applied by its command, the arms taking turns step by step (the machine's load drifts):
    each arm's wall seconds of each step, and each run's phases."""
    times: dict[str, dict[str, list[float]]] = {arm: {step: [] for step in STEPS} for arm in arms}
    runs = []
    for round_ in range(count):
        for step, entry in (("add", NEW), ("change", {**NEW, "cpu": CHANGED_CPU}), ("remove", None)):
            for arm, (stack, apply) in arms.items():
                stack.set_new(entry)
                seconds, lines = apply()
                times[arm][step].append(seconds)
                marks = phases(lines)
                runs.append({"arm": arm, "round": round_, "step": step, "seconds": seconds, **marks,
                             "said": [line for _, line in lines if line.startswith(("kns up:", "Update of stack"))]})
                shown = ", ".join(f"{key} {value:.1f}" for key, value in marks.items() if value is not None)
                print(f"  {size} entries, round {round_}, {step}, {arm}: {seconds:.1f} s ({shown}); "
                      f"{' / '.join(runs[-1]['said'])}", flush=True)
                time.sleep(2)
    return times, runs


def entry_stacks(size: int, per_stack: int) -> Optional[int]:
    """The N-stack's `kns:state.entryStacks`: about `per_stack` entries each (None: 0, unsplit)."""
    return max(1, round(size / per_stack)) if per_stack else None


def measure(size: int, bin_dir: str, tmp: Path, count: int, per_stack: int) -> dict:
    """The N-stack and the baseline, each on a cluster of its own (their platforms would
    collide on one), both up while the arms take turns."""
    out: dict = {"entries": size, "entry_stacks": entry_stacks(size, per_stack)}
    config = synthetic_config(size)
    if out["entry_stacks"] is not None:
        config["state"] = {"entryStacks": out["entry_stacks"]}
    jobs = len(config["jobs"])
    with local_cluster(tmp / "cluster", nodes()) as cluster, local_cluster(tmp / "baseline-cluster", nodes()) as other:
        stack = Stack(tmp / "stack", bin_dir, config, cluster)
        out["setup_up_seconds"], _ = stack.make_up()
        print(f"{size} entries: set-up `make up` {out['setup_up_seconds']:.1f} s", flush=True)
        baseline = Stack(tmp / "baseline", bin_dir, {**synthetic_config(0), "jobs": [], "schedules": []}, other)
        out["baseline_setup_up_seconds"], _ = baseline.make_up()
        print(f"baseline (no entry): set-up `make up` {out['baseline_setup_up_seconds']:.1f} s", flush=True)
        settle(cluster, jobs, timeout=900)
        times, out["runs"] = rounds({"targeted": (stack, lambda: stack.kns_up(NEW["name"])),
                                     "baseline": (baseline, baseline.make_up)}, count, size)
    out.update(times)
    return out


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
        got["best"], got["median"], got["ratio"], got["median_ratio"] = {}, {}, {}, {}
        for step in STEPS:
            for key, pick in (("best", min), ("median", statistics.median)):
                got[key][step] = {arm: pick(got[arm][step]) for arm in ("targeted", "baseline")}
            got["ratio"][step] = got["best"][step]["targeted"] / got["best"][step]["baseline"]
            got["median_ratio"][step] = got["median"][step]["targeted"] / got["median"][step]["baseline"]
            rows.append([size, got["entry_stacks"] or "-", step, f"{got['best'][step]['targeted']:.1f}", f"{got['best'][step]['baseline']:.1f}",
                         f"{got['ratio'][step]:.2f}", f"{got['median'][step]['targeted']:.1f}",
                         f"{got['median'][step]['baseline']:.1f}", f"{got['median_ratio'][step]:.2f}"])
        got["load_average"] = os.getloadavg()
        results.append(got)
        print(table(["entries", "entry stacks", "step", "./kns up s", "make up (1 entry) s", "ratio", "median ./kns up s",
                     "median make up s", "median ratio"], rows), flush=True)
    print(f"written: {write('targeted_up', {'results': results, 'entry': NEW, 'changed_cpu': CHANGED_CPU, 'rounds': options.rounds, 'per_stack': options.per_stack})}")


if __name__ == "__main__":
    with recorded("targeted_up"):
        main()
