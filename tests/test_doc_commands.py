"""Documented sessions are real (issue 32, "docs that cannot drift"; issue 44): every fenced
block of README.md and docs/*.md that shows a `$ ` prompt is a session. One whose commands
are all `./kns ...` on the dev stack (and `echo $?`) is run here, and its output and exit
status must be what the block shows. Any other (a `make` target, a prepared repository, the
engine) is in SET_ASIDE with why and the test that checks it instead; that test must exist.
So a new block is either checked here, or explicitly set aside with its checker."""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kns_testing.program import PROJECT_FILES, ROOT

# A fenced block of any language, at any indentation (a list item's), up to its closing fence.
BLOCK = re.compile(r"^( *)```([a-z]*)\n(.*?)^\1```", re.S | re.M)
# "<doc>: <first command>" -> (why it is not run here, "<test module>::<test function>" that checks it).
SET_ASIDE = {
    "docs/multicluster.md: make up": (
        "renders a site through the engine; the directories per cluster are the providers' render dirs",
        "tests/test_multicluster.py::test_a_site_renders_offline_one_directory_per_cluster"),
    "docs/cli.md: ./kns changed main HEAD~1": (
        "needs a repository with a branch of two crafted commits",
        "tests/test_changed.py::test_the_documented_changed_session_is_what_kns_prints"),
    "docs/cli.md: ./kns preview train-resnet added-smoke": (
        "runs the engine against a changed copy of the dev stack",
        "tests/test_preview_targeted.py::test_the_documented_preview_is_this_run"),
    "docs/cli.md: make preview": (
        "runs make and the engine on a new copy of the dev stack",
        "tests/test_make_output.py::test_the_documented_session_is_this_run"),
    "docs/queueing.md: ./kns queues": (
        "a worked example on its own config (the dev stack's a100 pool and a compute pool), not the dev stack",
        "tests/test_queueing.py::test_the_documented_queues_session_is_what_kns_prints"),
    "README.md: KNS_STACK=site make up": (
        "runs make on a stack other than dev, in an environment without a passphrase",
        "tests/test_passphrase.py::test_the_documented_session_is_what_make_prints"),
    "docs/entry-stacks.md: make up": (
        "needs a stack applied in one Pulumi stack, then split (the states stand in for the engine's)",
        "tests/test_entry_stacks.py::test_the_documented_restack_session_is_what_kns_prints"),
}
# Where the docs say the checkout is; a run's output says where it really is.
SHOWN_ROOT = "~/kns-platform"
# The prepared project the validation example runs on: the dev stack as Pulumi.staging.yaml
# with the three mistakes docs/cli.md describes.
DOC_PROJECT = "/tmp/docproj"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def prompts(block: str) -> list[str]:
    return [line.strip()[2:] for line in block.splitlines() if line.strip().startswith("$ ")]


def runnable(block: str) -> bool:
    """Every command of the block is `./kns ...` or `echo $?`: what run_session runs."""
    return all(command.startswith("./kns ") or command == "echo $?" for command in prompts(block))


def sessions() -> list[tuple[str, str]]:
    """("<doc>: <first command>", block) for every fenced block with a `$ ` prompt."""
    found = []
    for path in documents():
        for indent, _, block in BLOCK.findall(path.read_text()):
            block = "".join(line[len(indent):] + "\n" for line in block.splitlines())
            if prompts(block):
                found.append((f"{path.relative_to(ROOT)}: {prompts(block)[0]}", block))
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


RUN = [(where, block) for where, block in sessions() if where not in SET_ASIDE]


@pytest.mark.parametrize("where,block", RUN, ids=[w for w, _ in RUN])
def test_a_documented_session_prints_what_it_shows(where, block, tmp_path):
    assert runnable(block), f"{where}: runs more than ./kns; check it elsewhere and add it to SET_ASIDE"
    assert run_session(block, tmp_path) == block, f"{where}: regenerate it (tests/test_doc_commands.py run_session)"


def test_every_documented_session_is_run_or_set_aside_with_its_checker():
    found = {where for where, _ in sessions()}
    assert set(SET_ASIDE) <= found, set(SET_ASIDE) - found  # a stale exemption is removed
    assert len(found - set(SET_ASIDE)) >= 8
    for where, (why, checker) in SET_ASIDE.items():
        module, function = checker.split("::")
        tree = ast.parse((ROOT / module).read_text())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert why and function in defined, f"{where}: {checker} does not exist"
        assert where.split(": ")[0] in (ROOT / module).read_text(), f"{checker} never reads {where.split(': ')[0]}"


def test_a_session_that_runs_more_than_kns_is_not_run_as_kns():
    """run_session runs every command as ./kns: a block with another command must be set aside."""
    assert runnable("$ ./kns validate\n$ echo $?\n0\n")
    assert not runnable("$ ./kns restack\n...\n$ make up\n")
    assert not runnable("$ KNS_FULL=true make up\n")


def regenerate() -> None:
    """Rewrite every checked block from a real run (`make docs`)."""
    import tempfile
    for path in documents():
        text = path.read_text()

        def fresh(match: re.Match) -> str:
            indent = match.group(1)
            block = "".join(line[len(indent):] + "\n" for line in match.group(3).splitlines())
            commands = prompts(block)
            if match.group(2) != "console" or not commands or not runnable(block) \
                    or f"{path.relative_to(ROOT)}: {commands[0]}" in SET_ASIDE:
                return match.group(0)
            with tempfile.TemporaryDirectory() as tmp:
                printed = run_session(block, Path(tmp))
            # BLOCK's match ends at the closing fence, before its newline.
            return "\n".join(f"{indent}{line}" if line else "" for line in f"```console\n{printed}```".splitlines())

        new = BLOCK.sub(fresh, text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    regenerate()
