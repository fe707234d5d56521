"""`./kns` (kns_cli): validate, explain and timeline, offline.

A few cases run the real `./kns` as a subprocess (from another working directory); the
rest call the package's functions. The program under the recording mocks is the
reference: the same broken config must give it the same problem lines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pulumi
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chrono import cron
from config.errors import ConfigError, closest
from config.loader import parse_config, parse_stack_config
from config.source import StackFile
from kns_cli import cli, explain, runs, stack, timeline
from kns_testing.program import ROOT, RecordingMocks, dev_stack_config, run_program, without_places
from kns_testing.svg import SVG, parse_svg, path_xs, plot_x, svg_ids, tooltip
from plan.stackplan import plan_stack

KNS = ROOT / "kns"
NOW = datetime(2026, 3, 1, 0, 0, tzinfo=timezone.utc)  # a Sunday
DOC_START = "2026-03-02T00:00Z"
DOC_HOURS = "12"


def kns(*args: str, cwd: Path, env: dict[str, str] | None = None, script: Path = KNS) -> subprocess.CompletedProcess:
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=env if env is not None else dict(os.environ))


def project(tmp_path: Path, config: dict, stack_name: str = "broken") -> Path:
    """A copy of the project with one stack file holding `config` (keys without `kns:`)."""
    root = tmp_path / "project"
    root.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(ROOT / "jobs", root / "jobs")
    shutil.copytree(ROOT / "vendor", root / "vendor")  # the Kueue install the program reads (dev has queueing on)
    document = {"config": {f"kns:{k}": v for k, v in config.items()}}
    (root / f"Pulumi.{stack_name}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return root


def entry(config: dict, kind: str, name: str) -> dict:
    return next(e for e in config[kind] if e["name"] == name)


def two_problems() -> dict:
    config = dev_stack_config()
    entry(config, "jobs", "train-resnet")["memory"] = "12Qi"
    entry(config, "schedules", "nightly-report")["timeZone"] = "Europe/Pariss"
    return config


def program_problem_text(config: dict, stack_name: str, root: Path) -> str:
    """The program's text, run in project `root` (it places problems in its stack file)."""
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, stack=stack_name, mocks=mocks, project_dir=root)
    assert mocks.resources == []
    return str(info.value)


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- validate ---------------------------------------------------------------------------


