"""Entry stacks (`kns:state.entryStacks`, docs/entry-stacks.md): which Pulumi stack holds
what, what the program registers in each, and how `./kns` and `make` run them.

The engine runs that prove the layout on a cluster (a stack split with `./kns restack`
keeps every object, `./kns up` applies one entry in its entry stack) are in
tests/test_drift.py; the engine facts it relies on (an entry stack's secrets, its config
file) are checked here with the real CLI.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Optional

import pytest
import yaml

from config import fingerprint
from config.errors import ConfigError
from config.invocation import TARGETED_RUN
from config.rules import ENTRY_STACK_NAME, ENTRY_STACKS_MAX
from config.source import read_stack_file
from kns_cli import cli, layout
from kns_cli import engine_run as engine_run_module
from kns_cli import preview as preview_module
from kns_cli import up as up_module
from kns_cli.passphrase import DEV_PASSPHRASE
from kns_cli.stack import UsageError, load_stack
from kns_cli.state import StackState
from kns_testing import tokens
from kns_testing.program import ROOT, RecordingMocks, built_toolchain, dev_stack_config, run_program
from kns_testing.sites import SECRETS, site
from plan import digests, stacks
from plan.outputs import ENTRY_OUTPUTS, merge_outputs
from plan.targeting import ONLY_ENTRIES, entry_urns
from plan.stackplan import plan_stack

SPLIT = 3


def split_config(**over) -> dict:
    return {**dev_stack_config(), "state": {"entryStacks": SPLIT}, **over}


# ---- plan/stacks.py ------------------------------------------------------------------------


def test_a_stack_name_says_its_role():
    assert stacks.role("dev") == stacks.Role("dev")
    assert stacks.role("dev.entries-2") == stacks.Role("dev", 2)
    assert stacks.role("team.prod.entries-10") == stacks.Role("team.prod", 10)
    # Not the names make and ./kns give entry stacks: ordinary stacks.
    for name in ("dev.entries-02", "dev.entries-", "dev-entries-1", "dev.entries-1x"):
        assert stacks.role(name) == stacks.Role(name), name
    assert stacks.role("dev.entries-2").name == "dev.entries-2"
    assert stacks.stacks("dev", None) == ["dev"]
    assert stacks.stacks("dev", 2) == ["dev", "dev.entries-0", "dev.entries-1"]
    assert stacks.config_arguments("dev") == []
    assert stacks.config_arguments("a.b.entries-1") == ["--config-file", "Pulumi.a.b.yaml"]


def test_an_entry_keeps_its_entry_stack_on_every_machine_and_the_stacks_fill_evenly():
    """The hash is of the name alone (sha256, not Python's per-process hash): these are the
    stacks existing states were written with; a change here would strand entries."""
    names = ("train-resnet", "hourly-sync", "new-0", "t-00", "s-03")
    assert [stacks.index_of(name, 10) for name in names] == [2, 5, 1, 8, 4]
    assert [stacks.index_of(name, 256) for name in names] == [58, 35, 145, 100, 20]
    pinned = {"train-resnet": 0, "vcluster-smoke": 0, "genomics-align": 0, "hourly-sync": 1, "weekly-finetune": 1,
              "etl-nightly-backfill": 2, "nightly-report": 2}
    assert {name: stacks.index_of(name, SPLIT) for name in pinned} == pinned
    spread = Counter(stacks.index_of(f"cpu-{i}", 10) for i in range(2000))
    assert set(spread) == set(range(10)) and max(spread.values()) < 1.3 * 200 and min(spread.values()) > 0.7 * 200
    assert all(stacks.holder("dev", f"e-{i}", None) == "dev" for i in range(50))
    grouped = stacks.group(["hourly-sync", "train-resnet", "nightly-report", "vcluster-smoke"], "dev", SPLIT)
    assert grouped == {"dev.entries-0": ["train-resnet", "vcluster-smoke"], "dev.entries-1": ["hourly-sync"],
                       "dev.entries-2": ["nightly-report"]}


# ---- config --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, ENTRY_STACKS_MAX + 1, "3", True, 2.5, None])
def test_a_bad_entry_stack_count_is_reported_at_its_path(value):
    raw = split_config(state={"entryStacks": value})
    with pytest.raises(Exception) as info:
        run_program(raw, stack="dev")
    assert "kns:state.entryStacks" in str(info.value), str(info.value)
    assert "Traceback" not in str(info.value)


@pytest.mark.parametrize("value,read", [(4, 4), (1, 1), (0, None), ("3", None), (True, None), (None, None)])
def test_make_reads_the_count_as_the_program_does(tmp_path, value, read):
    """scripts/up.sh runs the entry stacks `kns_cli.layout` reads from the stack file: a value
    the program refuses runs the stack alone, whose program then reports it."""
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"kns:state": {"entryStacks": value}}}))
    assert layout.declared_entry_stacks(tmp_path, "dev") == read
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"kns:cluster": {"name": "x"}}}))
    assert layout.declared_entry_stacks(tmp_path, "dev") is None


def test_make_leaves_a_bad_count_to_the_program_and_stops_on_misplaced_entries(monkeypatch, tmp_path, capsys):
    """`make up`'s check (kns_cli.layout check): with a kns:state the program refuses it
    reads no state (the stack's run reports the value with every other problem); with a
    valid one it exits 3 while an entry is elsewhere."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"kns:state": {"entryStacks": "three"}}}))
    monkeypatch.setattr(layout, "read_states", lambda *a: pytest.fail("read the state"))
    assert layout.main(["check", "dev"]) == 0
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"kns:state": {"entryStacks": 3}}}))
    monkeypatch.setattr(layout, "read_states", lambda *a: {"dev": state({"train-resnet": "dev"})})
    assert layout.main(["check", "dev"]) == layout.MISPLACED
    assert "train-resnet (dev -> dev.entries-0)" in capsys.readouterr().err
    monkeypatch.setattr(layout, "read_states", lambda *a: {"dev": state({}),
                                                          "dev.entries-0": state({"train-resnet": "dev.entries-0"})})
    assert layout.main(["check", "dev"]) == 0
    assert layout.main(["stacks", "dev"]) == 0 and capsys.readouterr().out.split() == stacks.stacks("dev", 3)
    assert layout.main(["stacks", "dev.entries-1"]) == 2


