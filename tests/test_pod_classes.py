"""Bad pods, overrides, resources and generated names never reach the API server.

Each class of bad input has one rule (config/podspec.py, config/profile_rules.py,
plan/final.py, plan/inventory.py). Every case runs through the real `__main__.py` under the
recording Pulumi mocks (it must raise the exact path-qualified message and register
nothing) and through `./kns validate` on a stack file holding the same config (exit 1, the
same text). The generated cases walk the Kubernetes shapes and the places an image or a
resource is given, so a new member of a class is caught without a new test.
"""

from __future__ import annotations


import json
import os
import subprocess
from typing import Any

import pytest

from config import podspec
from config.loader import check_config
from kns_testing.doors import checked, expected_text, program_text, refused, write_project
from kns_testing.program import ROOT, run_program, without_places
from plan import inventory
from plan.planner import plan_checked
from tools import k8s_shapes

CLUSTER = {"name": "kns-test", "renderDir": "out"}
POOLS = [{"name": "a100", "role": "gpu", "nodes": ["g1"], "gpu": {"vendor": "nvidia", "perNode": 8}}]
IMAGE_RULE = ('is not an image reference ([registry[:port]/]path[:tag][@digest], the path in lower '
                              'case, for example "ghcr.io/example/app:1.2")')
RESERVED = "the names the program gives are reserved: choose another"
RENAME = "names the program derives from the entries are reserved: rename one of the two"
CREDENTIALS = {"s3": {"key": "x"}, "x-cred-y": {"f": "1"}, "y": {"g": "2"}}


def stack_config(**keys: Any) -> dict[str, Any]:
    return {"cluster": CLUSTER, "nodePools": POOLS, **keys}


# ---- 4: the shape of a raw pod spec ------------------------------------------------------

GOOD_CONTAINER = {"name": "c", "image": "busybox:1.37"}
WRONG = {"string": ["x"], "integer": "x", "number": "x", "boolean": "x", "object": "x", "quantity": ["1"],
         "int-or-string": ["x"]}
WHAT = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
        "object": "a mapping", "quantity": 'a quantity (a number, or a string like "500m" or "4Gi")',
        "int-or-string": "a whole number or a string"}


KIND = {str: "a string", list: "a list"}
WORDS = ' as an item (["sh", "-c", "..."])'


def wrong_value(shape: Any) -> tuple[Any, str]:
    """A value of the wrong type for `shape`, and the message the rule gives for it: what
    is expected and what kind of value is there, never the value."""
    if isinstance(shape, list):
        hint = f"; write each word{WORDS}" if shape == ["string"] else ""
        return "x", f"must be {podspec.expected(shape)}, not a string{hint}"
    if isinstance(shape, dict) or shape.startswith("@"):
        return "x", f"must be {podspec.expected(shape)}, not a string"
    return WRONG[shape], f"must be {WHAT[shape]}, not {KIND[type(WRONG[shape])]}"


def shape_cases() -> list[tuple[str, tuple, Any, str]]:
    """Every field of PodSpec, Container and ResourceRequirements, with a wrong value."""
    cases = []
    defs = podspec.DEFINITIONS
    for field, shape in defs["PodSpec"]["properties"].items():
        cases.append((f"podSpec.{field}", (field,), *wrong_value(shape)))
    for field, shape in defs["Container"]["properties"].items():
        for key in ("containers", "initContainers"):
            cases.append((f"{key}[0].{field}", (key, 0, field), *wrong_value(shape)))
    for field, shape in defs["ResourceRequirements"]["properties"].items():
        cases.append((f"resources.{field}", ("containers", 0, "resources", field), *wrong_value(shape)))
    cases.append(("containers[0]", ("containers", 0), None, "is given without a value: write a mapping (a Container), or remove the item"))
    cases.append(("resources.limits.cpu", ("containers", 0, "resources", "limits", "cpu"), ["2"],
                  'must be a quantity (a number, or a string like "500m" or "4Gi"), not a list'))
    return cases


def _put(spec: dict, loc: tuple, value: Any) -> dict:
    spec = json.loads(json.dumps(spec))
    here: Any = spec
    for step in loc[:-1]:
        if isinstance(step, int):
            here = here[step]
        else:
            here = here.setdefault(step, [dict(GOOD_CONTAINER)] if step in ("containers", "initContainers") else {})
    here[loc[-1]] = value
    return spec


@pytest.mark.parametrize("case", shape_cases(), ids=lambda c: c[0])
def test_every_field_of_a_raw_pod_spec_has_its_kubernetes_type(case):
    _, loc, value, message = case
    spec = _put({"containers": [dict(GOOD_CONTAINER)]}, loc, value)
    assert checked(stack_config(jobs=[{"name": "g", "podSpec": spec}])) == [
        f"kns:jobs[g].podSpec{''.join(f'[{s}]' if isinstance(s, int) else f'.{s}' for s in loc)}: {message}"]


