"""Pure derivations: every node-pool label and taint rule, placement, resources, limits."""

from __future__ import annotations

import pytest

from config import resolve
from plan import accounting
from config.models import Job, NodePool, Profile, Schedule

VC = {"key": "node-role.jarvice.io/jarvice-vcluster", "value": "true", "effect": "NoSchedule"}
NVIDIA = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
AMD = {"key": "amd.com/gpu", "value": "present", "effect": "NoSchedule"}


def pool(**kw) -> NodePool:
    return NodePool.model_validate({"nodes": ["n1"], **kw})


def job(**kw) -> Job:
    return Job.model_validate({"name": "j", "image": "busybox", **kw})


# ---- contract section 2: one test per rule ---------------------------------------------


def test_every_pool_node_gets_the_pool_and_cluster_labels():
    for p in (pool(name="c", role="compute"), pool(name="s", role="system")):
        labels = resolve.pool_labels(p, "kns-dev")
        assert labels == {"kns.io/pool": p.name, "kns.io/cluster": "kns-dev"}
        assert resolve.pool_taints(p) == []


def test_vcluster_nodes_get_label_and_taint():
    p = pool(name="vc", role="vcluster")
    assert resolve.pool_labels(p, "c")["node-role.jarvice.io/jarvice-vcluster"] == "true"
    assert resolve.pool_taints(p) == [VC]


def test_nvidia_gpu_nodes_get_label_and_taint():
    p = pool(name="g", role="gpu", gpu={"vendor": "nvidia", "perNode": 8})
    assert resolve.pool_labels(p, "c")["nvidia.com/gpu"] == "present"
    assert resolve.pool_taints(p) == [NVIDIA]


def test_amd_gpu_nodes_get_the_amd_label_and_taint():
    p = pool(name="g", role="gpu", gpu={"vendor": "amd", "perNode": 4})
    labels = resolve.pool_labels(p, "c")
    assert labels["amd.com/gpu"] == "present" and "nvidia.com/gpu" not in labels
    assert resolve.pool_taints(p) == [AMD]


def test_gpu_pool_with_vcluster_gets_both_taints():
    p = pool(name="g", role="gpu", vcluster=True, gpu={"vendor": "nvidia", "perNode": 8})
    assert resolve.pool_taints(p) == [VC, NVIDIA]
    assert resolve.pool_labels(p, "c")["node-role.jarvice.io/jarvice-vcluster"] == "true"


def test_pool_labels_and_taints_are_added_without_duplicates():
    p = pool(
        name="vc",
        role="vcluster",
        labels={"zone": "a"},
        taints=[{"key": "team", "value": "ml", "effect": "NoExecute"}, dict(VC)],
    )
    assert resolve.pool_labels(p, "c")["zone"] == "a"
    assert resolve.pool_taints(p) == [VC, {"key": "team", "value": "ml", "effect": "NoExecute"}]


def test_pool_labels_cannot_override_the_pool_label():
    p = pool(name="vc", role="vcluster", labels={"kns.io/pool": "other"})
    assert resolve.pool_labels(p, "c")["kns.io/pool"] == "vc"


