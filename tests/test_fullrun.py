"""A full `make up` of a stack split into entry stacks (issue 47; docs/entry-stacks.md, "What
a full `make up` runs"): the digests the program exports and compares (plan/digests.py),
an entry stack planning only its own entries once the platform's run checked the config,
and the run of the entry stacks (kns_cli/fullrun.py): unchanged ones skipped, failed or
interrupted ones never, side by side, each with its own state lock and log.

The engine runs of the orchestration are a stand-in `pulumi` (below) that records each
call and answers from files: what is tested is which stacks run, how and in what order.
Whether a no-change `up` restores an object edited by hand (it does not: the engine diffs
against state) is proven on the real engine and cluster in tests/test_drift.py.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

import pytest
import yaml

from config import fingerprint
from config.loader import check_config
from kns_cli import fullrun
from kns_testing.doors import write_project
from kns_testing.fake_pulumi import Fake, SPLIT, split_config, split_project, stack_calls
from kns_testing.program import ROOT, dev_stack_config, run_program
from plan import digests, planner, stacks


# ---- what the program exports ------------------------------------------------------------------


def test_each_entry_stack_exports_the_digest_the_platforms_run_computed_for_it(monkeypatch):
    platform = run_program(split_config(), stack="dev").outputs
    wanted = platform[digests.DIGESTS_OUTPUT]
    assert sorted(wanted) == [stacks.entry_stack("dev", i) for i in range(SPLIT)]
    assert len(set(wanted.values())) == SPLIT
    monkeypatch.setenv(digests.CHECKED_ENV, platform[digests.CHECKED_OUTPUT])
    for stack, digest in wanted.items():
        assert run_program(split_config(), stack=stack).outputs[digests.ENTRY_STACK_OUTPUT] == digest
    monkeypatch.delenv(digests.CHECKED_ENV)
    stack, digest = next(iter(wanted.items()))
    assert run_program(split_config(), stack=stack).outputs[digests.ENTRY_STACK_OUTPUT] == digest


def test_after_the_platforms_check_an_entry_stack_plans_only_its_own_entries(monkeypatch):
    planned: list[str] = []
    real = planner.plan_workload
    monkeypatch.setattr(planner, "plan_workload", lambda entry, cfg: planned.append(entry.name) or real(entry, cfg))
    platform = run_program(split_config(), stack="dev").outputs
    everyone = sorted(planned)
    assert len(everyone) == 7
    stack = stacks.entry_stack("dev", 1)
    own = sorted(n for n in everyone if stacks.holder("dev", n, SPLIT) == stack)
    assert 0 < len(own) < len(everyone)
    planned.clear()
    monkeypatch.setenv(digests.CHECKED_ENV, platform[digests.CHECKED_OUTPUT])
    run_program(split_config(), stack=stack)
    assert sorted(planned) == own
    # Another config than the one checked: the entry stack checks and plans it all itself.
    planned.clear()
    run_program(split_config(jobs=[{**dev_stack_config()["jobs"][0], "cpu": "3"}, *dev_stack_config()["jobs"][1:]]),
                stack=stack)
    assert len(planned) == len(everyone)


def _digests(stack_config: dict, config: dict) -> dict[str, str]:
    checked = check_config(config, project_dir=ROOT, environ={}, secret_keys=frozenset())
    plans = planner.plan_checked(checked).entries
    return digests.entry_stack_digests(plans, "dev", SPLIT, stack_config, "program")


def test_a_change_of_any_shared_section_runs_every_entry_stack():
    config = split_config()
    stack_config = {f"kns:{k}": v for k, v in config.items()}
    before = _digests(stack_config, config)
    for key in fingerprint.SHARED:
        changed = {**stack_config, key: {"changed": key}}
        after = _digests(changed, config)
        assert all(after[s] != before[s] for s in before), key
    assert _digests(stack_config, config) == before


def test_a_change_of_one_entry_runs_only_the_stack_that_holds_it():
    config = split_config()
    stack_config = {f"kns:{k}": v for k, v in config.items()}
    before = _digests(stack_config, config)
    for index, change in ((0, {"image": "busybox:1.36"}), (1, {"cpu": "3"})):
        edited = copy.deepcopy(config)
        edited["jobs"][index].update(change)
        after = _digests(stack_config, edited)
        holder = stacks.holder("dev", edited["jobs"][index]["name"], SPLIT)
        assert {s for s in before if after[s] != before[s]} == {holder}, change


# ---- the run of the stacks (a stand-in pulumi) ---------------------------------------------------


@pytest.fixture
def fake(tmp_path):
    return Fake(tmp_path)


def ran(calls: list[dict]) -> list[str]:
    return [c["stack"] for c in calls]


def test_unchanged_entry_stacks_are_skipped_in_one_line_each(fake, capsys):
    code, out, calls = fake.run(capsys)
    assert code == 0 and ran(calls) == ["dev"]
    assert [line for line in out.splitlines() if "skipped" in line] == [
        *(f"Update of stack {s}: skipped, unchanged since its last update (KNS_FULL=true runs it)" for s in fake.names),
        f"Update of stack dev and its entry stacks, in all: no changes (0 objects; 1 stack ran, {SPLIT} skipped as "
        "unchanged)"]
    code, out, calls = fake.run(capsys, "preview")
    assert ran(calls) == ["dev"] and out.count("Preview of stack dev.entries-") == SPLIT


def test_each_stack_s_state_is_read_once_per_run(fake, capsys):
    """The layout check and the records read the same exports: one per stack."""
    fake.record("dev", None)  # the platform stack, as scripts/up.sh leaves it
    code, _, calls = fake.run(capsys)
    assert code == 0 and ran(calls) == ["dev"]
    exported = sorted(call[2] for call in stack_calls(fake) if call[:2] == ["stack", "export"])
    assert exported == sorted(["dev", *fake.names])


def test_new_entry_stacks_are_created_then_run_and_the_stack_selected_again(fake, capsys):
    fake.record("dev", None)  # scripts/up.sh made the stack itself
    for stack in fake.names[1:]:
        (fake.dir / "export" / f"{stack}.json").unlink()
        (fake.dir / "history" / f"{stack}.json").unlink()
    code, out, calls = fake.run(capsys)
    assert code == 0 and ran(calls)[0] == "dev" and sorted(ran(calls)[1:]) == fake.names[1:]  # side by side
    made = [call for call in stack_calls(fake) if call[1] in ("select", "init")]
    assert made == [["stack", "select", "dev"], ["stack", "select", fake.names[1]], ["stack", "init", fake.names[1]],
                    ["stack", "select", fake.names[2]], ["stack", "init", fake.names[2]], ["stack", "select", "dev"]]
    assert f"Update of stack {fake.names[0]}: skipped" in out


@pytest.mark.parametrize("action", ["up", "preview"])
def test_a_config_that_cannot_run_creates_and_reads_nothing(fake, capsys, action):
    """The config is checked before any stack is created (the stack itself or its entry
    stacks) or any state read: the problems, exit 1, no call of the engine at all."""
    for stack in ("dev", *fake.names):
        (fake.dir / "export" / f"{stack}.json").unlink(missing_ok=True)
    config = split_config()
    config["jobs"][0]["cpu"] = "lots"
    write_project(fake.project, config, "dev")
    code, out, calls = fake.run(capsys, action)
    assert (code, out, calls, stack_calls(fake)) == (1, "", [], [])
    assert fake.err.startswith("kns-platform: invalid configuration, 1 problem; nothing was applied:\n")
    assert f': kns:jobs[{config["jobs"][0]["name"]}].cpu: "lots" is not a quantity' in fake.err


def test_entry_stacks_a_smaller_layout_dropped_are_removed_by_an_up_and_said_by_a_preview(fake, capsys):
    """From more entry stacks to SPLIT: the surplus ones hold nothing once restacked, and
    their old outputs must not be merged into the stack's."""
    extra = [stacks.entry_stack("dev", i) for i in (SPLIT, SPLIT + 1)]
    for stack in extra:
        fake.record(stack, "digest-old")
    code, out, calls = fake.run(capsys, "preview")
    assert code == 0 and not [c for c in stack_calls(fake) if c[1] == "rm"]
    assert [line for line in fake.err.splitlines() if "would remove" in line] == [
        f"would remove entry stack {stack}: kns:state.entryStacks is {SPLIT}, and it holds nothing" for stack in extra]
    code, out, calls = fake.run(capsys, "up")
    assert code == 0 and [c for c in stack_calls(fake) if c[1] == "rm"] == [["stack", "rm", s] for s in extra]
    assert not set(extra) & set(ran(calls))
    # one still holding an entry: moved first (`./kns restack`), never removed with it
    fake.record(extra[0], "digest-old")
    export = json.loads((fake.dir / "export" / f"{extra[0]}.json").read_text())
    export["deployment"]["resources"].append(entry_component(extra[0], "train-resnet"))
    (fake.dir / "export" / f"{extra[0]}.json").write_text(json.dumps(export))
    code, out, calls = fake.run(capsys, "up")
    assert code != 0 and calls == [] and "./kns restack" in fake.err
    assert (fake.dir / "export" / f"{extra[0]}.json").exists()