def test_unknown_state_keys_are_reported_and_the_section_is_shared(tmp_path):
    with pytest.raises(Exception) as info:
        run_program(split_config(state={"entryStacks": 2, "stacks": 3}), stack="dev")
    assert "kns:state.stacks" in str(info.value)
    before = fingerprint.shared_digests({"kns:state": {"entryStacks": 2}})
    after = fingerprint.shared_digests({"kns:state": {"entryStacks": 3}})
    assert [key for key in before if before[key] != after[key]] == ["kns:state"]


def test_an_entry_stack_name_is_not_a_stack_for_kns(tmp_path):
    with pytest.raises(UsageError) as info:
        load_stack(ROOT, "dev.entries-0")
    assert str(info.value) == f"--stack dev.entries-0 {ENTRY_STACK_NAME.message}"


# ---- the program in each role (Pulumi mocks) -----------------------------------------------


def objects(run) -> dict[tuple[str, str], dict]:
    """Every Kubernetes object the run registers (not its providers), by (type, name), with its inputs."""
    found = {(r.type, r.name): r.inputs for r in run.kubernetes if r.type != "pulumi:providers:kubernetes"}
    assert len(found) == len([r for r in run.kubernetes if r.type != "pulumi:providers:kubernetes"])
    return found


ENTRY_COMPONENTS = {tokens.JOB, tokens.SCHEDULE, tokens.JOB_NAMESPACE}


def test_the_stack_holds_the_platform_and_each_entry_stack_its_own_entries():
    """The stacks partition the unsplit stack's objects: the platform's in the stack, each
    entry's in the entry stack its name hashes to, every one with the same inputs."""
    whole = run_program(dev_stack_config(), stack="dev")
    platform = run_program(split_config(), stack="dev")
    parts = [run_program(split_config(), stack=f"dev.entries-{i}") for i in range(SPLIT)]
    _, plans = load_stack(ROOT, "dev")
    names = {plan.entry.name for plan in plans}
    assert not ENTRY_COMPONENTS & {r.type for r in platform.resources}
    held: dict[str, int] = {}
    for i, part in enumerate(parts):
        here = {r.name for r in part.resources if r.type in (tokens.JOB, tokens.SCHEDULE)}
        assert here and all(stacks.index_of(name, SPLIT) == i for name in here), (i, here)
        held.update({name: i for name in here})
        # Its entries, and the cluster's provider at its root, named as the platform names it.
        assert {r.type for r in part.resources if not r.type.startswith("kubernetes:")} <= \
            ENTRY_COMPONENTS | {"pulumi:pulumi:Stack", "pulumi:providers:kubernetes"}
        assert [p.name for p in part.of_type("pulumi:providers:kubernetes")] == ["kns-dev-kubernetes"]
        assert all(r.provider and "::kns-dev-kubernetes::" in r.provider for r in part.kubernetes
                   if r.type != "pulumi:providers:kubernetes")
    assert set(held) == names and len(names) == 7
    split_objects = {key: value for part in parts for key, value in objects(part).items()}
    assert sum(len(objects(part)) for part in parts) == len(split_objects) > 30
    everything = objects(whole)
    assert objects(platform).items() <= everything.items()
    assert split_objects == {key: value for key, value in everything.items() if key not in objects(platform)}


