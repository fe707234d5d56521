"""Both doors of bad input: the real `__main__.py` under the recording Pulumi mocks and
`./kns validate` (or another `./kns` command) on a project copy holding the same config.

Shared by the test modules of each class of mistake, which assert that the two doors say
the same path-qualified lines: a config given as a dict (`write_project`, `refused`), or a
stack file given as text with its job files (`project`, `both`)."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Optional

import pulumi
import pytest
import yaml

from config import yamldoc
from config.errors import ConfigError, Problem, render
from config.loader import check_config
from kns_cli import cli
from kns_testing.program import ROOT, RecordingMocks, dev_stack_config, run_program, without_places
from plan.planner import plan_checked


def expected_text(lines: list[str]) -> str:
    return render([Problem(*line.split(": ", 1)) for line in lines])


def program_text(config: dict[str, Any]) -> str:
    """The program's RunError text; nothing may have been registered."""
    mocks = RecordingMocks()
    secret = tuple(k for k in ("credentials",) if k in config)
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys=secret, mocks=mocks)
    assert mocks.resources == []
    text = str(info.value)
    assert "Traceback" not in text and "Error:" not in text
    return text


def write_project(root: Path, config: dict[str, Any], stack: str = "case") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    if not (root / "vendor").exists():  # the Kueue install the program reads with kns:queueing.install
        shutil.copytree(ROOT / "vendor", root / "vendor")
    document = {"config": {f"kns:{k}": v for k, v in config.items()}}
    if "credentials" in config:  # stored as secrets, one value per file, as the docs say
        document["config"]["kns:credentials"] = {
            s: {f: {"secure": "v1:AAAA:BBBB"} for f in files} for s, files in config["credentials"].items()}
    (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return root


def validate_text(tmp_path: Path, config: dict[str, Any], capsys) -> str:
    root = write_project(tmp_path / "project", config)
    code = cli.main(["validate", "--stack", "case", "--project-dir", str(root)])
    out, err = capsys.readouterr()
    assert code == 1 and out == "", (code, out, err)
    return without_places(err.rstrip("\n"))


def refused(tmp_path: Path, capsys, config: dict[str, Any], lines: list[str]) -> None:
    """The program and `./kns validate` both refuse `config` with exactly `lines`."""
    text = expected_text(lines)
    assert program_text(config) == text
    assert validate_text(tmp_path, config, capsys) == text


def refused_edited(tmp_path: Path, capsys, base: dict[str, Any], case: tuple[Any, list[str]]) -> None:
    """`refused` of a copy of `base` changed by the case's edit, with the case's lines."""
    config = copy.deepcopy(base)
    change, lines = case
    change(config)
    refused(tmp_path, capsys, config, lines)


def checked(config: dict[str, Any]) -> list[str]:
    """The problem lines of the calls both the program and `./kns validate` make."""
    try:
        plan_checked(check_config(config, project_dir=ROOT, environ={},
                                  secret_keys=frozenset({"credentials", "keycloakClientSecret"})))
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return []


STACK = "case"


Files = dict[str, "str | bytes"]


def project(tmp_path: Path, stack_text: "str | bytes", files: Optional[Files] = None, stack: str = STACK) -> Path:
    root = tmp_path / "project"
    root.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(ROOT / "jobs", root / "jobs")
    shutil.copytree(ROOT / "vendor", root / "vendor")  # the Kueue install the program reads (dev has queueing on)
    for name, content in {f"Pulumi.{stack}.yaml": stack_text, **(files or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def stack_text(change: Optional[Callable[[dict], None]] = None, extra: str = "") -> str:
    """The dev stack's config (changed by `change`) as a stack file, plus raw `extra` lines
    inside its `config:` mapping."""
    config = dev_stack_config()
    if change:
        change(config)
    text = yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}}, sort_keys=False)
    return text + "".join(f"  {line}\n" for line in extra.splitlines())


def delivered(root: Path, stack: str = STACK) -> tuple[dict, tuple[str, ...]]:
    """The config as the engine delivers it: the stack file's `kns:` values (YAML 1.2 reads
    `NO` as text, as config/yamldoc.py keeps it); encrypted values are not used here."""
    value, _ = yamldoc.load((root / f"Pulumi.{stack}.yaml").read_bytes())
    config = {k.partition(":")[2]: v for k, v in (value.get("config") or {}).items() if k.startswith("kns:")}
    return {k: v for k, v in config.items() if v is not None}, ()


def program_lines(root: Path, config: Optional[dict] = None, secret: tuple[str, ...] = (),
                  stack: str = STACK) -> list[str]:
    """The program's problem lines ([] when it ran), asserting nothing was registered on failure."""
    if config is None:
        config, secret = delivered(root, stack)
    mocks = RecordingMocks()
    try:
        run_program(config, secret_keys=secret, stack=stack, mocks=mocks, project_dir=root)
    except pulumi.RunError as exc:
        assert mocks.resources == [], [r.name for r in mocks.resources]
        return str(exc).splitlines()
    assert mocks.resources, "the program ran but registered nothing"
    return []


def validate_lines(capsys, root: Path, stack: str = STACK) -> tuple[int, list[str], str]:
    code = cli.main(["validate", "--stack", stack, "--project-dir", str(root)])
    out, err = capsys.readouterr()
    return code, err.splitlines(), out


def both(capsys, root: Path, stack: str = STACK, places: bool = False, **program) -> list[str]:
    """The problem lines, asserted equal through the program and `./kns validate` (of
    stack `stack`); without the stack file's places unless `places`
    (tests/test_stack_file_places.py holds them)."""
    code, lines, _ = validate_lines(capsys, root, stack)
    from_program = program_lines(root, stack=stack, **program)
    assert lines == from_program
    assert code == (1 if lines else 0)
    text = "\n".join(lines)
    assert "Traceback" not in text and "Error:" not in text and "Exception" not in text
    return [line.removeprefix("  - ") if places else without_places(line.removeprefix("  - ")) for line in lines[1:]]


JOB_FILE_LINE = re.compile(r"^([^:]+\.ya?ml):[0-9]+:")


def problem_at(lines: list[str], path: str) -> str:
    """The message of the one line at `path` (a job file's line number after its name, a
    stack file's place before the path, are not part of the path: tests/test_config.py and
    tests/test_stack_file_places.py hold them)."""
    plain = [JOB_FILE_LINE.sub(r"\1:", without_places(line)) for line in lines]
    found = [line[len(path) + 2:] for line in plain if line.startswith(path + ": ")]
    assert len(found) == 1, (path, lines)
    return found[0]


def job_file(name: str, text: "str | bytes") -> Files:
    return {f"jobs/{name}": text}


def with_job_files(config: dict) -> None:
    config["jobFiles"] = ["jobs/*.yaml"]


def run(tmp_path, capsys, config: dict[str, Any], *args: str) -> tuple[int, str, str]:
    root = write_project(tmp_path / "project", config)
    code = cli.main([*args, "--stack", "case", "--project-dir", str(root)])
    out, err = capsys.readouterr()
    return code, out, err
