"""The one passphrase rule of every door that runs the engine (kns_cli/passphrase.py): the
dev passphrase is the dev stack's only; any other stack with the passphrase secrets
provider stops, before anything runs, with one message naming the stack and the two
variables. And the hints those doors print name the stack when it is not dev. Run with a
stub `pulumi` (tests/test_engine_settings.py's `up_sh`): no engine starts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kns_cli import cli, summary
from kns_cli import preview as preview_module
from kns_cli import up as up_module
from kns_cli.passphrase import DEV_PASSPHRASE, PASSPHRASE, PASSPHRASE_FILE
from kns_testing.engine import TUNED, up_sh  # noqa: F401  (the fixture)
from plan import stacks

ROOT = Path(__file__).resolve().parent.parent
ENGINE_COMMANDS = [["preview", "train-resnet"], ["up", "train-resnet"], ["recover"], ["restack"], ["applied"],
                   ["outputs"]]


def said_missing(text: str, stack: str) -> bool:
    return f"stack {stack} needs its passphrase" in text and PASSPHRASE in text and PASSPHRASE_FILE in text


def run_up_sh(root: Path, action: str, **given: str) -> subprocess.CompletedProcess:
    """up.sh of the project copy with its stub pulumi, in an environment without PULUMI_*."""
    env = {key: value for key, value in os.environ.items() if key not in TUNED and not key.startswith("PULUMI_")}
    return subprocess.run(["bash", str(root / "scripts" / "up.sh"), action],
                          env={**env, **given, "KNS_STUB_LOG": str(root / "pulumi.log"), "KNS_PYTHON": sys.executable},
                          capture_output=True, text=True, timeout=60)


def pulumi_calls(root: Path) -> list[str]:
    log = root / "pulumi.log.args"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("action", ["up", "preview", "outputs"])
def test_make_on_another_stack_without_a_passphrase_stops_before_anything_runs(up_sh, action):
    done = run_up_sh(up_sh, action, KNS_STACK="site")
    assert done.returncode == 2, done.stdout + done.stderr
    assert said_missing(done.stderr, "site"), done.stderr
    assert done.stderr.startswith("up: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert pulumi_calls(up_sh) == [] and not (up_sh / ".pulumi-state").exists()


def test_the_documented_session_is_what_make_prints(up_sh):
    """README, "Passphrases": the message of `KNS_STACK=site make up` without a passphrase."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = readme.split("$ KNS_STACK=site make up\n", 1)[1].splitlines()[0].strip()
    assert run_up_sh(up_sh, "up", KNS_STACK="site").stderr.strip() == shown


@pytest.mark.parametrize("given", [{PASSPHRASE: "theirs"}, {PASSPHRASE_FILE: "FILE"}])
def test_another_stack_runs_with_the_passphrase_it_is_given(up_sh, given):
    secret = up_sh / "passphrase"
    secret.write_text("theirs\n")
    given = {key: str(secret) if value == "FILE" else value for key, value in given.items()}
    done = run_up_sh(up_sh, "up", KNS_STACK="site", **given)
    assert done.returncode == 0, done.stderr
    assert any(call.startswith("stack select site") for call in pulumi_calls(up_sh))
    assert DEV_PASSPHRASE not in (up_sh / "pulumi.log").read_text()  # never defaulted beside the given one


def test_an_unreadable_passphrase_file_stops_before_anything_runs(up_sh):
    done = run_up_sh(up_sh, "preview", KNS_STACK="site", PULUMI_CONFIG_PASSPHRASE_FILE=str(up_sh / "absent"))
    assert done.returncode == 2 and f"{PASSPHRASE_FILE} names {up_sh / 'absent'}" in done.stderr, done.stderr
    assert pulumi_calls(up_sh) == []


def test_the_dev_stack_defaults_to_the_dev_passphrase(up_sh):
    done = run_up_sh(up_sh, "preview")
    assert done.returncode == 0, done.stderr
    assert f"{PASSPHRASE}={DEV_PASSPHRASE}" in (up_sh / "pulumi.log").read_text()