def test_the_outputs_of_the_stacks_merge_into_the_unsplit_stacks():
    whole = run_program(dev_stack_config(), stack="dev").outputs
    platform = run_program(split_config(), stack="dev").outputs
    parts = [run_program(split_config(), stack=f"dev.entries-{i}").outputs for i in range(SPLIT)]
    # Each entry stack also records what it registered, for the next full `make up` (plan/digests.py).
    assert all(set(part) == {*ENTRY_OUTPUTS, digests.ENTRY_STACK_OUTPUT} for part in parts)
    assert {digests.CHECKED_OUTPUT, digests.DIGESTS_OUTPUT} <= set(platform)
    assert platform["namespaces"] == {} and fingerprint.OUTPUT in platform
    merged = merge_outputs(platform, parts)

    def runs_aside(outputs):  # nextRuns moves with the clock between two program runs
        return {**outputs, "schedules": {k: {**v, "nextRuns": None} for k, v in outputs["schedules"].items()},
                fingerprint.OUTPUT: None}
    assert runs_aside(merged) == runs_aside(whole)
    assert merged["namespaces"] == whole["namespaces"] and len(whole["namespaces"]) == 7
    # The platform exports `queues` (docs/outputs.md); no entry stack does.
    assert set(merged["queues"]) == {"research", "gpu"} and all("queues" not in part for part in parts)


@pytest.mark.parametrize("stack,config,said", [
    ("dev.entries-3", split_config(), "its entry stacks are dev.entries-0 to dev.entries-2"),
    ("dev.entries-0", dev_stack_config(), "it sets no kns:state.entryStacks"),
])
def test_an_entry_stack_the_config_does_not_have_is_refused(stack, config, said):
    mocks = RecordingMocks()
    with pytest.raises(Exception) as info:
        run_program(config, stack=stack, mocks=mocks)
    assert f"stack {stack} is not an entry stack of this stack (dev): {said}" in str(info.value)
    assert not [r for r in mocks.resources if r.type.startswith("kubernetes:")]


def test_on_a_site_an_entry_stack_reaches_the_workers_through_their_providers():
    """An entry's copies on the workers (its namespace, LimitRange, queue...) go through
    the workers' providers, registered in the entry stack as the platform stack names them."""
    config = {**site(), "state": {"entryStacks": 2}}

    def placed(run) -> set[tuple[str, str, str]]:
        return {(r.type, r.name, r.provider.split("::")[3]) for r in run.kubernetes
                if r.type != "pulumi:providers:kubernetes"}
    whole = run_program(site(), secret_keys=SECRETS)
    platform = run_program(config, secret_keys=SECRETS)
    split = [run_program(config, secret_keys=SECRETS, stack=f"test.entries-{i}") for i in range(2)]
    held = set().union(*(placed(part) for part in split))
    workers = {w["name"] for w in site()["workers"]}
    assert {provider for *_, provider in held} == {f"{site()['cluster']['name']}-kubernetes"} | \
        {f"{w}-kubernetes" for w in workers}
    assert held == placed(whole) - placed(platform) and held
    for part in split:
        assert {p.name for p in part.of_type("pulumi:providers:kubernetes")} == \
            {f"{site()['cluster']['name']}-kubernetes"} | {f"{w}-kubernetes" for w in workers}
        assert not part.of_type(tokens.WORKER)


# ---- ./kns and make -------------------------------------------------------------------------


def state(entries: dict[str, str]) -> StackState:
    return StackState(None, {name: [f"urn:pulumi:{stack}::kns-platform::{tokens.JOB}::{name}", "child"]
                             for name, stack in entries.items()})


