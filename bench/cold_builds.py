"""Cold Go builds side by side against in sequence, sharing one Go build cache (issue 47,
"Cold builds"; docs/benchmarks.md section 15).

Both arms run the same four build scripts `.ci/run` runs (scripts/toolchain.sh,
cluster-build.sh, actionlint.sh, linters.sh) with `KNS_BUILD_KUEUE=1`, each arm with an
empty Go build cache (GOCACHE), tools directory (KNS_TOOLS_DIR) and PULUMI_HOME of its own:

- `side by side`: as `.ci/run` runs them: the four scripts at once, and inside each script
  its independent builds at once (scripts/lib/gomod.sh `parallel`);
- `in sequence`: one script after another, and inside each one build after another
  (`KNS_BUILD_JOBS=1`), so a package two builds share is compiled once.

Measured per arm: seconds, and CPU seconds of every process the builds ran (user + system).
The Go module cache is the machine's own, already filled (a cold machine also downloads
every module, in both arrangements the same bytes; what the arrangements change is
compiling and linking).

`--only NAME,...` measures part of it: the arms' tools directories start as copies of the
machine's built tools without the named binaries (a binary's file name, or `provider` for
the Kubernetes provider), so only those are built, cold, by the same scripts.
Results: build/bench/ and bench/results/cold_builds.json (cold_builds-<names>.json for a
part).

    cd bench && ../.venv/bin/python cold_builds.py [--only NAME,...] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import ROOT, recorded, stopwatch, table, write
from kns_testing.program import pinned_versions

SCRIPTS = ("toolchain", "cluster-build", "actionlint", "linters")
ARMS = ("side by side", "in sequence")
# Each arm's caches, outside the repository (the build scripts refuse a work dir inside it);
# a failed arm's logs stay there.
WORK = Path(tempfile.gettempdir()) / "kns-cold-builds"
TOOLS = Path(os.environ.get("KNS_TOOLS_DIR", Path.home() / ".cache" / "kns-platform" / "tools"))


def prefilled(tools: Path, only: list[str]) -> None:
    """`tools` as the machine's built tools of the pinned versions, without `only`."""
    pinned = pinned_versions()
    toolchain = f"pulumi-{pinned['PULUMI_VERSION']}-k8s-{pinned['PULUMI_KUBERNETES_VERSION']}"
    for source in TOOLS.iterdir():
        if source.is_dir() and (not source.name.startswith("pulumi-") or source.name == toolchain):
            shutil.copytree(source, tools / source.name, symlinks=True)
    for name in only:
        found = ([p for p in tools.glob("pulumi-*/provider-*")] if name == "provider"
                 else list(tools.glob(f"*/bin/{name}")))
        if not found:
            raise SystemExit(f"no built tool named {name} under {TOOLS}")
        for path in found:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def run_arm(arm: str, home: Path, only: list[str]) -> dict:
    for sub in ("go-build", "tools", "pulumi", "tmp"):
        (home / sub).mkdir(parents=True)
    if only:
        prefilled(home / "tools", only)
    env = {**os.environ, "GOCACHE": str(home / "go-build"), "KNS_TOOLS_DIR": str(home / "tools"),
           "PULUMI_HOME": str(home / "pulumi"), "TMPDIR": str(home / "tmp"), "KNS_BUILD_KUEUE": "1"}
    env.pop("KNS_BUILD_JOBS", None)
    if arm == "in sequence":
        env["KNS_BUILD_JOBS"] = "1"
    logs = {script: (home / f"{script}.log").open("w") for script in SCRIPTS}
    ended: dict[str, float] = {}
    codes: dict[str, int] = {}

    def launch(script: str) -> subprocess.Popen:
        return subprocess.Popen(["bash", str(ROOT / "scripts" / f"{script}.sh")], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=logs[script])

    start = time.perf_counter()
    with stopwatch() as took:
        if arm == "side by side":
            running = {script: launch(script) for script in SCRIPTS}
            while running:
                for script, process in list(running.items()):
                    if process.poll() is not None:
                        ended[script] = time.perf_counter() - start
                        codes[script] = process.returncode
                        del running[script]
                time.sleep(1)
        else:
            for script in SCRIPTS:
                codes[script] = launch(script).wait()
                ended[script] = time.perf_counter() - start
    for log in logs.values():
        log.close()
    failed = {script: code for script, code in codes.items() if code}
    if failed:
        raise RuntimeError(f"{arm}: builds failed {failed}; their logs: {home}")
    return {"arm": arm, **took, "ended": ended, "codes": codes}


def results_name(only: list[str]) -> str:
    """bench/results/cold_builds.json for every build, cold_builds-<names>.json for a part."""
    return "-".join(["cold_builds", *only])


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md's table rows, from a results file (tests/test_bench_docs.py)."""
    built = ", ".join(payload["only"]) or "everything"
    rows = []
    for round_ in range(payload["rounds"]):
        arm = {run["arm"]: run for run in payload["runs"] if run["round"] == round_}
        side, sequence = arm["side by side"], arm["in sequence"]
        rows.append(f"| {round_} | {built} | {side['seconds']:.0f} | {side['cpu']:.0f} | {sequence['seconds']:.0f} | "
                    f"{sequence['cpu']:.0f} | **{sequence['seconds'] / side['seconds']:.2f}** | "
                    f"**{sequence['cpu'] / side['cpu']:.2f}** |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="comma-separated built tools to measure (default: all)")
    parser.add_argument("--rounds", type=int, default=1)
    options = parser.parse_args()
    only = [name for name in options.only.split(",") if name]
    runs = []
    with recorded("cold_builds") as partial:
        partial["runs"] = runs
        for round_ in range(options.rounds):
            for arm in ARMS[round_ % 2:] + ARMS[:round_ % 2]:
                home = WORK / f"{round_}-{arm.replace(' ', '-')}"
                shutil.rmtree(home, ignore_errors=True)
                got = run_arm(arm, home, only)
                print(f"round {round_}, {arm}: {got['seconds']:.0f} s, {got['cpu']:.0f} CPU s", flush=True)
                runs.append({"round": round_, **got})
                shutil.rmtree(home)
        payload = {"only": only, "rounds": options.rounds, "runs": runs}
        print(table(["round", "built", "side by side s", "CPU s", "in sequence s", "CPU s", "seconds ratio",
                     "CPU ratio"],
                    [row.strip("|").split("|") for row in doc_rows(payload)]))
        print(f"written: {write(results_name(only), payload, keep=True)}")


if __name__ == "__main__":
    main()