def entry_component(stack: str, name: str) -> dict:
    return {"urn": f"urn:pulumi:{stack}::kns-platform::{planner_job_type()}::{name}", "type": planner_job_type(),
            "parent": f"urn:pulumi:{stack}::kns-platform::pulumi:pulumi:Stack::kns-platform-{stack}"}


def planner_job_type() -> str:
    from plan.identity import JOB_TYPE
    return JOB_TYPE


@pytest.mark.parametrize("action", ["up", "preview"])
def test_an_entry_in_another_stack_than_the_config_says_stops_the_run_before_any_engine(fake, capsys, action):
    """What `./kns restack` fixes: the message of docs/entry-stacks.md, exit 3, no engine."""
    from kns_cli import layout
    holder = stacks.holder("dev", "train-resnet", SPLIT)
    elsewhere = next(stack for stack in fake.names if stack != holder)
    export = json.loads((fake.dir / "export" / f"{elsewhere}.json").read_text())
    export["deployment"]["resources"].append(entry_component(elsewhere, "train-resnet"))
    (fake.dir / "export" / f"{elsewhere}.json").write_text(json.dumps(export))
    code, out, calls = fake.run(capsys, action)
    assert code == layout.MISPLACED and calls == []
    assert f"train-resnet ({elsewhere} -> {holder})" in fake.err and "./kns restack" in fake.err