def test_misplaced_entries_are_moved_forward_and_never_back():
    states = {"dev": state({"train-resnet": "dev", "hourly-sync": "dev"}),
              "dev.entries-0": state({"nightly-report": "dev.entries-0"})}
    moves = layout.misplaced(states, "dev", SPLIT)
    assert {(m.entry, m.source, m.dest, m.root) for m in moves} == {
        ("train-resnet", "dev", "dev.entries-0", f"urn:pulumi:dev::kns-platform::{tokens.JOB}::train-resnet"),
        ("hourly-sync", "dev", "dev.entries-1", f"urn:pulumi:dev::kns-platform::{tokens.JOB}::hourly-sync"),
        ("nightly-report", "dev.entries-0", "dev.entries-2",
         f"urn:pulumi:dev.entries-0::kns-platform::{tokens.JOB}::nightly-report")}
    said = layout.problem(moves, "dev", SPLIT)
    assert said.startswith("kns: kns:state.entryStacks is 3, and 3 entries are in another stack: ")
    assert "Run `./kns restack`" in said and "nothing on the cluster changes" in said
    assert layout.problem(layout.misplaced({"dev": state({"train-resnet": "dev"}),
                                            "dev.entries-0": state({"vcluster-smoke": "dev.entries-0"})},
                                           "dev", SPLIT), "dev", SPLIT) is not None
    back = layout.misplaced({"dev.entries-0": state({"train-resnet": "dev.entries-0"})}, "dev", None)
    assert "its config sets no kns:state.entryStacks: kns:state cannot be removed" in layout.problem(back, "dev", None)
    assert layout.problem([], "dev", SPLIT) is None
    # An interrupted move: the entry in both stacks. Named, never moved again.
    twice = layout.misplaced({"dev": state({"train-resnet": "dev"}),
                              "dev.entries-0": state({"train-resnet": "dev.entries-0"})}, "dev", SPLIT)
    assert [(m.entry, m.already) for m in twice] == [("train-resnet", True)]
    assert "1 entry is in the state of two stacks" in layout.problem(twice, "dev", SPLIT)
    assert "train-resnet (dev and dev.entries-0)" in layout.problem(twice, "dev", SPLIT)
    assert "`./kns restack` removes the first from its stack's state" in layout.problem(twice, "dev", SPLIT)


def test_previews_of_several_stacks_combine_into_one():
    one = ({"steps": [{"op": "create"}], "diagnostics": [], "changeSummary": {"create": 1, "same": 4}}, 0)
    two = ({"steps": [{"op": "same"}], "policyViolations": [{"policyName": "p"}], "changeSummary": {"same": 2}}, 1)
    merged, status = preview_module.combine([one, two])
    assert status == 1 and merged["changeSummary"] == {"create": 1, "same": 6}
    assert merged["steps"] == [{"op": "create"}, {"op": "same"}] and merged["policyViolations"] == [{"policyName": "p"}]
    assert preview_module.combine([one]) == one


def split_project(tmp_path: Path) -> Path:
    for name in ("Pulumi.yaml", "jobs"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, tmp_path / name)
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["kns:state"] = {"entryStacks": SPLIT}
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return tmp_path