def test_a_stack_with_a_kms_secrets_provider_needs_no_passphrase(up_sh):
    (up_sh / "Pulumi.prod.yaml").write_text("secretsprovider: awskms://alias/kns-prod\n"
                                            + (ROOT / "Pulumi.dev.yaml").read_text())
    done = run_up_sh(up_sh, "preview", KNS_STACK="prod")
    assert done.returncode == 0, done.stderr
    assert PASSPHRASE not in (up_sh / "pulumi.log").read_text()


def test_make_up_s_hints_name_another_stack(up_sh):
    up = run_up_sh(up_sh, "up", KNS_STACK="site", PULUMI_CONFIG_PASSPHRASE="theirs")
    assert up.returncode == 0, up.stderr
    assert "Outputs: KNS_STACK=site make outputs " in up.stdout, up.stdout
    outputs = run_up_sh(up_sh, "outputs", KNS_STACK="site", PULUMI_CONFIG_PASSPHRASE="theirs")
    assert outputs.returncode == 0 and "Outputs of stack site" in outputs.stderr, outputs.stderr
    dev = run_up_sh(up_sh, "up")
    assert "Outputs: make outputs " in dev.stdout, dev.stdout


@pytest.fixture
def site_project(tmp_path, monkeypatch):
    """A project with a stack `site` (the dev config), no passphrase in the environment, and
    every way the engine could start recorded."""
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "Pulumi.dev.yaml", tmp_path / "Pulumi.site.yaml")
    monkeypatch.delenv(PASSPHRASE, raising=False)
    monkeypatch.delenv(PASSPHRASE_FILE, raising=False)
    started = []
    monkeypatch.setattr(preview_module, "toolchain", lambda: started.append("toolchain") or "/nonexistent")
    monkeypatch.setattr(cli.subprocess, "run", lambda *a, **k: started.append(a) or subprocess.CompletedProcess(a, 1))
    return tmp_path, started


@pytest.mark.parametrize("command", ENGINE_COMMANDS, ids=lambda c: c[0])
def test_every_kns_command_that_runs_the_engine_checks_the_passphrase_first(site_project, capsys, command):
    root, started = site_project
    assert cli.main([*command, "--stack", "site", "--project-dir", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kns {command[0]}: ") and said_missing(err, "site"), err
    assert started == [] and not (root / ".pulumi-state").exists()


def test_a_misspelt_stack_is_said_before_the_passphrase(site_project, capsys):
    root, _ = site_project
    assert cli.main(["preview", "train-resnet", "--stack", "sitte", "--project-dir", str(root)]) == 2
    err = capsys.readouterr().err
    assert "did you mean --stack site?" in err and "passphrase" not in err


def test_commands_and_hints_name_a_stack_other_than_dev():
    assert stacks.make_command("outputs", "dev") == "make outputs"
    assert stacks.make_command("outputs", "site") == "KNS_STACK=site make outputs"
    assert stacks.make_command("up", "site.entries-2") == "KNS_STACK=site make up"
    assert stacks.kns_command("recover", "dev.entries-0") == "./kns recover"
    assert stacks.kns_command("recover --force", "site") == "./kns recover --force --stack site"
    assert "`KNS_STACK=site make up`" in up_module.refusal("site", ["queues"], {})
    assert "(KNS_STACK=site make preview previews the whole stack)" in summary.render_text("site", [], ["a"], 2)
    diagnostic = {"message": "resource 'x' depends on 'urn:pulumi:site::kns-platform::kubernetes:core/v1:Namespace"
                             "::q' which was not specified in --target list"}
    said = preview_module.missing_dependency({"diagnostics": [diagnostic]}, "site")
    assert "`KNS_STACK=site make preview`" in said and "`KNS_STACK=site make up`" in said