def test_bad_pod_spec_shapes_stop_the_program_and_validate(tmp_path, capsys):
    config = stack_config(jobs=[
        {"name": "a", "podSpec": {"containers": "x"}},
        {"name": "b", "podSpec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": ["x"]}}]}},
        {"name": "c", "podSpec": {"containers": [dict(GOOD_CONTAINER)], "initContainers": "x"}},
        {"name": "d", "podSpec": {"containers": [None]}},
        {"name": "e", "podSpec": {"containers": [dict(GOOD_CONTAINER)], "contianers": []}},
        {"name": "f", "podSpec": {"containers": [{**GOOD_CONTAINER, "ports": [{"containerPort": 80}, {"containerPort": 80}]}]}},
        {"name": "h", "image": "i", "volumes": [{"name": "v", "emptyDir": "x"}], "volumeMounts": [{"name": "v"}]},
        {"name": "k", "image": "i", "env": {"A": {"valueFrom": {"secretKeyRef": "x"}}}},
    ])
    refused(tmp_path, capsys, config, [
        "kns:jobs[a].podSpec.containers: must be a list of Container mappings, not a string",
        "kns:jobs[b].podSpec.containers[0].resources.limits: must be a mapping, not a list",
        "kns:jobs[c].podSpec.initContainers: must be a list of Container mappings, not a string",
        "kns:jobs[d].podSpec.containers[0]: is given without a value: write a mapping (a Container), or remove the item",
        'kns:jobs[e].podSpec.contianers: unknown field; did you mean "containers"?',
        "kns:jobs[f].podSpec.containers[0].ports[1]: has the same containerPort and protocol as ports[0]; each item "
        "of ports needs its own containerPort and protocol",
        "kns:jobs[h].volumes[0].emptyDir: must be a mapping ({medium, sizeLimit}), not a string",
        "kns:jobs[h].volumeMounts[0].mountPath: is required",
        "kns:jobs[k].env.A.valueFrom.secretKeyRef: must be a mapping ({key, name, optional}), not a string",
    ])


def test_the_pod_rules_hold_for_a_raw_pod_spec(tmp_path, capsys):
    config = stack_config(jobs=[
        {"name": "a", "podSpec": {"restartPolicy": "Always", "containers": []}},
        {"name": "b", "podSpec": {"initContainers": [{"name": "c", "image": "i"}], "containers": [
            {"name": "c", "image": "i", "volumeMounts": [{"name": "nope", "mountPath": "/data"}]}]}},
        {"name": "c", "podSpec": {"containers": [dict(GOOD_CONTAINER)], "ephemeralContainers": [{"name": "d"}]}},
    ])
    refused(tmp_path, capsys, config, [
        "kns:jobs[a].podSpec.containers: needs at least one container",
        'kns:jobs[a].podSpec.restartPolicy: "Always" cannot run as a Job (Never or OnFailure)',
        'kns:jobs[b].podSpec.containers[0].name: "c" is also the name of initContainers[0]; containers and init '
        "containers need names of their own",
        'kns:jobs[b].podSpec.containers[0].volumeMounts[0].name: "nope" is not a volume of the pod (volumes: none)',
        "kns:jobs[c].podSpec.ephemeralContainers: cannot be set when a pod is created (kubectl debug adds them)",
    ])


# ---- 28: one image reference rule, wherever an image is given -----------------------------

BAD_IMAGES = ["", "busy box", "Busybox:1", "a:", "a::b", "-x", "x/", "a@sha256:123"]
IMAGE_PLACES = {
    "entry image": (lambda v: stack_config(jobs=[{"name": "j", "image": v}]), "kns:jobs[j].image"),
    "podSpec container": (lambda v: stack_config(jobs=[{"name": "j", "podSpec": {"containers": [{"name": "c", "image": v}]}}]),
                          "kns:jobs[j].podSpec.containers[0].image"),
    "podSpec init container": (lambda v: stack_config(jobs=[{"name": "j", "podSpec": {
        "containers": [dict(GOOD_CONTAINER)], "initContainers": [{"name": "i", "image": v}]}}]),
        "kns:jobs[j].podSpec.initContainers[0].image"),
    "wait image": (lambda v: stack_config(schedules=[{"name": "s", "image": "i", "schedule": "0 3 * * *",
                                                      "waitImage": v}]), "kns:schedules[s].waitImage"),
    "packing scheduler": (lambda v: stack_config(packingScheduler={"image": v}), "kns:packingScheduler.image"),
    "KNS scheduler": (lambda v: stack_config(knsScheduler={"enabled": True, "image": v}), "kns:knsScheduler.image"),
    "KNS init image": (lambda v: stack_config(knsScheduler={"initImage": v}), "kns:knsScheduler.initImage"),
    "KNS gotty image": (lambda v: stack_config(knsScheduler={"gottyImage": v}), "kns:knsScheduler.gottyImage"),
    "profile images": (lambda v: stack_config(profiles={"*": {"images": [v]}}), "kns:profiles[*].images[0]"),
    "profile default image": (lambda v: stack_config(profiles={"*": {"defaultImage": v}}),
                              "kns:profiles[*].defaultImage"),
    "override": (lambda v: stack_config(jobs=[{"name": "j", "image": "i", "jsonOverrides": [
        {"path": "/spec/template/spec/containers/0/image", "value": v}]}]),
        "kns:jobs[j].jsonOverrides[0]: /spec/template/spec/containers/0/image"),
}


