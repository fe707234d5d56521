"""Reading the job files: the whole-config check every program run makes (and `./kns
validate`, and a full `make up` offline), with config/yamldoc.py reading YAML through
libyaml's parser (as it does) against the pure-Python parser (as it did), in the same
process, the two taking turns (docs/benchmarks.md section 14, "Reading the job files").

Per size, bench/common.py's synthetic stack with its entries in a job file (as
bench/full_up.py writes it) in a copy of the project; measured: `config.loader.
check_stack_config` of the stack (the job file read, every entry checked) and
`yamldoc.load` of the job file alone; best of 5 CPU seconds of this process. Both parsers
must read the same config. Results: build/bench/ and bench/results/yaml_read.json.

    cd bench && ../.venv/bin/python yaml_read.py [sizes...]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import tempfile
from pathlib import Path

import yaml

from common import ROOT, measure_interleaved, recorded, synthetic_job_file_stack, table, write
from config import yamldoc
from kns_cli.stack import checked_stack
from kns_testing.program import PROJECT_FILES

PARSERS = {"pure Python": yaml.SafeLoader, "libyaml": yaml.CSafeLoader}


def project(where: Path, size: int) -> Path:
    for name in PROJECT_FILES:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, where / name)
    config, entries = synthetic_job_file_stack(size)
    (where / "bench-jobs").mkdir()
    job_file = where / "bench-jobs" / "bench.yaml"
    job_file.write_text(yaml.safe_dump(entries, sort_keys=False))
    (where / "Pulumi.bench.yaml").write_text(yaml.safe_dump({"config": config}))
    return job_file


def check(where: Path):
    return checked_stack(where, "bench", os.environ).checked


def with_parser(loader: type, function):
    def run():
        saved, yamldoc._LOADER = yamldoc._LOADER, loader
        try:
            return function()
        finally:
            yamldoc._LOADER = saved
    return run


def doc_rows(payload: dict) -> list[str]:
    """docs/benchmarks.md's table rows, from a results file (tests/test_bench_docs.py)."""
    rows = []
    for got in payload["results"]:
        load, whole = got["load"], got["check"]
        rows.append(f"| {got['entries']:,} | {got['kib']:,} | {load['pure Python']['cpu_seconds']:.2f} | "
                    f"{load['libyaml']['cpu_seconds']:.2f} | {whole['pure Python']['cpu_seconds']:.2f} | "
                    f"{whole['libyaml']['cpu_seconds']:.2f} | "
                    f"**{whole['libyaml']['cpu_seconds'] / whole['pure Python']['cpu_seconds']:.2f}** |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 300, 1000])
    options = parser.parse_args()
    results = []
    with recorded("yaml_read") as partial, tempfile.TemporaryDirectory() as tmp:
        partial["results"] = results
        for size in options.sizes:
            where = Path(tmp) / str(size)
            where.mkdir()
            job_file = project(where, size)
            text = job_file.read_text()
            got = {"entries": size, "kib": round(len(text.encode()) / 1024)}
            for what, function in (("load", lambda: yamldoc.load(text)), ("check", lambda: check(where))):
                gc.collect()
                got[what] = measure_interleaved({name: with_parser(loader, function)
                                                 for name, loader in PARSERS.items()}, repeat=5)
            read = [with_parser(loader, lambda: yamldoc.load(text))() for loader in PARSERS.values()]
            assert read[0] == read[1], "the parsers read the job file differently"
            checked = [with_parser(loader, lambda: check(where))().config for loader in PARSERS.values()]
            assert checked[0] == checked[1], "the parsers gave different configs"
            del read, checked
            results.append(got)
            print(f"{size} entries: {got}", flush=True)
        payload = {"results": results}
        print(table(["entries", "KiB", "load pure", "load libyaml", "check pure", "check libyaml", "ratio"],
                    [row.strip("|").split("|") for row in doc_rows(payload)]))
        print(f"written: {write('yaml_read', payload, keep=True)}")


if __name__ == "__main__":
    main()
