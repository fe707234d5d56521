"""Priorities (issue 31, contract section 13; docs/queueing.md, "Start times on a busy
queue"): `kns:priorities` as Kueue WorkloadPriorityClasses, each queued entry's priority
(its own, its profile's, the highest for a prescaled schedule, the default), the label
that gives it to the Job's Workload, the config errors, and what `./kns explain` and
`./kns timeline` say about a prescaled schedule's start."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

import pytest

from config import rules
from kns_cli import explain, starts, timeline
from kns_testing import apiserver
from kns_testing.doors import refused, refused_edited, validate_text, write_project
from kns_testing.program import run_program
from plan.stackplan import plan_stack

JOB = "kubernetes:batch/v1:Job"
CRON = "kubernetes:batch/v1:CronJob"
WPC = "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
LABEL = "kueue.x-k8s.io/priority-class"
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def job(name: str, queue: str | None = "research", **more: Any) -> dict[str, Any]:
    entry = {"name": name, "user": "ann", "image": "busybox:1.37", "cpu": 8, "memory": 1024, "pool": "cpu", **more}
    if queue:
        entry["queue"] = queue
    return entry


def schedule(name: str, cron: str, queue: str | None = "research", **more: Any) -> dict[str, Any]:
    entry = job(name, queue, schedule=cron, **{"warmUpMinutes": 10, **more})
    return {k: v for k, v in entry.items() if v is not None}


CONFIG: dict[str, Any] = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [{"name": "cpu", "role": "compute", "nodes": ["c1", "c2"]}],
    "queueing": {"enabled": True, "install": False},
    "priorities": [{"name": "batch", "value": 100, "default": True},
                   {"name": "report", "value": 1000, "description": "scheduled reports"},
                   {"name": "urgent", "value": 500}],
    "profiles": {"bob": {"priority": "urgent"}},
    "queues": [{"name": "research", "quota": {"cpu": {"cpu": 16, "memory": "64Gi"}},
                "preemption": {"withinClusterQueue": "LowerPriority"}},
               {"name": "flat", "quota": {"cpu": {"cpu": 16, "memory": "64Gi"}}}],
    "jobs": [job("train"), job("own", priority="urgent"), job("bobs", user="bob"), job("free", queue=None),
             job("flat-train", queue="flat")],
    "schedules": [schedule("report", "30 2 * * *"), schedule("plain", "0 4 * * *", warmUpMinutes=None),
                  schedule("flat-report", "30 2 * * *", queue="flat")],
}


@pytest.fixture(scope="module")
def run():
    return run_program(CONFIG)


def labels(manifest: dict[str, Any]) -> dict[str, str]:
    spec = manifest["spec"]
    return (spec["jobTemplate"]["metadata"] if "jobTemplate" in spec else manifest["metadata"]).get("labels", {})


def test_each_priority_is_a_workload_priority_class_the_api_server_accepts(run):
    classes = {r.name: r.inputs for r in run.of_type(WPC)}
    assert sorted(classes) == ["workloadpriorityclass-batch", "workloadpriorityclass-report",
                               "workloadpriorityclass-urgent"]
    report = classes["workloadpriorityclass-report"]
    assert (report["metadata"]["name"], report["value"], report["description"]) == ("report", 1000, "scheduled reports")
    assert "spec" not in report and "description" not in classes["workloadpriorityclass-batch"]
    assert report["metadata"]["labels"]["kns.io/cluster"] == "kns-test"
    assert apiserver.problems(run.resources) == []


def test_each_queued_entry_gets_its_own_its_profiles_the_highest_when_prescaled_or_the_default(run):
    assert labels(run.named(JOB, "own").inputs)[LABEL] == "urgent"  # its own
    assert labels(run.named(JOB, "bobs").inputs)[LABEL] == "urgent"  # profile rule bob
    assert labels(run.named(CRON, "report").inputs)[LABEL] == "report"  # prescaled: the highest
    assert labels(run.named(CRON, "plain").inputs)[LABEL] == "batch"  # not prescaled: the default
    assert labels(run.named(JOB, "train").inputs)[LABEL] == "batch"
    assert LABEL not in labels(run.named(JOB, "free").inputs)  # no queue, no priority


def test_without_a_default_an_entry_names_none_and_kueue_gives_it_zero():
    config = copy.deepcopy(CONFIG)
    config["priorities"][0]["default"] = False
    done = run_program(config)
    assert LABEL not in labels(done.named(JOB, "train").inputs)
    assert labels(done.named(CRON, "report").inputs)[LABEL] == "report"


def test_the_priority_label_cannot_be_overridden_away(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["jobs"][0]["jsonOverrides"] = [{"path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "x"}]
    refused(tmp_path, capsys, config, [
        'kns:jobs[train].jsonOverrides[0]: /metadata/labels/kueue.x-k8s.io~1priority-class: is "batch", set by '
        'priority (Kueue orders and preempts the Job by it); overrides may not change it'])


BAD = {
    "an unknown priority (entry and profile rule)": (
        lambda c: (c["jobs"][0].update(priority="reprot"), c["profiles"]["bob"].update(priority="nope")),
        ['kns:profiles[bob].priority: no priority named "nope"; priorities: batch, report, urgent',
         'kns:jobs[train].priority: no priority named "reprot"; did you mean "report"?']),
    "two defaults": (
        lambda c: c["priorities"][2].update(default=True),
        [f'kns:priorities[urgent].default: {rules.ONE_DEFAULT_PRIORITY.message} ("batch" is already)']),
    "values outside Kueue's range": (
        lambda c: (c["priorities"][1].update(value=2**31), c["priorities"][2].update(value=-(2**31) - 1)),
        ["kns:priorities[report].value: 2147483648 is invalid: input should be less than or equal to 2147483647",
         "kns:priorities[urgent].value: -2147483649 is invalid: input should be greater than or equal to -2147483648",
         'kns:profiles[bob].priority: priority "urgent" is invalid (its problems are listed under kns:priorities[urgent])',
         'kns:jobs[own].priority: priority "urgent" is invalid (its problems are listed under kns:priorities[urgent])']),
    "priority on an entry without a queue": (
        lambda c: c["jobs"][3].update(priority="urgent"),
        [f"kns:jobs[free].priority: {rules.PRIORITY_NEEDS_QUEUE.message}"]),
    "a duplicate name": (
        lambda c: c["priorities"].append({"name": "batch", "value": 1}),
        ['kns:priorities[batch].name: "batch" names another priority too; priority names are unique']),
    "priorities with queueing off": (
        lambda c: (c.update(queueing={"enabled": False}), c.pop("queues"), c.pop("profiles"),
                   [(e.pop("queue", None), e.pop("priority", None)) for e in c["jobs"] + c["schedules"]]),
        [f"kns:priorities: {rules.PRIORITIES_NEED_QUEUEING.message}"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_priorities_are_refused_by_the_program_and_validate_alike(case, tmp_path, capsys):
    refused_edited(tmp_path, capsys, CONFIG, BAD[case])


def test_an_entrys_labels_cannot_set_the_priority_label(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["jobs"][0]["labels"] = {LABEL: "report"}
    refused(tmp_path, capsys, config, [f"kns:jobs[train].labels.{LABEL}: {rules.PROGRAM_OWNED_PRIORITY_LABEL.message}"])


def test_a_namespace_entry_takes_no_priority(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["jobs"].append({"name": "space", "type": "namespace", "user": "ann", "priority": "batch"})
    text = validate_text(tmp_path, config, capsys)
    assert f"kns:jobs[space].priority: {rules.NAMESPACE_NO_WORKLOAD.message}" in text, text


# ---- whether a prescaled start is guaranteed ---------------------------------------------


def verdicts(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from kns_cli import stack
    root = write_project_dir(config)
    cfg, plans = stack.load_stack(root, "case")
    document = explain.explain(plan_stack(cfg, plans, NOW), now=NOW)
    return {facts["name"]: facts["start"] for facts in document["entries"] if facts["start"] is not None}


_ROOTS: list[Any] = []


def write_project_dir(config: dict[str, Any]):
    import tempfile
    from pathlib import Path
    directory = tempfile.TemporaryDirectory()
    _ROOTS.append(directory)
    return write_project(Path(directory.name) / "project", config)


def test_a_prescaled_schedule_on_a_queue_that_preempts_lower_priorities_is_guaranteed():
    found = verdicts(CONFIG)
    assert found["report"]["guaranteed"] is True, found["report"]
    assert (found["report"]["priority"], found["report"]["value"]) == ("report", 1000)
    assert found["report"]["prioritySource"] == "the highest priority: a prescaled schedule on a queue"
    assert "plain" not in found  # not prescaled: no start to keep


def test_without_preemption_and_with_lower_priority_work_it_is_best_effort_and_says_why():
    found = verdicts(CONFIG)["flat-report"]
    assert found["guaranteed"] is False
    assert found["reasons"] == ['queue "flat" has no preemption (withinClusterQueue: Never), and 1 entry of lower '
                                "priority may hold its quota at warm-up time"]


def test_no_preemption_is_needed_when_nothing_of_lower_priority_uses_the_queue():
    config = copy.deepcopy(CONFIG)
    config["jobs"] = [e for e in config["jobs"] if e.get("queue") != "flat"]
    assert verdicts(config)["flat-report"]["guaranteed"] is True


def test_schedules_of_equal_priority_whose_warm_ups_overlap_beyond_the_quota_are_flagged_before_up():
    config = copy.deepcopy(CONFIG)
    # Three 8-CPU reports on a 16-CPU queue, 10-minute warm-ups from 02:20, 02:25 and 02:23:
    # from 02:25 the three hold it at once.
    config["schedules"] += [schedule("report-b", "35 2 * * *"), schedule("report-c", "33 2 * * *")]
    found = verdicts(config)
    assert found["report-c"]["guaranteed"] is False
    (reason,) = found["report-c"]["reasons"]
    assert reason.startswith("2 other schedules of the same or a higher priority (report, report-b) hold its queue "
                             "at 2026-12-01T02:25:00+00:00, during its warm-up, on pool cpu: together they ask cpu 24, "
                             'queue "research" holds 16 (28 runs in the next 28 days)'), reason
    assert len(found["report-c"]["lateRuns"]) == 28
    # Without report-b, two hold it at once at most: that fits.
    config["schedules"] = [s for s in config["schedules"] if s["name"] != "report-b"]
    assert verdicts(config)["report-c"]["guaranteed"] is True


def test_a_start_verdict_names_times_in_the_schedules_own_zone():
    """One sentence, one convention (docs/outputs.md, "Times"): the warm-up time a reason
    names is in the schedule's zone, as its late runs are, never UTC beside local."""
    config = copy.deepcopy(CONFIG)
    config["schedules"] += [schedule("report-b", "35 2 * * *"), schedule("report-c", "33 2 * * *")]
    for entry in config["schedules"]:
        entry["timeZone"] = "America/New_York"
    found = verdicts(config)["report-c"]
    (reason,) = found["reasons"]
    assert "hold its queue at 2026-12-01T02:25:00-05:00, during its warm-up" in reason and "UTC" not in reason, reason
    assert found["lateRuns"][0] == "2026-12-01T02:33:00-05:00", found["lateRuns"]