@pytest.mark.parametrize("place", sorted(IMAGE_PLACES))
@pytest.mark.parametrize("image", BAD_IMAGES)
def test_every_image_is_an_image_reference(place, image):
    build, path = IMAGE_PLACES[place]
    # what an override wrote is not repeated (it may be a secret in the wrong place)
    shown = "" if place == "override" else f'"{image}" '
    assert checked(build(image)) == [f'{path}: {shown}{IMAGE_RULE}']


def test_images_stop_the_program_and_validate(tmp_path, capsys):
    config = stack_config(
        jobs=[{"name": "a", "image": ""}, {"name": "b", "podSpec": {"containers": [{"name": "c", "image": "busy box"}]}},
              {"name": "c", "podSpec": {"containers": [{"name": "c"}]}}],
        packingScheduler={"image": ""},
    )
    refused(tmp_path, capsys, config, [
        f'kns:packingScheduler.image: "" {IMAGE_RULE}',
        f'kns:jobs[a].image: "" {IMAGE_RULE}',
        f'kns:jobs[b].podSpec.containers[0].image: "busy box" {IMAGE_RULE}',
        "kns:jobs[c].podSpec.containers[0].image: is required",
    ])


# ---- 30 and 19: resources --------------------------------------------------------------

@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "amd.com/gpu", "example.com/fpga", "nvidia.com/mig-1g.5gb"])
@pytest.mark.parametrize("value, message", [
    ("-1", '"-1" must not be negative'), (-2, "-2 must not be negative"),
    ("0.5", "0.5 is not a whole number: extended resources (domain/name) are counted in whole units"),
    ("1500m", "1.5 is not a whole number: extended resources (domain/name) are counted in whole units"),
])
def test_extended_resources_in_a_pod_spec_are_whole_and_not_negative(resource, value, message):
    spec = {"containers": [{**GOOD_CONTAINER, "resources": {"limits": {resource: value}}}]}
    assert checked(stack_config(jobs=[{"name": "g", "podSpec": spec}])) == [
        f"kns:jobs[g].podSpec.containers[0].resources.limits.{resource}: {message}"]


