"""`./kns preview ENTRY...`: a real, targeted `pulumi preview` on a copy of the dev stack
after `pulumi up`, as in a pull request; and what it refuses before the engine starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pulumi
import pytest
import yaml

from config.errors import ConfigError
from config.invocation import TARGETED_RUN
from kns_cli import cli
from kns_cli import preview as preview_module
from kns_cli.stack import load_stack
from kns_testing import tokens
from kns_testing.engine import PASSPHRASE, Project  # a copy of the dev stack through the real engine
from kns_testing.program import PROJECT_FILES, ROOT, built_toolchain, dev_stack_config, engine_project, run_program
from plan import targeting
from plan.targeting import ONLY_ENTRIES, entry_urns, plans_to_register
from plan.stackplan import plan_stack

KNS = ROOT / "kns"
SUMMARY = preview_module.summary_module()


def kns_preview(project: Project, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(KNS), "preview", "--project-dir", str(project.root), *args], env=project.env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    """The dev stack, applied (render mode), then changed in two entries and given a new one."""
    root = tmp_path_factory.mktemp("targeted") / "kns-platform"
    project = Project(root, engine_project(root, built_toolchain(), PASSPHRASE,
                                           files=(*PROJECT_FILES, "Pulumi.dev.yaml")))

    def queued(config):  # a queued entry, whose LocalQueue is a child no --target URN names
        config["kns:queueing"] = {**config.get("kns:queueing", {}), "enabled": True, "install": False}
        config["kns:queues"] = [*config.get("kns:queues", []),
                                *({"name": name, "quota": {"vcluster": {"cpu": 4, "memory": "8Gi"}}}
                                  for name in ("first", "second"))]
        config["kns:jobs"].append({"name": "queued", "image": "busybox:1.37", "cpu": 1, "memory": 256,
                                   "pool": "vcluster", "queue": "first"})

    project.edit_config(queued)
    project.pulumi("stack", "init", "dev")
    project.pulumi("up", "--yes", "--skip-preview")

    def change(config):
        next(j for j in config["kns:jobs"] if j["name"] == "train-resnet")["cpu"] = 12
        next(j for j in config["kns:jobs"] if j["name"] == "queued")["queue"] = "second"
        next(s for s in config["kns:schedules"] if s["name"] == "weekly-finetune")["cpu"] = 3
        config["kns:jobs"].append({"name": "added-smoke", "image": "busybox:1.37", "cpu": 1, "memory": 256})
        config["kns:jobs"].append({"name": "added-other", "image": "busybox:1.37", "cpu": 1, "memory": 128})

    project.edit_config(change)
    return project


def changes(steps: list[dict]) -> dict[str, tuple]:
    """URN -> (op, changed fields) of every step that changes something."""
    return {s["urn"]: (s["op"], tuple(sorted(s.get("detailedDiff") or {}))) for s in steps if s["op"] != "same"}


def owner(urn: str, steps: list[dict]) -> str:
    parents = {s["urn"]: (s.get("newState") or s.get("oldState") or {}).get("parent") for s in steps}
    found = SUMMARY.entry_of(urn, {k: v for k, v in parents.items() if v})
    return found[0] if found else SUMMARY.PLATFORM


def test_the_targets_are_the_urns_the_engine_gave_the_entry(project):
    """Read from the state of the applied stack, before any change: the derived URNs are exact."""
    state = json.loads(project.pulumi("stack", "export").stdout)["deployment"]["resources"]
    in_state = {r["urn"] for r in state if "train-resnet" in r["urn"].rsplit("::", 1)[-1]
                and r["type"] != "pulumi:providers:kubernetes"}
    cfg, plans = load_stack(ROOT, "dev")
    assert set(entry_urns(plan_stack(cfg, plans), ["train-resnet"], "dev", "kns-platform")) == in_state
    assert len(in_state) == 10


def test_targeted_preview_shows_exactly_the_named_entries_changes(project):
    done = kns_preview(project, "train-resnet", "queued", "--format", "json")
    assert done.returncode == 0, done.stderr
    targeted = json.loads(done.stdout)["steps"]
    full = json.loads(project.pulumi("preview", "--json", "--show-sames").stdout)["steps"]

    # The full preview sees the three changed entries and both new ones ...
    assert {owner(urn, full) for urn in changes(full)} == {"train-resnet", "queued", "weekly-finetune",
                                                            "added-smoke", "added-other"}
    # ... the targeted one only the named entries', and exactly as the full preview shows them,
    named = {u: c for u, c in changes(full).items() if owner(u, full) in ("train-resnet", "queued")}
    assert changes(targeted) == named
    job = f"urn:pulumi:dev::kns-platform::{tokens.JOB}$kubernetes:batch/v1:Job::train-resnet"
    assert changes(targeted)[job][0] == "replace"
    # the LocalQueue included (a dependent of the entry, not one of the --target URNs).
    queue = f"urn:pulumi:dev::kns-platform::{tokens.JOB}$kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue::queued-queue"
    assert changes(targeted)[queue] == ("update", ("spec.clusterQueue",))


def test_a_new_entry_is_previewed_with_its_summary(project):
    done = kns_preview(project, "added-smoke", "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert "### Job `added-smoke`: `+` 10 to create" in done.stdout
    assert "**Totals:** `+` 10 to create (10 resources)" in done.stdout
    assert "| `+` create | `LimitRange` | `kns-added-smoke/kns-defaults` |  |" in done.stdout
    for other in ("train-resnet", "weekly-finetune", "added-other", "### Platform"):
        assert other not in done.stdout
    assert "**Not previewed** (`--target`): the platform" in done.stdout and "and the 9 other entries" in done.stdout


def test_on_a_terminal_the_preview_is_aligned_rows_with_the_cluster_s_names(project):
    done = kns_preview(project, "added-smoke", "train-resnet")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Preview of stack dev, 2 entries: 8 to create, 2 to update, 1 to replace, 5 unchanged"
    assert lines[1].split() == ["ENTRY", "OP", "KIND", "NAME", "CHANGED", "FIELDS"]
    assert any(re.fullmatch(r"train-resnet +\+- replace +Job +kns-train-resnet/train-resnet +"
                            r"spec\.template\.spec\.containers\[0\]\.resources\.\{limits\.cpu, requests\.cpu\}", line)
               for line in lines), done.stdout
    assert any(re.fullmatch(r"added-smoke +\+ create +LimitRange +kns-added-smoke/kns-defaults", line) for line in lines)
    rows = [line for line in lines[2:] if line.startswith(("added-smoke ", "train-resnet "))]
    assert len(rows) == 11
    for column in ("KIND", "NAME"):  # aligned: every row's cell starts under its heading
        start = lines[1].index(column)
        assert all(row[start - 2:start] == "  " and row[start] != " " for row in rows), column
    assert "`" not in done.stdout and "|" not in done.stdout  # no Markdown on a terminal
    assert lines[-1].startswith("Not previewed: the platform and the 8 other entries")


def test_an_entry_in_a_new_queue_is_one_message_naming_what_it_needs(project):
    """Its LocalQueue depends on a ClusterQueue the stack does not have yet: the engine says
    so once per dependent object; the user gets one line and no table."""
    original = project.stack_file.read_text()

    def third(config):
        config["kns:queues"].append({"name": "third", "quota": {"vcluster": {"cpu": 2, "memory": "4Gi"}}})
        config["kns:jobs"].append({"name": "in-third", "image": "busybox:1.37", "cpu": 1, "memory": 256,
                                   "pool": "vcluster", "queue": "third"})
    project.edit_config(third)
    try:
        done = kns_preview(project, "in-third")
    finally:
        project.stack_file.write_text(original)
    assert done.returncode == 1
    assert done.stdout == ""
    message = [line for line in done.stderr.splitlines() if not line.startswith(("kns preview: stack ", "toolchain: "))]
    assert message == [
        "kns preview: the named entries depend on the ClusterQueue of kns:queues[third], which the stack does not have yet "
        "(a new queue, pool or cluster, or a stack never applied): preview the whole stack with `make preview`, and "
        "apply it with `make up` before previewing entries one by one"], done.stderr


def test_a_policy_violation_of_a_named_entry_fails_before_the_engine_under_its_path(project):
    """The program and `./kns preview`'s own check run the pack's rules (docs/policy.md): the
    entry's violation is a config error naming it and the policy, and no preview runs."""
    original = project.stack_file.read_text()
    project.edit_config(lambda config: config["kns:jobs"].append(
        {"name": "added-elsewhere", "image": "registry.example.com/tool:1", "cpu": 1, "memory": 256}))
    try:
        done = kns_preview(project, "added-elsewhere")
    finally:
        project.stack_file.write_text(original)
    assert done.returncode == 1
    assert ("kns:jobs[added-elsewhere]: containers[0] 'added-elsewhere' image 'registry.example.com/tool:1' "
            "(registry.example.com/tool) is not from an allowed registry") in done.stderr
    assert "(policy allowed-registries, docs/policy.md)" in done.stderr
    assert "to create" not in done.stdout