def test_schedules_that_overlap_only_on_some_days_are_late_only_on_those():
    config = copy.deepcopy(CONFIG)
    config["schedules"] += [schedule("weekly-a", "30 2 * * 1"), schedule("weekly-b", "30 2 * * 1")]
    found = verdicts(config)
    late = found["weekly-b"]["lateRuns"]
    assert late and all(datetime.fromisoformat(s).weekday() == 0 for s in late)
    assert found["report"]["lateRuns"] == found["weekly-b"]["lateRuns"]  # report too: three on Mondays


def test_a_run_that_must_borrow_is_best_effort():
    config = copy.deepcopy(CONFIG)
    config["queues"][0]["cohort"] = "shared"
    config["queues"][1]["cohort"] = "shared"
    config["schedules"][0]["cpu"] = 24
    found = verdicts(config)["report"]
    assert found["guaranteed"] is False
    assert any("must borrow from its cohort" in r for r in found["reasons"]), found
    assert any('lends its idle quota to cohort "shared"' in r for r in found["reasons"]), found


def test_explain_shows_the_priority_and_the_verdict(tmp_path, capsys):
    from kns_cli import cli
    root = write_project(tmp_path / "project", CONFIG)
    assert cli.main(["explain", "--stack", "case", "--project-dir", str(root), "report", "flat-report", "bobs"]) == 0
    out = capsys.readouterr().out
    assert "  priority:       report (the highest priority: a prescaled schedule on a queue)" in out, out
    assert "  start:          guaranteed: its queue holds it at every warm-up of the next 28 days" in out
    assert '  start:          best effort: queue "flat" has no preemption' in out
    assert "  priority:       urgent (profile rule bob)" in out