def test_kns_up_applies_each_entry_in_the_entry_stack_that_holds_it(monkeypatch, tmp_path):
    project = split_project(tmp_path)
    digest = fingerprint.platform_digest(read_stack_file(project, "dev").config, project)
    cfg, plans = load_stack(project, "dev")
    applied = entry_urns(plan_stack(cfg, plans), ["train-resnet"], "dev.entries-0", "kns-platform")
    states = {"dev": StackState(digest, {}),
              "dev.entries-0": StackState(None, {"train-resnet": applied[:1], "gone-job": ["urn:old", "urn:old-child"]}),
              "dev.entries-1": StackState(None, {"hourly-sync": ["urn:h1"]})}
    assert stacks.index_of("gone-job", SPLIT) == 0
    read: list[str] = []
    runs: list[tuple[str, list[str], dict]] = []
    monkeypatch.setattr(preview_module, "toolchain", lambda: "/nonexistent/bin")
    monkeypatch.setattr(up_module, "export_state", lambda _dir, stack, _env: read.append(stack) or states[stack])
    # Where the entries are is checked first (test_entry_stacks.py, the hand-moved entry).
    monkeypatch.setattr(up_module.layout, "check_placement", lambda *a: None)

    def run(action, stack, command, **kwargs):
        runs.append((stack, list(command), dict(kwargs["env"])))
        return 0
    monkeypatch.setattr(up_module.engine_run, "run", run)
    out, err = io.StringIO(), io.StringIO()
    assert up_module.run_up(project, plan_stack(cfg, plans), "dev", ["hourly-sync", "train-resnet", "gone-job"], {},
                            out=out, err=err) == 0
    assert read == ["dev", "dev.entries-0", "dev.entries-1"]  # never another entry stack
    assert [stack for stack, *_ in runs] == ["dev.entries-0", "dev.entries-1"]
    for stack, command, env in runs:
        assert command[command.index("--stack") + 1] == stack
        assert command[command.index("--config-file") + 1] == "Pulumi.dev.yaml"
        assert env[TARGETED_RUN] and env["PULUMI_CONFIG_PASSPHRASE"] == DEV_PASSPHRASE
    (_, first, env0), (_, second, env1) = runs
    targets = [first[i + 1] for i, a in enumerate(first) if a == "--target"]
    assert targets == applied + ["urn:old", "urn:old-child"]
    assert all(t.startswith("urn:pulumi:dev.entries-0::") for t in targets[:-2])
    assert env0[ONLY_ENTRIES] == "train-resnet" and env1[ONLY_ENTRIES] == "hourly-sync"
    assert "kns up: stack dev.entries-0, 2 entries (train-resnet, gone-job (removed))" in err.getvalue()
    assert "kns up: stack dev.entries-1, 1 entry (hourly-sync)" in err.getvalue()


def test_kns_up_on_a_split_stack_is_refused_by_the_stacks_own_record(monkeypatch, tmp_path):
    project = split_project(tmp_path)
    states = {"dev": StackState({"kns:state": "0" * 64}, {})}  # entry stacks not made yet: never read
    monkeypatch.setattr(preview_module, "toolchain", lambda: "/nonexistent/bin")
    monkeypatch.setattr(up_module, "export_state", lambda _dir, stack, _env: states[stack])
    # Where the entries are is checked first (test_entry_stacks.py, the hand-moved entry).
    monkeypatch.setattr(up_module.layout, "check_placement", lambda *a: None)
    monkeypatch.setattr(up_module.engine_run, "run", lambda *a, **k: pytest.fail("the engine ran"))
    cfg, plans = load_stack(project, "dev")
    with pytest.raises(up_module.UpRefused) as info:
        up_module.run_up(project, plan_stack(cfg, plans), "dev", ["train-resnet"], {}, out=io.StringIO(), err=io.StringIO())
    assert "kns:state" in str(info.value)


def test_make_outputs_merges_the_stacks_outputs(monkeypatch, tmp_path):
    answers = {"dev": {"namespaces": {}, "schedules": {}, "nodePools": {"a": 1}},
               "dev.entries-0": {"namespaces": {"b": "kns-b"}, "schedules": {}},
               "dev.entries-1": {"namespaces": {"a": "kns-a"}, "schedules": {"a": {"schedule": "* * * * *"}}}}
    monkeypatch.setattr(layout, "existing_stacks", lambda *a: list(answers))

    monkeypatch.setattr(layout.subprocess, "run", backend(answers))
    assert layout.stack_outputs(tmp_path, "dev", {}) == {
        "namespaces": {"a": "kns-a", "b": "kns-b"}, "schedules": {"a": {"schedule": "* * * * *"}},
        "nodePools": {"a": 1}, "lastUpdates": {stack: SUCCEEDED for stack in answers}}


SUCCEEDED = {"kind": "update", "result": "succeeded", "endTime": "2026-11-29T04:00:00Z"}


def backend(answers: dict, history: Optional[dict] = None):
    """A stand-in for `pulumi stack output` and `pulumi stack history` of each stack."""
    def run(command, **kwargs):
        stack = command[command.index("--stack") + 1]
        answer = [(history or {}).get(stack, SUCCEEDED)] if "history" in command else answers[stack]
        return subprocess.CompletedProcess(command, 0, json.dumps(answer), "")
    return run


