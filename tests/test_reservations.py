"""Reservations (issue 45, contract section 15; docs/reservations.md): what each produces
under the program's own run (mocks), and every config problem, through both the program
and `./kns validate`, with nothing registered."""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo
from typing import Any

import pytest

from chrono import calendar as calendar_module
from config import rules
from kns_cli import cli
from kns_testing import apiserver
from kns_testing.doors import program_text, validate_text, write_project
from kns_testing.program import ROOT, run_laid_out, run_program
from kns_testing.reserving import CHALLENGE, CONFIG, DOC_NOW, doc_example, gpu_job, tuesday_in_paris
from plan.stackplan import plan_stack

CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LQ = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
COHORT = "kubernetes:kueue.x-k8s.io/v1beta2:Cohort"
CRON = "kubernetes:batch/v1:CronJob"
JOB = "kubernetes:batch/v1:Job"
WPC = "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"


@pytest.fixture(scope="module")
def run():
    return run_program(CONFIG)


def test_one_run_plans_its_reservations_and_the_pools_cohorts_once_at_one_instant(monkeypatch):
    """plan/stackplan.py: the program, its guard rails and its name checks read one plan of
    the reservations and one of the Cohorts, made at the run's instant."""
    from plan import reservations
    calls: dict[str, list] = {"plan_reservations": [], "pool_cohorts": []}
    for name in calls:
        real = getattr(reservations, name)

        def counted(*args, _real=real, _name=name):
            calls[_name].append(args[-1] if _name == "pool_cohorts" else None)
            return _real(*args)
        monkeypatch.setattr(reservations, name, counted)
    moment = datetime(2026, 12, 1, 7, 0, tzinfo=timezone.utc)
    from chrono import clock
    monkeypatch.setattr(clock, "now", lambda: moment)
    run = run_program(CONFIG)
    assert len(calls["plan_reservations"]) == 1 and calls["pool_cohorts"] == [moment]
    assert len(run.of_type(COHORT)) == 1 and len(run.of_type(CRON)) >= 3  # what the plan held was registered


def test_the_switched_fields_are_registered_ignored_and_nothing_else_is(monkeypatch):
    """What keeps `pulumi up` from undoing a window (docs/reservations.md, "Why pulumi up
    leaves a window alone"): the registration options the engine gets for the switch's
    CronJob and for every reservation LocalQueue of an entry, held exactly, so a field
    dropped from ignoreChanges (or one more ignored) fails here."""
    from kns_testing.program import registration_requests
    registered = registration_requests(monkeypatch)
    run_program(CONFIG)
    options = {}
    for (type_, name), request in registered.items():
        if type_ in (CRON, LQ):
            options[(type_, name)] = (tuple(sorted(request.ignoreChanges)), tuple(sorted(request.replaceOnChanges)),
                                      request.deleteBeforeReplace)
    switches = {k: v for k, v in options.items() if k[0] == CRON}
    assert len(switches) == 3  # course, challenge, maint
    assert set(switches.values()) == {(("spec.schedule", "spec.suspend"), ("spec.jobTemplate",), True)}
    entry_queues = {k: v for k, v in options.items() if k[0] == LQ and k[1].endswith("-localqueue-kns-res")}
    assert len(entry_queues) == 2  # lab's (course) and train's (challenge)
    assert set(entry_queues.values()) == {(("spec.stopPolicy",), (), False)}
    # The holders' queues and the entries' own queues are the program's alone.
    others = [v for k, v in options.items() if k[0] == LQ and k not in entry_queues]
    assert len(others) >= 5 and set(others) == {((), (), False)}


def test_the_reservations_objects_are_what_the_api_server_accepts(run):
    assert apiserver.problems(run.resources) == []