def test_the_timeline_marks_guaranteed_and_best_effort_runs_differently():
    from kns_cli import stack
    from kns_testing.svg import SVG, svg_ids, tooltip
    root = write_project_dir(CONFIG)
    cfg, plans = stack.load_stack(root, "case")
    drawing = timeline.draw(cfg, plans, NOW, 24.0)
    ids = svg_ids(drawing.svg())
    runs = {gid: kind for gid, kind in drawing.kinds.items() if gid.startswith("run-")}
    assert sorted(runs.values()) == ["best-effort", "guaranteed", "run"]  # report, flat-report, plain
    assert set(runs) <= set(ids)
    for gid, kind in runs.items():  # drawn in their colours, the best-effort one dashed
        style = ids[gid].find(f"{SVG}path").get("style")
        assert f"stroke: {timeline.COLORS[kind][1]}" in style and ("stroke-dasharray" in style) == (kind == "best-effort")
    (report,) = [r for r in drawing.rows if r.plan.entry.name == "report"]
    assert [run.start.isoformat() for run in report.runs] == ["2026-12-01T02:30:00+00:00"]
    assert runs["run-report-0"] == "guaranteed" and tooltip(ids["run-report-0"]).endswith(": start guaranteed")
    assert ": best effort, " in tooltip(ids["run-flat-report-0"])