def test_pod_spec_resources_follow_the_api_servers_rules(tmp_path, capsys):
    def job(name: str, resources: dict) -> dict:
        return {"name": name, "podSpec": {"containers": [{**GOOD_CONTAINER, "resources": resources}]}}

    config = stack_config(jobs=[
        job("a", {"limits": {"nvidia.com/gpu": "-1"}}),
        job("b", {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}),
        job("c", {"requests": {"example.com/fpga": "1"}}),
        job("d", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
        job("e", {"limits": {"gpu": "1"}}),
        job("f", {"limits": {"amd.com/gpu": 0.5}}),
    ])
    refused(tmp_path, capsys, config, [
        'kns:jobs[a].podSpec.containers[0].resources.limits.nvidia.com/gpu: "-1" must not be negative',
        "kns:jobs[b].podSpec.containers[0].resources.requests.nvidia.com/gpu: 2 is not limits.nvidia.com/gpu 1 "
        "(extended resources and hugepages are requested exactly: request = limit)",
        "kns:jobs[c].podSpec.containers[0].resources.requests.example.com/fpga: 1 needs limits.example.com/fpga "
        "equal to it (extended resources and hugepages are requested exactly: request = limit)",
        "kns:jobs[d].podSpec.containers[0].resources.requests.cpu: 2 is more than limits.cpu 1",
        'kns:jobs[e].podSpec.containers[0].resources.limits.gpu: "gpu" is not a resource a container can ask for '
        "(cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource domain/name)",
        "kns:jobs[f].podSpec.containers[0].resources.limits.amd.com/gpu: 0.5 is not a whole number: extended "
        "resources (domain/name) are counted in whole units",
    ])


CORE = {
    "cpu": "cpu is set with cpu and cpuLimit, which the profile maxima see",
    "memory": "memory is set with memory and memoryLimit, which the profile maxima see",
    "ephemeral-storage": "ephemeral-storage is set with storage and storageLimit, which the profile maxima see",
}
GPU = ("is a GPU resource: request GPUs with gpus (gpuVendor, gpuResource), which place the pod on a GPU pool "
       "and are held to maxGpus")


@pytest.mark.parametrize("resource", [*CORE, "nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-3g.20gb", "amd.com/x"])
def test_extra_resources_cannot_name_core_resources_or_gpus(resource):
    words = CORE.get(resource) or f"{resource} {GPU}"
    assert checked(stack_config(jobs=[{"name": "j", "image": "i", "extraResources": {resource: "64"}}])) == [
        f"kns:jobs[j].extraResources.{resource}: {words}; extraResources is for other extended resources"]


def test_core_resources_only_through_their_own_fields(tmp_path, capsys):
    config = stack_config(jobs=[
        {"name": "a", "image": "i", "cpu": 1, "extraResources": {"cpu": "64"}},
        {"name": "b", "image": "i", "extraResources": {"example.com/fpga": "0.5"}},
        {"name": "c", "image": "i", "gpus": 1, "gpuResource": "amd.com/gpu"},
        {"name": "d", "image": "i", "gpus": 1, "gpuResource": "nvidia.com/mig-3g.20gb"},
    ], profiles={"*": {"maxCpu": 4}})
    refused(tmp_path, capsys, config, [
        f"kns:jobs[a].extraResources.cpu: {CORE['cpu']}; extraResources is for other extended resources",
        "kns:jobs[b].extraResources.example.com/fpga: 0.5 is not a whole number: extended resources (domain/name) "
        "are counted in whole units",
        'kns:jobs[c].gpuResource: "amd.com/gpu" is not a GPU resource of vendor nvidia (nvidia.com/<name>, for '
        "example nvidia.com/gpu); cpu, memory and storage have their own fields",
    ])


# ---- 20: namespace quotas are held to the profile maxima --------------------------------

MAXIMA = {"*": {"maxCpu": 4, "maxMemory": "8Gi", "maxGpus": {"nvidia": 1, "amd": 0}}}


@pytest.mark.parametrize("key, value, words", [
    ("cpu", 8, '8 CPU in the namespace\'s quota is over maxCpu 4 of profile rule "*"'),
    ("requests.cpu", 8, '8 CPU in the namespace\'s quota is over maxCpu 4 of profile rule "*"'),
    ("limits.cpu", 64, '64 CPU in the namespace\'s quota is over maxCpu 4 of profile rule "*"'),
    ("memory", "16Gi", '16Gi memory in the namespace\'s quota is over maxMemory 8Gi of profile rule "*"'),
    ("limits.memory", "9Gi", '9Gi memory in the namespace\'s quota is over maxMemory 8Gi of profile rule "*"'),
    ("requests.nvidia.com/gpu", 2, '2 nvidia GPUs in the namespace\'s quota are over maxGpus.nvidia 1 of profile rule "*"'),
    ("requests.amd.com/gpu", 1, '1 amd GPUs in the namespace\'s quota are over maxGpus.amd 0 of profile rule "*"'),
])
def test_a_namespace_quota_over_a_profile_maximum_is_refused(key, value, words):
    entry = {"name": "sb", "type": "namespace", "quota": {key: value}}
    assert checked(stack_config(jobs=[entry], profiles=MAXIMA)) == [f"kns:jobs[sb].quota.{key}: {words}"]


def test_namespace_quotas_stop_the_program_and_validate(tmp_path, capsys):
    config = stack_config(jobs=[{"name": "sb", "type": "namespace", "quota": {"limits.cpu": 64}}], profiles=MAXIMA)
    refused(tmp_path, capsys, config, [
        'kns:jobs[sb].quota.limits.cpu: 64 CPU in the namespace\'s quota is over maxCpu 4 of profile rule "*"'])


def test_a_namespace_without_its_own_quota_gets_one_within_the_maxima():
    profiles = {"*": {"maxCpu": 4, "maxMemory": "512Mi", "maxGpus": {"nvidia": 1}}}
    result = run_program(stack_config(jobs=[{"name": "sb", "type": "namespace"}], profiles=profiles))
    hard = result.named("kubernetes:core/v1:ResourceQuota", "sb-quota").inputs["spec"]["hard"]
    assert hard == {"limits.cpu": "4", "limits.memory": "512Mi", "pods": "10", "requests.cpu": "2",
                    "requests.memory": "512Mi", "requests.nvidia.com/gpu": "1"}
    limits = result.named("kubernetes:core/v1:LimitRange", "sb-defaults").inputs["spec"]["limits"][0]
    assert limits["max"] == {"cpu": "4", "memory": "512Mi"} and limits["default"]["memory"] == "512Mi"


# ---- 21 and 22: the final object after overrides ------------------------------------------

def override_job(*overrides: dict, **entry: Any) -> dict:
    return {"name": "j", "image": "i", "jsonOverrides": list(overrides), **entry}


def test_overrides_cannot_drop_what_the_program_guarantees(tmp_path, capsys):
    config = stack_config(jobs=[
        override_job({"path": "/spec", "value": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
                     name="a", ttlHours=1),
        override_job({"path": "/spec/template/spec/restartPolicy", "value": "Always"},
                     {"path": "/spec/template/spec/containers", "value": []}, name="b"),
        override_job({"path": "/metadata", "value": {"labels": {}}}, name="c"),
        override_job({"path": "/spec/backoffLimit", "value": "lots"},
                     {"path": "/spec/template/spec/nodeSelector", "value": None}, name="d"),
    ])
    refused(tmp_path, capsys, config, [
        'kns:jobs[a].jsonOverrides[0]: /spec/template/metadata/labels/kns.io~1job: is "a", set by the program (its '
        "own labels); overrides may not change it (they remove it)",
        'kns:jobs[a].jsonOverrides[0]: /spec/template/metadata/labels/kns.io~1owner: is "platform", set by the program '
        "(its own labels); overrides may not change it (they remove it)",
        "kns:jobs[a].jsonOverrides[0]: /spec/template/spec/automountServiceAccountToken: is false, set by the program "
        "(the pod gets no service-account token); overrides may not change it (they remove it)",
        "kns:jobs[a].jsonOverrides[0]: /spec/ttlSecondsAfterFinished: is 3600, set by ttlHours; overrides may not "
        "change it (they remove it)",
        'kns:jobs[b].jsonOverrides[0]: /spec/template/spec/restartPolicy: cannot run as a Job (Never or '
        "OnFailure)",
        "kns:jobs[b].jsonOverrides[1]: /spec/template/spec/containers: needs at least one container",
        'kns:jobs[c].jsonOverrides[0]: /metadata/labels/app.kubernetes.io~1managed-by: is "pulumi", set by the '
        "program (its own labels); overrides may not change it (they remove it)",
        'kns:jobs[c].jsonOverrides[0]: /metadata/labels/kns.io~1cluster: is "kns-test", set by the program (its own '
        "labels); overrides may not change it (they remove it)",
        'kns:jobs[c].jsonOverrides[0]: /metadata/labels/kns.io~1job: is "c", set by the program (its own labels); '
        "overrides may not change it (they remove it)",
        'kns:jobs[c].jsonOverrides[0]: /metadata/labels/kns.io~1owner: is "platform", set by the program (its own '
        "labels); overrides may not change it (they remove it)",
        'kns:jobs[c].jsonOverrides[0]: /metadata/name: is "c", set by the entry\'s name; overrides may not change it '
        "(they remove it)",
        'kns:jobs[c].jsonOverrides[0]: /metadata/namespace: is "kns-c", set by the entry\'s name; overrides may not '
        "change it (they remove it)",
        "kns:jobs[d].jsonOverrides[0]: /spec/backoffLimit: must be a whole number, not a string",
        "kns:jobs[d].jsonOverrides[1]: /spec/template/spec/nodeSelector: is given without a value: write a mapping, "
        "or remove the key",
    ])


def test_overrides_keep_the_programs_placement_labels_and_gpus(tmp_path, capsys):
    config = stack_config(
        jobs=[
            override_job({"path": "/spec/template/spec/tolerations/-", "value": {"operator": "Exists"}},
                         {"path": "/spec/template/spec/nodeSelector", "value": {}},
                         {"path": "/metadata/labels/kns.io~1owner", "value": "root"}, name="a", gpus=1, user="eve"),
            override_job({"path": "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "4"},
                         name="b"),
            override_job({"path": "/spec/template/metadata/labels/kns.io~1job", "value": "other"}, name="c"),
        ],
        schedules=[{"name": "s", "image": "i", "schedule": "0 3 * * *", "jsonOverrides": [
            {"path": "/spec/template/spec/tolerations", "value": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}]}],
    )
    refused(tmp_path, capsys, config, [
        "kns:jobs[a].jsonOverrides[0]: /spec/template/spec/tolerations/1: is not a toleration the pod has from pool "
        '"a100" and the entry\'s tolerations; overrides may not add tolerations',
        'kns:jobs[a].jsonOverrides[1]: /spec/template/spec/nodeSelector/kns.io~1pool: is "a100", set by pool; '
        "overrides may not change it (they remove it)",
        'kns:jobs[a].jsonOverrides[2]: /metadata/labels/kns.io~1owner: is "eve", set by the program (its own '
        "labels); overrides may not change it",
        "kns:jobs[b].jsonOverrides[0]: /spec/template/spec/containers: they change the pod's GPUs from none to "
        "nvidia.com/gpu 4; GPUs come from gpus (or the podSpec), which place the pod on a GPU pool and are held "
        "to maxGpus",
        'kns:jobs[c].jsonOverrides[0]: /spec/template/metadata/labels/kns.io~1job: is "c", set by the program (its '
        "own labels); overrides may not change it",
        "kns:schedules[s].jsonOverrides[0]: /spec/template/spec/tolerations/0: is not a toleration the pod has from "
        "the entry's tolerations; overrides may not add tolerations",
    ])


JOB_FIELDS = sorted(podspec.DEFINITIONS["JobSpec"]["properties"])


@pytest.mark.parametrize("field", JOB_FIELDS)
def test_every_job_field_an_override_writes_has_its_kubernetes_type(field):
    shape = podspec.DEFINITIONS["JobSpec"]["properties"][field]
    value, message = wrong_value(shape)
    config = stack_config(jobs=[override_job({"path": f"/spec/{field}", "value": value})])
    assert checked(config) == [f"kns:jobs[j].jsonOverrides[0]: /spec/{field}: {message}"]


def test_a_profile_override_is_named_and_a_good_override_passes():
    profiles = {"*": {"jsonOverrides": [{"path": "/spec/template/spec/nodeSelector", "value": {"x": "y"}}]}}
    assert checked(stack_config(jobs=[{"name": "j", "image": "i", "gpus": 1}], profiles=profiles)) == [
        'kns:jobs[j].jsonOverrides (profile rule "*" jsonOverrides[0]): /spec/template/spec/nodeSelector/'
        'kns.io~1pool: is "a100", set by pool; overrides may not change it (they remove it)']
    fine = [{"path": "/spec/template/spec/nodeSelector/region", "value": "eu"},
            {"path": "/spec/template/spec/containers/-", "value": {"name": "side", "image": "busybox:1.37",
                                                                      "resources": {"limits": {"cpu": 1, "memory": "64Mi"}}}},
            {"path": "/spec/template/spec/priorityClassName", "value": "batch-low"}]
    assert checked(stack_config(jobs=[override_job(*fine, gpus=1)])) == []


# ---- 15: names the program generates are reserved ------------------------------------------

def test_user_names_cannot_take_the_names_the_program_generates(tmp_path, capsys):
    config = stack_config(
        credentials=CREDENTIALS,
        jobs=[
            {"name": "a", "image": "i", "credentials": ["s3"], "volumes": [{"name": "kns-credentials", "emptyDir": {}}]},
            {"name": "b", "credentials": ["s3"], "podSpec": {
                "containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/credentials"}]}],
                "volumes": [{"name": "v", "emptyDir": {}}]}},
            {"name": "c", "image": "i", "credentials": ["s3"], "credentialsMountPath": "/"},
            {"name": "d", "image": "i", "credentials": ["s3"], "credentialsMountPath": "/creds",
             "volumes": [{"name": "v", "emptyDir": {}}], "volumeMounts": [{"name": "v", "mountPath": "/creds/sub"}]},
        ],
        schedules=[
            {"name": "s", "schedule": "0 3 * * *", "warmUpMinutes": 5, "podSpec": {
                "initContainers": [{"name": "kns-wait", "image": "i"}], "containers": [dict(GOOD_CONTAINER)]}},
            {"name": "kns-wait", "image": "i", "schedule": "0 3 * * *", "primerSchedule": "55 2 * * *"},
        ],
    )
    refused(tmp_path, capsys, config, [
        f'kns:jobs[a].volumes[0].name: "kns-credentials" is the name of the credentials volume the program adds '
        f"(credentials); {RESERVED}",
        f'kns:jobs[b].podSpec.containers[0].volumeMounts[0].mountPath: "/credentials" is where the program mounts the '
        f"credentials (credentialsMountPath); {RESERVED}",
        'kns:jobs[c].credentialsMountPath: "/" is not a mount path (an absolute path other than "/", without "." or '
        '".." parts)',
        f'kns:jobs[d].volumeMounts[0].mountPath: "/creds/sub" is inside the read-only directory where the program '
        f"mounts the credentials (credentialsMountPath); {RESERVED}",
        f'kns:schedules[s].podSpec.initContainers[0].name: "kns-wait" is the name of the wait init container the '
        f"program adds to a prescaled schedule (warmUpMinutes); {RESERVED}",
        f'kns:schedules[kns-wait].name: "kns-wait" is the name of the wait init container the program adds to a '
        f"prescaled schedule (primerSchedule); {RESERVED}",
    ])


