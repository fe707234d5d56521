"""Documented `./kns` sessions are real (issue 32, "docs that cannot drift"): each
```console block of README.md and docs/*.md whose commands are `./kns ...` on the dev
stack is run, and its output and exit status must be what the block shows. A block that
needs something else (a prepared project, the engine) is listed in NOT_RUN with why, so a
new block is either checked or explicitly set aside."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kns_testing.program import PROJECT_FILES, ROOT

# A ```console block, at any indentation (a list item's), up to its closing fence.
BLOCK = re.compile(r"^( *)```console\n(.*?)^\1```", re.S | re.M)
# First command of a block -> why it is not run here (and where it is checked instead).
NOT_RUN = {
    "./kns changed main HEAD~1": "needs a repository with a branch of two crafted commits "
                                 "(tests/test_changed.py builds such commits)",
    "./kns preview train-resnet added-smoke": "runs the engine against a changed copy of the dev stack "
                                              "(tests/test_preview_targeted.py checks it against that run)",
}
# Where the docs say the checkout is; a run's output says where it really is.
SHOWN_ROOT = "~/kns-platform"
# The prepared project the validation example runs on: the dev stack as Pulumi.staging.yaml
# with the three mistakes docs/cli.md describes.
DOC_PROJECT = "/tmp/docproj"


def sessions() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for indent, block in BLOCK.findall(path.read_text()):
            block = "".join(line[len(indent):] + "\n" for line in block.splitlines())
            first = next((line.strip() for line in block.splitlines() if line.strip().startswith("$ ")), "")
            if first.startswith("$ ./kns"):
                found.append((f"{path.relative_to(ROOT)}: {first[2:]}", block))
    return found


def staging_project(where: Path) -> Path:
    """A copy of the project whose Pulumi.staging.yaml is the dev stack with a bad quantity,
    a misspelt time zone and a jsonOverrides pointer past the end of a list."""
    where.mkdir(parents=True)
    for name in PROJECT_FILES:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, where / name)
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    entry = {e["name"]: e for e in [*config["kns:jobs"], *config["kns:schedules"]]}
    entry["train-resnet"]["memory"] = "64Qi"
    entry["nightly-report"]["timeZone"] = "Europe/Pariss"
    entry["vcluster-smoke"]["jsonOverrides"] = [{"path": "/spec/template/spec/containers/5/image", "value": "x"}]
    (where / "Pulumi.staging.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return where


def run_session(block: str, tmp_path: Path) -> str:
    """The block as this checkout prints it: each `$ ./kns ...` run, `$ echo $?` its status.
    An `--output` path is written under tmp_path and shown as the block names it."""
    out: list[str] = []
    status = 0
    for line in block.splitlines():
        if not line.startswith("$ "):
            continue
        out.append(line)
        command = line[2:]
        if command == "echo $?":
            out.append(str(status))
            continue
        args = shlex.split(command)
        shown = {str(ROOT): SHOWN_ROOT}
        if "--project-dir" in args and args[args.index("--project-dir") + 1] == DOC_PROJECT:
            index = args.index("--project-dir") + 1
            if not (tmp_path / "docproj").exists():
                staging_project((tmp_path / "docproj"))
            args[index] = str(tmp_path / "docproj")
            shown[args[index]] = DOC_PROJECT
        if "--output" in args:
            index = args.index("--output") + 1
            shown[str(tmp_path / "out.svg")] = args[index]
            args[index] = str(tmp_path / "out.svg")
        done = subprocess.run([str(ROOT / "kns"), *args[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
        status = done.returncode
        text = done.stdout + done.stderr
        for real, name in sorted(shown.items(), key=lambda item: -len(item[0])):
            text = text.replace(real, name)
        out.extend(text.rstrip("\n").splitlines())
    return "\n".join(out) + "\n"


RUN = [(where, block) for where, block in sessions() if where.split(": ", 1)[1] not in NOT_RUN]


@pytest.mark.parametrize("where,block", RUN, ids=[w for w, _ in RUN])
def test_a_documented_session_prints_what_it_shows(where, block, tmp_path):
    assert run_session(block, tmp_path) == block, f"{where}: regenerate it (tests/test_doc_commands.py run_session)"


def test_every_documented_session_is_run_or_set_aside_with_a_reason():
    commands = {where.split(": ", 1)[1] for where, _ in sessions()}
    assert set(NOT_RUN) <= commands, set(NOT_RUN) - commands  # a stale exemption is removed
    assert len(commands - set(NOT_RUN)) >= 4


def regenerate() -> None:
    """Rewrite every checked block from a real run (`make docs`)."""
    import tempfile
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()

        def fresh(match: re.Match) -> str:
            indent = match.group(1)
            block = "".join(line[len(indent):] + "\n" for line in match.group(2).splitlines())
            first = next((line.strip() for line in block.splitlines() if line.strip().startswith("$ ")), "")
            if not first.startswith("$ ./kns") or first[2:] in NOT_RUN:
                return match.group(0)
            with tempfile.TemporaryDirectory() as tmp:
                printed = run_session(block, Path(tmp))
            return "".join(f"{indent}{line}\n" if line else "\n" for line in f"```console\n{printed}```".splitlines())

        new = BLOCK.sub(fresh, text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    regenerate()
