"""A copy of the dev stack run by the real engine (`Project`), and a project copy whose
toolchain is a stub that records the engine's command lines (`up_sh`, a fixture)."""

from __future__ import annotations

import collections
import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from kns_testing.program import ROOT


PASSPHRASE = "kns-dev-local"  # the dev stack's committed encryptionsalt belongs to it


class Project:
    def __init__(self, root: Path, env: dict[str, str]):
        self.root = root
        self.env = env

    def pulumi(self, *args: str, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def preview(self) -> list[dict]:
        """The steps of `pulumi preview --json`, minus the stack and provider bookkeeping."""
        done = self.pulumi("preview", "--json")
        return json.loads(done.stdout).get("steps", [])

    @property
    def stack_file(self) -> Path:
        return self.root / "Pulumi.dev.yaml"

    def edit_config(self, change) -> None:
        document = yaml.safe_load(self.stack_file.read_text())
        change(document["config"])
        self.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))

    def rendered(self) -> collections.Counter:
        kinds: collections.Counter = collections.Counter()
        for path in (self.root / "build" / "manifests" / "dev").rglob("*.yaml"):
            for document in yaml.safe_load_all(path.read_text()):
                if document:
                    kinds[document["kind"]] += 1
        return kinds


TUNED = {
    "PULUMI_SKIP_CHECKPOINTS": "true",
    "PULUMI_PARALLEL": "32",
    "PULUMI_PARALLEL_DIFF": "true",
    "PULUMI_K8S_CLIENT_QPS": "200",
    "PULUMI_K8S_CLIENT_BURST": "400",
    "PULUMI_AUTOMATIC_LOGGING": "false",
}


@pytest.fixture
def up_sh(tmp_path):
    """scripts/up.sh and scripts/lib/engine.sh in a project copy whose toolchain is a stub:
    its `pulumi` records each command line with the PULUMI_* variables it was given."""
    scripts = tmp_path / "scripts"
    (scripts / "lib").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "up.sh", scripts / "up.sh")
    shutil.copy(ROOT / "scripts" / "lib" / "engine.sh", scripts / "lib" / "engine.sh")
    shutil.copy(ROOT / "scripts" / "preview-summary.py", scripts / "preview-summary.py")
    # kns_cli, and what its layout module reads the stack's entry stacks with (docs/entry-stacks.md).
    for package in ("kns_cli", "chrono", "config", "plan"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    # The project: a valid dev stack (and `site`, the same config), which `make up` and
    # `make preview` check before anything else (kns_cli/fullrun.py).
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "Pulumi.dev.yaml", tmp_path / "Pulumi.site.yaml")
    for directory in ("jobs", "vendor"):
        shutil.copytree(ROOT / directory, tmp_path / directory)
    stub_bin = tmp_path / "stub-bin"
    stub_bin.mkdir()
    (scripts / "toolchain.sh").write_text(f"#!/usr/bin/env bash\necho {stub_bin}\n")
    pulumi = stub_bin / "pulumi"
    pulumi.write_text('#!/usr/bin/env bash\n'
                      '{ printf "%s" "$1"; env | grep "^PULUMI_" | sort | tr "\\n" " "; echo; } >>"$KNS_STUB_LOG"\n'
                      'echo "$@" >>"$KNS_STUB_LOG.args"\n'
                      '[ "$1" != config ]\n')
    pulumi.chmod(pulumi.stat().st_mode | stat.S_IEXEC)
    return tmp_path
