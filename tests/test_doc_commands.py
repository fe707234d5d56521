"""Documented `./kns` sessions are real (issue 32, "docs that cannot drift"): each
```console block of README.md and docs/*.md whose commands are `./kns ...` on the dev
stack is run, and its output and exit status must be what the block shows. A block that
needs something else (a prepared project, the engine) is listed in NOT_RUN with why, so a
new block is either checked or explicitly set aside."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from kns_testing.program import ROOT

BLOCK = re.compile(r"```console\n(.*?)```", re.S)
# First command of a block -> why it is not run here.
NOT_RUN = {
    "./kns changed main HEAD~1": "needs a repository with a branch of two crafted commits "
                                 "(tests/test_changed.py builds such commits)",
    "./kns validate --stack staging --project-dir /tmp/docproj": "a copy of the dev stack with three mistakes",
    "./kns validate --stack prod": "names the directory it looked in, which differs per checkout",
    "./kns preview train-resnet added-smoke": "runs the engine against a changed copy of the dev stack",
    "./kns preview train-resnt": "runs the engine",
}


def sessions() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in BLOCK.findall(path.read_text()):
            first = next((line.strip() for line in block.splitlines() if line.strip().startswith("$ ")), "")
            if first.startswith("$ ./kns"):
                found.append((f"{path.relative_to(ROOT)}: {first[2:]}", block))
    return found


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
        shown = {}
        if "--output" in args:
            index = args.index("--output") + 1
            shown[str(tmp_path / "out.svg")] = args[index]
            args[index] = str(tmp_path / "out.svg")
        done = subprocess.run([str(ROOT / "kns"), *args[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
        status = done.returncode
        text = done.stdout + done.stderr
        for real, name in shown.items():
            text = text.replace(real, name)
        out.extend(text.rstrip("\n").splitlines())
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("where,block", sessions(), ids=[w for w, _ in sessions()])
def test_a_documented_session_prints_what_it_shows(where, block, tmp_path):
    command = where.split(": ", 1)[1]
    if command in NOT_RUN:
        assert NOT_RUN[command]
        return
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
            block = match.group(1)
            first = next((line.strip() for line in block.splitlines() if line.strip().startswith("$ ")), "")
            if not first.startswith("$ ./kns") or first[2:] in NOT_RUN:
                return match.group(0)
            with tempfile.TemporaryDirectory() as tmp:
                return f"```console\n{run_session(block, Path(tmp))}```"

        new = BLOCK.sub(fresh, text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    regenerate()
