"""A prescaled run's deadlines against its warm-up (issue 29, docs/validation.md): the Job's
and the pod's activeDeadlineSeconds count from the moment the primer's pod starts
waiting, so one no longer than the lead kills the run before its workload starts. Set
directly, in a podSpec, by an override or by a profile's override, against warmUpMinutes
or a primerSchedule: refused through both doors, under the field that set it."""

from __future__ import annotations

import copy

import pytest

from kns_testing.doors import checked, refused
from kns_testing.program import dev_stack_config

NAME = "nightly-report"  # the dev stack's: "30 2 * * *", warmUpMinutes 10


def config_with(change) -> dict:
    config = dev_stack_config()
    config.pop("jobFiles", None)  # the project copies of `refused` hold the stack file only
    entry = next(s for s in config["schedules"] if s["name"] == NAME)
    change(entry)
    return config


def pod_spec(deadline: int) -> dict:
    return {"activeDeadlineSeconds": deadline,
            "containers": [{"name": "main", "image": "busybox:1.37",
                            "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}


def without_container_fields(entry: dict) -> None:
    for key in ("image", "cpu", "memory", "gpus", "command", "args"):
        entry.pop(key, None)


def message(value: int, what: str, lead_minutes: int) -> str:
    lead = lead_minutes * 60
    return (f"{value} s ends {what} during its warm-up: the wait holds it {lead} s (the {lead_minutes}-minute lead) "
            f"before the workload starts, and the deadline counts from the warm-up; give more than {lead} s plus "
            "the run's own time")


CASES = {
    "set directly": (lambda e: e.update(activeDeadlineSeconds=600),
                     [f"kns:schedules[{NAME}].activeDeadlineSeconds: {message(600, 'the Job', 10)}"]),
    "against a primerSchedule": (
        lambda e: (e.pop("warmUpMinutes"), e.update(primerSchedule="0 2 * * *", activeDeadlineSeconds=1200)),
        [f"kns:schedules[{NAME}].activeDeadlineSeconds: {message(1200, 'the Job', 30)}"]),
    "the Job's, by an override": (
        lambda e: e.update(jsonOverrides=[{"path": "/spec/activeDeadlineSeconds", "value": 30}]),
        [f"kns:schedules[{NAME}].jsonOverrides[0]: /spec/activeDeadlineSeconds: {message(30, 'the Job', 10)}"]),
    "the pod's, by an override": (
        lambda e: e.update(jsonOverrides=[{"path": "/spec/template/spec/activeDeadlineSeconds", "value": 599}]),
        [f"kns:schedules[{NAME}].jsonOverrides[0]: /spec/template/spec/activeDeadlineSeconds: "
         f"{message(599, 'the pod', 10)}"]),
    "the pod's, in a podSpec": (
        lambda e: (without_container_fields(e), e.update(podSpec=pod_spec(60))),
        [f"kns:schedules[{NAME}].podSpec.activeDeadlineSeconds: {message(60, 'the pod', 10)}"]),
}


@pytest.mark.parametrize("change, lines", list(CASES.values()), ids=list(CASES))
def test_a_deadline_no_longer_than_the_warm_up_is_refused(tmp_path, capsys, change, lines):
    refused(tmp_path, capsys, config_with(change), lines)


def test_a_profile_override_is_named_by_its_rule():
    config = config_with(lambda e: None)
    entry = next(s for s in config["schedules"] if s["name"] == NAME)
    config["profiles"] = {**config.get("profiles", {}), f"{entry['user']}": {
        "jsonOverrides": [{"path": "/spec/activeDeadlineSeconds", "value": 300}]}}
    (line,) = [l for l in checked(config) if l.startswith(f"kns:schedules[{NAME}]")]
    assert f'(profile rule "{entry["user"]}" jsonOverrides[0])' in line and message(300, "the Job", 10) in line


@pytest.mark.parametrize("deadline", [601, 3600])
def test_a_deadline_past_the_warm_up_is_taken(deadline):
    assert checked(config_with(lambda e: e.update(activeDeadlineSeconds=deadline))) == []
    assert checked(config_with(lambda e: (without_container_fields(e), e.update(podSpec=pod_spec(deadline))))) == []


def test_a_schedule_without_warm_up_keeps_any_deadline():
    assert checked(config_with(lambda e: (e.pop("warmUpMinutes"), e.update(activeDeadlineSeconds=1)))) == []