def test_a_plain_preview_with_the_entries_exported_is_refused(project):
    """Issue 33: KNS_PREVIEW_ENTRIES exported in a shell (even with a KNS_TARGETED_RUN token)
    must not narrow a plain `pulumi preview` (every other entry would show as a delete) nor
    reach a `pulumi up`: the program refuses both before it registers anything, with one
    line that names the variable, and the stack keeps every resource. `./kns preview`, which
    passes the token's --message, is honoured (the tests above)."""
    def in_state() -> set[tuple[str, str]]:
        resources = json.loads(project.pulumi("stack", "export").stdout)["deployment"]["resources"]
        return {(r["urn"], r.get("id", "")) for r in resources}

    before = in_state()
    env = {**project.env, ONLY_ENTRIES: "train-resnet", TARGETED_RUN: "0123456789abcdef0123456789abcdef"}
    refusal = (f"{ONLY_ENTRIES}: is set (train-resnet), but this run was not started by ./kns (no {TARGETED_RUN} "
               f"token carried by its pulumi command's --message), so it is refused")
    for args in (("preview",), ("preview", "--message", "kns-targeted:a-token-of-another-run"),
                 ("up", "--yes", "--skip-preview"), ("up", "--yes")):
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=project.root, env=env,
                              capture_output=True, text=True, timeout=600)
        output = done.stdout + done.stderr
        assert done.returncode != 0, (args, output)
        assert refusal in output, (args, output)
        assert f"Unset {ONLY_ENTRIES}, or run ./kns preview train-resnet" in output, (args, output)
        assert "to delete" not in output and "deleted" not in output and "Traceback" not in output, (args, output)
    assert in_state() == before