def test_the_check_reads_the_schedules_own_windows():
    """The window is the warm-up to the start, or to the Job's deadline when it has one."""
    from kns_cli import stack
    config = copy.deepcopy(CONFIG)
    config["schedules"] += [schedule("long", "0 2 * * *", activeDeadlineSeconds=3600),
                            schedule("long-b", "0 2 * * *")]
    root = write_project_dir(config)
    cfg, plans = stack.load_stack(root, "case")
    checks = starts.check_starts(cfg, plans, NOW)
    # long holds 8 CPU from 01:50 to 03:00; long-b from 01:50 to 02:00; report's 02:20-02:30
    # overlaps long only: 16 of 16. long-b with long and report: 16 too.
    assert checks["report"].guaranteed and checks["long-b"].guaranteed
    config["schedules"].append(schedule("third", "25 2 * * *"))
    root = write_project_dir(config)
    cfg, plans = stack.load_stack(root, "case")
    checks = starts.check_starts(cfg, plans, NOW)
    assert not checks["third"].guaranteed and not checks["report"].guaranteed


def test_the_worked_example_of_docs_queueing_says_what_explain_says(tmp_path, capsys):
    """docs/queueing.md, "Start times on a busy queue": its stack file, and the lines
    `./kns explain report` prints for it, with preemption and without."""
    import re

    import yaml

    from kns_cli import cli
    from kns_testing.program import ROOT
    text = (ROOT / "docs" / "queueing.md").read_text()
    section = text[text.index("## Start times on a busy queue"):]
    document = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    for preemption in ("LowerPriority", "Never"):
        document["config"]["kns:queues"][0]["preemption"]["withinClusterQueue"] = preemption
        root = tmp_path / preemption
        root.mkdir()
        (root / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
        (root / "Pulumi.case.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
        assert cli.main(["explain", "--stack", "case", "--project-dir", str(root), "report"]) == 0
        lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("  priority:", "  start:"))]
        assert len(lines) == 2 and all(line in section for line in lines), lines