def test_make_outputs_says_when_a_stacks_last_update_failed(monkeypatch, tmp_path, capsys):
    """After a failed `make up` the outputs are what the program computed, not what the
    cluster has: they say so, per stack."""
    answers = {"dev": {"namespaces": {"a": "kns-a"}, "schedules": {}}, "dev.entries-0": {"namespaces": {}}}
    monkeypatch.setattr(layout, "existing_stacks", lambda *a: list(answers))
    failed = {"kind": "update", "result": "failed", "endTime": "2026-11-29T04:05:00Z"}
    monkeypatch.setattr(layout.subprocess, "run", backend(answers, {"dev": failed}))
    assert layout.stack_outputs(tmp_path, "dev", {})["lastUpdates"] == {"dev": failed, "dev.entries-0": SUCCEEDED}
    err = capsys.readouterr().err
    assert "the last update of dev did not succeed (failed): its outputs are what its program computed" in err
    assert "run `make up` again" in err


def test_make_outputs_leaves_out_entry_stacks_the_layout_dropped(monkeypatch, tmp_path, capsys):
    """After `entryStacks: 2` -> `1`, a stale `.entries-1` (not yet removed by `./kns
    restack`) would list a removed entry among the namespaces."""
    answers = {"dev": {"namespaces": {}, "schedules": {}},
               "dev.entries-0": {"namespaces": {"b": "kns-b"}, "schedules": {}},
               "dev.entries-1": {"namespaces": {"gone": "kns-gone"}, "schedules": {}}}
    monkeypatch.setattr(layout, "existing_stacks", lambda *a: list(answers))
    monkeypatch.setattr(layout.subprocess, "run", backend(answers))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"kns:state": {"entryStacks": 1}}}))
    assert layout.stack_outputs(tmp_path, "dev", {})["namespaces"] == {"b": "kns-b"}
    assert "left out the outputs of dev.entries-1: not in the layout" in capsys.readouterr().err


# ---- the engine's side: an entry stack's config and secrets (the real CLI) ----------------------


@pytest.fixture(scope="module")
def pulumi_env(tmp_path_factory):
    bin_dir = built_toolchain()
    root = tmp_path_factory.mktemp("entry-stacks")
    (root / "state").mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(root), "PULUMI_BACKEND_URL": f"file://{root / 'state'}",
           "PULUMI_CONFIG_PASSPHRASE": "entry-stacks", "PULUMI_SKIP_UPDATE_CHECK": "true",
           "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}
    project = root / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    return project, env


def test_an_entry_stack_has_no_config_file_and_reads_the_stacks_secrets(pulumi_env):
    project, env = pulumi_env

    def pulumi(*args):
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout
    preview_module.select_stack(project, "prod", env)
    pulumi("config", "set", "--secret", "kns:keycloakClientSecret", "s3cr3t", "--stack", "prod")
    assert "s3cr3t" not in (project / "Pulumi.prod.yaml").read_text()
    preview_module.select_stack(project, "prod.entries-0", env)
    assert sorted(p.name for p in project.glob("Pulumi.*.yaml")) == ["Pulumi.prod.yaml"]
    assert "prod.entries-0" in pulumi("stack", "ls")
    got = pulumi("config", "get", "kns:keycloakClientSecret", "--stack", "prod.entries-0",
                 *stacks.config_arguments("prod.entries-0"))
    assert got.strip() == "s3cr3t"
    preview_module.select_stack(project, "prod.entries-0", env)  # again: selected, nothing written
    assert sorted(p.name for p in project.glob("Pulumi.*.yaml")) == ["Pulumi.prod.yaml"]