def test_an_entry_stack_is_not_a_stack_to_run(fake, capsys):
    code = fullrun.main(["up", "--stack", fake.names[0], "--", "--yes"], env={**os.environ}, cwd=fake.project)
    assert code == 2 and "entry stack" in capsys.readouterr().err


@pytest.mark.parametrize("state, reason", [
    ({"digest": "digest-old"}, "changed"),
    ({"digest": None}, "a targeted ./kns up records none"),
    ({"result": "failed"}, "failed"),
    ({"result": "in-progress"}, "never finished"),
    ({"pending": True}, "interrupted"),
])
def test_a_changed_failed_or_interrupted_entry_stack_always_runs(fake, capsys, state, reason):
    stack = fake.names[1]
    fake.record(stack, state.get("digest", fake.wanted[stack]), state.get("result", "succeeded"),
                state.get("pending", False))
    code, out, calls = fake.run(capsys)
    assert ran(calls) == ["dev", stack], reason
    assert calls[1]["checked"] == "checked-1"  # the platform's verdict, so it plans its own entries only


@pytest.mark.parametrize("flag", ["KNS_FULL", "KNS_REFRESH"])
def test_kns_full_and_kns_refresh_run_every_stack(fake, capsys, flag):
    code, out, calls = fake.run(capsys, **{flag: "true"})
    assert sorted(ran(calls)) == ["dev", *fake.names] and "skipped" not in out


