"""The guard of the targeting variable (issue 33, config/invocation.py): KNS_PREVIEW_ENTRIES
narrows the program only in a run `./kns` started, proven by a token in KNS_TARGETED_RUN
that the `--message` of the pulumi command running the program carries. Without the engine:
a fake /proc tree, and real process trees whose `pulumi` is a shell renamed with `exec -a`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest

from config.errors import ConfigError
from config.invocation import (TARGETED_RUN, carries_marker, marker, message_arguments, new_token,
                               pulumi_command, started_by_kns)
from kns_cli import preview as preview_module
from kns_cli import up as up_module
from kns_cli.stack import load_stack
from kns_testing.program import ROOT, RecordingMocks, dev_stack_config, run_program
from plan.targeting import ONLY_ENTRIES, plans_to_register

TOKEN = "0123456789abcdef0123456789abcdef"


def fake_proc(root: Path, processes: dict[int, tuple[int, list[str], str]]) -> Path:
    """A /proc with `pid -> (parent, argv, comm)`: each process's stat and cmdline."""
    for pid, (parent, argv, comm) in processes.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) S {parent} {pid} {pid} 0 -1 4194560 0 0\n")
        (root / str(pid) / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    return root


def tree(tmp_path: Path, pulumi_argv: list[str], host: str = "pulumi-language-python") -> Path:
    """init -> shell -> `pulumi_argv` -> language host -> exec script -> the program (pid 500)."""
    return fake_proc(tmp_path / f"proc-{len(list(tmp_path.glob('proc-*')))}", {
        1: (0, ["/sbin/init"], "init"),
        100: (1, ["bash"], "bash"),
        200: (100, pulumi_argv, "pulumi"),
        300: (200, [host, "-root", "/project"], host[:15]),
        400: (300, ["/bin/sh", "pulumi-language-python-exec", "__main__.py"], "sh"),
        500: (400, ["/project/.venv/bin/python", "-u", "__main__.py"], "python"),
    })


KNS_PREVIEW = ["/home/u/.cache/kns-platform/tools/bin/pulumi", "preview", "--stack", "dev", "--json",
               *message_arguments(TOKEN), "--target", "urn:x", "--target-dependents", "--non-interactive"]


def test_the_pulumi_command_kns_started_is_recognised_through_the_host(tmp_path):
    proc = tree(tmp_path, KNS_PREVIEW)
    assert pulumi_command(500, proc) == KNS_PREVIEW
    assert started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=proc)
    assert started_by_kns({TARGETED_RUN: f" {TOKEN}\n"}, pid=500, proc=proc)  # as a shell may hand it on


def test_a_token_that_the_command_does_not_carry_is_refused(tmp_path):
    proc = tree(tmp_path, KNS_PREVIEW)
    assert not started_by_kns({TARGETED_RUN: "f" * 32}, pid=500, proc=proc)
    assert not started_by_kns({TARGETED_RUN: TOKEN[:-1]}, pid=500, proc=proc)  # a prefix is not the token
    assert not started_by_kns({TARGETED_RUN: ""}, pid=500, proc=proc)
    assert not started_by_kns({}, pid=500, proc=proc)


@pytest.mark.parametrize("argv", [
    ["pulumi", "preview"],                                          # a plain preview
    ["pulumi", "up", "--yes"],                                      # a plain up
    ["pulumi", "preview", "--message", "deploy " + marker(TOKEN)],  # the marker inside other text
    ["pulumi", "preview", "--target", marker(TOKEN)],               # not as the message
    ["pulumi", "preview", "--message"],                             # the flag with nothing after it
], ids=["preview", "up", "inside-text", "not-the-message", "no-value"])
def test_a_pulumi_command_without_the_message_is_refused(tmp_path, argv):
    assert not started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=tree(tmp_path, argv))


@pytest.mark.parametrize("argv", [
    ["pulumi", "preview", "--message", marker(TOKEN)],
    ["pulumi", "preview", f"--message={marker(TOKEN)}"],
    ["pulumi", "up", "-m", marker(TOKEN), "--yes"],
    ["/usr/local/bin/pulumi", "preview", f"-m{marker(TOKEN)}"],
])
def test_every_spelling_of_the_message_flag_is_read(tmp_path, argv):
    assert carries_marker(argv, TOKEN)
    assert started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=tree(tmp_path, argv))


