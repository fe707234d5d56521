"""What the minimal language host's About costs every engine run: `pulumi preview` of the
same fresh stack (render mode, bench/common.py's synthetic stack) with the host built from
an earlier revision (its About asked the Python toolchain, which also runs `python -m pip
--version`) and from this tree (one Python process), arms taking turns round by round.
Both bin directories hold the same CLI; only `pulumi-language-python` differs. Seconds and
CPU seconds of every process the CLI started (docs/benchmarks.md, "The language host's
About").

    cd bench && ../.venv/bin/python host_about.py [--rounds N] [--entries N] [--old-rev REV]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import ROOT, recorded, run_timed, synthetic_config, table, write
from engine_preview import project_with

HOST = "pulumi-language-python"
GO_ENV = {**os.environ, "GOWORK": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}


def build_host(source: Path, out: Path) -> None:
    subprocess.run(["go", "build", "-trimpath", "-o", str(out), "."], cwd=source, env=GO_ENV, check=True,
                   capture_output=True, text=True, timeout=3600)


def bin_dir_with(host: Path, toolchain: Path, where: Path) -> Path:
    """A copy of the toolchain's bin directory with `host` as its language host (copies: the
    CLI finds its plugins beside its own executable)."""
    where.mkdir(parents=True)
    for item in toolchain.iterdir():
        shutil.copy2(host if item.name == HOST else item, where / item.name)
    return where


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md's table row, from a results file (tests/test_bench_docs.py)."""
    got = payload["result"]
    old, new = got["earlier host"], got["this host"]
    return [f"| {got['entries']} | {got['rounds']} | {old['seconds']:.2f} | {new['seconds']:.2f} | "
            f"**{new['seconds'] / old['seconds']:.2f}** | {old['cpu']:.2f} | {new['cpu']:.2f} | "
            f"**{new['cpu'] / old['cpu']:.2f}** | {got['cpu_saved']:.2f} |"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--entries", type=int, default=10)
    parser.add_argument("--old-rev", default="0cee48f", help="the revision whose minimal host is the baseline")
    options = parser.parse_args()
    toolchain = Path(subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], check=True, capture_output=True,
                                    text=True).stdout.strip())
    with recorded("host_about") as partial, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        old_source = tmp / "old-source"
        old_source.mkdir()
        archive = subprocess.run(["git", "archive", options.old_rev, "scripts/minimal-host"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old_source)], input=archive, check=True)
        hosts = {"earlier host": old_source / "scripts" / "minimal-host", "this host": ROOT / "scripts" / "minimal-host"}
        arms = {}
        for name, source in hosts.items():
            build_host(source, tmp / f"{name}-host".replace(" ", "-"))
            arms[name] = bin_dir_with(tmp / f"{name}-host".replace(" ", "-"), toolchain,
                                      tmp / name.replace(" ", "-") / "bin")
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
        for round_ in range(options.rounds):
            order = list(arms) if round_ % 2 == 0 else list(arms)[::-1]
            for name in order:
                where = tmp / f"r{round_}-{name.replace(' ', '-')}" / "kns-platform"
                env = project_with(synthetic_config(options.entries), where, str(arms[name]))
                run_timed(["pulumi", "stack", "init", "bench", "--non-interactive"], where, env)
                seconds, cpu, done = run_timed(["pulumi", "preview", "--non-interactive"], where, env, timeout=3600)
                assert "to create" in done.stdout, done.stdout[-2000:]
                runs[name].append((seconds, cpu))
                shutil.rmtree(where.parent)
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {runs[n][-1][0]:.2f} s / {runs[n][-1][1]:.2f} CPU s"
                                                       for n in arms), flush=True)
        result = {"entries": options.entries, "rounds": options.rounds, "old_rev": options.old_rev,
                  **{name: {"seconds": statistics.median(s for s, _ in got), "cpu": statistics.median(c for _, c in got),
                            "runs": got} for name, got in runs.items()},
                  # The pairs' differences: a round's load falls on both of its runs.
                  "cpu_saved": statistics.median(old[1] - new[1] for old, new in zip(*runs.values()))}
        partial["result"] = result
        payload = {"result": result}
        print(table(["entries", "rounds", "earlier s", "this s", "ratio", "earlier CPU s", "this CPU s", "ratio",
                     "CPU s saved (median of pairs)"], [row.strip("|").split("|") for row in doc_rows(payload)]))
        print(f"written: {write('host_about', payload, keep=True)}")


if __name__ == "__main__":
    main()
