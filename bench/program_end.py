"""What two costs of Pulumi's Python SDK take from a fresh preview, and what taking them out
gives (issue 47; docs/benchmarks.md section 14, "The SDK's costs").

Three copies of the project run the same command, `pulumi preview --json` of a fresh stack
of bench/common.py's synthetic config (the real engine and Kubernetes provider in render
mode), on the same size, in rounds whose arm order turns:

- `sdk`: __main__.py without the two calls below, so the SDK runs as shipped;
- `drain`: with `linear_output_drain()` only (components/output_drain.py: the program's
  end waits for its outputs in linear time instead of n²/2 callbacks);
- `drain+debug`: as the program is (also `debug_messages_on_request()`,
  components/sdk_messages.py: the SDK's per-resource debug messages stay in the program).

Every arm must plan the same steps. Results: build/bench/ and bench/results/program_end.json.

    cd bench && ../.venv/bin/python program_end.py [sizes...] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import ROOT, recorded, run_timed, synthetic_config, table, write
from engine_preview import project_with

CALLS = {"drain": "linear_output_drain()\n", "debug": "debug_messages_on_request()\n"}
ARMS = {"sdk": ("drain", "debug"), "drain": ("debug",), "drain+debug": ()}


def without(main: Path, calls: tuple[str, ...]) -> None:
    text = main.read_text()
    for name in calls:
        line = CALLS[name]
        assert text.count(line) == 1, f"__main__.py no longer calls {line.strip()} once"
        text = text.replace(line, "")
    main.write_text(text)


def preview(where: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Seconds, CPU seconds of every process, and the number of steps planned."""
    seconds, cpu, done = run_timed(["pulumi", "preview", "--json", "--non-interactive"], where, env, timeout=3600)
    return seconds, cpu, len(json.loads(done.stdout).get("steps") or [])


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md's table rows, from a results file (tests/test_bench_docs.py)."""
    rows = []
    for got in payload["results"]:
        median = {arm: statistics.median(run["seconds"] for run in got["runs"] if run["arm"] == arm) for arm in ARMS}
        rows.append(f"| {got['entries']:,} | {got['steps']:,} | {median['sdk']:.1f} | {median['drain']:.1f} | "
                    f"{median['drain+debug']:.1f} | **{median['drain'] / median['sdk']:.2f}** | "
                    f"**{median['drain+debug'] / median['sdk']:.2f}** |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 300])
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    bin_dir = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], check=True, capture_output=True,
                             text=True).stdout.strip()
    results = []
    with recorded("program_end") as partial, tempfile.TemporaryDirectory() as tmp:
        partial["results"] = results
        for size in options.sizes:
            config = synthetic_config(size)
            copies = {}
            for arm, dropped in ARMS.items():
                where = Path(tmp) / f"{size}-{arm.replace('+', '-')}" / "kns-platform"
                env = project_with(config, where, bin_dir)
                without(where / "__main__.py", dropped)
                subprocess.run(["pulumi", "stack", "init", "bench", "--non-interactive"], cwd=where, env=env,
                               check=True, capture_output=True, text=True)
                preview(where, env)  # the first run of a copy compiles its Python files
                copies[arm] = (where, env)
            runs = []
            names = list(ARMS)
            for round_ in range(options.rounds):
                for arm in names[round_ % len(names):] + names[:round_ % len(names)]:
                    seconds, cpu, steps = preview(*copies[arm])
                    runs.append({"round": round_, "arm": arm, "seconds": seconds, "cpu": cpu, "steps": steps})
                    print(f"{size} entries, round {round_}, {arm}: {seconds:.1f} s ({cpu:.1f} CPU s, {steps} steps)",
                          flush=True)
            assert len({run["steps"] for run in runs}) == 1, "the arms planned different steps"
            results.append({"entries": size, "steps": runs[0]["steps"], "runs": runs})
        payload = {"rounds": options.rounds, "results": results}
        print(table(["entries", "steps", "sdk s", "drain s", "drain+debug s", "drain/sdk", "drain+debug/sdk"],
                    [row.strip("|").split("|") for row in doc_rows(payload)]))
        print(f"written: {write('program_end', payload, keep=True)}")


if __name__ == "__main__":
    main()