def test_the_message_counts_only_on_a_command_named_pulumi(tmp_path):
    """A shell or script that merely has the marker among its arguments is not the engine."""
    argv = ["bash", "-c", "pulumi preview", "--message", marker(TOKEN)]
    assert not started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=tree(tmp_path, argv))
    named_alike = ["/opt/pulumi-wrapper", "preview", *message_arguments(TOKEN)]
    assert not started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=tree(tmp_path, named_alike))


def test_only_the_nearest_pulumi_command_counts(tmp_path):
    """A plain `pulumi up` run from inside a `./kns preview` (say, by a policy pack or a hook)
    is its own run: the marker of an outer pulumi command does not carry over to it."""
    proc = fake_proc(tmp_path / "proc", {
        1: (0, ["/sbin/init"], "init"),
        200: (1, KNS_PREVIEW, "pulumi"),
        300: (200, ["sh", "-c", "pulumi up"], "sh"),
        400: (300, ["pulumi", "up"], "pulumi"),
        500: (400, ["python", "__main__.py"], "python"),
    })
    assert not started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=proc)
    assert started_by_kns({TARGETED_RUN: TOKEN}, pid=300, proc=proc)


def test_odd_process_names_and_broken_trees_end_the_walk(tmp_path):
    proc = fake_proc(tmp_path / "proc", {
        200: (1, KNS_PREVIEW, "pulumi"),
        300: (200, ["x"], "a) b (c"),    # a command name with spaces and parentheses
        500: (300, ["python"], "python"),
    })
    assert started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=proc)
    loop = fake_proc(tmp_path / "loop", {
        10: (11, ["sh"], "sh"), 11: (10, ["sh"], "sh"), 500: (10, ["python"], "python")})
    assert pulumi_command(500, loop) is None  # a cycle (a corrupt tree) ends, refused
    assert pulumi_command(500, tmp_path / "no-proc") is None  # no /proc at all: refused
    assert not started_by_kns({TARGETED_RUN: TOKEN}, pid=500, proc=tmp_path / "no-proc")


def test_this_test_process_was_not_started_by_kns():
    assert not started_by_kns({TARGETED_RUN: TOKEN})


def test_tokens_are_new_each_run():
    tokens = {new_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) == 32 for t in tokens)


# Real process trees: `exec -a pulumi sh host.sh ARGS...` is a process whose argv[0] is
# `pulumi` with the pulumi command's arguments; its child is the Python program (the
# `; exit` keeps sh from exec-ing it in place, which would remove the `pulumi` process).
CHECK = """
import os, sys
sys.path.insert(0, sys.argv[1])
from config.errors import ConfigError
from kns_cli.stack import load_stack
from plan.targeting import plans_to_register
_, plans = load_stack(sys.argv[1], "dev")
try:
    print("registers:", ",".join(p.entry.name for p in plans_to_register(plans, os.environ)))
except ConfigError as exc:
    print("refused:", exc.problems[0])
"""


