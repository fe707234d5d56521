"""The pinned Pulumi engine against a newer one (issue 47, "The engine"): the same commands
on the same stack, the engine run as scripts/lib/engine.sh runs it, each CLI built by
scripts/toolchain.sh from its own versions file (the CLI patch applied to both; provider
and Python SDK as pinned), in rounds whose arm order turns (docs/benchmarks.md section 14,
"A newer engine").

Per round and arm, on a fresh stack of bench/common.py's synthetic config (render mode):
`pulumi preview --json`, then `pulumi up --yes --skip-preview`; every arm must plan the same
steps and leave the same number of resources in its state. Results: build/bench/ and
bench/results/engine_version.json.

    cd bench && ../.venv/bin/python engine_version.py NEWER_VERSIONS_ENV [sizes...] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import yaml

from common import ROOT, recorded, run_timed, synthetic_job_file_stack, table, write
from kns_cli.engine import engine_settings
from kns_testing.program import engine_project

# As scripts/up.sh runs the engine (scripts/lib/engine.sh): without these a 300-entry `up`
# spends minutes writing a checkpoint after every step.
ENGINE = engine_settings()


def toolchain(versions: Path) -> tuple[str, str]:
    """The bin directory the toolchain script prints for `versions`, and its CLI's version."""
    env = {**os.environ, "KNS_VERSIONS_FILE": str(versions)}
    bin_dir = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
    version = subprocess.run([f"{bin_dir}/pulumi", "version"], check=True, capture_output=True,
                             text=True).stdout.strip()
    return bin_dir, version


def timed(command: list[str], where: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Seconds and CPU seconds of every process; for a preview the steps it planned, for an
    update the resources the stack then holds."""
    seconds, cpu, done = run_timed(command, where, env, timeout=3600)
    if command[1] == "preview":
        return seconds, cpu, len(json.loads(done.stdout).get("steps") or [])
    exported = subprocess.run(["pulumi", "stack", "export", "--non-interactive"], cwd=where, env=env, check=True,
                              capture_output=True, text=True).stdout
    return seconds, cpu, len(json.loads(exported)["deployment"].get("resources") or [])


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md's table rows, from a results file (tests/test_bench_docs.py)."""
    rows = []
    pinned, newer = payload["arms"]
    for got in payload["results"]:
        for command in ("preview", "up"):
            median = {arm: statistics.median(run[command]["seconds"] for run in got["runs"] if run["arm"] == arm)
                      for arm in (pinned, newer)}
            rows.append(f"| {got['entries']:,} | `{command}` | {got['steps'][command]:,} | {median[pinned]:.1f} | "
                        f"{median[newer]:.1f} | **{median[newer] / median[pinned]:.2f}** |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("newer", type=Path, help="a versions.env naming the newer PULUMI_VERSION")
    parser.add_argument("sizes", nargs="*", type=int, default=[300])
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    bins = dict(toolchain(path)[::-1] for path in (ROOT / "versions.env", options.newer.resolve()))
    arms = list(bins)
    results = []
    with recorded("engine_version") as partial, tempfile.TemporaryDirectory() as tmp:
        partial["results"] = results
        for size in options.sizes:
            config, entries = synthetic_job_file_stack(size)
            runs = []
            for round_ in range(options.rounds):
                for arm in arms[round_ % 2:] + arms[:round_ % 2]:
                    where = Path(tmp) / f"{size}-{round_}-{arm}" / "kns-platform"
                    env = {**engine_project(where, bins[arm], "bench"), **ENGINE}
                    (where / "Pulumi.bench.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
                    (where / "bench-jobs").mkdir()
                    (where / "bench-jobs" / "bench.yaml").write_text(yaml.safe_dump(entries, sort_keys=False))
                    subprocess.run(["pulumi", "stack", "init", "bench", "--non-interactive"], cwd=where, env=env,
                                   check=True, capture_output=True, text=True)
                    run = {"round": round_, "arm": arm}
                    for command, args in (("preview", ["preview", "--json"]),
                                          ("up", ["up", "--yes", "--skip-preview"])):
                        seconds, cpu, steps = timed(["pulumi", *args, "--non-interactive"], where, env)
                        run[command] = {"seconds": seconds, "cpu": cpu, "steps": steps}
                        print(f"{size} entries, round {round_}, {arm} {command}: {seconds:.1f} s "
                              f"({cpu:.1f} CPU s, {steps} steps)", flush=True)
                    runs.append(run)
            steps = {command: {run[command]["steps"] for run in runs} for command in ("preview", "up")}
            assert all(len(found) == 1 for found in steps.values()), f"the arms did different work: {steps}"
            results.append({"entries": size, "steps": {c: found.pop() for c, found in steps.items()}, "runs": runs})
        payload = {"arms": arms, "rounds": options.rounds, "results": results}
        print(table(["entries", "command", "steps", arms[0], arms[1], "newer/pinned"],
                    [row.strip("|").split("|") for row in doc_rows(payload)]))
        print(f"written: {write('engine_version', payload, keep=True)}")


if __name__ == "__main__":
    main()