def test_entry_stacks_run_side_by_side_each_with_its_own_lock_and_log_summaries_in_order(fake, capsys):
    for stack in fake.names:
        fake.record(stack, "digest-old")
    code, out, calls = fake.run(capsys, KNS_PARALLEL_STACKS="3", FAKE_SLEEP="1.5")
    entries = [c for c in calls if c["stack"] != "dev"]
    assert sorted(ran(entries)) == fake.names
    # They overlapped: each started before another ended.
    assert max(c["start"] for c in entries) < min(c["end"] for c in entries)
    assert all(["--stack", c["stack"]] == c["args"][1:3] for c in entries)
    assert all(c["args"][3:5] == ["--config-file", "Pulumi.dev.yaml"] for c in entries)
    logs = sorted(p.name for p in (fake.dir / "logs").iterdir())
    assert len(logs) == 1 + SPLIT and all(any(p.startswith(f"{s}-up-") for p in logs) for s in ["dev", *fake.names])
    order = [line.split()[3].rstrip(":") for line in out.splitlines() if line.startswith("Update of stack")]
    assert order == ["dev", *fake.names, "dev"]  # then one total
    assert out.splitlines()[-1].startswith(f"Update of stack dev and its entry stacks, in all: ")
    assert out.splitlines()[-1].endswith(f"; {1 + SPLIT} stacks ran)")


def test_one_stack_at_a_time_when_so_bounded_and_a_failure_is_the_exit_status(fake, capsys):
    for stack in fake.names:
        fake.record(stack, "digest-old")
    failing = fake.names[0].replace(".", "_").replace("-", "_")
    code, out, calls = fake.run(capsys, KNS_PARALLEL_STACKS="1", FAKE_SLEEP="0.3", **{f"FAKE_FAIL_{failing}": "5"})
    entries = [c for c in calls if c["stack"] != "dev"]
    assert all(a["end"] <= b["start"] for a, b in zip(entries, entries[1:]))
    assert code == 5 and len(entries) == SPLIT


def test_a_failed_platform_run_runs_no_entry_stack(fake, capsys, monkeypatch):
    code, out, calls = fake.run(capsys, FAKE_FAIL_dev="2")
    assert code == 2 and ran(calls) == ["dev"]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_parallel_bound_is_refused(value):
    with pytest.raises(SystemExit, match="KNS_PARALLEL_STACKS"):
        fullrun.parallel_stacks({"KNS_PARALLEL_STACKS": value})


# ---- the platform stack skipped too ----------------------------------------------------------------


def test_the_platform_s_program_exports_the_digest_the_full_run_computes_offline(tmp_path, monkeypatch):
    project = split_project(tmp_path)
    for settings in ("", "policy-config-digest"):
        monkeypatch.setenv(digests.SETTINGS_ENV, settings)
        outputs = run_program(split_config(), stack="dev", project_dir=project).outputs
        known = fullrun.offline_digests(project, "dev", SPLIT, {}, settings)
        assert known is not None
        assert outputs[digests.PLATFORM_OUTPUT] == known.platform
        assert outputs[digests.CHECKED_OUTPUT] == known.checked
        assert outputs[digests.DIGESTS_OUTPUT] == known.entries
    plain = fullrun.offline_digests(project, "dev", SPLIT, {}, "")
    assert plain.platform != known.platform
    assert all(plain.entries[stack] != known.entries[stack] for stack in known.entries)


def test_the_platform_digest_changes_with_every_section_but_the_entries(tmp_path):
    base = fullrun.offline_digests(split_project(tmp_path / "a"), "dev", SPLIT, {}, "")
    dev = dev_stack_config()
    changed_entry = fullrun.offline_digests(split_project(
        tmp_path / "b", jobs=[{**dev["jobs"][0], "cpu": "3"}, *dev["jobs"][1:]]), "dev", SPLIT, {}, "")
    assert changed_entry.platform == base.platform
    assert [s for s in base.entries if base.entries[s] != changed_entry.entries[s]] == [
        stacks.holder("dev", dev["jobs"][0]["name"], SPLIT)]
    packing = {**dev.get("packingScheduler", {}), "name": "kns-packing-2"}
    changed_section = fullrun.offline_digests(split_project(tmp_path / "c", packingScheduler=packing),
                                              "dev", SPLIT, {}, "")
    assert changed_section.platform != base.platform


