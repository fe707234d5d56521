"""`./kns preview ENTRY` against a full `pulumi preview` on a 1,000-entry stack, as in a pull
request: the stack is applied first (render mode), then one entry changes, and both
previews run against that state, with the policy pack, in the same process run.

Three timings:
- full: `pulumi preview --json --show-sames --policy-pack policy` (what CI's JSON step runs);
- kns preview: `./kns preview ENTRY --format json` end to end (offline validation, toolchain
  check, stack select, the targeted preview, the summary's input), once before and twice
  after the full preview, the ratio from their median (the machine's load drifts);
- targeted, every entry registered: the same `--target ... --target-dependents` preview
  without the program's narrowing (plan/targeting.py), to show what the narrowing buys.

The entries live in a job file: with 1,000 entries in the stack file, the config the engine
hands the program (one environment variable) is over Linux's 128 KiB limit for one
variable, and the program cannot start ("argument list too long").
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from common import ROOT, recorded, synthetic_config, table, write
from kns_cli.preview import preview_arguments
from kns_cli.stack import load_stack
from kns_testing.program import engine_project
from plan.targeting import entry_urns
from plan.stackplan import plan_stack

SIZE = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
ENTRY = "cpu-0"
FILES = ("Pulumi.yaml", "__main__.py", "chrono", "config", "plan", "components", "vendor")


def project_with(config: dict, where: Path, bin_dir: str) -> dict[str, str]:
    env = engine_project(where, bin_dir, "bench", files=FILES)
    (where / "jobs").mkdir()
    entries = {"jobs": config.pop("jobs"), "schedules": config.pop("schedules")}
    (where / "jobs" / "bench.yaml").write_text(yaml.safe_dump(entries, sort_keys=False))
    config["jobFiles"] = ["jobs/*.yaml"]
    (where / "Pulumi.bench.yaml").write_text(yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}},
                                                            sort_keys=False))
    return env


def changes(steps: list[dict]) -> dict[str, str]:
    return {s["urn"]: s["op"] for s in steps if s["op"] != "same"}


def main() -> None:
    bin_dir = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], check=True, capture_output=True,
                             text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "kns-platform"
        env = project_with(synthetic_config(SIZE), where, bin_dir)

        def pulumi(*args: str, extra: dict[str, str] | None = None) -> tuple[float, str]:
            start = time.perf_counter()
            done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=where, env={**env, **(extra or {})},
                                  check=True, capture_output=True, text=True, timeout=7200)
            return time.perf_counter() - start, done.stdout

        pulumi("stack", "init", "bench")
        # Set-up, not measured: intermediate checkpoints make a first `up` of 9,000 resources
        # on a file backend quadratic.
        up, _ = pulumi("up", "--yes", "--skip-preview", extra={"PULUMI_SKIP_CHECKPOINTS": "true"})
        jobs_file = where / "jobs" / "bench.yaml"
        entries = yaml.safe_load(jobs_file.read_text())
        next(j for j in entries["jobs"] if j["name"] == ENTRY)["cpu"] = 3  # the pull request
        jobs_file.write_text(yaml.safe_dump(entries, sort_keys=False))

        def kns_preview() -> tuple[float, str]:
            start = time.perf_counter()
            done = subprocess.run([str(ROOT / "kns"), "preview", "--project-dir", str(where), "--stack", "bench",
                                   ENTRY, "--format", "json"], env=env, capture_output=True, text=True, timeout=7200)
            assert done.returncode == 0, done.stderr
            return time.perf_counter() - start, done.stdout

        # The machine's load drifts over minutes: the targeted preview runs once before the
        # full one and twice after it, and its time is the median of the three.
        first, kns_json = kns_preview()
        full, full_json = pulumi("preview", "--stack", "bench", "--json", "--show-sames", "--policy-pack",
                                 str(ROOT / "policy"))
        runs = [first, kns_preview()[0], kns_preview()[0]]
        kns = statistics.median(runs)

        cfg, plans = load_stack(where, "bench")
        urns = entry_urns(plan_stack(cfg, plans), [ENTRY], "bench", "kns-platform")
        with tempfile.TemporaryDirectory() as logs:
            args = preview_arguments("bench", urns, Path(logs) / "events.jsonl", ROOT / "policy", None)
            unnarrowed, _ = pulumi(*args, extra={"PULUMI_DEBUG_COMMANDS": "true"})

    full_steps = json.loads(full_json)["steps"]
    targeted = changes(json.loads(kns_json)["steps"])
    assert targeted and targeted == {u: op for u, op in changes(full_steps).items() if f"::{ENTRY}" in u}, targeted
    resources = len(full_steps)
    rows = [
        ["full pulumi preview", f"{full:.1f}", "1.00"],
        [f"./kns preview {ENTRY}, median of 3", f"{kns:.1f} ({', '.join(f'{r:.1f}' for r in runs)})",
         f"**{kns / full:.3f}**"],
        ["same targets, every entry registered", f"{unnarrowed:.1f}", f"{unnarrowed / full:.3f}"],
    ]
    print(f"{SIZE} entries, {resources} resources in the preview; set-up `pulumi up` {up:.0f} s (not measured)")
    print(table(["preview", "seconds", "of full"], rows))
    path = write("targeted_preview", {
        "entries": SIZE, "resources": resources, "entry": ENTRY, "target_urns": len(urns), "setup_up_seconds": up,
        "full_preview_seconds": full, "kns_preview_seconds": kns, "kns_preview_runs": runs, "targeted_unnarrowed_seconds": unnarrowed,
        "ratio": kns / full, "unnarrowed_ratio": unnarrowed / full, "load_average": os.getloadavg(),
    })
    print(f"written: {path}")


if __name__ == "__main__":
    with recorded("targeted_preview"):
        main()