def test_validate_dev_stack_from_another_directory(tmp_path):
    result = kns("validate", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    cfg, plans = stack.load_stack(ROOT, "dev")
    assert result.stdout.strip() == (
        f"kns validate: stack dev is valid: {len(plans)} entries ({len(cfg.jobs)} jobs, {len(cfg.schedules)} "
        f"schedules, 2 prescaled, {sum(1 for p in plans if p.entry.queue)} queued), {len(cfg.node_pools)} node pools, "
        f"{len(cfg.queues)} queues, {len(plans)} Jobs and CronJobs planned"
    )
    assert result.stderr == ""


def test_validate_reports_the_programs_problem_lines(tmp_path):
    config = two_problems()
    root = project(tmp_path, config)
    result = kns("validate", "--stack", "broken", "--project-dir", str(root), cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "kns-platform: invalid configuration, 2 problems; nothing was applied:"
    assert all(line.startswith("  - Pulumi.broken.yaml:") for line in lines[1:])  # placed in the file
    lines = without_places(result.stderr).splitlines()
    assert lines[1] == '  - kns:jobs[train-resnet].memory: "12Qi" is not a quantity'
    assert lines[2].startswith('  - kns:schedules[nightly-report].timeZone: "Europe/Pariss" is not an IANA time zone')
    # One source of truth: the program, fed the same config, says exactly the same.
    assert result.stderr.rstrip("\n") == program_problem_text(config, "broken", root)


def test_a_planning_problem_is_reported_with_the_others(tmp_path, capsys):
    config = dev_stack_config()
    entry(config, "jobs", "vcluster-smoke")["jsonOverrides"] = [
        {"path": "/spec/template/spec/containers/5/image", "value": "busybox:1.37"}]
    entry(config, "jobs", "train-resnet")["gpus"] = 16  # a cross-check problem on another entry
    # only the planner finds the pointer problem
    with pytest.raises(ConfigError) as info:
        parse_config(config, project_dir=ROOT, environ={})
    assert [p.path for p in info.value.problems] == ["kns:jobs[train-resnet].gpus"]

    root = project(tmp_path, config)
    code, out, err = main(capsys, "validate", "--stack", "broken", "--project-dir", str(root))
    assert code == 1 and out == ""
    assert without_places(err).splitlines()[1:] == [
        '  - kns:jobs[train-resnet].gpus: 16 GPUs do not fit on one node of pool "a100" (perNode: 8)',
        '  - kns:jobs[vcluster-smoke].jsonOverrides[0]: "/spec/template/spec/containers/5/image": index 5 is past '
        'the end of a list of 1 at "/spec/template/spec/containers/5"',
    ]
    assert err.rstrip("\n") == program_problem_text(config, "broken", root)


def test_missing_stack_file_is_a_usage_error(tmp_path):
    result = kns("validate", "--stack", "prod", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "no stack file Pulumi.prod.yaml" in result.stderr
    assert "stack files there: Pulumi.dev.yaml" in result.stderr


def test_misspelt_stack_gets_a_suggestion(capsys):
    code, _, err = main(capsys, "validate", "--stack", "deb")
    assert code == 2 and "did you mean --stack dev?" in err


def subcommands() -> dict[str, argparse.ArgumentParser]:
    (commands,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def test_every_command_takes_the_common_options(tmp_path):
    """--stack and --project-dir mean the same to every command, the engine's included."""
    found = subcommands()
    assert {"validate", "explain", "queues", "usage", "timeline", "preview", "up", "changed", "applied", "recover",
            "restack", "outputs"} <= set(found)
    for name, command in found.items():
        # A value for each positional the command needs.
        needed = [a for a in command._actions if not a.option_strings and a.nargs not in ("?", "*")]
        args = cli.build_parser().parse_args([name, *["x"] * len(needed), "--stack", "other",
                                              "--project-dir", str(tmp_path)])
        assert (args.command, args.stack, args.project_dir) == (name, "other", tmp_path), name


def test_outputs_reads_the_stack_of_the_project_dir(tmp_path, capsys, monkeypatch):
    root = project(tmp_path, dev_stack_config(), "other")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "theirs")  # a stack other than dev needs its own
    ran = []
    monkeypatch.setattr(cli.subprocess, "run",
                        lambda command, env: ran.append((command, env)) or subprocess.CompletedProcess(command, 0))
    assert cli.main(["outputs", "--stack", "other", "--project-dir", str(root)]) == 0
    ((command, env),) = ran
    assert command[1:] == [str(ROOT / "scripts" / "up.sh"), "outputs"]
    assert (env["KNS_STACK"], env["KNS_PROJECT_DIR"]) == ("other", str(root.resolve()))
    # A stack the project has no file for is a usage error with its did-you-mean, as for every command.
    code, _, err = main(capsys, "outputs", "--stack", "othr", "--project-dir", str(root))
    assert code == 2 and "did you mean --stack other?" in err and len(ran) == 1


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["timeline", "--start", "yesterday"])
    assert info.value.code == 2
    assert cli.main([]) == 2


def test_secure_values_count_as_present_secrets(tmp_path, capsys):
    config = dev_stack_config()
    config["knsScheduler"]["keycloak"] = {"url": "https://sso.example.org", "realm": "jarvice", "clientId": "kns"}
    config["keycloakClientSecret"] = {"secure": "v1:AAAAAAAAAAAAAAAA:BBBBBBBBBBBBBBBB"}
    config["credentials"] = {"s3": {"access-key": {"secure": "v1:CCCC:DDDD"}, "secret-key": {"secure": "v1:EEEE:FFFF"}}}
    entry(config, "jobs", "etl-nightly-backfill")["credentials"] = ["s3"]
    root = project(tmp_path, config, "secure")
    code, out, err = main(capsys, "validate", "--stack", "secure", "--project-dir", str(root))
    assert (code, err) == (0, ""), err
    cfg, plans = stack.load_stack(root, "secure")
    plan = next(p for p in plans if p.entry.name == "etl-nightly-backfill")
    assert plan.credentials == {"s3": {"access-key": stack.SECRET_PLACEHOLDER, "secret-key": stack.SECRET_PLACEHOLDER}}

    # the same values in plain text are refused, as the program refuses them
    config["keycloakClientSecret"] = "in-clear"
    config["credentials"] = {"s3": {"access-key": "a", "secret-key": "b"}}
    root = project(tmp_path / "plain", config, "plain")
    code, _, err = main(capsys, "validate", "--stack", "plain", "--project-dir", str(root))
    assert code == 1
    assert "  - kns:keycloakClientSecret: must be a secret" in without_places(err)
    assert "  - kns:credentials: must be a secret" in without_places(err)


def test_a_structured_key_stored_as_one_secret_cannot_be_checked_offline(tmp_path, capsys):
    config = dev_stack_config()
    config["credentials"] = {"secure": "v1:AAAA:BBBB"}
    root = project(tmp_path, config, "blob")
    code, out, err = main(capsys, "validate", "--stack", "blob", "--project-dir", str(root))
    assert code == 2 and "kns:credentials is one encrypted value" in err


PROFILES = {"*": {"cpuRequestRatio": 0.5}, "alice": {"maxCpu": "16"}, "@ml": {"cpuRequestRatio": 0.25}}


def test_profile_rules_keep_their_file_order(tmp_path, capsys):
    """The program restores the authored order and refuses what it cannot restore; the
    CLI goes through the same function and reads the authored file, so it is satisfied."""
    config = dev_stack_config()
    config["profiles"] = PROFILES  # not sorted: "*", "alice", "@ml"
    root = project(tmp_path, config, "profiles")
    code, out, err = main(capsys, "validate", "--stack", "profiles", "--project-dir", str(root))
    assert (code, err) == (0, ""), err
    cfg, plans = stack.load_stack(root, "profiles")
    assert [rule for rule, _ in cfg.profiles] == ["*", "alice", "@ml"]
    # the shared function is the one that refuses sorted delivery without the authored order
    delivered = json.loads(json.dumps(config, sort_keys=True))
    with pytest.raises(ConfigError) as info:
        parse_stack_config(delivered, StackFile(None), project_dir=root, stack="profiles", secret_keys=frozenset(), environ={})
    assert str(info.value.problems[0]).startswith("kns:profiles: the order of its rules cannot be read from "
                                                  "Pulumi.profiles.yaml")


# ---- explain ----------------------------------------------------------------------------


def test_explain_json_from_the_real_command(tmp_path):
    result = kns("explain", "weekly-finetune", "--format", "json", "--now", "2026-03-01T00:00Z", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    (facts,) = document["entries"]
    assert facts["kind"] == "schedule" and facts["namespace"] == "kns-weekly-finetune"
    assert facts["schedule"]["cron"] == "0 0 * * 1"
    assert facts["schedule"]["warmUpMinutes"] == 20
    assert facts["schedule"]["primerSchedules"] == ["40 23 * * 0"]
    assert facts["schedule"]["nextRuns"][0] == {"start": "2026-03-02T00:00:00-05:00",
                                                "primer": "2026-03-01T23:40:00-05:00"}


def test_explain_facts_are_the_plan_objects():
    cfg, plans = stack.load_stack(ROOT, "dev")
    document = explain.explain(plan_stack(cfg, plans, NOW), (), NOW)
    assert [f["name"] for f in document["entries"]] == [p.entry.name for p in plans]
    for facts, plan in zip(document["entries"], plans):
        pod = plan.pod_spec
        assert facts["namespace"] == plan.namespace
        assert facts["nodePool"] == (plan.pool.name if plan.pool else None)
        autoscale = plan.pool.autoscale if plan.pool else None
        assert facts["nodePoolAutoscale"] == (
            {"nodePool": plan.pool.name, "limits": autoscale.limits} if autoscale else None)
        assert facts["schedulerName"] == plan.scheduler_name
        assert facts["podSecurity"] == plan.pod_security
        assert facts["limitRange"] == plan.limit_range and facts["quota"] == plan.quota
        assert facts["tolerations"] == pod.get("tolerations", [])
        assert facts["nodeSelector"] == pod.get("nodeSelector", {})
        main_container = next(c for c in facts["containers"] if c["name"] == plan.entry.name)
        assert {k: main_container[k] for k in ("requests", "limits")} == plan.resources
        assert main_container["image"] == plan.entry.image and plan.entry.image in facts["images"]
        if plan.is_schedule:
            schedule = facts["schedule"]
            assert schedule["timeZone"] == plan.entry.time_zone
            assert schedule["primerSchedules"] == list(plan.primers.schedules if plan.primers else [])
            starts = [r["start"] for r in schedule["nextRuns"]]
            assert starts == cron.next_runs(plan.entry.schedule, plan.entry.time_zone, 3, NOW)
            assert all(datetime.fromisoformat(s) > NOW for s in starts)
    weekly = next(f for f in document["entries"] if f["name"] == "weekly-finetune")
    assert weekly["nodePool"] == "a100" and weekly["quota"]["requests.nvidia.com/gpu"] == "2"
    assert [c["name"] for c in weekly["containers"]] == ["kns-wait", "weekly-finetune"]
    # the wait's small local-disk bound counts too (init containers count by their maximum)
    assert weekly["podTotals"] == {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "2", "ephemeral-storage": "0"},
                                   "limits": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "2", "ephemeral-storage": "16Mi"}}
    for run in weekly["schedule"]["nextRuns"]:
        start, primer = (datetime.fromisoformat(run[k]) for k in ("start", "primer"))
        assert start.strftime("%a %H:%M") == "Mon 00:00" and primer.strftime("%a %H:%M") == "Sun 23:40"


def test_next_runs_are_strictly_after_the_reference():
    cfg, plans = stack.load_stack(ROOT, "dev")
    hourly = next(p for p in plans if p.entry.name == "hourly-sync")
    at_a_run = datetime(2026, 3, 1, 4, 5, tzinfo=timezone.utc)
    assert [r.start.isoformat() for r in runs.next_runs(hourly, 2, at_a_run)] == [
        "2026-03-01T05:05:00+00:00", "2026-03-01T06:05:00+00:00"]


def test_explain_requests_after_a_profile(tmp_path):
    config = dev_stack_config()
    config["profiles"] = PROFILES
    root = project(tmp_path, config, "profiles")
    cfg, plans = stack.load_stack(root, "profiles")
    facts = {f["name"]: f for f in explain.explain(plan_stack(cfg, plans, NOW), (), NOW)["entries"]}
    train = next(p for p in plans if p.entry.name == "train-resnet")
    # alice is in @ml: "*", "alice", "@ml" apply in file order, and @ml's ratio wins
    assert facts["train-resnet"]["profileRules"] == ["*", "alice", "@ml"]
    container = facts["train-resnet"]["containers"][0]
    assert container["requests"] == train.resources["requests"]
    assert container["requests"]["cpu"] == "2" and container["limits"]["cpu"] == "8"
    assert facts["nightly-report"]["profileRules"] == ["*"]
    assert facts["nightly-report"]["containers"][1]["requests"] == {"cpu": "500m", "memory": "2Gi"}
    text = explain.render_text(explain.explain(plan_stack(cfg, plans, NOW), ["train-resnet"], NOW))
    assert "profile rules:  *, alice, @ml" in text
    assert "cpu=2 memory=64Gi nvidia.com/gpu=4  cpu=8 memory=64Gi nvidia.com/gpu=4" in text


def test_explain_text_names_every_fact(capsys):
    code, out, err = main(capsys, "explain", "weekly-finetune", "--now", "2026-03-01T00:00Z")
    assert code == 0, err
    for expected in ("namespace:      kns-weekly-finetune", "node pool:      a100 (static)", "scheduler:      kns-packing",
                     "Pod Security:   baseline", "tolerations:    nvidia.com/gpu=present:NoSchedule",
                     "node selector:  kns.io/pool=a100", "schedule:  0 0 * * 1  (America/New_York)",
                     "warm-up:   20 min; primer 40 23 * * 0",
                     "2026-03-02T00:00:00-05:00  2026-03-01T23:40:00-05:00"):
        assert expected in out


def test_explain_shows_an_autoscaled_pool_as_such(capsys):
    code, out, err = main(capsys, "explain", "nightly-report", "--now", "2026-03-01T00:00Z")
    assert code == 0, err
    assert "node pool:      burst (autoscaled: Karpenter NodePool burst, cpu=256 memory=1Ti)" in out
    code, out, err = main(capsys, "explain", "weekly-finetune", "--now", "2026-03-01T00:00Z")
    assert "node pool:      a100 (static)" in out


def test_explain_unknown_entry(capsys):
    code, out, err = main(capsys, "explain", "nightly-reprot")
    assert code == 2 and out == ""
    assert 'nothing named "nightly-reprot"; did you mean "nightly-report"?' in err


@pytest.mark.parametrize("given, meant", [("TRAIN-RESNET", "train-resnet"), ("Nightly-Report", "nightly-report"),
                                          ("weekly", "weekly-finetune"), ("backfill", "etl-nightly-backfill")])
def test_explain_suggests_the_entry_a_name_in_other_case_or_a_part_of_one_means(capsys, given, meant):
    """The did-you-mean every unknown name gets (config.errors.closest): case is ignored,
    and a word that is part of one name only suggests it, however long the name."""
    code, out, err = main(capsys, "explain", given)
    assert code == 2 and out == ""
    assert f'nothing named "{given}"; did you mean "{meant}"?' in err


def test_a_part_of_several_names_or_a_short_one_suggests_none():
    assert closest("nightly", ["nightly-report", "etl-nightly-backfill"]) == "nightly-report"  # the closer one
    assert closest("ly", ["nightly-report", "weekly-finetune"]) is None
    assert closest("tune", ["weekly-finetune", "daily-finetune"]) is None
    assert closest("Dist", ["dist-train", "eval"]) == "dist-train"


def test_explain_invalid_config_is_reported_like_validate(tmp_path, capsys):
    root = project(tmp_path, two_problems())
    results = [main(capsys, command, "--stack", "broken", "--project-dir", str(root)) for command in ("validate", "explain")]
    assert results[0] == results[1] and results[0][0] == 1


# ---- timeline ---------------------------------------------------------------------------


def window_runs(plan, start: datetime, end: datetime) -> list[str]:
    """Runs next_runs gives in [start, end)."""
    times = cron.next_runs(plan.entry.schedule, plan.entry.time_zone, 200, start - timedelta(seconds=1))
    return [t for t in times if datetime.fromisoformat(t) < end]


def numbered(ids: dict, prefix: str) -> list[str]:
    """The ids `<prefix>-<n>` in document order."""
    return [i for i in ids if re.fullmatch(re.escape(prefix) + r"-[0-9]+", i)]


def test_timeline_rows_markers_and_warm_up_bars():
    cfg, plans = stack.load_stack(ROOT, "dev")
    start, hours = datetime(2026, 3, 2, 0, 0, tzinfo=timezone.utc), 12
    end = start + timedelta(hours=hours)
    drawing = timeline.draw(cfg, plans, start, hours)
    text = drawing.svg()
    assert parse_svg(text).tag == f"{SVG}svg"
    ids = svg_ids(text)
    schedules = [p for p in plans if p.is_schedule]
    names = [p.entry.name for p in schedules]
    assert [r.plan.entry.name for r in drawing.rows] == names
    assert [i for i in ids if i.startswith("label-")] == [f"label-{n}" for n in names]  # config order
    seconds = hours * 3600
    warm_bars = 0
    for row, plan in zip(drawing.rows, schedules):
        name = plan.entry.name
        assert ids[f"label-{name}"].find(f".//{SVG}text").text == name
        assert f" in {plan.entry.time_zone}" in ids[f"note-{name}"].find(f".//{SVG}text").text
        expected = window_runs(plan, start, end)
        assert [run.start.isoformat() for run in row.runs] == expected and expected
        markers = numbered(ids, f"run-{name}")
        assert markers == [f"run-{name}-{i}" for i in range(len(expected))]
        for marker, run in zip(markers, row.runs):
            x = plot_x(run.start, start, hours)
            assert path_xs(ids[marker]) == pytest.approx([x] * 3, abs=0.006)  # a vertical line
            assert drawing.pixel_x(run.start) == pytest.approx(x, abs=1e-6)
            assert f"({timeline.utc_label(run.start)})" in tooltip(ids[marker])
        bars = numbered(ids, f"warmup-{name}")
        warm = [b for b in bars if drawing.kinds[b] == "warm-capacity"]
        # warm capacity held exactly where the pool is autoscaled (Karpenter adds the node)
        autoscaled = plan.pool is not None and plan.pool.autoscale is not None
        assert len(warm) == (len(bars) if autoscaled else 0)
        warm_bars += len(warm)
        assert all(f"warm capacity held on autoscaled pool {plan.pool.name}" in tooltip(ids[b]) for b in warm)
        assert all(timeline.COLORS[drawing.kinds[b]][0] in ids[b].find(f".//{SVG}path").get("style") for b in bars)
        if plan.primers is None:
            assert bars == []
            continue
        assert len(bars) == len(markers)
        for bar, marker in zip(bars, markers):
            xs = path_xs(ids[bar])
            lead = plan.primers.lead * 60 / seconds * timeline.PLOT_WIDTH
            assert max(xs) - min(xs) == pytest.approx(lead, abs=0.011)
            assert max(xs) == pytest.approx(path_xs(ids[marker])[0], abs=0.011)
    assert warm_bars >= 1  # the dev stack's nightly-report runs on the autoscaled pool burst
    finetune = numbered(ids, "run-weekly-finetune")
    assert [drawing.kinds[m] for m in finetune] == ["guaranteed"]  # queue gpu, priority on-time
    assert f"stroke: {timeline.COLORS['guaranteed'][1]}" in ids[finetune[0]].find(f".//{SVG}path").get("style")
    assert tooltip(ids[finetune[0]]).endswith(": start guaranteed")
    title = ids["title"].find(f"{SVG}text").text
    assert title == "kns timeline: stack dev, 2026-03-02 00:00 UTC to 2026-03-02 12:00 UTC (12 h)"
    grid = sorted(path_xs(ids["hours"])[0::2] + path_xs(ids["midnights"])[0::2])  # two points a line
    assert grid == pytest.approx([timeline.PLOT_LEFT + h / hours * timeline.PLOT_WIDTH for h in range(hours + 1)])


def test_a_warm_up_that_began_before_the_window_is_cut_at_its_edge():
    cfg, plans = stack.load_stack(ROOT, "dev")
    start = datetime(2026, 3, 2, 4, 50, tzinfo=timezone.utc)  # weekly-finetune warms from 04:40 UTC
    drawing = timeline.draw(cfg, plans, start, 1)
    ids = svg_ids(drawing.svg())
    (row,) = [r for r in drawing.rows if r.plan.entry.name == "weekly-finetune"]
    assert row.runs[0].primer.isoformat() == "2026-03-01T23:40:00-05:00"
    (bar,) = numbered(ids, "warmup-weekly-finetune")
    assert min(path_xs(ids[bar])) == pytest.approx(timeline.PLOT_LEFT, abs=1e-6)
    assert max(path_xs(ids[bar])) == pytest.approx(plot_x(row.runs[0].start, start, 1), abs=0.006)
    assert "warm-up from Sun 2026-03-01 23:40 EST (2026-03-02 04:40 UTC)" in tooltip(ids[bar])


def test_timeline_command_is_deterministic_and_writes_the_default_path(tmp_path):
    root = project(tmp_path, dev_stack_config(), "copy")
    first = kns("timeline", "--stack", "copy", "--project-dir", str(root), "--start", DOC_START, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    default = root / "build" / "timeline-copy.svg"
    assert first.stdout.startswith(f"kns timeline: wrote {default.relative_to(tmp_path)} ")
    content = default.read_bytes()
    other = tmp_path / "out" / "t.svg"
    second = kns("timeline", "--stack", "copy", "--project-dir", str(root), "--start", "2026-03-02T01:00+01:00",
                 "--output", str(other), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert other.read_bytes() == content  # same instant, same picture
    assert "run-weekly-finetune-0" in svg_ids(content.decode())


def test_timeline_writes_a_png_and_refuses_other_suffixes(tmp_path, capsys):
    png = tmp_path / "t.png"
    assert cli.main(["timeline", "--start", DOC_START, "--hours", "6", "--output", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    capsys.readouterr()
    assert cli.main(["timeline", "--start", DOC_START, "--output", str(tmp_path / "t.pdf")]) == 2
    assert "its name must end in .png or .svg" in capsys.readouterr().err
    assert not (tmp_path / "t.pdf").exists()


def test_the_documented_timeline_is_current():
    cfg, plans = stack.load_stack(ROOT, "dev")
    svg = timeline.render(cfg, plans, datetime.fromisoformat(DOC_START), float(DOC_HOURS))
    assert (ROOT / "docs" / "img" / "timeline-dev.svg").read_text() == svg, (
        f"regenerate it: ./kns timeline --start {DOC_START} --hours {DOC_HOURS} --output docs/img/timeline-dev.svg")


# ---- the wrapper ------------------------------------------------------------------------


def test_the_wrapper_follows_a_symlink(tmp_path):
    link = tmp_path / "bin" / "kns"
    link.parent.mkdir()
    link.symlink_to(KNS)
    result = kns("validate", cwd=tmp_path, script=link)
    assert result.returncode == 0, result.stderr


def test_the_wrapper_without_a_virtualenv_says_how_to_make_one(tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy(KNS, root / "kns")
    for name in ("kns_cli", "chrono", "config", "components", "jobs", "Pulumi.yaml", "Pulumi.dev.yaml"):
        (root / name).symlink_to(ROOT / name)
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"  # a python3 with the dependencies
    result = kns("validate", cwd=tmp_path, env=env, script=root / "kns")
    assert "no virtualenv at" in result.stderr and "run `make venv`" in result.stderr
    assert result.returncode == 0, result.stderr


# ---- extreme times ------------------------------------------------------------------------

OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda minutes: timezone(timedelta(minutes=minutes)))


def at(moment: datetime) -> str:
    return moment.isoformat()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moment=st.datetimes(min_value=cli.EARLIEST.replace(tzinfo=None) + timedelta(days=1),
                           max_value=cli.LATEST.replace(tzinfo=None) - timedelta(days=1), timezones=OFFSETS),
       hours=st.floats(cli.MIN_HOURS, cli.MAX_HOURS))
def test_any_time_in_the_supported_range_is_explained_and_drawn(tmp_path, capsys, moment, hours):
    code, out, err = main(capsys, "explain", "--now", at(moment))
    assert code == 0 and "Traceback" not in err, err
    code, out, err = main(capsys, "timeline", "--start", at(moment), "--hours", repr(hours),
                          "--output", str(tmp_path / "t.svg"))
    assert code == 0 and "Traceback" not in err, err


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moment=st.one_of(st.datetimes(max_value=datetime(1969, 12, 30), timezones=OFFSETS),
                        st.datetimes(min_value=datetime(9901, 1, 2), timezones=OFFSETS)),
       command=st.sampled_from([("explain", "--now"), ("timeline", "--start")]))
def test_a_time_outside_it_is_a_usage_error_naming_the_range(capsys, moment, command):
    with pytest.raises(SystemExit) as stopped:
        cli.main([*command, at(moment)])
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert f'"{at(moment)}" is outside the times the commands reason about (1970-01-01 to 9900-12-31, UTC)' in err


@pytest.mark.parametrize("hours", ["1e-300", "0.01", "5e-324", "0", "-0.0", "1489", "1e308", "nan", "inf"])
def test_a_window_under_a_minute_or_over_the_maximum_is_a_usage_error(capsys, hours):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["timeline", "--hours", hours])
    assert stopped.value.code == 2
    assert f"argument --hours: {hours} is outside one minute (0.0167) to 1488 hours" in capsys.readouterr().err
