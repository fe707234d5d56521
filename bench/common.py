"""Shared pieces of the benchmarks: synthetic stacks, timing, result files."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "build" / "bench"
KEPT = ROOT / "bench" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Prescaled in Europe/Paris between 04:00 and 19:59: no warm-up may cross its 02:00-03:00
# clock changes (docs/prescaling.md). Every schedule of a stack is its own expression, as in
# a real stack, so no primer proof is shared through the caches.
DAY_FIELDS = ["* * *", "* * 1-5", "* * 1", "* * 0,6", "1,15 * *", "* * 1,3,5", "1 * *", "* 1-6 *"]


def synthetic_schedule(i: int) -> str:
    return f"{i % 60} {4 + i // 60 % 16} {DAY_FIELDS[(i + i // 960) % len(DAY_FIELDS)]}"


def synthetic_config(entries: int, prescaled: float = 0.2) -> dict[str, Any]:
    """A stack of `entries` entries: a `prescaled` share of prescaled schedules, the rest
    three CPU jobs to one GPU job (60% CPU, 20% GPU, 20% prescaled by default)."""
    jobs, schedules = [], []
    every = round(1 / prescaled)
    for i in range(entries):
        kind = i % every
        if kind == every - 1:
            schedules.append({
                "name": f"sched-{i}", "user": f"user{i % 17}", "groups": ["research"], "image": "busybox:1.37",
                "schedule": synthetic_schedule(i), "timeZone": "Europe/Paris",
                "warmUpMinutes": 5 + i % 3 * 5, "cpu": 2, "memory": 2048,
            })
        elif len(jobs) % 4 == 3:
            jobs.append({"name": f"gpu-{i}", "user": f"user{i % 17}", "image": "pytorch:2", "cpu": 8,
                         "memory": "32Gi", "gpus": 1 + i % 4, "pool": "a100", "ttlHours": 12})
        else:
            jobs.append({"name": f"cpu-{i}", "user": f"user{i % 17}", "image": "busybox:1.37", "cpu": 1 + i % 4,
                         "memory": 1024 * (1 + i % 3), "env": {"RUN": str(i)}})
    return {
        "cluster": {"name": "kns-bench", "renderDir": "build/manifests/bench"},
        "nodePools": [
            {"name": "vcluster", "role": "vcluster", "nodes": [f"vc-{n}" for n in range(8)]},
            {"name": "a100", "role": "gpu", "nodes": [f"gpu-{n}" for n in range(4)], "gpu": {"vendor": "nvidia", "perNode": 8}},
        ],
        "jobs": jobs,
        "schedules": schedules,
    }


def synthetic_job_file_stack(entries: int, job_dir: str = "bench-jobs") -> tuple[dict[str, Any], dict[str, Any]]:
    """`synthetic_config(entries)` as a stack file's config (keys with `kns:`) naming one job
    file in `job_dir`, and that job file's content: at 1,000 entries in the stack file, the
    config the engine hands the program (one environment variable) is over Linux's 128 KiB
    limit for one variable."""
    config = synthetic_config(entries)
    held = {"jobs": config.pop("jobs"), "schedules": config.pop("schedules")}
    config["jobFiles"] = [f"{job_dir}/*.yaml"]
    return {f"kns:{key}": value for key, value in config.items()}, held


def measure_interleaved(functions: dict[str, Callable[[], Any]], repeat: int = 3) -> dict[str, dict[str, float]]:
    """The best of `repeat` runs of each function, the functions taking turns round by
    round so that a change in the machine's load falls on all of them alike: best wall
    time, best CPU time of this process (every thread; another process's load hardly moves
    it), and the peak traced memory of one more run."""
    walls: dict[str, list[float]] = {name: [] for name in functions}
    cpus: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeat):
        for name, function in functions.items():
            start, cpu = time.perf_counter(), time.process_time()
            function()
            walls[name].append(time.perf_counter() - start)
            cpus[name].append(time.process_time() - cpu)
    out = {}
    for name, function in functions.items():
        tracemalloc.start()
        function()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out[name] = {"seconds": min(walls[name]), "cpu_seconds": min(cpus[name]), "peak_mib": peak / 2**20}
    return out


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}


def _dump(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2))
    return path


def write(name: str, payload: dict[str, Any], keep: bool = False) -> Path:
    """The benchmark's complete result; `keep`: also in bench/results/, the committed copy
    that docs/benchmarks.md quotes."""
    path = _dump(name, {"status": "complete", **payload})
    if keep:
        KEPT.mkdir(parents=True, exist_ok=True)
        (KEPT / path.name).write_text(path.read_text())
    return path


@contextmanager
def recorded(name: str) -> Iterator[dict[str, Any]]:
    """Run a benchmark so that its result file always says how its last run ended: it is
    replaced by a `running` record before the first measurement, so a run that fails or is
    killed never leaves an older run's success behind, and a failure is written (with
    whatever the benchmark put in the yielded dict so far) as `failed`, with the error."""
    partial: dict[str, Any] = {}
    _dump(name, {"status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    try:
        yield partial
    except BaseException as error:
        _dump(name, {"status": "failed", "error": f"{type(error).__name__}: {error}", **partial})
        raise


@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """The block's `seconds` and `cpu` seconds (user + system of every process it started
    and waited for), set when it ends."""
    took: dict[str, float] = {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    yield took
    took["seconds"] = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    took["cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def run_timed(command: list[str], cwd: Optional[Path], env: Mapping[str, str],
              timeout: float = 7200) -> tuple[float, float, subprocess.CompletedProcess]:
    """Seconds, CPU seconds (the command and every process it started) and the result of a
    command that must succeed."""
    with stopwatch() as took:
        done = subprocess.run(command, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return took["seconds"], took["cpu"], done


def table(headers: list[str], rows: list[list[Any]]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])