def two_pools() -> dict[str, Any]:
    """CONFIG with a second pool, cpu2, in queue research's quota."""
    config = copy.deepcopy(CONFIG)
    config["nodePools"].append({"name": "cpu2", "role": "compute", "nodes": ["d1"]})
    config["queues"][0]["quota"]["cpu2"] = {"cpu": 16, "memory": "64Gi"}
    return config


def unpinned(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "pool"}


def test_a_schedule_that_names_no_pool_may_take_the_pools_quota_first():
    """Kueue may admit an entry without a pool on any pool of its queue, this one first:
    two such reports of the same priority overlapping report's warm-up crowd pool cpu."""
    config = two_pools()
    config["schedules"] += [unpinned(schedule("anywhere", "30 2 * * *")),
                            unpinned(schedule("anywhere-b", "30 2 * * *"))]
    found = verdicts(config)["report"]
    assert found["guaranteed"] is False
    (reason,) = found["reasons"]
    assert reason.startswith("2 other schedules of the same or a higher priority (anywhere, anywhere-b) hold its "
                             "queue at 2026-12-01T02:20:00+00:00, during its warm-up, on pool cpu: together they ask "
                             'cpu 24, queue "research" holds 16'), reason
    # Pinned to the other pool, they take none of cpu's quota.
    for entry in config["schedules"][-2:]:
        entry["pool"] = "cpu2"
    assert verdicts(config)["report"]["guaranteed"] is True


def test_a_job_that_names_no_pool_is_counted_on_each_pool_it_fits_and_only_there():
    config = two_pools()
    config["jobs"] = [job("pinned-elsewhere", pool="cpu2", priority="report")]
    assert verdicts(config)["report"]["guaranteed"] is True
    config["jobs"].append(unpinned(job("anywhere", priority="report")))
    found = verdicts(config)["report"]
    assert found["reasons"] == ['1 other entry of the same or a higher priority on queue "research" (anywhere) may '
                                "hold its quota at any time, and none can be preempted for it"]
    # One that fits only on cpu2 (more CPU than cpu's quota and borrowing) never holds cpu's.
    config["queues"][0]["quota"]["cpu2"]["cpu"] = 32
    config["jobs"][-1]["cpu"] = 24
    assert verdicts(config)["report"]["guaranteed"] is True


def test_a_held_queue_guarantees_no_start(tmp_path, capsys):
    from kns_cli import cli
    config = copy.deepcopy(CONFIG)
    config["queues"][0]["hold"] = True
    found = verdicts(config)["report"]
    assert found["guaranteed"] is False
    assert found["reasons"] == ['queue "research" is held (kns:queues[research].hold): it admits nothing new until '
                                "the hold is lifted"]
    root = write_project(tmp_path / "project", config)
    assert cli.main(["explain", "--stack", "case", "--project-dir", str(root), "report"]) == 0
    out = capsys.readouterr().out
    assert '  start:          best effort: queue "research" is held' in out and "guaranteed" not in out
