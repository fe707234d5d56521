"""GPUs as devices (issue 46, contract section 16; docs/gpus.md): what a DRA pool and the
entries on it produce under the program's own run (mocks), how every counter of the
platform counts devices (plan/accounting.py), and every config problem, through both the
program and `./kns validate`, with nothing registered."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from typing import Any

import pytest
import yaml

from config import rules
from kns_cli import cli
from kns_testing import apiserver
from kns_testing.doors import program_text, refused, validate_text, write_project
from kns_testing.gpus import doc_example
from kns_testing.program import ROOT, run_program
from plan import kueue_install

DEVICE_CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass"
TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
CLAIM = "kubernetes:resource.k8s.io/v1:ResourceClaim"
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
QUOTA = "kubernetes:core/v1:ResourceQuota"
JOB = "kubernetes:batch/v1:Job"
CRON = "kubernetes:batch/v1:CronJob"
MODEL = "NVIDIA A100-SXM4-80GB"


def dra_pool(name: str = "a100", nodes: int = 2, **gpu: Any) -> dict[str, Any]:
    return {"name": name, "role": "gpu", "nodes": [f"{name}-{i}" for i in range(1, nodes + 1)],
            "gpu": {"vendor": "nvidia", "perNode": 8, "allocation": "dra", "driver": "gpu.nvidia.com",
                    "model": MODEL, "partitions": [{"profile": "1g.10gb", "perGpu": 7},
                                                   {"profile": "3g.40gb", "perGpu": 2}], **gpu}}


def job(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "user": "ann", "image": "busybox:1.37", "cpu": 1, "memory": 2048, **more}


# The page's worked example: two nodes of 8 A100s partitioned into 1g.10gb and 3g.40gb
# slices, a notebook on one slice, a 2 x 8-GPU distributed job, a prescaled schedule on two
# slices, an inference service sharing one GPU.
CONFIG: dict[str, Any] = doc_example()


@pytest.fixture(scope="module")
def run():
    return run_program(CONFIG)


def named(run, type_: str, name: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in run.of_type(type_) if r.name == name]
    return apiserver.manifest(next(r for r in run.of_type(type_) if r.name == name)) if found else {}


def pod_of(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    return (spec["jobTemplate"]["spec"] if manifest["kind"] == "CronJob" else spec)["template"]["spec"]


def test_every_object_is_what_the_api_server_accepts(run):
    assert apiserver.problems(run.resources) == []


def test_a_dra_pool_gets_a_device_class_per_kind_selecting_on_the_drivers_attributes(run):
    classes = {r.name: apiserver.manifest(r) for r in run.of_type(DEVICE_CLASS)}
    assert sorted(classes) == ["kns-a100-1g.10gb", "kns-a100-3g.40gb", "kns-a100-gpu"]
    attributes = "device.attributes['gpu.nvidia.com']"
    whole = classes["kns-a100-gpu"]["spec"]["selectors"][0]["cel"]["expression"]
    assert whole == (f"device.driver == 'gpu.nvidia.com' && {attributes}.type == 'gpu' && "
                     f"{attributes}.productName == '{MODEL}'")
    slice_ = classes["kns-a100-1g.10gb"]["spec"]["selectors"][0]["cel"]["expression"]
    assert f"{attributes}.type == 'mig'" in slice_ and f"{attributes}.profile == '1g.10gb'" in slice_
    assert classes["kns-a100-gpu"]["metadata"]["labels"]["kns.io/pool"] == "a100"


def test_a_one_slice_entry_claims_one_slice_per_pod_and_no_extended_gpu(run):
    template = named(run, TEMPLATE, "notebook-gpu-claim")
    assert template["metadata"] == {**template["metadata"], "name": "kns-gpu", "namespace": "kns-notebook"}
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {"deviceClassName": "kns-a100-1g.10gb", "allocationMode": "ExactCount", "count": 1}
    pod = pod_of(named(run, JOB, "notebook"))
    assert pod["resourceClaims"] == [{"name": "kns-gpu", "resourceClaimTemplateName": "kns-gpu"}]
    (container,) = pod["containers"]
    assert container["resources"]["claims"] == [{"name": "kns-gpu"}]
    assert not any("gpu" in r for side in ("requests", "limits") for r in container["resources"][side])
    assert pod["nodeSelector"]["kns.io/pool"] == "a100"
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in pod["tolerations"]


def test_quotas_count_devices_per_class_per_pod_at_once(run):
    hard = {r.inputs["metadata"]["namespace"]: apiserver.manifest(r)["spec"]["hard"] for r in run.of_type(QUOTA)}
    assert hard["kns-notebook"]["kns-a100-1g.10gb.deviceclass.resource.k8s.io/devices"] == "1"
    assert hard["kns-train"]["kns-a100-gpu.deviceclass.resource.k8s.io/devices"] == "16"  # 2 workers x 8
    # Two slices for each pod the schedule's namespace may hold at once.
    nightly = hard["kns-nightly"]
    assert nightly["kns-a100-3g.40gb.deviceclass.resource.k8s.io/devices"] == str(2 * int(nightly["pods"]))
    # Three pods share one claim: one device, counted once.
    assert hard["kns-serve"]["kns-a100-gpu.deviceclass.resource.k8s.io/devices"] == "1"
    assert not any("nvidia.com/gpu" in key for quota in hard.values() for key in quota)


def test_each_worker_of_a_distributed_entry_claims_its_own_eight_gpus(run):
    template = named(run, TEMPLATE, "train-gpu-claim")
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 8
    job_ = named(run, JOB, "train")
    assert job_["spec"]["completionMode"] == "Indexed" and job_["spec"]["parallelism"] == 2
    assert pod_of(job_)["resourceClaims"] == [{"name": "kns-gpu", "resourceClaimTemplateName": "kns-gpu"}]


def test_a_prescaled_schedules_pod_claims_its_devices_and_the_wait_does_not(run):
    cron = named(run, CRON, "nightly")
    pod = pod_of(cron)
    assert pod["resourceClaims"] == [{"name": "kns-gpu", "resourceClaimTemplateName": "kns-gpu"}]
    assert [c["resources"].get("claims") for c in pod["containers"]] == [[{"name": "kns-gpu"}]]
    assert all("claims" not in c.get("resources", {}) for c in pod["initContainers"])


def test_a_shared_gpu_is_one_claim_the_pods_share_with_the_drivers_sharing_config(run):
    (claim,) = [apiserver.manifest(r) for r in run.of_type(CLAIM)]
    assert claim["metadata"]["namespace"] == "kns-serve"
    devices = claim["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["deviceClassName"] == "kns-a100-gpu"
    assert devices["config"] == [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}}}]
    assert pod_of(named(run, JOB, "serve"))["resourceClaims"] == [{"name": "kns-gpu", "resourceClaimName": "kns-gpu"}]


def test_kueue_counts_each_kind_of_device_as_one_resource_and_the_queue_covers_them(run):
    (config_map,) = [r for r in run.resources if r.type == "kubernetes:core/v1:ConfigMap"
                     and kueue_install.CONFIG_KEY in (r.inputs.get("data") or {})]
    configuration = yaml.safe_load(config_map.inputs["data"][kueue_install.CONFIG_KEY])
    assert configuration["resources"]["deviceClassMappings"] == [
        {"name": "gpu.nvidia.com/gpu", "deviceClassNames": ["kns-a100-gpu"]},
        {"name": "gpu.nvidia.com/1g.10gb", "deviceClassNames": ["kns-a100-1g.10gb"]},
        {"name": "gpu.nvidia.com/3g.40gb", "deviceClassNames": ["kns-a100-3g.40gb"]}]
    (queue,) = [apiserver.manifest(r) for r in run.of_type(CQ)]
    covered = queue["spec"]["resourceGroups"][0]["coveredResources"]
    assert "gpu.nvidia.com/gpu" in covered and "gpu.nvidia.com/1g.10gb" in covered


def test_explain_and_queues_count_devices_as_the_planner_does(tmp_path, capsys):
    root = write_project(tmp_path / "p", CONFIG)
    assert cli.main(["explain", "train", "--stack", "case", "--project-dir", str(root), "--format", "json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    entry = facts["entries"][0] if "entries" in facts else facts
    assert entry["podTotals"]["devices"] == {"kns-a100-gpu": 8}
    assert entry["queue"]["requests"]["gpu.nvidia.com/gpu"] == "16"
    assert entry["quota"]["kns-a100-gpu.deviceclass.resource.k8s.io/devices"] == "16"
    assert cli.main(["explain", "notebook", "--stack", "case", "--project-dir", str(root)]) == 0
    text = capsys.readouterr().out
    assert "1 of DeviceClass kns-a100-1g.10gb per pod" in text
    assert cli.main(["explain", "serve", "--stack", "case", "--project-dir", str(root)]) == 0
    assert "1 of DeviceClass kns-a100-gpu shared by the entry's pods" in capsys.readouterr().out
    assert cli.main(["queues", "--stack", "case", "--project-dir", str(root)]) == 0
    text = capsys.readouterr().out
    line = next(l for l in text.splitlines() if "gpu.nvidia.com/1g.10gb" in l)
    assert line.split()[-1] == "1"  # what its entries ask: the notebook's one slice


# ---- the queue fit check and profiles count devices ------------------------------------------


def test_a_queue_too_small_for_the_devices_is_refused_naming_the_device_resource(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["queues"][0]["quota"]["a100"]["gpu.nvidia.com/1g.10gb"] = 6
    config["jobs"][0]["gpu"]["count"] = 7
    config["jobs"][0]["parallelism"] = 1
    text = program_text(config)
    assert text == validate_text(tmp_path, config, capsys)
    assert "kns:jobs[notebook].queue" in text and "gpu.nvidia.com/1g.10gb 7" in text and "quota 6" in text


def test_a_queue_that_names_extended_gpus_on_a_dra_pool_cannot_admit_device_entries(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["queues"][0]["quota"]["a100"] = {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 16,
                                            "gpu.nvidia.com/1g.10gb": 14}
    text = program_text(config)
    assert "kns:jobs[train].queue" in text and "gpu.nvidia.com/gpu is not in its quota" in text


def test_max_gpus_bounds_devices_a_slice_counting_as_one(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["profiles"] = {"*": {"maxGpus": {"nvidia": 1}}}
    text = program_text(config)
    assert text == validate_text(tmp_path, config, capsys)
    assert "kns:schedules[nightly].gpu.count" in text and "kns:jobs[train].gpus" in text
    assert "kns:jobs[notebook]" not in text


def test_an_override_cannot_drop_or_add_a_claim(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["jobs"][0]["jsonOverrides"] = [{"path": "/spec/template/spec/resourceClaims", "value": []}]
    config["jobs"][2]["jsonOverrides"] = [{"path": "/spec/template/spec/containers/0/resources/claims", "value": []}]
    text = program_text(config)
    assert text == validate_text(tmp_path, config, capsys)
    assert "kns:jobs[notebook].jsonOverrides[0]" in text and "kns:jobs[serve].jsonOverrides[0]" in text
    assert text.count("the pod's GPU device claim") == 2


# ---- bad input: each a path-qualified problem through both doors, nothing registered ---------


# A pool's own problems, on a config of pools alone: the entries on a broken pool would add
# their own line ("node pool ... is invalid"), which test_config holds already.
POOLS_ONLY = {"cluster": CONFIG["cluster"], "nodePools": CONFIG["nodePools"]}


def edit(change, base: dict[str, Any] = CONFIG) -> dict[str, Any]:
    config = copy.deepcopy(base)
    change(config)
    return config


def pool_gpu(config: dict[str, Any]) -> dict[str, Any]:
    return config["nodePools"][0]["gpu"]


EXT_POOL = {"name": "t4", "role": "gpu", "nodes": ["t1"], "gpu": {"vendor": "nvidia", "perNode": 4}}
BAD = {
    "partition not offered": (
        lambda c: c["jobs"][0]["gpu"].update(partition="2g.20gb"),
        ['kns:jobs[notebook].gpu.partition: "2g.20gb" is not a partition pool "a100" offers (its partitions: '
         "1g.10gb, 3g.40gb)"]),
    "more whole GPUs than a node": (
        lambda c: c["jobs"][1].update(gpus=9),
        ['kns:jobs[train].gpus: 9 whole GPUs do not fit on one node of pool "a100" (it has 8: perNode 8)']),
    "more slices than a node": (
        lambda c: c["schedules"][0]["gpu"].update(count=17),
        ['kns:schedules[nightly].gpu.count: 17 3g.40gb partitions do not fit on one node of pool "a100" '
         "(it has 16: perNode 8 x perGpu 2)"]),
    "gpu on an extended-resource pool": (
        lambda c: (c["nodePools"].append(EXT_POOL), c["jobs"][0].update(pool="t4"), c["jobs"][0].pop("queue"),
                   [e.update(pool="a100") for e in c["jobs"][1:] + c["schedules"]]),
        ['kns:jobs[notebook].gpu.partition: asks a partition, but pool "t4" counts GPUs as an extended resource '
         "(allocation: extendedResource): gpu: {...} is for allocation: dra pools; use gpus: N"]),
    "whole devices on an extended-resource pool": (
        lambda c: (c["nodePools"].append(EXT_POOL), c["jobs"][2].update(pool="t4", gpu={"count": 2}),
                   [e.update(pool="a100") for e in c["jobs"][:2] + c["schedules"]]),
        ['kns:jobs[serve].gpu: asks GPU devices, but pool "t4" counts GPUs as an extended resource '
         "(allocation: extendedResource): gpu: {...} is for allocation: dra pools; use gpus: N"]),
    "gpuResource on a dra pool": (
        lambda c: c["jobs"][1].update(gpuResource="nvidia.com/mig-1g.10gb"),
        ['kns:jobs[train].gpuResource: names the extended resource nvidia.com/mig-1g.10gb, but pool "a100" '
         "allocates GPUs as devices (allocation: dra): ask gpus: N or gpu: {...}"]),
    "an init container asking extended GPUs on a dra pool": (
        lambda c: c["jobs"].__setitem__(0, {"name": "notebook", "user": "ann", "pool": "a100", "podSpec": {
            "initContainers": [{"name": "i", "image": "busybox:1.37",
                                "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": 1, "memory": "1Gi"}}}],
            "containers": [{"name": "n", "image": "busybox:1.37",
                            "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}),
        ['kns:jobs[notebook].podSpec: asks 2 nvidia.com/gpu, but pool "a100" allocates GPUs as devices '
         "(allocation: dra), so no node offers that resource: use gpu: {...}"]),
    "partitions without dra": (
        lambda c: c["nodePools"].append({**EXT_POOL, "gpu": {**EXT_POOL["gpu"], "partitions": [
            {"profile": "1g.10gb", "perGpu": 7}]}}),
        [f"kns:nodePools[t4].gpu.partitions: {rules.DRA_FIELDS_NEED_DRA.message}"]),
    "dra without a driver": (
        lambda c: pool_gpu(c).pop("driver"),
        [f"kns:nodePools[a100].gpu.driver: {rules.DRA_NEEDS_DRIVER.message}"]),
    "gpuResource with gpu": (
        lambda c: c["jobs"][0].update(gpuResource="nvidia.com/mig-1g.10gb"),
        [f"kns:jobs[notebook].gpuResource: {rules.GPU_RESOURCE_NOT_WITH_GPU.message}"]),
    "gpus and gpu": (
        lambda c: c["jobs"][0].update(gpus=1),
        [f"kns:jobs[notebook].gpu: {rules.GPU_ASK_EXCLUSIVE.message}"]),
    "podSpec asking extended GPUs on a dra pool": (
        lambda c: c["jobs"].__setitem__(0, {"name": "notebook", "user": "ann", "pool": "a100", "podSpec": {
            "containers": [{"name": "n", "image": "busybox:1.37",
                            "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 1, "memory": "1Gi"}}}]}}),
        ['kns:jobs[notebook].podSpec: asks 1 nvidia.com/gpu, but pool "a100" allocates GPUs as devices '
         "(allocation: dra), so no node offers that resource: use gpu: {...}"]),
    "an old declared version": (
        lambda c: c["cluster"].update(kubernetesVersion="1.33"),
        ["kns:nodePools[a100].gpu.allocation: allocation: dra needs resource.k8s.io/v1 (Kubernetes 1.34 or "
         "later), and kns:cluster declares kubernetesVersion 1.33"]),
    "duplicate profiles": (
        lambda c: pool_gpu(c)["partitions"].append({"profile": "1g.10gb", "perGpu": 4}),
        ['kns:nodePools[a100].gpu.partitions[2].profile: "1g.10gb" is already partitions[0]']),
    "not a profile": (
        lambda c: pool_gpu(c)["partitions"].__setitem__(1, {"profile": "3g-40gb", "perGpu": 2}),
        [f'kns:nodePools[a100].gpu.partitions[1].profile: "3g-40gb" is {rules.MIG_PROFILE.message}']),
    "dra on an autoscaled pool": (
        lambda c: c["nodePools"][0].update(nodes=None, autoscale={"nodeClassRef": {
            "group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}),
        [f"kns:nodePools[a100].gpu.allocation: {rules.DRA_NEEDS_STATIC_POOL.message}"]),
    "shared where the pool does not share": (
        lambda c: pool_gpu(c).pop("sharing"),
        ['kns:jobs[serve].gpu.shared: pool "a100" declares no gpu.sharing: its GPUs are not shared']),
    "shared on a queue": (
        lambda c: c["jobs"][2].update(queue="gpu"),
        [f"kns:jobs[serve].gpu.shared: {rules.SHARED_NOT_QUEUED.message}"]),
    "shared with a partition": (
        lambda c: c["jobs"][2]["gpu"].update(partition="1g.10gb"),
        [f"kns:jobs[serve].gpu: {rules.SHARED_IS_ONE_GPU.message}"]),
    # A quota of a device the pool does not offer: Kueue would count what nothing asks.
    "quota of a profile the pool does not offer": (
        lambda c: c["queues"][0]["quota"]["a100"].update({"gpu.nvidia.com/2g.20gb": "2"}),
        ['kns:queues[gpu].quota.a100.gpu.nvidia.com/2g.20gb: "gpu.nvidia.com/2g.20gb" is no device resource pool '
         '"a100" offers, so Kueue would count a quota nothing asks; did you mean "gpu.nvidia.com/3g.40gb"? (its '
         "device resources: gpu.nvidia.com/gpu, gpu.nvidia.com/1g.10gb, gpu.nvidia.com/3g.40gb)"]),
    "quota of a misspelt device": (
        lambda c: c["queues"][0]["quota"]["a100"].update({"gpu.nvidia.com/1g.10g": "2"}),
        ['kns:queues[gpu].quota.a100.gpu.nvidia.com/1g.10g: "gpu.nvidia.com/1g.10g" is no device resource pool '
         '"a100" offers, so Kueue would count a quota nothing asks; did you mean "gpu.nvidia.com/1g.10gb"? (its '
         "device resources: gpu.nvidia.com/gpu, gpu.nvidia.com/1g.10gb, gpu.nvidia.com/3g.40gb)"]),
    "quota of devices on a pool without them": (
        lambda c: (c["nodePools"].append(EXT_POOL), c["queues"][0]["quota"].update(
            {"t4": {"nvidia.com/gpu": "4", "gpu.nvidia.com/gpu": "4"}}),
                   [e.update(pool="a100") for e in c["jobs"] + c["schedules"]]),
        ['kns:queues[gpu].quota.t4.gpu.nvidia.com/gpu: "gpu.nvidia.com/gpu" is no device resource pool "t4" offers, '
         "so Kueue would count a quota nothing asks (its device resources: none: its GPUs are not allocated as "
         "devices (allocation: dra))"]),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_a_device_config_that_cannot_work_is_refused_at_its_path(tmp_path, capsys, case):
    change, lines = BAD[case]
    pool_only = lines[0].startswith("kns:nodePools[a100]") and "allocation: dra needs resource" not in lines[0]
    refused(tmp_path, capsys, edit(change, POOLS_ONLY if pool_only else CONFIG), lines)


def test_a_worker_declaring_an_old_version_refuses_its_dra_pool():
    from kns_testing.sites import problems, site  # a manager and two workers

    config = site()
    worker = config["workers"][0]
    worker["kubernetesVersion"] = "v1.31.4"
    worker["nodePools"].append(dra_pool("h100", nodes=1))
    found = problems(config)
    assert found["kns:workers[east].nodePools[h100].gpu.allocation"] == (
        "allocation: dra needs resource.k8s.io/v1 (Kubernetes 1.34 or later), and kns:workers[east] declares "
        "kubernetesVersion v1.31.4")
    worker["kubernetesVersion"] = "1.34"
    assert not any("h100" in path for path in problems(config))


# ---- the policy pack --------------------------------------------------------------------------


def test_the_pack_passes_the_programs_claims_and_refuses_uncounted_ones(run):
    from plan.guardrails import Resource, device_claims_are_counted

    claims = [Resource(r.type, r.name, apiserver.manifest(r)) for r in run.resources
              if r.type in (TEMPLATE, CLAIM)]
    assert len(claims) == 4 and device_claims_are_counted(claims, {}) == []
    bad = copy.deepcopy(next(c.props for c in claims if c.type == TEMPLATE))  # registration order is the SDK's
    requests = bad["spec"]["spec"]["devices"]["requests"]
    requests[0]["exactly"].update(allocationMode="All", adminAccess=True)
    requests.append({"name": "alt", "firstAvailable": [{"name": "a", "deviceClassName": "kns-a100-gpu"}]})
    found = [v.message for v in device_claims_are_counted([Resource(TEMPLATE, "urn:x", bad)], {})]
    assert len(found) == 3
    assert any("allocationMode All" in m for m in found) and any("adminAccess" in m for m in found)
    assert any("request alt asks no exact" in m for m in found)


# ---- reservations on a DRA pool (docs/reservations.md, docs/gpus.md) ----------------------------


def test_a_reservation_on_a_dra_pool_holds_gpu_devices_and_its_holder_claims_them():
    from config.loader import check_config
    from plan import reservations as plan_reservations
    from plan.planner import plan_checked

    config = copy.deepcopy(CONFIG)
    config["queues"][0]["cohort"] = "site"
    # The pool's 16 whole GPUs: 8 for the queue, a node's 8 for the course (more is overbooked).
    config["queues"][0]["quota"]["a100"]["gpu.nvidia.com/gpu"] = "8"
    config["jobs"][1]["gpus"] = 4
    config["reservations"] = [{"name": "course", "pool": "a100", "nodes": 1, "schedule": "0 9 * * 2",
                               "timeZone": "Europe/Paris", "duration": "3h", "entries": ["notebook"]},
                              {"name": "labs", "pool": "a100", "schedule": "0 14 * * 3", "timeZone": "Europe/Paris",
                               "duration": "2h", "resources": {"gpu.nvidia.com/1g.10gb": 7, "cpu": 7}}]
    config["jobs"][0]["reservation"] = "course"
    checked = check_config(config, project_dir=ROOT, environ={}, secret_keys=frozenset())
    cfg = checked.clean()
    plans = plan_checked(checked).entries
    (cohort,) = plan_reservations.pool_cohorts(cfg, datetime.now(timezone.utc))
    quota = {r["name"]: r["nominalQuota"] for r in cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota["gpu.nvidia.com/gpu"] == "8" and quota["gpu.nvidia.com/1g.10gb"] == "7"
    planned = {p.name: p for p in plan_reservations.plan_reservations(cfg, plans, datetime.now(timezone.utc))}
    for name, device_class, count, pods in (("course", "kns-a100-gpu", 1, 8), ("labs", "kns-a100-1g.10gb", 1, 7)):
        (claim,) = [o for o in planned[name].objects if o["kind"] == "ResourceClaimTemplate"]
        (request,) = claim["spec"]["spec"]["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == device_class and request["exactly"]["count"] == count
        holder = plan_reservations.holder_manifest(cfg, planned[name])
        assert holder["spec"]["parallelism"] == pods
        pod = holder["spec"]["template"]["spec"]
        assert pod["resourceClaims"] == [{"name": "kns-gpu", "resourceClaimTemplateName": "kns-gpu"}]
        (container,) = pod["containers"]
        assert container["resources"]["claims"] == [{"name": "kns-gpu"}]
        assert not [r for r in container["resources"]["requests"] if "gpu" in r]
    run = run_program(config)
    assert apiserver.problems(run.resources) == []
    assert sum(1 for r in run.of_type(TEMPLATE) if r.inputs["metadata"]["namespace"].startswith("kns-res-")) == 2