PRIMED = {"image": "i", "schedule": "0 0,12 * * 1", "warmUpMinutes": 30}  # two primer CronJobs: a, a-2


def test_generated_pulumi_names_cannot_meet_user_names(tmp_path, capsys):
    config = stack_config(
        schedules=[{"name": "a", **PRIMED}, {"name": "a-2", "image": "i", "schedule": "0 3 * * *"},
                   {"name": "b", **PRIMED}],
        jobs=[{"name": "b-2", "image": "i"}],
    )
    refused(tmp_path, capsys, config, [
        f'kns:schedules[a-2].name: its CronJob is named "a-2", like the second primer CronJob (of 2) of '
        f"kns:schedules[a]; {RENAME}",
        f'kns:schedules[b].name: its second primer CronJob (of 2) is named "b-2", like the Job of kns:jobs[b-2]; '
        f"{RENAME}",
    ])


def test_derived_secret_names_cannot_meet():
    config = stack_config(credentials=CREDENTIALS, jobs=[
        {"name": "a", "image": "i", "credentials": ["x-cred-y"]},
        {"name": "a-cred-x", "image": "i", "credentials": ["y"]}])
    assert checked(config) == [
        'kns:jobs[a-cred-x].credentials: its Secret of credential set "y" is named "a-cred-x-cred-y", like the Secret '
        f'of credential set "x-cred-y" of kns:jobs[a]; {RENAME}']