def under_pulumi(tmp_path: Path, args: list[str], env: dict[str, str]) -> list[str]:
    host = tmp_path / "host.sh"
    host.write_text('"$KNS_TEST_PYTHON" -c "$KNS_TEST_CHECK" "$KNS_TEST_ROOT"; exit $?\n')
    done = subprocess.run(["bash", "-c", 'exec -a pulumi sh "$0" "$@"', str(host), *args],
                          env={**env, "KNS_TEST_PYTHON": sys.executable, "KNS_TEST_CHECK": CHECK,
                               "KNS_TEST_ROOT": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _plain_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (ONLY_ENTRIES, TARGETED_RUN)}


def test_the_environment_and_arguments_of_kns_preview_pass_the_guard(tmp_path):
    """What `./kns preview` and `./kns up` hand the engine (kns_cli/preview.py, kns_cli/up.py)
    passes, in a real process tree: the program registers the named entries only."""
    token = new_token()
    env = preview_module.engine_environment(tmp_path, "dev", ["train-resnet", "hourly-sync"], "/nonexistent",
                                            _plain_environ(), token)
    assert env[ONLY_ENTRIES] == "train-resnet,hourly-sync" and env[TARGETED_RUN] == token
    args = preview_module.preview_arguments("dev", ["urn:a"], tmp_path / "events.jsonl", ROOT / "policy", None,
                                            token)
    assert args[args.index("--message") + 1] == f"kns-targeted:{token}"
    _, plans = load_stack(ROOT, "dev")
    assert under_pulumi(tmp_path, args, env) == ["registers: train-resnet,hourly-sync"]
    command = up_module.up_arguments("dev", ["urn:a"], token)
    assert under_pulumi(tmp_path, command[1:], env) == ["registers: train-resnet,hourly-sync"]
    assert len(plans) > 2


def test_kns_up_of_removed_entries_only_registers_no_entry(tmp_path):
    """`./kns up` naming only entries the config no longer has sets the variable empty: the
    program registers the platform and no entry (the state's entries are targeted and
    deleted), where an unset variable would register every entry."""
    token = new_token()
    env = preview_module.engine_environment(tmp_path, "dev", [], "/nonexistent", _plain_environ(), token,
                                            narrowed=True)
    assert env[ONLY_ENTRIES] == "" and env[TARGETED_RUN] == token
    command = up_module.up_arguments("dev", ["urn:a"], token)
    assert under_pulumi(tmp_path, command[1:], env) == ["registers: "]
    assert under_pulumi(tmp_path, ["up", "--yes"], env)[0].startswith(f"refused: {ONLY_ENTRIES}: is set (), but")


def test_the_same_variables_under_a_plain_pulumi_command_are_refused(tmp_path):
    token = new_token()
    env = preview_module.engine_environment(tmp_path, "dev", ["train-resnet"], "/nonexistent", _plain_environ(),
                                            token)
    refused = [f"refused: {ONLY_ENTRIES}: is set (train-resnet), but this run was not started by ./kns "
               f"(no {TARGETED_RUN} token carried by its pulumi command's --message), so it is refused: narrowed to "
               f"some entries, a plain pulumi preview or up would show every other entry as a delete. Unset "
               f"{ONLY_ENTRIES}, or run ./kns preview train-resnet"]
    assert under_pulumi(tmp_path, ["preview", "--stack", "dev"], env) == refused
    assert under_pulumi(tmp_path, ["up", "--yes", *message_arguments(new_token())], env) == refused


def test_without_the_variable_nothing_is_refused(tmp_path):
    """No KNS_PREVIEW_ENTRIES: every entry, wherever the program runs (a token alone narrows
    nothing and refuses nothing)."""
    _, plans = load_stack(ROOT, "dev")
    everything = f"{','.join(p.entry.name for p in plans)}"
    for env in (_plain_environ(), {**_plain_environ(), TARGETED_RUN: TOKEN}):
        assert under_pulumi(tmp_path, ["up", "--yes"], env) == [f"registers: {everything}"]
        assert plans_to_register(plans, env) == plans


def test_kns_environment_without_entries_holds_neither_variable(tmp_path):
    """`./kns recover` runs `pulumi up` with no entries: an operator's exported variables are
    dropped, not handed to the program (which would refuse them)."""
    env = preview_module.engine_environment(tmp_path, "dev", (), "/nonexistent",
                                            {**_plain_environ(), ONLY_ENTRIES: "x", TARGETED_RUN: TOKEN})
    assert ONLY_ENTRIES not in env and TARGETED_RUN not in env
    with pytest.raises(ValueError):
        preview_module.engine_environment(tmp_path, "dev", ["x"], "/nonexistent", _plain_environ())
    assert "--message" not in preview_module.preview_arguments("dev", [], tmp_path / "e", ROOT / "policy", None)


@pytest.mark.parametrize("dry_run", [True, False], ids=["preview", "update"])
def test_the_program_refuses_the_variable_outside_kns_before_registering_anything(monkeypatch, dry_run):
    """__main__.py under the mocks, as a plain `pulumi preview` / `pulumi up` with the variable
    exported runs it: a RunError with the refusal, and no resource registered."""
    monkeypatch.setenv(ONLY_ENTRIES, "train-resnet")
    monkeypatch.setenv(TARGETED_RUN, TOKEN)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: dry_run)
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        run_program(dev_stack_config(), stack="dev", mocks=mocks)
    assert str(info.value).startswith("kns-platform: invalid configuration, 1 problem; nothing was applied:\n"
                                      f"  - {ONLY_ENTRIES}: is set (train-resnet), but this run was not started by")
    assert [r for r in mocks.resources if r.type != "pulumi:pulumi:Stack"] == []


def test_plans_to_register_refuses_without_kns():
    _, plans = load_stack(ROOT, "dev")
    with pytest.raises(ConfigError, match=f"{ONLY_ENTRIES}: is set \\(train-resnet,nope\\), but this run"):
        plans_to_register(plans, {ONLY_ENTRIES: "train-resnet,nope", TARGETED_RUN: TOKEN})