@pytest.fixture
def no_engine(monkeypatch):
    """Fails the test if `kns preview` starts any process (toolchain, pulumi)."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"the engine was started: {args}")
    monkeypatch.setattr(preview_module.subprocess, "run", refuse)


def test_an_unknown_entry_is_a_usage_error_with_a_suggestion(no_engine, capsys):
    assert cli.main(["preview", "train-resnet", "train-resnt"]) == 2
    err = capsys.readouterr().err
    assert 'kns preview: no entry named "train-resnt"; did you mean "train-resnet"?' in err


def test_a_config_error_exits_1_before_the_engine(no_engine, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "broken-stack")  # a stack other than dev needs its own
    config = dev_stack_config()
    next(j for j in config["jobs"] if j["name"] == "train-resnet")["memory"] = "12Qi"
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.broken.yaml").write_text(yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}}))
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    assert cli.main(["preview", "--project-dir", str(tmp_path), "--stack", "broken", "train-resnet"]) == 1
    err = capsys.readouterr().err
    assert "kns-platform: invalid configuration, 1 problem; nothing was applied:" in err
    assert 'kns:jobs[train-resnet].memory: "12Qi" is not a quantity' in err


def test_the_program_narrows_only_to_known_entries(monkeypatch):
    monkeypatch.setattr(targeting, "started_by_kns", lambda environ: True)  # tests/test_invocation.py
    _, plans = load_stack(ROOT, "dev")
    environ = {ONLY_ENTRIES: "hourly-sync, train-resnet"}
    assert [p.entry.name for p in plans_to_register(plans, environ)] == ["train-resnet", "hourly-sync"]
    assert plans_to_register(plans, {}) == plans
    assert plans_to_register(plans, {ONLY_ENTRIES: ""}) == []  # ./kns up of removed entries only
    with pytest.raises(ConfigError, match=f'{ONLY_ENTRIES}: no entry named "nope"'):
        plans_to_register(plans, {ONLY_ENTRIES: "train-resnet,nope"})


def test_the_program_registers_only_the_named_entries_in_a_preview(monkeypatch):
    """__main__.py under the recording mocks, as the engine runs it for `kns preview`: the
    platform and the named entries only, and the stack outputs of every entry."""
    monkeypatch.setenv(ONLY_ENTRIES, "train-resnet,hourly-sync")
    monkeypatch.setattr(targeting, "started_by_kns", lambda environ: True)  # as under `./kns preview`
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    run = run_program(dev_stack_config(), stack="dev")
    entries = {r.name for r in run.resources if r.type in (tokens.JOB, tokens.SCHEDULE)}
    assert entries == {"train-resnet", "hourly-sync"}
    assert run.of_type(tokens.KNS_CLUSTER) and run.of_type(tokens.PACKING_SCHEDULER)
    full = run_program(dev_stack_config(), stack="dev")  # outputs do not depend on what a preview registers
    assert run.outputs == full.outputs and "nightly-report" in json.dumps(full.outputs)


def test_make_preview_with_entries_runs_kns_preview():
    def dry(*args: str) -> str:
        return subprocess.run(["make", "-n", "-C", str(ROOT), "preview", *args], capture_output=True, text=True,
                              check=True).stdout

    assert "./kns preview --stack dev train-resnet hourly-sync" in dry("ENTRIES=train-resnet hourly-sync")
    assert "./kns preview --stack prod a" in dry("ENTRIES=a", "KNS_STACK=prod")
    assert "scripts/up.sh preview" in dry() and "kns preview" not in dry()


def documented_preview() -> tuple[str, int, int]:
    doc = ROOT / "docs" / "cli.md"
    text = doc.read_text()
    start = text.index("```console\n$ ./kns preview train-resnet added-smoke\n") + len("```console\n")
    return text, start, text.index("```\n", start)


def test_the_documented_preview_is_this_run(project):
    """docs/cli.md's `./kns preview train-resnet added-smoke` session, from this module's
    stack (paths under the home directory shown as ~; KNS_WRITE_DOCS=1 rewrites it)."""
    done = kns_preview(project, "train-resnet", "added-smoke")
    printed = (f"$ ./kns preview train-resnet added-smoke\n{done.stderr}{done.stdout}$ echo $?\n{done.returncode}\n"
               .replace(str(Path.home()), "~"))
    text, start, end = documented_preview()
    if os.environ.get("KNS_WRITE_DOCS") == "1":
        (ROOT / "docs" / "cli.md").write_text(text[:start] + printed + text[end:])
        text, start, end = documented_preview()
    assert text[start:end] == printed