INVENTORY_STACKS = {
    "dev": None,
    # Reservations (docs/reservations.md): a reserved pool, its reservations and their entries.
    "reservations": stack_config(
        nodePools=[*POOLS, {"name": "b200", "role": "gpu", "nodes": ["b1", "b2"], "gpu": {"perNode": 8}}],
        queueing={"enabled": True, "install": False},
        queues=[{"name": "gpu", "cohort": "site", "quota": {"a100": {"cpu": 8, "memory": "32Gi", "nvidia.com/gpu": 4},
                                                             "b200": {"cpu": 8, "memory": "32Gi", "nvidia.com/gpu": 8}}}],
        reservations=[{"name": "course", "pool": "b200", "nodes": 1, "schedule": "0 9 * * 2", "duration": "3h",
                       "users": ["ann"]},
                      {"name": "night", "pool": "a100", "resources": {"gpus": 4}, "schedule": "0 22 * * *",
                       "duration": "6h", "atEnd": "finish", "entries": ["n"]}],
        jobs=[{"name": "j", "user": "ann", "image": "i", "gpus": 1, "queue": "gpu", "reservation": "course"}],
        schedules=[{"name": "n", "image": "i", "gpus": 1, "schedule": "0 23 * * *", "reservation": "night",
                    "pool": "a100"}],
    ),
    "everything": stack_config(
        credentials=CREDENTIALS,
        packingScheduler={"replicas": 2},
        knsScheduler={"enabled": True, "image": "kns:1", "replicas": 2, "ingress": True, "jobsDomain": "jobs.example.org",
                      "keycloak": {"url": "https://k", "realm": "r", "clientId": "c"}},
        keycloakClientSecret="s",
        nodePools=[*POOLS, {"name": "sys", "role": "system", "nodes": ["s1", "s2"]}],
        jobs=[{"name": "j", "image": "i", "credentials": ["s3", "y"]}, {"name": "ns", "type": "namespace"}],
        schedules=[{"name": "a", **PRIMED}, {"name": "p", "image": "i", "schedule": "0 3 * * *"}],
    ),
    # Queueing with the cluster's own Kueue (the dev stack has the program install it): a
    # pool's Topology, flavors, queues, priorities and the queued entries' LocalQueues.
    "queueing": stack_config(
        nodePools=[{**POOLS[0], "topology": {"levels": ["example.com/rack", "kubernetes.io/hostname"]}},
                   {"name": "cpu", "role": "compute", "nodes": ["c1"]}],
        queueing={"enabled": True, "install": False},
        priorities=[{"name": "low", "value": 1, "default": True}, {"name": "high", "value": 10}],
        queues=[{"name": "a100", "cohort": "all", "quota": {"a100": {"cpu": 8, "memory": "64Gi", "nvidia.com/gpu": 8}}},
                {"name": "cpu", "cohort": "all", "quota": {"cpu": {"cpu": 8, "memory": "64Gi"}}}],
        jobs=[{"name": "q", "image": "i", "queue": "cpu"}, {"name": "a100", "image": "i", "queue": "a100", "gpus": 1},
              {"name": "free", "image": "i"}],
        schedules=[{"name": "s", "image": "i", "queue": "cpu", "schedule": "0 3 * * *", "warmUpMinutes": 5}],
    ),
    # GPUs as devices (docs/gpus.md): a DRA pool's DeviceClasses, the entries' claim objects
    # (a shared one too) and a reservation whose holder claims devices.
    "devices": stack_config(
        nodePools=[{"name": "mig", "role": "gpu", "nodes": ["m1", "m2"], "gpu": {
            "perNode": 8, "allocation": "dra", "driver": "gpu.nvidia.com", "partitions": [
                {"profile": "1g.10gb", "perGpu": 7}], "sharing": {"strategy": "MPS"}}}],
        queueing={"enabled": True, "install": False},
        queues=[{"name": "q", "cohort": "all", "quota": {"mig": {"cpu": 8, "memory": "64Gi",
                                                                 "gpu.nvidia.com/1g.10gb": 7}}}],
        reservations=[{"name": "lab", "pool": "mig", "schedule": "0 9 * * 2", "timeZone": "Etc/UTC",
                       "duration": "1h", "resources": {"gpu.nvidia.com/1g.10gb": 7}}],
        jobs=[{"name": "nb", "image": "i", "queue": "q", "gpu": {"partition": "1g.10gb"}},
              {"name": "serve", "image": "i", "gpu": {"shared": True}, "parallelism": 2},
              {"name": "train", "image": "i", "gpus": 8, "workers": 2}],
    ),
}


