"""kwok's primed stage is held to the real wait (issue 44, item 2).

The e2e tests check that a prescaled pod's workload starts at its start time through kwok,
which runs no containers: scripts/kwok/pod-complete-primed.yaml completes a primed pod at
the instant its jq expression computes, standing in for plan/wait.py's script. That proof
is only as good as the stand-in. Here both run on the same pods: kwok's own stage code
(kns-stage-delay, built by scripts/cluster-build.sh inside the pinned kwok module, on the
stages scripts/kwok/stages.sh composes for the control plane), and the wait script itself
under busybox sh with the environment plan/wait.py gives the container. Names, zones (DST
changes, half and three-quarter hour offsets), leads, a late Job and Jobs made by hand:
every case must give the same instant, and kwok must pick the primed stage.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from kns_testing.cluster import script
from kns_testing.program import ROOT
from plan import wait

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "America/St_Johns"]
LEADS = [0, 5, 30, 120]
# Scheduled times (UTC) around the zones' clock changes of 2026, ordinary days, and (in
# cases()) times ahead of the run, whose starts are still to come.
SCHEDULED = [datetime(2026, 3, 29, 0, 30), datetime(2026, 3, 29, 1, 0), datetime(2026, 3, 8, 6, 55),
             datetime(2026, 4, 4, 14, 45), datetime(2026, 10, 4, 15, 40), datetime(2026, 10, 25, 0, 50),
             datetime(2026, 11, 1, 5, 30)]
# What the script says when it computes a start: holding until it, or already past it.
TARGET = re.compile(r"until the start at (\d+) \(epoch seconds\)|start (\d+) is -?\d+s past")


@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> tuple[Path, Path]:
    """kns-stage-delay and the stages kwok plays on the control plane."""
    bin_dir = Path(script("cluster-build.sh"))
    composed = tmp_path_factory.mktemp("stages") / "kwok-stages.yaml"
    done = subprocess.run(["bash", str(ROOT / "scripts" / "kwok" / "stages.sh"),
                           str(bin_dir.parent / "share" / "kwok-stages.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    composed.write_text(done.stdout)
    return bin_dir / "kns-stage-delay", composed


def primed_pod(job: str, container: dict, legacy_label: bool = False) -> dict:
    """A Running pod of Job `job` as the Job controller makes it from a primed template."""
    label = "job-name" if legacy_label else "batch.kubernetes.io/job-name"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{job}-abcde", "namespace": "kns-report", "labels": {label: job},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u",
                                              "controller": True}]},
            "spec": {"initContainers": [container], "containers": [{"name": "report", "image": "busybox:1.37"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "report", "image": "busybox:1.37",
                                                                  "ready": True, "state": {"running": {}}}]}}


def kwok_instants(binary: Path, stages: Path, pods: list[dict], now: datetime) -> list[tuple[str, str]]:
    lines = "".join(json.dumps({"pod": pod, "now": now.isoformat().replace("+00:00", "Z")}) + "\n" for pod in pods)
    done = subprocess.run([str(binary), str(stages)], input=lines, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [(a["stage"], a["at"]) for a in map(json.loads, done.stdout.splitlines())]


def script_instant(container: dict, labels: dict[str, str]) -> str:
    """The start the real script computes, from the first line it prints (it would then
    sleep until it: stopped there). "" when it starts at once with no start (by hand)."""
    env = {"PATH": os.environ["PATH"]}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:  # the downward API: metadata.labels['<key>']
            key = re.fullmatch(r"metadata\.labels\['(.+)'\]", item["valueFrom"]["fieldRef"]["fieldPath"]).group(1)
            env[item["name"]] = labels.get(key, "")
    assert container["command"][:2] == ["sh", "-c"]
    process = subprocess.Popen(["busybox", "sh", "-c", container["command"][2]], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        first = process.stdout.readline()
    finally:
        process.kill()
        process.wait()
    if "started by hand" in first:
        return ""
    match = TARGET.search(first)
    assert match, first
    return datetime.fromtimestamp(int(match.group(1) or match.group(2)), timezone.utc).isoformat().replace("+00:00", "Z")


def kwok_at(stage_at: str) -> str:
    """kwok's instant in the script's terms: whole seconds, UTC, as RFC 3339."""
    if not stage_at:
        return ""
    instant = datetime.fromisoformat(stage_at.replace("Z", "+00:00"))
    assert instant.microsecond == 0, stage_at  # the stage computes whole seconds, as the script does
    return instant.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def cases() -> list[tuple[str, dict, dict]]:
    """(what, container, pod): a primed Job for each zone, lead and scheduled time, and the
    Jobs with no scheduled time in their name."""
    found = []
    ahead = datetime.now(timezone.utc).replace(second=0, microsecond=0, tzinfo=None)
    for zone in ZONES:
        for lead in LEADS:
            container = wait.wait_container(lead, zone)
            for when in [*SCHEDULED, ahead + timedelta(hours=3), ahead + timedelta(days=40, minutes=7)]:
                minutes = int(when.replace(tzinfo=timezone.utc).timestamp()) // 60
                job = f"nightly-report-{minutes}"
                found.append((f"{zone} lead {lead} {when:%Y-%m-%dT%H:%M}", container, primed_pod(job, container)))
    container = wait.wait_container(5, "Europe/Paris")
    found.append(("legacy job-name label", container, primed_pod("weekly-finetune-29500000", container, legacy_label=True)))
    for job in ("nightly-report-manual", "report", "nightly-report-12a4", "nightly-report-"):
        found.append((f"made by hand: {job}", container, primed_pod(job, container)))
    return found


def test_kwok_s_primed_stage_and_the_wait_script_give_the_same_start(stages):
    binary, composed = stages
    every = cases()
    now = datetime.now(timezone.utc).replace(microsecond=0)
    answers = kwok_instants(binary, composed, [pod for _, _, pod in every], now)
    assert len(answers) == len(every)
    late = 0
    for (what, container, pod), (stage, at) in zip(every, answers):
        assert stage == "pod-complete-primed", (what, stage)
        expected = script_instant(container, pod["metadata"]["labels"])
        assert kwok_at(at) == expected, (what, at, expected)
        late += bool(expected) and datetime.fromisoformat(expected.replace("Z", "+00:00")) < now
    # The sample holds both kinds: starts already past (a late Job: both start at once,
    # kwok with a negative delay) and starts ahead.
    assert 0 < late < len(every) - 5


def test_a_hand_made_job_completes_at_once_in_both(stages):
    binary, composed = stages
    container = wait.wait_container(15, "UTC")
    pod = primed_pod("report", container)
    ((stage, at),) = kwok_instants(binary, composed, [pod], datetime.now(timezone.utc))
    assert (stage, at) == ("pod-complete-primed", "")
    assert script_instant(container, pod["metadata"]["labels"]) == ""


def test_a_pod_without_the_wait_is_not_the_primed_stage_s(stages):
    """The stage keys on the wait container: a Job pod without it completes by the module's
    pod-complete stage, at once."""
    binary, composed = stages
    pod = primed_pod("nightly-report-29500000", wait.wait_container(5, "UTC"))
    pod["spec"]["initContainers"] = []
    ((stage, _),) = kwok_instants(binary, composed, [pod], datetime.now(timezone.utc))
    assert stage == "pod-complete"