def test_a_pool_sets_aside_the_most_its_reservations_hold_at_once_lent_to_its_queues_cohort(run):
    (cohort,) = [r.inputs for r in run.of_type(COHORT)]
    assert cohort["metadata"]["name"] == "kns-res-pool-a100"
    assert cohort["spec"]["parentName"] == "site"
    group = cohort["spec"]["resourceGroups"][0]
    (flavor,) = group["flavors"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    # course (16), challenge (32, Wednesday to Friday) and maint (32, Sunday night) never
    # meet: the most at once is 32 GPUs, not 80.
    assert quota == {"nvidia.com/gpu": "32", "cpu": "128", "memory": "1Ti"}


def test_each_reservation_borrows_at_most_what_it_holds_and_reclaims_what_it_lent(run):
    queues = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in run.of_type(CQ)}
    course = queues["kns-res-course"]
    assert course["cohortName"] == "kns-res-pool-a100"
    assert course["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    resources = {r["name"]: r for r in course["resourceGroups"][0]["flavors"][0]["resources"]}
    assert resources["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "16"}
    # What it does not hold is never lent, and bounded by its nodes rather than by Kueue.
    assert resources["cpu"]["lendingLimit"] == "0" and resources["memory"]["lendingLimit"] == "0"
    challenge = {r["name"]: r for r in queues["kns-res-challenge"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert challenge["cpu"] == {"name": "cpu", "nominalQuota": "0", "borrowingLimit": "128"}


def test_an_entry_of_a_reservation_goes_to_its_held_local_queue(run):
    jobs = {r.name: r.inputs for r in run.of_type(JOB)}
    assert jobs["lab"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kns-res"
    assert jobs["lab"]["spec"]["suspend"] is True
    assert jobs["train"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kns-res"  # no queue of its own
    assert jobs["plain"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kns"
    local = {(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["spec"] for r in run.of_type(LQ)}
    # Created as the calendar says when the program runs (held here: the challenge is weeks ahead).
    assert local[("kns-train", "kns-res")] == {"clusterQueue": "kns-res-challenge", "stopPolicy": "Hold"}
    assert local[("kns-lab", "kns-res")]["clusterQueue"] == "kns-res-course"
    assert local[("kns-lab", "kns")] == {"clusterQueue": "batch"}  # where atEnd: requeue sends it
    assert ("kns-plain", "kns-res") not in local
    # The switch finds them by label; the one of an entry that requeues names its own queue.
    metadata = {(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["metadata"]
                for r in run.of_type(LQ)}
    assert metadata[("kns-lab", "kns-res")]["labels"]["kns.io/reservation"] == "course"
    assert metadata[("kns-lab", "kns-res")]["annotations"]["kns.io/own-queue"] == "kns"
    assert "kns.io/own-queue" not in metadata[("kns-train", "kns-res")].get("annotations", {})


def test_the_switch_is_told_the_calendar_and_starts_by_firing_every_minute(run):
    crons = {r.inputs["metadata"]["namespace"]: r.inputs for r in run.of_type(CRON)
             if r.inputs["metadata"]["name"] == "switch"}
    assert set(crons) == {"kns-res-course", "kns-res-challenge", "kns-res-maint"}
    course = crons["kns-res-course"]
    assert course["spec"]["schedule"] == "* * * * *" and course["spec"]["timeZone"] == "Etc/UTC"
    pod = course["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    told = json.loads(next(e["value"] for e in pod["containers"][0]["env"] if e["name"] == "KNS_RESERVATION"))
    assert told["calendar"] == {"schedule": "0 9 * * 2", "zone": "Europe/Paris", "seconds": 10800}
    assert told["leadSeconds"] == 900 and told["atEnd"] == "requeue"
    assert (told["localQueue"], told["label"]) == ("kns-res", "kns.io/reservation")
    holder = told["holder"]
    assert holder["spec"]["parallelism"] == 16  # one GPU each, admitted partially
    assert holder["metadata"]["annotations"] == {"kueue.x-k8s.io/job-min-parallelism": "1"}
    assert holder["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == rules.RESERVATION_HOLDER_PRIORITY
    container = holder["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    classes = {r.inputs["metadata"]["name"]: r.inputs["value"] for r in run.of_type(WPC)}
    assert classes[rules.RESERVATION_HOLDER_PRIORITY] == rules.PRIORITY_VALUE_MIN


def test_the_switch_carries_its_code_and_its_zone_from_this_program(run):
    maps = {r.inputs["metadata"]["namespace"]: r.inputs for r in run.of_type("kubernetes:core/v1:ConfigMap")
            if r.inputs["metadata"]["name"] == "switch"}
    code = maps["kns-res-course"]
    from plan import reservation_switch
    assert code["data"]["switch.py"] == open(reservation_switch.__file__).read()
    assert code["data"]["tzdata.zones"] == "Etc/UTC\nEurope/Paris\n"
    assert set(code["binaryData"]) == {"tzdata.zoneinfo.Etc.UTC", "tzdata.zoneinfo.Europe.Paris"}


@pytest.mark.parametrize("namespace", ["kns-res-course", "kns-res-challenge"])
def test_the_switch_runs_from_its_layout_alone(run, tmp_path, namespace):
    """The switch's ConfigMap carries every module its script imports, at any depth: laid
    out as its pod mounts them, it computes its calendar in a Python that has nothing else
    (no site-packages, no project), as in this process."""
    from plan import reservation_switch
    (cron,) = [r.inputs for r in run.of_type("kubernetes:batch/v1:CronJob") if r.metadata["namespace"] == namespace]
    (code,) = [r.inputs for r in run.of_type("kubernetes:core/v1:ConfigMap")
               if r.metadata.get("namespace") == namespace and r.metadata["name"] == "switch"]
    probe = ("import json, os; from datetime import datetime, timezone; import switch; from chrono import calendar;"
             "cal = switch.reservation_calendar(json.loads(os.environ['KNS_RESERVATION']));"
             "print(' | '.join(calendar.describe(w, cal.zone) for w in calendar.next_windows(cal, NOW, 2)))")
    now = "datetime(2026, 11, 28, 12, tzinfo=timezone.utc)"
    done = run_laid_out(cron, code, tmp_path, probe.replace("NOW", now))
    assert done.returncode == 0, done.stderr
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (spec,) = [e["value"] for e in pod["containers"][0]["env"] if e["name"] == "KNS_RESERVATION"]
    cal = reservation_switch.reservation_calendar(json.loads(spec))
    here = " | ".join(calendar_module.describe(w, cal.zone)
                      for w in calendar_module.next_windows(cal, datetime(2026, 11, 28, 12, tzinfo=timezone.utc), 2))
    assert done.stdout.strip() == here and here


def test_the_switchs_rbac_names_its_own_objects(run):
    roles = {(r.inputs["metadata"].get("namespace"), r.inputs["metadata"]["name"]): r.inputs["rules"]
             for r in [*run.of_type(ROLE), *run.of_type(CLUSTER_ROLE)] if "kns.io/reservation" in
             r.inputs["metadata"].get("labels", {})}
    own = roles[("kns-res-course", "switch")]
    assert {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "delete"],
            "resourceNames": ["holder"]} in own
    assert {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get", "patch"],
            "resourceNames": ["switch"]} in own
    assert roles[(None, "kns-res-course-find")] == [  # which LocalQueues are its: read only
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["list"]}]
    entries = roles[(None, "kns-res-course-entries")]
    assert entries[0] == {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get", "patch"],
                          "resourceNames": ["kns-res"]}
    assert len(roles[(None, "kns-res-challenge-entries")]) == 1  # finish: moves no Job


def test_the_platforms_own_containers_of_a_reservation_are_hardened(run):
    specs = [r.inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"] for r in run.of_type(CRON)
             if r.inputs["metadata"]["name"] == "switch"]
    for cron in [r.inputs for r in run.of_type(CRON) if r.inputs["metadata"]["name"] == "switch"]:
        told = json.loads(cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"])
        specs.append(told["holder"]["spec"]["template"]["spec"])
    for pod in specs:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["runAsUser"] > 0 and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]} and context["readOnlyRootFilesystem"] is True


# ---- bad input: every problem at its path, the program and ./kns validate alike ----------


def edit(path: str, value: Any):
    """A change to CONFIG: `reservations[course].duration` style paths."""
    def change(config: dict[str, Any]) -> None:
        section, _, rest = path.partition("[")
        name, _, key = rest.partition("].")
        item = next(i for i in config[section] if i["name"] == name)
        if value is None:
            item.pop(key, None)
        else:
            item[key] = value
    return change


def both(*changes):
    def change(config: dict[str, Any]) -> None:
        for one in changes:
            one(config)
    return change


BAD = {
    "duration zero": (edit("reservations[course].duration", "0m"),
                      ["kns:reservations[course].duration: " + rules.RESERVATION_DURATION.message]),
    "duration negative": (edit("reservations[course].duration", "-3h"),
                          ["kns:reservations[course].duration: " + rules.RESERVATION_DURATION.message]),
    "duration beyond the period": (edit("reservations[maint].duration", "170h"), [
        "kns:reservations[maint].duration: 170h is longer than the time between two windows: the window "]),
    "start after end": (edit("reservations[challenge].end", f"{CHALLENGE - timedelta(days=1)}T08:00:00+01:00"), [
        f"kns:reservations[challenge].end: {CHALLENGE - timedelta(days=1)}T08:00:00+01:00 is not after start "
        f"{CHALLENGE}T08:00:00+01:00"]),
    "start without offset": (edit("reservations[challenge].start", f"{CHALLENGE}T08:00:00"),
                             ["kns:reservations[challenge].start: " + rules.RESERVATION_OFFSET.message]),
    "unknown zone": (edit("reservations[course].timeZone", "Mars/Olympus"), [
        'kns:reservations[course].timeZone: "Mars/Olympus" is not an IANA time zone (for example "Europe/Paris" or '
        '"Etc/UTC")']),
    "a wrong value": (edit("reservations[course].atEnd", "keep"), [
        "kns:reservations[course].atEnd: \"keep\" is invalid: input should be 'requeue' or 'finish'"]),
    "duration a number": (edit("reservations[course].duration", 3), [
        "kns:reservations[course].duration: 3 is a number, not a duration of hours and minutes"]),
    "duration the number 0": (edit("reservations[course].duration", 0), [
        "kns:reservations[course].duration: 0 is a number, not a duration of hours and minutes"]),
    "misspelt reservation": (edit("jobs[plain].reservation", "corse"), [
        'kns:jobs[plain].reservation: names no reservation; did you mean "course"? '
        "(reservations: challenge, course, maint)"]),
    "unknown pool": (edit("reservations[course].pool", "h100"),
                     ['kns:reservations[course].pool: names no node pool; did you mean "a100"? (pools: a100, cpu)']),
    "pool with no close name": (edit("reservations[course].pool", "tpu-v5"),
                                ["kns:reservations[course].pool: names no node pool (pools: a100, cpu)"]),
    "nodes and resources": (edit("reservations[course].resources", {"gpus": 8}),
                            ["kns:reservations[course]: " + rules.RESERVATION_HOLDS_ONE.message]),
    "more nodes than the pool": (edit("reservations[maint].nodes", 9),
                                 ["kns:reservations[maint].nodes: 9 nodes is more than pool a100 has (8)"]),
    "nodes beyond an autoscaled pool's limits": (both(
        lambda c: c["nodePools"].append({"name": "burst", "role": "gpu", "gpu": {"perNode": 8}, "autoscale": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "limits": {"nvidia.com/gpu": 64, "nodes": 4}}}),
        edit("reservations[maint].pool", "burst"), edit("reservations[maint].nodes", 5)),
        ["kns:reservations[maint].nodes: 5 nodes is more than pool burst may grow to (4 nodes by its limits)"]),
    "GPUs beyond an autoscaled pool's limits": (both(
        lambda c: c["nodePools"].append({"name": "burst", "role": "gpu", "gpu": {"perNode": 8}, "autoscale": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "limits": {"nvidia.com/gpu": 16}}}),
        edit("reservations[maint].pool", "burst"), edit("reservations[maint].nodes", 3)),
        ["kns:reservations[maint].nodes: holds 24 GPUs, more than pool burst can have (16 GPUs by its limits)"]),
    "nodes on a pool without GPUs": (both(edit("reservations[maint].pool", "cpu"), edit("reservations[maint].nodes", 1)),
                                     ["kns:reservations[maint].nodes: pool cpu has no GPUs"]),
    "nodes on an autoscaled pool without GPUs": (both(
        lambda c: c["nodePools"].append({"name": "burst", "role": "compute", "autoscale": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "limits": {"cpu": 64}}}),
        edit("reservations[maint].pool", "burst"), edit("reservations[maint].nodes", 1)),
        ["kns:reservations[maint].nodes: pool burst has no GPUs"]),
    "name of a queue": (edit("reservations[course].name", "batch"), [
        'kns:reservations[batch].name: "batch" is also the name of a queue']),
    "requeue without a queue": (edit("jobs[lab].queue", None),
                                ["kns:jobs[lab].reservation: " + rules.RESERVATION_REQUEUE_NEEDS_QUEUE.message]),
    "not allowed": (edit("jobs[lab].groups", ["other"]),
                    ['kns:jobs[lab].reservation: may not use reservation "course": it is for group teach']),
    "maintenance for no one": (edit("jobs[plain].reservation", "maint"), [
        'kns:jobs[plain].reservation: may not use reservation "maint": it is for no one (a maintenance window)']),
    "unknown reservation": (edit("jobs[plain].reservation", "exam"), [
        "kns:jobs[plain].reservation: names no reservation (reservations: challenge, course, maint)"]),
    "an entry on another pool": (edit("jobs[train].pool", "cpu"), [
        'kns:jobs[train].reservation: reservation "challenge" holds pool a100, but the entry runs on pool cpu']),
    "a pod larger than the reservation": (both(edit("jobs[train].gpus", 8), edit("jobs[train].parallelism", 5)), [
        'kns:jobs[train].reservation: reservation "challenge" can never admit its Job: 5 pods ask 40 GPUs '
        "(it holds 32 GPUs)"]),
    "an entry in a reservation's namespace": (edit("jobs[plain].name", "res-maint"), [
        "kns:jobs[res-maint].name: its namespace would be reservation \"maint\"'s"]),
    "queueing off": (lambda c: c.update(queueing={"enabled": False}), [
        "kns:reservations[course]: " + rules.RESERVATIONS_NEED_QUEUEING.message]),
}


def lines_start(tmp_path, capsys, config: dict[str, Any], starts: list[str]) -> None:
    """Both the program and ./kns validate refuse `config`; each expected line begins one of
    their problem lines, and the two say the same."""
    program = program_text(config)
    validated = validate_text(tmp_path, config, capsys)
    assert program == validated
    for start in starts:
        assert any(line.lstrip("- ").startswith(start) for line in program.splitlines()), (start, program)


@pytest.mark.parametrize("case", sorted(BAD), ids=sorted(BAD))
def test_a_reservation_that_cannot_work_is_refused_at_its_path(tmp_path, capsys, case):
    change, starts = BAD[case]
    config = copy.deepcopy(CONFIG)
    change(config)
    lines_start(tmp_path, capsys, config, starts)


def test_reservations_that_meet_beyond_the_pool_name_both_and_the_first_window(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    # A second challenge on the Thursday night meets the first: 64 GPUs, and the queue's 16,
    # on a 64-GPU pool.
    night = CHALLENGE + timedelta(days=1)
    config["reservations"].append({"name": "rival", "pool": "a100", "resources": {"gpus": 32},
                                   "start": f"{night}T00:00:00+01:00", "end": f"{night}T06:00:00+01:00"})
    lines_start(tmp_path, capsys, config, [
        'kns:reservations[rival]: with reservation "challenge" it holds 64 GPUs of pool a100 at once, and its '
        f"queues hold 16 GPUs of it: more than its 64 GPUs, first in the window {night}T00:00:00+01:00 to "
        f"{night}T06:00:00+01:00"])


SECRETISH = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


@pytest.mark.parametrize("key", ["start", "end", "pool", "entries", "duration", "users"])
def test_a_value_in_the_wrong_place_is_never_repeated(tmp_path, capsys, key):
    """A token pasted where a time, a pool, an entry or a duration belongs: refused (where
    the field can be wrong) at its path, through both doors, and never shown."""
    config = copy.deepcopy(CONFIG)
    item = next(r for r in config["reservations"] if r["name"] == ("challenge" if key in ("start", "end") else "course"))
    value = {"entries": [SECRETISH], "users": [SECRETISH], "resources": {SECRETISH: 1}}.get(key, SECRETISH)
    item[key] = value
    try:
        text = program_text(config)
    except BaseException:  # accepted (users may be anyone's name): nothing to show
        assert key == "users"
        return
    assert SECRETISH not in text and SECRETISH not in validate_text(tmp_path, config, capsys), text
    assert "kns:reservations[" in text


@pytest.mark.parametrize("zone", ["America/Chicgo", "Europe/Pari", "Mars/Olympus", "europe/paris"])
def test_a_reservations_zone_is_refused_as_a_schedules_is(tmp_path, capsys, zone):
    """One zone check, one message wherever a zone is given: the value written (a zone name
    is no secret) and the product's own example, untouched."""
    from chrono.cron import zone_problem
    config = copy.deepcopy(CONFIG)
    next(r for r in config["reservations"] if r["name"] == "course")["timeZone"] = zone
    expected = f"kns:reservations[course].timeZone: {zone_problem(zone)}"
    assert f'"{zone}"' in expected and '(for example "Europe/Paris" or "Etc/UTC")' in expected
    lines_start(tmp_path, capsys, config, [expected])
    assert expected in program_text(config).replace("  - ", "").splitlines()


def test_a_one_off_window_already_over_is_a_warning_with_its_date(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["reservations"].append({"name": "past", "pool": "a100", "nodes": 1,
                                   "start": "2025-06-01T08:00:00Z", "end": "2025-06-02T08:00:00Z"})
    run_program(config)  # accepted
    root = write_project(tmp_path / "project", config)
    assert cli.main(["validate", "--stack", "case", "--project-dir", str(root)]) == 0
    out, _ = capsys.readouterr()
    assert "warning: kns:reservations[past]: its window ended on 2025-06-02; it holds nothing" in out


# ---- when a reservation holds: from its warm-up to its window's end (issue 57) -------------

def back_to_back(gpus: int) -> dict[str, Any]:
    """A pool of `gpus` GPUs; course holds 32 on Tuesdays 09:00-12:00 in Paris, lab holds 32
    from 12:00 to 14:00 with an hour's warm-up: both hold from 11:00."""
    return {
        "cluster": {"name": "kns-test", "renderDir": "out"},
        "nodePools": [{"name": "a100", "role": "gpu", "nodes": [f"g{i}" for i in range(gpus // 8)],
                       "gpu": {"vendor": "nvidia", "perNode": 8}}],
        "queueing": {"enabled": True, "install": False},
        "reservations": [
            {"name": "course", "pool": "a100", "resources": {"gpus": 32}, "schedule": "0 9 * * 2",
             "timeZone": "Europe/Paris", "duration": "3h"},
            {"name": "lab", "pool": "a100", "resources": {"gpus": 32}, "schedule": "0 12 * * 2",
             "timeZone": "Europe/Paris", "duration": "2h", "warmUpMinutes": 60}],
        "jobs": [gpu_job("plain")],
    }


def test_a_warm_up_that_reaches_into_anothers_window_overbooks_the_pool(tmp_path, capsys):
    program = program_text(back_to_back(32))
    assert program == validate_text(tmp_path, back_to_back(32), capsys)
    (line,) = [line for line in program.splitlines() if line.startswith("  - ")]
    # The first Tuesday whose windows have not ended (today's, until 14:00 in Paris).
    day = next(t for t in (tuesday_in_paris(14) + timedelta(days=7 * k) for k in range(-2, 1))
               if t > datetime.now(timezone.utc)).date()
    offset = tuesday_in_paris(11).isoformat()[-6:]
    assert line == (f'  - kns:reservations[lab]: with reservation "course" it holds 64 GPUs of pool a100 at once: more '
                    f"than its 32 GPUs, first from {day}T11:00:00{offset}, the warm-up of its window {day}T12:00:00{offset} "
                    f"to {day}T14:00:00{offset}")
    # Without the warm-up the two windows only touch: the same 32 GPUs serve both.
    cold = back_to_back(32)
    del cold["reservations"][1]["warmUpMinutes"]
    run_program(cold)


def test_the_cohort_sets_aside_what_back_to_back_windows_hold_in_the_warm_up():
    (cohort,) = [r.inputs for r in run_program(back_to_back(64)).of_type(COHORT)]
    quota = {r["name"]: r["nominalQuota"] for r in cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota == {"nvidia.com/gpu": "64"}


def test_explain_and_the_timeline_say_a_warm_up_holds(tmp_path):
    from kns_cli import explain, timeline
    cfg, plans = offline(tmp_path, back_to_back(64))
    at = tuesday_in_paris(11, 30)
    found = {r["name"]: r["stateNow"] for r in explain.explain(plan_stack(cfg, plans, at), now=at)["reservations"]}
    assert found == {"course": "open", "lab": "warm-up"}
    from kns_testing.svg import svg_ids, tooltip
    ids = svg_ids(timeline.render(cfg, plans, tuesday_in_paris(6), 12))
    warm = tuesday_in_paris(11).astimezone(timezone.utc)
    (band,) = [ids[i] for i in ids if i.endswith("-warmup") and i.startswith("window-")
               and tooltip(ids[i]).startswith("lab: ")]
    assert tooltip(band).endswith(f": warm-up from {timeline.utc_label(warm)}")


# ---- what ./kns explain, ./kns timeline and ./kns queues say -------------------------------


def offline(tmp_path, config: dict[str, Any]):
    from kns_cli.stack import load_stack
    root = write_project(tmp_path / "project", config)
    return load_stack(root, "case")


def test_explain_says_each_reservations_state_who_may_use_it_and_when_an_entry_can_next_run(tmp_path):
    from kns_cli import explain
    cfg, plans = offline(tmp_path, CONFIG)
    during = tuesday_in_paris(10)
    document = explain.explain(plan_stack(cfg, plans, during), now=during)
    found = {r["name"]: r for r in document["reservations"]}
    assert found["course"]["stateNow"] == "open"
    offset = during.isoformat()[-6:]  # +01:00 in winter, +02:00 in summer
    assert found["course"]["window"] == f"{during.date()}T09:00:00{offset} to {during.date()}T12:00:00{offset}"
    assert found["course"]["who"]["groups"] == ["teach"] and found["course"]["who"]["using"] == ["lab"]
    assert found["course"]["lentTo"] == {"cohort": "site", "queues": ["batch"]}
    assert found["maint"]["stateNow"] == "closed" and found["maint"]["who"]["using"] == []
    entries = {e["name"]: e for e in document["entries"]}
    assert entries["lab"]["reservation"]["canRun"].startswith("now (window ")
    assert entries["train"]["reservation"]["canRun"] == (  # no warm-up: from its start
        f"from {CHALLENGE}T08:00:00+01:00 (warm-up of the window {CHALLENGE}T08:00:00+01:00 to "
        f"{CHALLENGE + timedelta(days=2)}T20:00:00+01:00)")
    assert entries["plain"]["reservation"] is None
    text = explain.render_text(document)
    assert "reservation course" in text and "for:" in text and "group teach" in text
    at = tuesday_in_paris(8, 50)
    before = explain.explain(plan_stack(cfg, plans, at), now=at)
    course = next(r for r in before["reservations"] if r["name"] == "course")
    assert course["stateNow"] == "warm-up"  # 15 minutes of warm-up before 09:00


def test_the_timeline_draws_each_pools_windows_as_bands(tmp_path):
    from kns_cli import timeline
    from kns_testing.svg import path_xs, plot_x, svg_ids
    cfg, plans = offline(tmp_path, CONFIG)
    start = tuesday_in_paris(6)
    drawing = timeline.draw(cfg, plans, start, 12)
    ids = svg_ids(drawing.svg())
    (band,) = drawing.bands["a100"]
    window = tuesday_in_paris(9).astimezone(timezone.utc)
    assert band.reservation == "course" and band.window.start == window
    assert {"pool-a100", "window-a100-0", "window-a100-0-warmup"} <= set(ids) and "window-a100-1" not in ids
    xs = path_xs(ids["window-a100-0"])
    assert (min(xs), max(xs)) == pytest.approx((plot_x(window, start, 12), plot_x(band.window.end, start, 12)),
                                               abs=0.006)
    assert max(path_xs(ids["window-a100-0-warmup"])) == pytest.approx(min(xs), abs=0.006)
    # A schedule on a reservation: its runs drawn over its reservation's windows.
    config = copy.deepcopy(CONFIG)
    config["schedules"] = [gpu_job("weekly", groups=["teach"], reservation="course", queue="batch",
                                   schedule="30 9 * * 2", timeZone="Europe/Paris")]
    cfg, plans = offline(tmp_path / "with-schedule", config)
    drawing = timeline.draw(cfg, plans, start, 12)
    ids = svg_ids(drawing.svg())
    # The job lab runs in the course's windows too: its row shows them.
    assert [i for i in ids if i.startswith("shade-")] == ["shade-lab-0", "shade-weekly-0"]
    xs = path_xs(ids["shade-weekly-0"])
    assert (min(xs), max(xs)) == pytest.approx((plot_x(band.warm_up, start, 12), plot_x(band.window.end, start, 12)),
                                               abs=0.006)


def test_queues_lists_each_reservations_queue_and_whom_it_lends_to(tmp_path):
    from kns_cli import queues as queues_cli
    cfg, plans = offline(tmp_path, CONFIG)
    document = queues_cli.report(cfg, plans)
    course = next(r for r in document["reservations"] if r["name"] == "course")
    assert course == {"name": "course", "clusterQueue": "kns-res-course", "cohort": "kns-res-pool-a100",
                      "pool": "a100", "holds": {"nvidia.com/gpu": "16 GPUs"},
                      "lentTo": {"cohort": "site", "queues": ["batch"]}, "entries": ["lab"]}
    assert "reservation course  (ClusterQueue kns-res-course in Cohort kns-res-pool-a100" in \
        queues_cli.render_text(document)


def test_the_outputs_list_each_reservation_with_its_next_windows():
    """Each window in the reservation's own zone (a one-off: its start's offset), as a
    schedule's nextRuns are (docs/outputs.md, "Times"), never in UTC."""
    outputs = run_program(CONFIG).outputs["reservations"]
    assert outputs["course"]["pool"] == "a100" and outputs["course"]["holds"] == {"nvidia.com/gpu": "16"}
    assert len(outputs["course"]["nextWindows"]) == 3
    paris = ZoneInfo("Europe/Paris")
    for window in outputs["course"]["nextWindows"]:
        start, end = (datetime.fromisoformat(window[k]) for k in ("start", "end"))
        assert start.isoformat() == start.astimezone(paris).isoformat() and start.strftime("%a %H:%M") == "Tue 09:00"
        assert end.isoformat() == end.astimezone(paris).isoformat() and end.strftime("%H:%M") == "12:00"
    assert outputs["challenge"]["nextWindows"] == [{
        "start": f"{CHALLENGE}T08:00:00+01:00", "end": f"{CHALLENGE + timedelta(days=2)}T20:00:00+01:00"}]


# ---- docs/reservations.md's example --------------------------------------------------------


def test_the_pages_example_is_refused_as_it_says_and_accepted_with_the_smaller_queue():
    from config.errors import ConfigError
    from config.loader import check_config
    from plan.planner import plan_checked
    from plan.reservations import pool_cohorts
    config, message = doc_example()
    config["cluster"] = {"name": "hpc-prod", "renderDir": "out"}  # no cluster to reach
    secret = frozenset({"credentials", "keycloakClientSecret"})
    with pytest.raises(ConfigError) as refused_with:
        plan_checked(check_config(config, project_dir=ROOT, environ={}, secret_keys=secret, now=DOC_NOW))
    assert str(refused_with.value).strip() == message.strip()
    config["queues"][0]["quota"]["h100"]["nvidia.com/gpu"] = "32"
    checked = check_config(config, project_dir=ROOT, environ={}, secret_keys=secret, now=DOC_NOW)
    plan_checked(checked)
    (cohort,) = pool_cohorts(checked.config, DOC_NOW)
    quota = {r["name"]: r["nominalQuota"] for r in cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota["nvidia.com/gpu"] == "96" and cohort["spec"]["parentName"] == "site"


def test_a_profile_rule_gives_its_entries_a_reservation_and_an_unknown_one_is_its_own_error(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["profiles"] = {"@teach": {"reservation": "course"}}
    lab = next(j for j in config["jobs"] if j["name"] == "lab")
    del lab["reservation"]
    jobs = {r.name: r.inputs for r in run_program(config).of_type(JOB)}
    assert jobs["lab"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kns-res"
    config["profiles"] = {"@teach": {"reservation": "exam"}}
    text = program_text(config)
    assert text.splitlines()[1:] == [  # said once, at the rule
        "  - kns:profiles[@teach].reservation: names no reservation (reservations: challenge, course, maint)"]
    assert validate_text(tmp_path, config, capsys) == text


def test_a_prescaled_schedule_on_a_reservation_gets_its_verdict_from_the_reservations_holds(tmp_path):
    """Its Jobs are admitted by the reservation's queue, in its holds (each window from its
    warm-up, here 08:45, to its end, 12:00): a run is on time when its whole warm-up is
    held, whatever its own queue says."""
    from kns_cli import explain, timeline
    config = copy.deepcopy(CONFIG)
    config["jobs"] = [j for j in config["jobs"] if j["name"] != "lab"]  # no other entry holds the course
    config["schedules"] = [gpu_job(name, groups=["teach"], queue="batch", schedule=cron, timeZone="Europe/Paris",
                                   warmUpMinutes=10, reservation="course")
                           for name, cron in (("weekly", "30 9 * * 2"), ("edge", "55 8 * * 2"),
                                              ("early", "50 8 * * 2"), ("after", "0 13 * * 2"))]
    config["schedules"].append(gpu_job("plain-weekly", queue="batch", schedule="30 9 * * 2", timeZone="Europe/Paris",
                                       warmUpMinutes=10))
    cfg, plans = offline(tmp_path, config)
    at = tuesday_in_paris(6)
    document = explain.explain(plan_stack(cfg, plans, at), now=at)
    entries = {e["name"]: e for e in document["entries"]}
    assert entries["plain-weekly"]["start"]["reservation"] is None  # the control: its own queue's verdict
    verdicts = {name: entries[name]["start"]["guaranteed"] for name in ("weekly", "edge", "early", "after")}
    assert verdicts == {"weekly": True, "edge": True, "early": False, "after": False}
    assert entries["weekly"]["start"]["reservation"] == "course"
    assert 'not inside a hold of reservation "course"' in entries["early"]["start"]["reasons"][0]
    text = explain.render_text(document)
    assert "guaranteed: reservation course holds its capacity through every warm-up" in text
    drawing = timeline.draw(cfg, plans, tuesday_in_paris(6), 8)
    kinds = {name: [drawing.kinds[g] for g in drawing.kinds if re.fullmatch(f"run-{name}-[0-9]+", g)]
             for name in ("early", "weekly")}
    assert kinds == {"early": ["best-effort"], "weekly": ["guaranteed"]}
    # Another entry of the reservation may hold it at any time: no run is guaranteed.
    config["jobs"].append(gpu_job("lab", groups=["teach"], reservation="course", queue="batch"))
    cfg, plans = offline(tmp_path / "shared", config)
    at = tuesday_in_paris(6)
    entries = {e["name"]: e for e in explain.explain(plan_stack(cfg, plans, at), now=at)["entries"]}
    assert entries["weekly"]["start"]["guaranteed"] is False
    assert "use reservation \"course\" (lab)" in entries["weekly"]["start"]["reasons"][0]


# ---- ./kns recover says when a switch is not where the calendar says -------------------------

def test_recover_names_a_switch_stuck_on_an_edge_it_missed_and_leaves_a_right_one_alone(tmp_path):
    """A switch whose Job failed all its retries keeps the schedule of the edge it missed
    (fired again a year later): recover's check says so, with the command that runs it
    now; a switch on its next edge, a new one (every minute) and one whose edge run is
    under way are right."""
    from kns_cli.recover import switch_problems
    from plan.reservation_switch import edge_schedule
    from chrono import calendar as cal
    cfg, _ = offline(tmp_path, CONFIG)
    now = tuesday_in_paris(10)  # inside course's window (09:00-12:00); challenge ahead; maint between

    def cron(schedule, suspend=False):
        return {"spec": {"schedule": schedule, "suspend": suspend}}

    by_name = {r.name: r for r in cfg.reservations}
    right = {name: cron(edge_schedule(cal.next_edge(item.calendar(), now, starts=False)))
             for name, item in by_name.items()}
    assert switch_problems(cfg, right, now) == []
    assert switch_problems(cfg, {**right, "course": cron("* * * * *")}, now) == []  # a new switch
    warm_up = tuesday_in_paris(8, 45)  # course's warm-up edge: missed, its run failed
    stuck = {**right, "course": cron(edge_schedule(warm_up))}
    (problem,) = switch_problems(cfg, stuck, now)
    assert problem.startswith("reservation course: CronJob kns-res-course/switch fires at ") and \
        "not at its next edge" in problem and "kubectl create job --from=cronjob/switch -n kns-res-course" in problem
    # A run at the edge a minute ago may still be under way.
    assert switch_problems(cfg, stuck, warm_up + timedelta(minutes=1)) == []
    assert switch_problems(cfg, {**right, "maint": cron(right["maint"]["spec"]["schedule"], True)}, now) == [
        f"reservation maint: CronJob kns-res-maint/switch is suspended, though its next edge is "
        f"{cal.next_edge(by_name['maint'].calendar(), now, starts=False).astimezone(ZoneInfo('Europe/Paris')).isoformat()}"
        ": the window is not switched"]
    assert switch_problems(cfg, {**right, "challenge": None}, now)[0].startswith(
        "reservation challenge: CronJob kns-res-challenge/switch is missing")
    # After the challenge's only window, its switch must be suspended.
    after = datetime.fromisoformat(f"{CHALLENGE + timedelta(days=3)}T12:00:00+01:00")
    late = {name: cron(edge_schedule(e)) if (e := cal.next_edge(item.calendar(), after, starts=False)) else
            cron("0 20 1 1 *") for name, item in by_name.items()}
    assert switch_problems(cfg, late, after) == [
        "reservation challenge: CronJob kns-res-challenge/switch is not suspended, though its last window is over"]