class Recorded(Fake):
    """The stand-in pulumi in a real project: each stack's record is what this config
    plans now, as a successful full run would have left it."""

    def __init__(self, root: Path, **over):
        super().__init__(root / "fake-root")
        self.project = split_project(root, **over)
        self.known = fullrun.offline_digests(self.project, "dev", SPLIT, {}, "")
        for stack in self.names:
            self.record(stack, self.known.entries[stack])
        self.record_platform(self.known.platform)

    def record_platform(self, digest, result: str = "succeeded", pending: bool = False) -> None:
        (self.dir / "history" / "dev.json").write_text(json.dumps([{"kind": "update", "result": result}]))
        root = {"type": "pulumi:pulumi:Stack", "outputs": {digests.PLATFORM_OUTPUT: digest} if digest else {}}
        deployment = {"resources": [root], **({"pending_operations": [{"type": "updating"}]} if pending else {})}
        (self.dir / "export" / "dev.json").write_text(json.dumps({"deployment": deployment}))


def test_a_no_change_full_run_starts_no_engine_at_all(tmp_path, capsys):
    fake = Recorded(tmp_path)
    for action, word in (("up", "Update"), ("preview", "Preview")):
        code, out, calls = fake.run(capsys, action)
        assert code == 0 and calls == []
        assert out.splitlines() == [*(f"{word} of stack {s}: skipped, unchanged since its last update "
                                      "(KNS_FULL=true runs it)" for s in ["dev", *fake.names]),
                                    f"{word} of stack dev and its entry stacks, in all: no changes (0 objects; 0 stacks "
                                    f"ran, {1 + SPLIT} skipped as unchanged)"]


def test_one_changed_entry_runs_only_its_entry_stack_with_the_offline_verdict(tmp_path, capsys):
    fake = Recorded(tmp_path)
    dev = dev_stack_config()
    name = dev["jobs"][1]["name"]
    edited = {**dev, "state": {"entryStacks": SPLIT}, "jobs": [dev["jobs"][0], {**dev["jobs"][1], "cpu": "3"},
                                                                *dev["jobs"][2:]]}
    (fake.project / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {f"kns:{k}": v for k, v in edited.items()}},
                                                                sort_keys=False))
    code, out, calls = fake.run(capsys)
    assert ran(calls) == [stacks.holder("dev", name, SPLIT)]
    now = fullrun.offline_digests(fake.project, "dev", SPLIT, {}, "")
    assert calls[0]["checked"] == now.checked != fake.known.checked


@pytest.mark.parametrize("state", [
    {"digest": "old"}, {"digest": None}, {"result": "failed"}, {"pending": True}])
def test_a_changed_failed_or_interrupted_platform_runs_and_its_digests_are_used(tmp_path, capsys, state):
    fake = Recorded(tmp_path)
    fake.record_platform(state.get("digest", fake.known.platform), state.get("result", "succeeded"),
                         state.get("pending", False))
    code, out, calls = fake.run(capsys)
    # The platform ran; the entry stacks compare with the digests its run exported (the
    # stand-in's outputs.json), which none of them recorded.
    assert ran(calls)[0] == "dev" and sorted(ran(calls)[1:]) == fake.names


@pytest.mark.parametrize("flag", ["KNS_FULL", "KNS_REFRESH"])
def test_kns_full_and_kns_refresh_run_the_platform_too(tmp_path, capsys, flag):
    fake = Recorded(tmp_path)
    code, out, calls = fake.run(capsys, **{flag: "true"})
    assert sorted(ran(calls)) == ["dev", *fake.names] and "skipped" not in out


def test_a_changed_policy_config_runs_every_stack(tmp_path, capsys):
    fake = Recorded(tmp_path)
    (fake.project / "policy-config.json").write_text('{"all": "mandatory"}')
    settings = fullrun.run_settings(["--yes", "--policy-pack-config", "policy-config.json"], fake.project)
    assert settings and settings == fullrun.run_settings(["--policy-pack-config=policy-config.json"], fake.project)
    calls_env = fake.dir / "calls.jsonl"
    calls_env.unlink(missing_ok=True)
    environ = {**os.environ, "PATH": f"{fake.dir / 'bin'}:{os.environ['PATH']}", "FAKE_DIR": str(fake.dir)}
    code = fullrun.main(["up", "--stack", "dev", "--log-dir", str(fake.dir / "logs"), "--", "--yes",
                         "--policy-pack-config", "policy-config.json"], env=environ, cwd=fake.project)
    capsys.readouterr()
    made = [json.loads(line) for line in calls_env.read_text().splitlines()]
    assert ran(made)[0] == "dev" and sorted(ran(made)[1:]) == fake.names