def test_tolerations_match_every_pool_taint():
    p = pool(name="g", role="gpu", vcluster=True, gpu={"vendor": "nvidia", "perNode": 8})
    assert resolve.tolerations_for(p) == [
        {"key": VC["key"], "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]


# ---- placement ---------------------------------------------------------------------------

POOLS = [
    pool(name="vc", role="vcluster"),
    pool(name="a100", role="gpu", gpu={"vendor": "nvidia", "perNode": 8}, nodes=["g1"]),
    pool(name="mi300", role="gpu", gpu={"vendor": "amd", "perNode": 8}, nodes=["m1"]),
]


def test_cpu_work_without_pool_targets_nothing():
    assert resolve.resolve_pool(job(), POOLS) is None


def test_named_pool_is_used():
    assert resolve.resolve_pool(job(pool="vc"), POOLS).name == "vc"


def test_gpu_work_finds_the_only_pool_of_its_vendor():
    assert resolve.resolve_pool(job(gpus=1), POOLS).name == "a100"
    assert resolve.resolve_pool(job(gpus=1, gpuVendor="amd"), POOLS).name == "mi300"


def test_gpu_work_on_a_non_gpu_pool_is_refused():
    with pytest.raises(resolve.PlacementError, match='"vc" is a "vcluster" pool') as info:
        resolve.resolve_pool(job(gpus=1, pool="vc"), POOLS)
    assert info.value.field == "pool"


def test_gpu_work_on_the_wrong_vendor_is_refused():
    with pytest.raises(resolve.PlacementError, match='"mi300" is a amd GPU pool'):
        resolve.resolve_pool(job(gpus=1, pool="mi300"), POOLS)


def test_several_gpu_pools_need_an_explicit_choice():
    pools = POOLS + [pool(name="h100", role="gpu", gpu={"vendor": "nvidia", "perNode": 8}, nodes=["h1"])]
    with pytest.raises(resolve.PlacementError, match=r"several nvidia GPU pools \(a100, h100\)"):
        resolve.resolve_pool(job(gpus=1), pools)


# ---- resources, LimitRange, quota -------------------------------------------------------


def test_limits_default_to_requests():
    r = accounting.container_resources(job(cpu=2, memory="4Gi", storage=1024))
    assert r == {
        "requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "1Gi"},
        "limits": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "1Gi"},
    }


def test_explicit_limits_and_gpus():
    r = accounting.container_resources(job(cpu=1, cpuLimit=4, memory=512, memoryLimit="1Gi", gpus=2))
    assert r["requests"] == {"cpu": "1", "memory": "512Mi", "nvidia.com/gpu": "2"}
    assert r["limits"] == {"cpu": "4", "memory": "1Gi", "nvidia.com/gpu": "2"}


def test_custom_gpu_resource_and_extra_resources():
    r = accounting.container_resources(job(gpus=1, gpuResource="nvidia.com/mig-1g.10gb", extraResources={"example.com/fpga": 1}))
    assert r["requests"] == {"nvidia.com/mig-1g.10gb": "1", "example.com/fpga": "1"}
    assert r["limits"] == r["requests"]


def test_profile_ratios_set_requests_from_limits():
    profile = Profile(cpu_request_ratio=0.5, memory_request_ratio=0.25)
    r = accounting.container_resources(job(cpuLimit=3, memoryLimit="4Gi"), profile)
    assert r["requests"] == {"cpu": "1500m", "memory": "1Gi"}
    assert r["limits"] == {"cpu": "3", "memory": "4Gi"}


def test_no_resources_means_none_set():
    assert accounting.container_resources(job()) == {"requests": {}, "limits": {}}


def test_limit_range_defaults_are_clamped_under_the_entry_limits():
    entry = job(cpu="500m", memory=128)
    spec = accounting.limit_range(entry, accounting.container_resources(entry))
    assert spec == {
        "type": "Container",
        "default": {"cpu": "500m", "memory": "128Mi"},
        "defaultRequest": {"cpu": "200m", "memory": "128Mi"},
        "max": {"cpu": "500m", "memory": "128Mi"},
    }


def test_limit_range_of_a_big_job_keeps_the_kns_defaults():
    entry = job(cpu=8, memory="64Gi", gpus=4)
    spec = accounting.limit_range(entry, accounting.container_resources(entry))
    assert spec["default"] == {"cpu": "1", "memory": "1Gi"}
    assert spec["defaultRequest"] == {"cpu": "200m", "memory": "256Mi"}
    assert spec["max"] == {"cpu": "8", "memory": "64Gi"}  # counts (GPUs) are quota'd, not capped here


def test_limit_range_without_resources_has_no_max():
    entry = job()
    assert "max" not in accounting.limit_range(entry, accounting.container_resources(entry))


def test_limit_range_override():
    entry = job(cpu=2, limitRange={"default": {"cpu": 1.5}, "max": {"memory": 2048}, "min": {"cpu": "100m"}})
    spec = accounting.limit_range(entry, accounting.container_resources(entry))
    assert spec["default"]["cpu"] == "1500m"
    assert spec["max"] == {"cpu": "2", "memory": "2Gi"}
    assert spec["min"] == {"cpu": "100m"}


def test_quota_is_per_pod_amounts_times_parallelism():
    entry = job(cpu=2, memory="4Gi", gpus=1, parallelism=3)
    r = accounting.container_resources(entry)
    hard = accounting.quota(entry, r, accounting.limit_range(entry, r))
    assert hard == {
        "limits.cpu": "6",
        "limits.memory": "12Gi",
        "pods": "3",
        "requests.cpu": "6",
        "requests.memory": "12Gi",
        "requests.nvidia.com/gpu": "3",
    }


def test_quota_counts_unset_resources_at_the_limit_range_defaults():
    entry = job()
    r = accounting.container_resources(entry)
    hard = accounting.quota(entry, r, accounting.limit_range(entry, r))
    assert hard == {"limits.cpu": "1", "limits.memory": "1Gi", "pods": "1", "requests.cpu": "200m", "requests.memory": "256Mi"}


def test_quota_of_overlapping_schedule_runs_is_doubled():
    forbid = Schedule.model_validate({"name": "s", "image": "i", "schedule": "0 * * * *", "cpu": 1})
    allow = forbid.model_copy(update={"concurrency_policy": "Allow"})
    for entry, pods in ((forbid, "1"), (allow, "2")):
        r = accounting.container_resources(entry)
        assert accounting.quota(entry, r, accounting.limit_range(entry, r))["pods"] == pods


def test_quota_override_wins():
    entry = job(cpu=1, quota={"pods": 5, "requests.memory": 1024})
    r = accounting.container_resources(entry)
    hard = accounting.quota(entry, r, accounting.limit_range(entry, r))
    assert hard["pods"] == "5" and hard["requests.memory"] == "1Gi"


# ---- profiles ----------------------------------------------------------------------------


def test_profile_rules_apply_top_to_bottom_later_wins():
    profiles = [
        ("*", Profile(allow_privileged=False, cpu_request_ratio=0.5)),
        ("@admins", Profile(allow_privileged=True)),
        ("mallory", Profile(allow_privileged=False)),
        ("@other", Profile(cpu_request_ratio=0.1)),
    ]
    merged, rules = resolve.resolve_profile(profiles, "alice", ["admins"])
    assert rules == ["*", "@admins"] and merged.allow_privileged is True and merged.cpu_request_ratio == 0.5
    merged, rules = resolve.resolve_profile(profiles, "mallory", ["admins"])
    assert rules == ["*", "@admins", "mallory"] and merged.allow_privileged is False
    merged, rules = resolve.resolve_profile(profiles, None, [])
    assert rules == ["*"]
    assert resolve.resolve_profile([], "x", []) == (Profile(), [])


def test_dynamic_labels_format_every_placeholder():
    entry = job(user="alice", groups=["ml", "hpc"], dynamicLabels={"a": "{name}-{user}", "b": "{groups}", "c": "{cluster}.{stack}"})
    assert resolve.dynamic_labels(entry, "kns-dev", "dev") == {"a": "j-alice", "b": "ml.hpc", "c": "kns-dev.dev"}