def test_restack_removes_the_entry_stacks_a_smaller_layout_dropped_with_the_real_cli(pulumi_env):
    """`./kns restack` after `entryStacks: 3` -> `2`: the emptied `.entries-2` is removed
    from the backend (a dry run says so and removes nothing); the others stay."""
    project, env = pulumi_env
    names = ["shrink", *[f"shrink.entries-{i}" for i in range(3)]]
    for name in names:
        done = subprocess.run(["pulumi", "stack", "init", name, "--non-interactive"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    said = io.StringIO()
    assert layout.restack(project, "shrink", 2, env, dry_run=True, out=said) == []
    assert said.getvalue() == "would remove entry stack shrink.entries-2: kns:state.entryStacks is 2, and it holds nothing\n"
    assert sorted(layout.existing_stacks(project, "shrink", env)) == names[:1] + names[1:]
    assert layout.restack(project, "shrink", 2, env, out=io.StringIO()) == []
    assert sorted(layout.existing_stacks(project, "shrink", env)) == names[:3]


def claim(project: Path, env: dict, stack: str, entry: str) -> str:
    """Put entry `entry` (its component and a child under it) into `stack`'s state, as an
    applied entry or an interrupted `pulumi state move` leaves it; the component's URN."""
    def pulumi(*args, stdin=None):
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=project, env=env, capture_output=True,
                              text=True, timeout=300, input=stdin)
        assert done.returncode == 0, done.stderr
        return done.stdout
    if stack not in layout.existing_stacks(project, stacks.role(stack).base, env):
        pulumi("stack", "init", stack)
    export = json.loads(pulumi("stack", "export", "--stack", stack))
    deployment = export.setdefault("deployment", {})
    resources = deployment.setdefault("resources", [])
    project_name = preview_module.project_name(project)
    root = f"urn:pulumi:{stack}::{project_name}::pulumi:pulumi:Stack::{project_name}-{stack}"
    if not resources:
        resources.append({"urn": root, "custom": False, "type": "pulumi:pulumi:Stack"})
    from plan.identity import JOB_TYPE
    component = f"urn:pulumi:{stack}::{project_name}::{JOB_TYPE}::{entry}"
    resources += [{"urn": component, "custom": False, "type": JOB_TYPE, "parent": root},
                  {"urn": f"urn:pulumi:{stack}::{project_name}::{JOB_TYPE}$kns:test:Part::{entry}-part", "custom": False,
                   "type": "kns:test:Part", "parent": component}]
    deployment.setdefault("manifest", {"time": "2026-11-29T00:00:00Z", "magic": "", "version": ""})
    (project / "state.json").write_text(json.dumps(export))
    pulumi("stack", "import", "--stack", stack, "--file", str(project / "state.json"))
    return component


def test_an_entry_two_states_claim_is_left_to_one_by_restack_with_the_real_cli(pulumi_env):
    """An interrupted move leaves the entry in both states: every engine door refuses
    (./kns up, ./kns preview, make up: `check_placement`), and `./kns restack` removes the
    copy the config does not put there, children and all; the state only."""
    project, env = pulumi_env
    holder = stacks.holder("twice", "train", 2)
    other = next(s for s in ("twice.entries-0", "twice.entries-1") if s != holder)
    claim(project, env, holder, "train")
    claim(project, env, other, "train")
    with pytest.raises(layout.Misplaced) as refused:
        layout.check_placement(project, "twice", 2, env)
    assert f"train ({other} and {holder})" in str(refused.value) and "./kns restack --stack twice" in str(refused.value)
    said = io.StringIO()
    layout.restack(project, "twice", 2, env, out=said)
    assert said.getvalue() == (f"removing entry train from the state of {other}: {holder} holds it too, where the "
                               "config puts it (an interrupted move)\n")
    states = layout.read_states(project, "twice", env, 2)
    assert "train" not in states[other].entries and len(states[holder].entries["train"]) == 2
    assert not [r for r in layout.read_exports(project, "twice", env, 2)[other]["deployment"]["resources"]
                if "train" in r["urn"]]
    layout.check_placement(project, "twice", 2, env)  # one state owns it now


def test_an_entry_moved_by_hand_stops_kns_up_and_preview_before_any_engine(monkeypatch, tmp_path, capsys):
    """`./kns up ENTRY` and `./kns preview ENTRY` look where the entries are first, as
    `make up` does, on the real CLI's states: an entry moved by hand (`pulumi state move`)
    to another entry stack is refused with what to run, exit 3, no engine run started, and
    one state still owns it."""
    (tmp_path / "p").mkdir()
    project = split_project(tmp_path / "p")
    (tmp_path / "state").mkdir()
    env = {"PATH": f"{built_toolchain()}:/usr/bin:/bin", "HOME": str(tmp_path), "PULUMI_SKIP_UPDATE_CHECK": "true",
           "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}", "PULUMI_CONFIG_PASSPHRASE": DEV_PASSPHRASE,
           "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}
    holder = stacks.holder("dev", "train-resnet", SPLIT)
    elsewhere = next(s for s in stacks.stacks("dev", SPLIT)[1:] if s != holder)
    claim(project, env, "dev", "other-entry-kept-out")
    claim(project, env, elsewhere, "train-resnet")
    monkeypatch.setenv("PULUMI_BACKEND_URL", env["PULUMI_BACKEND_URL"])
    ran = []
    monkeypatch.setattr(engine_run_module, "run", lambda *a, **k: ran.append(a) or 0)
    monkeypatch.setattr(preview_module, "run_preview", lambda *a, **k: ran.append(a) or ({}, 0))
    for command in ("up", "preview"):
        assert cli.main([command, "train-resnet", "--project-dir", str(project)]) == layout.MISPLACED
        err = capsys.readouterr().err
        assert f"train-resnet ({elsewhere} -> {holder})" in err and "Run `./kns restack`" in err
    assert ran == []
    owners = [stack for stack, found in layout.read_states(project, "dev", env, SPLIT).items()
              if "train-resnet" in found.entries]
    assert owners == [elsewhere]


def test_kns_restack_help_and_usage(capsys):
    assert cli.main(["restack", "--stack", "dev.entries-1"]) == 2
    assert ENTRY_STACK_NAME.message in capsys.readouterr().err


def test_the_documented_restack_session_is_what_kns_prints(monkeypatch, tmp_path, capsys):
    """docs/entry-stacks.md's worked example: the dev stack applied in one stack, then given
    entryStacks: 3 (the states stand in for the engine's; the lines are the commands')."""
    project = split_project(tmp_path)
    _, plans = load_stack(project, "dev")
    states = {"dev": state({plan.entry.name: "dev" for plan in reversed(plans)})}
    monkeypatch.setattr(layout, "read_states", lambda *a: states)
    monkeypatch.setattr(preview_module, "toolchain", lambda: "/nonexistent/bin")
    monkeypatch.setattr(preview_module, "select_stack", lambda *a, **k: None)
    refused = layout.problem(layout.misplaced(states, "dev", SPLIT), "dev", SPLIT)
    assert cli.main(["restack", "--project-dir", str(project), "--dry-run"]) == 0
    session = f"$ make up\n{refused}\n$ ./kns restack --dry-run\n{capsys.readouterr().out}"
    doc = (ROOT / "docs" / "entry-stacks.md").read_text()
    assert session in doc, session


def test_recover_runs_every_step_on_every_stack_the_stacks_first(monkeypatch, tmp_path):
    from kns_cli import recover as recover_module
    project = split_project(tmp_path)
    cfg, plans = load_stack(project, "dev")
    selected, released, commands = [], [], []
    monkeypatch.setattr(preview_module, "toolchain", lambda: "/nonexistent/bin")
    monkeypatch.setattr(preview_module, "select_stack", lambda _d, stack, _e, create=True: selected.append((stack, create)))
    monkeypatch.setattr(recover_module, "release_lock", lambda _d, _p, stack, _e, _f: released.append(stack))

    def pulumi(args, *_, **__):
        commands.append(list(args))
        return subprocess.CompletedProcess(args, 0, json.dumps({"deployment": {"resources": []}}), "")
    monkeypatch.setattr(recover_module, "pulumi", pulumi)
    assert recover_module.run_recover(project, plan_stack(cfg, plans), "dev", {"PULUMI_BACKEND_URL": "s3://x"}) == 0
    every = stacks.stacks("dev", SPLIT)
    assert selected == [("dev", False)] + [(name, True) for name in every[1:]] and released == every
    for verb in ("up", "preview"):
        ran = [c for c in commands if c[0] == verb]
        assert [c[c.index("--stack") + 1] for c in ran] == every
        assert all(("--config-file" in c) == (c[c.index("--stack") + 1] != "dev") for c in ran)
    assert [c[c.index("--stack") + 1] for c in commands if c[:2] == ["stack", "export"]] == every


def test_layout_init_selects_or_creates_every_stack_it_is_given_in_one_process(monkeypatch, tmp_path):
    """CI's workflow hands `kns_cli.layout init` all entry stacks at once (one Python
    process, not one per stack; `make up` creates them in kns_cli/fullrun.py,
    tests/test_fullrun.py); the other actions take one stack."""
    selected = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preview_module, "select_stack", lambda _d, stack, _e, create=True: selected.append(stack))
    assert layout.main(["init", "prod.entries-0", "prod.entries-1", "prod.entries-2"]) == 0
    assert selected == ["prod.entries-0", "prod.entries-1", "prod.entries-2"]
    with pytest.raises(SystemExit) as refused:
        layout.main(["check", "prod", "prod.entries-0"])
    assert refused.value.code == 2
