"""What `make preview` and `make up` print on the dev stack (queueing on, so Kueue's
install with its CRDs is part of it), through the real engine: the per-entry summary,
bounded to one line per changed entry or platform part plus a fixed few; the engine's
output in the log file it names; VERBOSE=1 shows that output too. docs/cli.md's `$ make
preview` session is this module's run (KNS_WRITE_DOCS=1 rewrites it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kns_testing.engine import PASSPHRASE, Project
from kns_testing.program import PROJECT_FILES, ROOT, built_toolchain, engine_project

DOC = ROOT / "docs" / "cli.md"
DOC_SECTION = "## What `make up` and `make preview` print"
# The fixed lines of a run: the header, "Entries", the unchanged entries, "Platform", the
# unchanged parts, the engine log's path, make's own echo, and for `up` the manifests and
# outputs lines; the rest is one line per changed entry or part (docs/cli.md says 16).
FIXED_LINES = 16
STAMP = re.compile(r"\d{8}T\d{6}Z")


def bound(out: str) -> int:
    changed = sum(1 for line in out.splitlines() if re.match(r"  (\+|~|-|\+-) ", line))
    return FIXED_LINES + changed


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    bin_dir = built_toolchain()
    root = tmp_path_factory.mktemp("make") / "kns-platform"
    env = engine_project(root, bin_dir, PASSPHRASE,
                         files=(*PROJECT_FILES, "Pulumi.dev.yaml", "Makefile", "kns_cli", "policy", "versions.env"))
    shutil.copy2(ROOT / "requirements.txt", root / "requirements.txt")
    (root / ".venv").symlink_to(ROOT / ".venv")
    scripts = root / "scripts"
    (scripts / "lib").mkdir(parents=True)
    for name in ("up.sh", "preview-summary.py", "lib/engine.sh"):
        shutil.copy(ROOT / "scripts" / name, scripts / name)
    (scripts / "toolchain.sh").write_text(f"#!/usr/bin/env bash\necho {bin_dir}\n")
    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE"):  # up.sh's own defaults, as for a user
        env.pop(name)
    env.pop("VERBOSE", None)
    return Project(root, env)


def make(project: Project, target: str, **extra: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["make", "--no-print-directory", target], cwd=project.root, env={**project.env, **extra},
                          capture_output=True, text=True, timeout=1800)
    return done


@pytest.fixture(scope="module")
def runs(project):
    """make preview on a new stack, make up, then make preview after a one-entry change."""
    first = make(project, "preview")
    up = make(project, "up")
    project.edit_config(lambda config: next(j for j in config["kns:jobs"] if j["name"] == "train-resnet")
                        .__setitem__("cpu", 12))
    after = make(project, "preview")
    verbose = make(project, "preview", VERBOSE="1")
    return {"first": first, "up": up, "after": after, "verbose": verbose}


def test_make_preview_of_a_new_stack_is_the_summary(runs):
    done = runs["first"]
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "bash scripts/up.sh preview"
    header = next(line for line in lines if line.startswith("Preview of stack dev: "))
    assert re.fullmatch(r"Preview of stack dev: \d+ to create \(\d+ objects\)", header)
    assert "  +  Kueue kueue " in done.stdout  # Kueue's install: one line, not its CRDs
    assert "openAPIV3Schema" not in done.stdout + done.stderr
    assert len(lines) <= bound(done.stdout), done.stdout
    assert "kns: creating stack dev" in done.stderr


def test_make_up_prints_progress_and_the_summary_not_the_engine_s_output(project, runs):
    done = runs["up"]
    assert done.returncode == 0, done.stdout + done.stderr
    header = next(line for line in done.stdout.splitlines() if line.startswith("Update of stack dev: "))
    created = int(re.fullmatch(r"Update of stack dev: (\d+) to create \(\d+ objects\)", header)[1])
    progress = [line for line in done.stderr.splitlines() if line.startswith("applied ")]
    last = re.fullmatch(r"applied (\d+) of (\d+) resources in dev \(100%\)", progress[-1]) if progress else None
    assert last and last[1] == last[2] and int(last[1]) > created, done.stderr  # components are resources too
    assert 1 <= len(progress) <= 4
    manifests = sum(1 for _ in (project.root / "build" / "manifests" / "dev").rglob("*.yaml"))
    assert f"Manifests: {manifests} objects in build/manifests/dev" in done.stdout
    assert "Outputs: make outputs" in done.stdout
    assert len(done.stdout.splitlines()) <= bound(done.stdout) + 2, done.stdout
    log = Path(project.root / re.search(r"Engine output: (\S+)", done.stdout)[1])
    engine_output = log.read_text()
    assert "Resources:" in engine_output and "openAPIV3Schema" in engine_output  # the --diff went there
    assert "Resources:" not in done.stdout + done.stderr


def test_a_one_entry_change_is_one_line(runs):
    done = runs["after"]
    assert done.returncode == 0, done.stdout + done.stderr
    changed = [line for line in done.stdout.splitlines() if re.match(r"  (\+|~|-|\+-) ", line)]
    assert len(changed) == 1 and changed[0].startswith("  +- job train-resnet "), done.stdout
    assert "Job kns-train-resnet/train-resnet (spec.template.spec.containers[0].resources." in changed[0]
    assert re.search(r"^  =  \d+ entries unchanged \(\d+ objects\): ", done.stdout, re.M)
    assert re.search(r"^  =  \d+ parts unchanged \(\d+ objects\): .*Kueue kueue", done.stdout, re.M)
    assert len(done.stdout.splitlines()) <= FIXED_LINES + 1


def test_verbose_shows_the_engine_s_output(runs):
    done = runs["verbose"]
    assert done.returncode == 0, done.stderr
    assert "Resources:" in done.stdout and "Preview of stack dev: " in done.stdout


def normalised(text: str) -> str:
    return STAMP.sub("20261126T060000Z", text)


def documented_session() -> tuple[str, int, int]:
    text = DOC.read_text()
    section = text.index(DOC_SECTION)
    start = text.index("```console\n", section) + len("```console\n")
    return text, start, text.index("```\n", start)


def test_the_documented_session_is_this_run(runs):
    done = runs["after"]
    printed = normalised("$ make preview\n" + done.stdout)
    text, start, end = documented_session()
    if os.environ.get("KNS_WRITE_DOCS") == "1":
        DOC.write_text(text[:start] + printed + text[end:])
        text, start, end = documented_session()
    assert text[start:end] == printed