@pytest.mark.parametrize("name", sorted(INVENTORY_STACKS))
def test_the_inventory_lists_exactly_what_the_program_registers(name):
    from kns_testing.program import dev_stack_config

    config = INVENTORY_STACKS[name] or dev_stack_config()
    secret = tuple(k for k in ("credentials", "keycloakClientSecret") if k in config)
    result = run_program(config, secret_keys=secret)
    registered = sorted((r.type, r.name) for r in result.resources if r.type != "pulumi:pulumi:Stack")
    cfg_checked = check_config(config, project_dir=ROOT, environ={}, secret_keys=frozenset(secret) or frozenset(
        {"credentials", "keycloakClientSecret"}))
    listed = sorted((item.type, item.name) for item in inventory.registrations(plan_checked(cfg_checked)))
    assert registered == listed


# ---- the generated shapes are the pinned Kubernetes' -------------------------------------

def test_the_committed_shapes_are_what_the_pinned_kubernetes_gives(tmp_path):
    version = k8s_shapes.kubernetes_version()
    assert podspec.SHAPES["kubernetes"] == version
    path = k8s_shapes.swagger_path(version)
    if not path.is_file():  # the control-plane and linter builds download it; fetch it if they have not
        subprocess.run(["go", "mod", "download", f"k8s.io/kubernetes@v{version}"], cwd=tmp_path, timeout=1800,
                       capture_output=True, env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
    assert path.is_file(), f"{path} is not in the Go module cache"
    swagger = json.loads(path.read_text(encoding="utf-8"))
    assert k8s_shapes.render(swagger, version) == (ROOT / "config" / "k8s_shapes.json").read_text(encoding="utf-8")


def test_the_real_kns_command_agrees_with_the_program(tmp_path):
    config = stack_config(jobs=[{"name": "a", "podSpec": {"containers": "x"}},
                                override_job({"path": "/spec/template/spec/restartPolicy", "value": "Always"})])
    root = write_project(tmp_path / "project", config)
    result = subprocess.run([str(ROOT / "kns"), "validate", "--stack", "case", "--project-dir", str(root)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert all(line.startswith("  - Pulumi.case.yaml:") for line in result.stderr.splitlines()[1:])
    assert without_places(result.stderr.rstrip("\n")) == program_text(config) == expected_text([
        "kns:jobs[a].podSpec.containers: must be a list of Container mappings, not a string",
        'kns:jobs[j].jsonOverrides[0]: /spec/template/spec/restartPolicy: cannot run as a Job (Never or '
        "OnFailure)",
    ])


# ---- hugepages names (rules.HUGEPAGES, one rule for every place a resource is named) ----


@pytest.mark.parametrize("name", ["hugepages-junk", "hugepages-0", "hugepages-1.5Mi", "hugepages-", "hugepages-2Mi/x"])
def test_a_hugepages_name_without_a_page_size_is_refused_wherever_resources_are_named(tmp_path, capsys, name):
    config = stack_config(jobs=[
        {"name": "extra", "image": "i", "extraResources": {name: 2}},
        {"name": "quota", "image": "i", "quota": {f"requests.{name}": "64Mi"}},
        {"name": "pod", "image": "i", "podSpec": {"containers": [
            {"name": "main", "image": "i", "resources": {"limits": {name: "64Mi", "cpu": 1, "memory": "1Gi"}}}]}},
    ])
    lines = checked(config)
    assert any(line.startswith("kns:jobs[extra].extraResources") and f'"{name}"' in line for line in lines), lines
    assert any(line.startswith("kns:jobs[quota].quota") and f'"requests.{name}"' in line for line in lines), lines
    assert any(line.startswith("kns:jobs[pod].podSpec") and name in line for line in lines), lines
    refused(tmp_path, capsys, config, lines)


@pytest.mark.parametrize("name", ["hugepages-2Mi", "hugepages-1Gi", "hugepages-64Ki"])
def test_a_hugepages_name_with_a_page_size_is_taken(name):
    assert checked(stack_config(jobs=[
        {"name": "quota", "image": "i", "quota": {f"requests.{name}": "64Mi"}},
        {"name": "extra", "image": "i", "extraResources": {name: "64Mi"}},
    ])) == []
