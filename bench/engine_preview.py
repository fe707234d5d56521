"""`pulumi preview` through the real engine and Kubernetes provider (render mode) at 10,
100 and 500 entries: seconds per entry, resources per entry, and how much of it is the
program itself (measured under mocks in the same run) versus the engine and provider."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from common import ROOT, recorded, synthetic_config, table, write
from kns_testing.program import engine_project, run_program

def project_with(config: dict, where: Path, bin_dir: str) -> dict[str, str]:
    env = engine_project(where, bin_dir, "bench")  # every file the program imports (PROJECT_FILES)
    stack = {"config": {f"kns:{k}": v for k, v in config.items()}}
    (where / "Pulumi.bench.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    return env


def main() -> None:
    bin_dir = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], check=True, capture_output=True,
                             text=True).stdout.strip()
    rows, results = [], []
    for size in [int(a) for a in sys.argv[1:]] or [10, 100, 500]:
        config = synthetic_config(size)
        with tempfile.TemporaryDirectory() as tmp:
            where = Path(tmp) / "kns-platform"
            env = project_with(config, where, bin_dir)
            run = lambda *a: subprocess.run(["pulumi", *a, "--non-interactive"], cwd=where, env=env,  # noqa: E731
                                            check=True, capture_output=True, text=True, timeout=3600)
            run("stack", "init", "bench")
            start = time.perf_counter()
            run("preview")
            seconds = time.perf_counter() - start
        start = time.perf_counter()
        resources = len([r for r in run_program(config, stack="bench").resources if r.custom])
        program = time.perf_counter() - start
        results.append({"entries": size, "preview_seconds": seconds, "resources": resources,
                        "program_seconds_under_mocks": program})
        rows.append([size, resources, f"{resources / size:.1f}", f"{seconds:.1f}", f"{seconds / size:.3f}",
                     f"{program:.1f}", f"{100 * program / seconds:.0f}%"])
    print(table(["entries", "resources", "per entry", "preview s", "s/entry", "program s (mocks)", "program share"], rows))
    print(f"written: {write('engine_preview', {'results': results})}")


if __name__ == "__main__":
    with recorded("engine_preview"):
        main()
