"""Generated configs, valid and broken, through both doors (docs/validation.md).

Hypothesis mutates the dev stack (and a job file beside it) with values drawn from every
class of mistake and from plain good values. For each generated project: `./kns validate`
and the program under mocks end without a traceback and give the same lines; a rejected
config registers nothing; an accepted one registers only objects the API server would
take (kns_testing/apiserver.py: the pinned version's strict schema plus its own rules).
"""

from __future__ import annotations

import copy

import pulumi
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kns_testing import apiserver
from kns_testing.doors import STACK, project, validate_lines
from kns_testing.program import RecordingMocks, dev_stack_config, run_program
from plan.guardrails import GUARD_RAILS, Resource

BASE = dev_stack_config()

# Values per field: good ones and members of the classes of docs/validation.md.
ENTRY_VALUES = {
    "name": ["fresh-entry", "x-2", "Bad_Name", "", "a" * 41, 7],
    "user": ["bob", 1001, "no user", "", None],
    "image": ["busybox:1.37", "", "busy box", "registry.example.org/team/app@sha256:" + "a" * 64, None],
    "cpu": [1, "500m", "0", "-1", "1e400", "abc", 0.5, "9e15", True],
    "memory": [256, "4Gi", "1", "12Qi", 1e300],
    "gpus": [0, 1, 2, -1, 9, 1.5],
    "pool": ["a100", "nope", None],
    "env": [{"A": "b"}, {"1A": "x"}, {"A": None}, {"A": {"valueFrom": {}}}, {"N": 5}, "A=b"],
    "ttlHours": [0, 1, 1e10, "inf", -1, 0.002],
    "backoffLimit": [0, 6, 2**31, -1],
    "placement": [{"topology.kubernetes.io/zone": "a"}, {"bad key": "x"}, {"zone": "a b"}],
    "nodeSelector": [{"disk": "ssd"}, {"kns.io/pool": "a100"}],
    "tolerations": [[{"key": "a", "operator": "Exists"}], [{"value": "x"}], [{"operator": "Exists"}], "all"],
    "labels": [{"team": "ml"}, {"kns.io/job": "other"}, {"team": "a/b"}],
    "annotations": [{"note": "x"}, {"note": "x" * 300_000}],
    "extraResources": [{"example.com/fpga": 1}, {"cpu": "64"}, {"example.com/fpga": -1}],
    "gpuResource": ["nvidia.com/gpu", "memory", "cpu", "bad/name/x"],
    "limitRange": [{"max": {"cpu": "8"}}, {"min": {"cpu": "2"}, "max": {"cpu": "1"}}],
    "quota": [{"pods": 4}, {"cpus": 4}, {"requests.cpu": "1e400"}],
    "podSpec": [{"containers": [{"name": "c", "image": "busybox:1.37"}]}, {"containers": "x"},
                {"containers": [None]}, {"containers": []},
                {"containers": [{"name": "c", "image": "busybox:1.37",
                                 "resources": {"limits": {"nvidia.com/gpu": -1}}}]}],
    "jsonOverrides": [[{"path": "/spec/backoffLimit", "value": 2}], [{"path": "/spec", "value": {}}],
                      [{"path": "/spec/template/spec/restartPolicy", "value": "Always"}],
                      [{"path": "/metadata/labels/kns.io~1job", "value": "x"}]],
    "credentialsMountPath": ["/creds", "/", "relative"],
    # the newer surface (issue 29): queues, native sidecars, program-owned fields, deadlines
    "queue": ["batch", "adhoc", "nope", None],
    "activeDeadlineSeconds": [60, 86400],
    "nodeSelector ": [{"kubernetes.io/arch": "arm64"}, {"team": "other"}],
    "podSpec ": [{"containers": [{"name": "c", "image": "busybox:1.37",
                                  "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}],
                  "initContainers": [{"name": "side", "image": "busybox:1.37", "restartPolicy": "Always",
                                      "resources": {"limits": {"cpu": 2, "memory": "2Gi"}}}]}],
    "jsonOverrides ": [[{"path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "other"}],
                       [{"path": "/spec/suspend", "value": False}],
                       [{"path": "/spec/template/metadata/annotations/karpenter.sh~1do-not-disrupt", "value": "false"}],
                       [{"path": "/spec/activeDeadlineSeconds", "value": 30}]],
}
# Queues (kns:queueing on): good ones and members of the queue classes.
QUEUE_SETS = [
    [{"name": "batch", "cohort": "all", "quota": {"burst": {"cpu": 64, "memory": "256Gi", "pods": 10}}},
     {"name": "adhoc", "cohort": "all", "quota": {"burst": {"cpu": 8, "memory": "32Gi"}},
      "lendingLimit": {"burst": {"cpu": 4}}}],
    [{"name": "batch", "quota": {"burst": {"cpu": 64, "memory": "512"}}}],
    [{"name": "batch", "quota": {"burst": {"cpu": 4, "hugepages-junk": 1}},
      "preemption": {"reclaimWithinCohort": "Any"}}],
    [{"name": "batch", "quota": {"a100": {"nvidia.com/gpu": 8, "cpu": 1}}, "fairSharingWeight": True}],
]
# The autoscaled pool `burst`: limits and requirements, good and not.
AUTOSCALE_VALUES = {
    "limits": [{"cpu": 64, "memory": "256Gi"}, {"cpu": 0}, {"nodes": 0}, {"cpu": "500m"}],
    "requirements": [[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                     [{"key": "kns.io/pool", "operator": "In", "values": ["other"]}]],
    "consolidateAfter": ["30s", "2562048h"],
}
SCHEDULE_VALUES = {
    "schedule": ["0 0 * * *", "0 0 30 2 *", "0 0 */1 * 1", "0 0 L * *", "@daily", "61 * * * *", "0 * * * *",
                 "* * * * *", "0 0 * * 7", "23-1 * * * *"],
    "timeZone": ["Etc/UTC", "Europe", "localtime", "Europe/London", "posix/Europe/Paris", "America/New_York"],
    "warmUpMinutes": [1, 15, 60, 90, 1440, 0],
    "primerSchedule": ["55 23 * * *", "5 0 * * *"],
}
STACK_VALUES = [
    ("cluster", "systemNamespace", ["kns-system", "kube-system", "default", "Kns"]),
    ("packingScheduler", "name", ["kns-packing", "default-scheduler", "kns-scheduler"]),
    ("packingScheduler", "image", ["registry.k8s.io/kube-scheduler:v1.36.1", ""]),
    ("cluster", "forbiddenContexts", [["jarvice-upstream"], ["Jarvice-Upstream "]]),
    ("knsScheduler", "jobsDomain", ["jobs.example.org", "jobs example.org", "*.example.org"]),
]


@st.composite
def mutations(draw):
    """A project: the dev stack changed in a few places, and maybe a job file."""
    config = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["jobs", "schedules"]))
            pool = {**ENTRY_VALUES, **(SCHEDULE_VALUES if kind == "schedules" else {})}
            field = draw(st.sampled_from(sorted(pool)))
            index = draw(st.integers(0, len(config[kind]) - 1))
            value = draw(st.sampled_from(pool[field]))
            field = field.strip()  # "podSpec " and the like: more values for a key listed above
            if value is None:
                config[kind][index].pop(field, None)
            else:
                config[kind][index][field] = copy.deepcopy(value)
        else:
            where = draw(st.sampled_from(["stack", "queues", "autoscale"]))
            if where == "queues":
                config["queueing"] = {"enabled": draw(st.booleans()), "install": False}
                config["queues"] = copy.deepcopy(draw(st.sampled_from(QUEUE_SETS)))
            elif where == "autoscale":
                burst = next(p for p in config["nodePools"] if p["name"] == "burst")
                field = draw(st.sampled_from(sorted(AUTOSCALE_VALUES)))
                burst["autoscale"][field] = copy.deepcopy(draw(st.sampled_from(AUTOSCALE_VALUES[field])))
            else:
                section, field, values = draw(st.sampled_from(STACK_VALUES))
                config.setdefault(section, {})[field] = draw(st.sampled_from(values))
    job_file = None
    if draw(st.booleans()):
        entry = {"name": "from-file", "user": "carol", "image": "busybox:1.37"}
        field = draw(st.sampled_from(sorted(ENTRY_VALUES)))
        value = draw(st.sampled_from(ENTRY_VALUES[field]))
        if value is not None:
            entry[field.strip()] = copy.deepcopy(value)
        job_file = yaml.safe_dump({"jobs": [entry]}, sort_keys=False)
        if draw(st.booleans()):
            job_file += draw(st.sampled_from(["jobs: []\n", "schedules:\n  - {name: twice, user: no}\n"]))
        config["jobFiles"] = ["jobs/generated-*.yaml"]
    return config, job_file


OUTCOMES: list[bool] = []  # accepted or not, per generated project (read by the test after)


@settings(max_examples=90, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutations())
def test_generated_configs_agree_and_accepted_ones_are_valid_objects(tmp_path_factory, capsys, case):
    config, job_file = case
    text = yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}}, sort_keys=False)
    files = {"jobs/generated-1.yaml": job_file} if job_file else {}
    root = project(tmp_path_factory.mktemp("generated"), text, files)
    code, lines, _ = validate_lines(capsys, root)
    assert code in (0, 1), lines

    mocks = RecordingMocks()
    try:
        run_program(config, stack=STACK, mocks=mocks, project_dir=root)
        program = []
    except pulumi.RunError as exc:
        program = str(exc).splitlines()
    assert lines == program
    OUTCOMES.append(not lines)
    if lines:
        assert mocks.resources == []
        assert all(line.startswith(("kns-platform:", "  - ")) for line in lines), lines
        return
    assert mocks.resources
    assert apiserver.problems(mocks.resources) == []
    # ... and the policy pack's rules pass them (docs/policy.md): cluster-admin-only-kns needs
    # each resource's parents, which mocks do not record; no config key binds cluster-admin.
    registered = [Resource(r.type, f"urn:pulumi:{STACK}::kns-platform::{r.type}::{r.name}", r.inputs)
                  for r in mocks.resources]
    assert [v.message for rail in GUARD_RAILS if rail.name != "cluster-admin-only-kns"
            for v in rail.rule(registered, {})] == []


def test_the_generated_projects_were_both_accepted_and_refused():
    """Runs after the property test (file order): it saw both verdicts, enough of each."""
    assert OUTCOMES.count(True) >= 10 and OUTCOMES.count(False) >= 10, OUTCOMES


def test_the_api_check_refuses_what_the_api_server_refuses():
    """The oracle itself can fail: objects the API server refuses are reported."""
    run = run_program(copy.deepcopy(BASE))
    assert apiserver.problems(run.resources) == []
    job = next(r for r in run.resources if r.type == "kubernetes:batch/v1:Job")
    broken = copy.deepcopy(job)
    broken.inputs["spec"]["backoffLimit"] = 2**31
    broken.inputs["spec"]["template"]["spec"]["containers"][0]["image"] = "busy box"
    broken.inputs["spec"]["template"]["spec"]["surprise"] = True
    broken.inputs["metadata"]["labels"]["bad key"] = "x"
    found = "\n".join(apiserver.problems([broken, job]))
    for expected in ("backoffLimit", "image 'busy box'", "surprise", "label key 'bad key'", "is defined twice"):
        assert expected in found, (expected, found)

