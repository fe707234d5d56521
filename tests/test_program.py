"""The real `__main__.py` under recording Pulumi mocks: what each entry produces."""

from __future__ import annotations

import copy
from collections import Counter

import pulumi
import pytest

from kns_testing import tokens
from kns_testing.program import ROOT, RecordingMocks, dev_stack_config, registration_requests, run_program
from plan import identity, kueue_install

NS = "kubernetes:core/v1:Namespace"
LR = "kubernetes:core/v1:LimitRange"
QUOTA = "kubernetes:core/v1:ResourceQuota"
SA = "kubernetes:core/v1:ServiceAccount"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
JOB = "kubernetes:batch/v1:Job"
CRON = "kubernetes:batch/v1:CronJob"
PATCH = "kubernetes:core/v1:NodePatch"
PROVIDER = "pulumi:providers:kubernetes"

BASE = {
    "cluster": {"name": "kns-test", "renderDir": "build/manifests/test", "forbiddenContexts": ["jarvice-upstream"]},
    "nodePools": [
        {"name": "vcluster", "role": "vcluster", "nodes": ["vc-1", "vc-2"]},
        {"name": "a100", "role": "gpu", "nodes": ["gpu-1"], "gpu": {"vendor": "nvidia", "perNode": 8}},
    ],
    "jobs": [
        {"name": "cpu-job", "user": "bob", "image": "busybox:1.37", "command": ["sh", "-c", "true"],
         "cpu": 2, "memory": 4096, "ttlHours": 2, "env": {"MODE": "fast", "DEBUG": True}},
        {"name": "gpu-job", "user": "alice", "image": "pytorch:2", "cpu": 8, "memory": "64Gi", "gpus": 4, "pool": "a100"},
    ],
    "schedules": [
        {"name": "nightly", "user": "bob", "image": "report:1", "schedule": "30 2 * * *", "timeZone": "Europe/Paris",
         "cpu": 1, "memory": "2Gi", "startingDeadlineSeconds": 300},
    ],
}


@pytest.fixture(scope="module")
def base_run():
    return run_program(BASE)


def spec_of(resource):
    return resource.inputs["spec"]


def pod_spec(resource):
    spec = spec_of(resource)
    if "jobTemplate" in spec:
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


# ---- the whole stack ---------------------------------------------------------------------


def test_dev_stack_registers_what_its_config_describes():
    cfg = dev_stack_config()
    run = run_program(cfg)
    counts = Counter(r.type for r in run.resources)
    entries = 3 + 2 + 2  # stack jobs and schedules, plus jobs/research.yaml
    # Kueue, installed by the program from the vendored bundle (kns:queueing.install defaults to true)
    assert cfg["queueing"] == {"enabled": True}
    kueue = Counter(identity.type_token(obj) for obj in kueue_install.load(ROOT))
    assert counts[tokens.KUEUE] == 1
    assert counts[PROVIDER] == 1
    assert counts[PATCH] == sum(len(p.get("nodes") or []) for p in cfg["nodePools"])
    assert counts["kubernetes:karpenter.sh/v1:NodePool"] == sum(1 for p in cfg["nodePools"] if "autoscale" in p) == 1
    for kind in (LR, QUOTA):
        assert counts[kind] == entries
    # plus the system namespace; the packing scheduler's account, lease Role and two
    # RoleBindings; the KNS scheduler's account; and Kueue's own
    assert counts[NS] == entries + 1 + kueue[NS]
    assert counts[SA] == entries + 2 + kueue[SA]
    assert counts[ROLE] == entries + 1 + kueue[ROLE]
    assert counts[BINDING] == entries + 2 + kueue[BINDING]
    assert counts[tokens.PACKING_SCHEDULER] == 1 and counts[tokens.KNS_SCHEDULER] == 1
    assert counts["kubernetes:apps/v1:Deployment"] == 2 + kueue["kubernetes:apps/v1:Deployment"] == 3
    assert counts[JOB] == 4 and counts[CRON] == 3
    assert counts[tokens.KNS_CLUSTER] == 1 and counts[tokens.NODE_POOL] == len(cfg["nodePools"]) == 4
    assert counts[tokens.JOB_NAMESPACE] == entries
    # The queues: a flavor per pool a queue names (burst, a100), a ClusterQueue per queue, a
    # WorkloadPriorityClass per priority, and a LocalQueue per queued entry: genomics-align
    # and hourly-sync (the "@research" profile rule), weekly-finetune (its own queue).
    kueue_api = "kubernetes:kueue.x-k8s.io/v1beta2"
    assert counts[tokens.QUEUES] == 1
    assert sorted(r.name for r in run.of_type(f"{kueue_api}:ResourceFlavor")) == ["resourceflavor-a100",
                                                                                 "resourceflavor-burst"]
    assert sorted(r.name for r in run.of_type(f"{kueue_api}:ClusterQueue")) == ["clusterqueue-gpu",
                                                                              "clusterqueue-research"]
    assert sorted(r.name for r in run.of_type(f"{kueue_api}:WorkloadPriorityClass")) == [
        "workloadpriorityclass-batch", "workloadpriorityclass-on-time"]
    assert sorted(r.name for r in run.of_type(f"{kueue_api}:LocalQueue")) == [
        "genomics-align-queue", "hourly-sync-queue", "weekly-finetune-queue"]


def test_every_kubernetes_resource_uses_the_one_explicit_provider(base_run):
    provider = base_run.named(PROVIDER, "kns-test-kubernetes")
    assert provider.inputs["renderYamlToDirectory"] == "build/manifests/test"
    assert provider.inputs["clusterIdentifier"] == "kns-platform/kns-test"
    custom = [r for r in base_run.kubernetes if r.custom]
    assert len(custom) > 10
    for resource in custom:
        assert resource.provider and "::kns-test-kubernetes::" in resource.provider, resource.name


def test_everything_an_entry_produces_carries_the_entry_labels(base_run):
    checked = 0
    for entry in ("cpu-job", "gpu-job", "nightly"):
        names = {entry, f"{entry}-defaults", f"{entry}-quota", f"{entry}-runner"}
        for resource in base_run.kubernetes:
            if resource.custom and resource.name in names and resource.type != PATCH:
                labels = resource.metadata["labels"]
                assert labels["kns.io/cluster"] == "kns-test"
                assert labels["app.kubernetes.io/managed-by"] == "pulumi"
                assert labels["kns.io/job"] == entry
                assert labels["kns.io/owner"] in ("alice", "bob")
                checked += 1
    assert checked == 3 * 7  # namespace, LimitRange, quota, account, Role, RoleBinding, workload


# ---- a CPU job ---------------------------------------------------------------------------


def test_cpu_job_namespace(base_run):
    ns = base_run.named(NS, "cpu-job")
    assert ns.metadata["name"] == "kns-cpu-job"
    assert ns.metadata["labels"] == {
        "kns.io/job": "cpu-job",
        "kns.io/owner": "bob",
        "kns.io/cluster": "kns-test",
        "app.kubernetes.io/managed-by": "pulumi",
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/audit": "baseline",
        "pod-security.kubernetes.io/warn": "baseline",
        "kns.io/network": "isolated",  # its NetworkPolicy holds it (docs/network.md)
    }


def test_cpu_job_limit_range_and_quota(base_run):
    lr = base_run.named(LR, "cpu-job-defaults")
    assert lr.metadata["name"] == "kns-defaults" and lr.metadata["namespace"] == "kns-cpu-job"
    assert spec_of(lr) == {"limits": [{
        "type": "Container",
        "default": {"cpu": "1", "memory": "1Gi"},
        "defaultRequest": {"cpu": "200m", "memory": "256Mi"},
        "max": {"cpu": "2", "memory": "4Gi"},
    }]}
    quota = base_run.named(QUOTA, "cpu-job-quota")
    assert quota.metadata["name"] == "kns-quota" and quota.metadata["namespace"] == "kns-cpu-job"
    assert spec_of(quota)["hard"] == {
        "pods": "1", "requests.cpu": "2", "limits.cpu": "2", "requests.memory": "4Gi", "limits.memory": "4Gi",
    }


def test_cpu_job_runner_account_and_least_privilege_role(base_run):
    sa = base_run.named(SA, "cpu-job-runner")
    assert sa.metadata["name"] == "kns-runner" and sa.metadata["namespace"] == "kns-cpu-job"
    assert sa.inputs["automountServiceAccountToken"] is False
    role = base_run.named(ROLE, "cpu-job-runner")
    assert role.metadata == {**role.metadata, "name": "kns-runner", "namespace": "kns-cpu-job"}
    assert role.inputs["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
    ]
    binding = base_run.named(BINDING, "cpu-job-runner")
    assert binding.inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kns-runner"}
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": "kns-runner", "namespace": "kns-cpu-job"}]


def test_no_role_anywhere_has_wildcards_or_secret_access():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"].append({"name": "sandbox", "type": "namespace", "user": "eve"})
    run = run_program(cfg)
    roles = run.of_type(ROLE)
    assert len(roles) == 5  # four entries and the packing scheduler's lease Role
    for role in roles:
        for rule in role.inputs["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
            assert "secrets" not in rule["resources"]


def test_cpu_job_workload(base_run):
    job = base_run.named(JOB, "cpu-job")
    assert job.metadata["name"] == "cpu-job" and job.metadata["namespace"] == "kns-cpu-job"
    assert job.metadata["annotations"] == {
        "pulumi.com/skipAwait": "true",
        # a replaced Job is gone at once, before its successor of the same name (plan/manifests.py)
        "pulumi.com/deletionPropagationPolicy": "background",
        "pulumi.com/patchForce": "true",  # the stack owns what it declares (components/cluster.py)
        # the linters' exceptions a user image needs (docs/testing.md)
        "kube-score/ignore": "container-ephemeral-storage-request-and-limit,container-image-pull-policy,"
                             "container-security-context-readonlyrootfilesystem,"
                             "container-security-context-user-group-id"}
    spec = spec_of(job)
    assert spec["ttlSecondsAfterFinished"] == 7200
    template = spec["template"]
    assert template["metadata"]["labels"] == {"kns.io/job": "cpu-job", "kns.io/owner": "bob"}
    pod = template["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["schedulerName"] == "kns-packing"
    assert "nodeSelector" not in pod and "tolerations" not in pod  # CPU work stays off tainted pools
    (container,) = pod["containers"]
    assert container["image"] == "busybox:1.37" and container["command"] == ["sh", "-c", "true"]
    assert container["env"] == [{"name": "MODE", "value": "fast"}, {"name": "DEBUG", "value": "true"}]
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }


# ---- a GPU job ---------------------------------------------------------------------------


def test_gpu_job_targets_its_pool(base_run):
    pod = pod_spec(base_run.named(JOB, "gpu-job"))
    assert pod["nodeSelector"] == {"kns.io/pool": "a100"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"},
        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"},
    }
    assert spec_of(base_run.named(JOB, "gpu-job"))["ttlSecondsAfterFinished"] == 24 * 3600


def test_gpu_job_namespace_quota_counts_gpus(base_run):
    hard = spec_of(base_run.named(QUOTA, "gpu-job-quota"))["hard"]
    assert hard["requests.nvidia.com/gpu"] == "4"
    assert hard["requests.cpu"] == "8" and hard["limits.memory"] == "64Gi" and hard["pods"] == "1"
    lr = spec_of(base_run.named(LR, "gpu-job-defaults"))["limits"][0]
    assert lr["max"] == {"cpu": "8", "memory": "64Gi"}
    assert base_run.named(NS, "gpu-job").metadata["labels"]["kns.io/owner"] == "alice"
    assert base_run.named(ROLE, "gpu-job-runner").metadata["namespace"] == "kns-gpu-job"
    assert base_run.named(BINDING, "gpu-job-runner").inputs["subjects"][0]["namespace"] == "kns-gpu-job"


def test_vcluster_pool_targeting_adds_its_toleration():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"][0]["pool"] = "vcluster"
    pod = pod_spec(run_program(cfg).named(JOB, "cpu-job"))
    assert pod["nodeSelector"] == {"kns.io/pool": "vcluster"}
    assert pod["tolerations"] == [
        {"key": "node-role.jarvice.io/jarvice-vcluster", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]


def test_entry_selectors_and_tolerations_are_added_to_the_pool_ones():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"][1].update({"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "spot", "operator": "Exists"}]})
    pod = pod_spec(run_program(cfg).named(JOB, "gpu-job"))
    assert pod["nodeSelector"] == {"kns.io/pool": "a100", "zone": "a"}
    assert pod["tolerations"][-1] == {"key": "spot", "operator": "Exists"}


# ---- a schedule --------------------------------------------------------------------------


def test_schedule_is_a_plain_cronjob_with_the_same_pod_template(base_run):
    cron = base_run.named(CRON, "nightly")
    spec = spec_of(cron)
    assert spec["schedule"] == "30 2 * * *" and spec["timeZone"] == "Europe/Paris"
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] == 300
    assert spec["successfulJobsHistoryLimit"] == 3 and spec["failedJobsHistoryLimit"] == 1
    assert spec["suspend"] is False
    pod = pod_spec(cron)
    assert pod["restartPolicy"] == "Never" and pod["schedulerName"] == "kns-packing"
    assert pod["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert base_run.named(NS, "nightly").metadata["name"] == "kns-nightly"


# ---- options -----------------------------------------------------------------------------


def test_namespace_entry_gets_edit_rights_and_no_workload():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"].append({"name": "sandbox", "type": "namespace", "user": "eve"})
    run = run_program(cfg)
    assert run.named(NS, "sandbox").metadata["name"] == "kns-sandbox"
    assert not [r for r in run.of_type(JOB) if r.name == "sandbox"]
    rules = run.named(ROLE, "sandbox-runner").inputs["rules"]
    assert {"apiGroups": [""], "resources": ["pods", "services", "configmaps"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]} in rules
    assert spec_of(run.named(QUOTA, "sandbox-quota"))["hard"]["pods"] == "10"


def test_scheduler_name_follows_the_packing_scheduler_or_the_entry():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"][0]["schedulerName"] = "default-scheduler"
    run = run_program(cfg)
    assert pod_spec(run.named(JOB, "cpu-job"))["schedulerName"] == "default-scheduler"
    assert pod_spec(run.named(JOB, "gpu-job"))["schedulerName"] == "kns-packing"
    cfg["packingScheduler"] = {"enabled": False}
    run = run_program(cfg)
    assert "schedulerName" not in pod_spec(run.named(JOB, "gpu-job"))
    assert run.outputs["packingSchedulerName"] is None


def test_privileged_needs_a_profile_that_allows_it():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"][0].update({"privileged": True, "groups": ["admins"]})
    cfg["profiles"] = {"@admins": {"allowPrivileged": True}}
    run = run_program(cfg)
    assert run.named(NS, "cpu-job").metadata["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert pod_spec(run.named(JOB, "cpu-job"))["containers"][0]["securityContext"] == {"privileged": True}
    assert run.named(NS, "gpu-job").metadata["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_user_labels_annotations_and_dynamic_labels_reach_the_pod():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"][0].update({"labels": {"team": "data"}, "annotations": {"example.com/note": "hi"},
                           "dynamicLabels": {"origin": "{cluster}.{stack}"}})
    job = run_program(cfg, stack="dev").named(JOB, "cpu-job")
    meta = spec_of(job)["template"]["metadata"]
    assert meta["labels"] == {"team": "data", "origin": "kns-test.dev", "kns.io/job": "cpu-job", "kns.io/owner": "bob"}
    assert meta["annotations"] == {"example.com/note": "hi"}
    assert {k: v for k, v in job.metadata["annotations"].items() if k != "kube-score/ignore"} == {
        "example.com/note": "hi", "pulumi.com/skipAwait": "true", "pulumi.com/patchForce": "true",
        "pulumi.com/deletionPropagationPolicy": "background"}


def test_a_real_cluster_target_passes_context_and_kubeconfig(tmp_path):
    kube = tmp_path / "kubeconfig"
    kube.write_text("apiVersion: v1\nkind: Config\ncurrent-context: kns\n")
    cfg = copy.deepcopy(BASE)
    cfg["cluster"] = {"name": "kns-prod", "context": "kns", "kubeconfig": str(kube)}
    provider = run_program(cfg).named(PROVIDER, "kns-prod-kubernetes")
    assert provider.inputs["context"] == "kns"
    assert provider.inputs["kubeconfig"] == str(kube)
    assert "renderYamlToDirectory" not in provider.inputs
    assert provider.inputs["clusterIdentifier"] == "kns-platform/kns-prod"


# ---- node pools --------------------------------------------------------------------------


def test_one_node_patch_per_node_with_the_pool_rules(base_run):
    patches = {r.name: r for r in base_run.of_type(PATCH)}
    assert set(patches) == {"vcluster.vc-1", "vcluster.vc-2", "a100.gpu-1"}
    vc = patches["vcluster.vc-1"]
    assert vc.metadata["name"] == "vc-1"
    assert vc.metadata["labels"] == {
        "kns.io/pool": "vcluster", "kns.io/cluster": "kns-test", "node-role.jarvice.io/jarvice-vcluster": "true",
    }
    assert vc.metadata["annotations"] == {"pulumi.com/patchForce": "true"}
    assert spec_of(vc)["taints"] == [{"key": "node-role.jarvice.io/jarvice-vcluster", "value": "true", "effect": "NoSchedule"}]
    gpu = patches["a100.gpu-1"]
    assert gpu.metadata["labels"]["nvidia.com/gpu"] == "present"
    assert spec_of(gpu)["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


# ---- outputs -----------------------------------------------------------------------------


def test_stack_outputs(base_run):
    out = base_run.outputs
    assert out["namespaces"] == {"cpu-job": "kns-cpu-job", "gpu-job": "kns-gpu-job", "nightly": "kns-nightly"}
    nightly = out["schedules"]["nightly"]
    assert nightly["schedule"] == "30 2 * * *" and nightly["timeZone"] == "Europe/Paris"
    assert nightly["primerSchedules"] == [] and nightly.get("warmUpMinutes") is None
    assert len(nightly["nextRuns"]) == 3
    assert all(":30:00+0" in run for run in nightly["nextRuns"])
    assert out["packingSchedulerName"] == "kns-packing"
    assert out["nodePools"]["a100"] == {
        "nodes": ["gpu-1"], "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    }
    assert out["nodePools"]["vcluster"]["nodes"] == ["vc-1", "vc-2"]


# ---- stable names ------------------------------------------------------------------------


def test_reordering_entries_changes_no_logical_name_or_input():
    cfg = copy.deepcopy(BASE)
    cfg["nodePools"].reverse()
    cfg["nodePools"][0]["nodes"].reverse()
    cfg["jobs"].reverse()
    before = {(r.type, r.name): r.inputs for r in run_program(BASE).resources}
    after = {(r.type, r.name): r.inputs for r in run_program(cfg).resources}
    assert set(before) == set(after)
    assert before == after


def test_adding_an_entry_only_adds_resources():
    cfg = copy.deepcopy(BASE)
    cfg["jobs"].insert(0, {"name": "new-first", "image": "busybox"})
    before = {(r.type, r.name): r.inputs for r in run_program(BASE).resources}
    after = {(r.type, r.name): r.inputs for r in run_program(cfg).resources}
    added = set(after) - set(before)
    assert set(before) <= set(after)
    assert all(before[key] == after[key] for key in before)
    assert {name for _, name in added} == {
        "new-first", "new-first-defaults", "new-first-quota", "new-first-runner", "new-first-isolation",
    }


# ---- bad input: nothing at all is registered ---------------------------------------------

BAD = {
    "bad quantity": ({"jobs": [{"name": "train-resnet", "image": "i", "memory": "12Qi"}]},
                     'kns:jobs[train-resnet].memory: "12Qi" is not a quantity'),
    "duplicate name": ({"schedules": [{"name": "cpu-job", "image": "i", "schedule": "0 * * * *"}]},
                       'kns:schedules[cpu-job].name: "cpu-job" is already used by an earlier entry, kns:jobs[cpu-job]'),
    "unknown pool": ({"jobs": [{"name": "j", "image": "i", "pool": "h100"}]},
                     'kns:jobs[j].pool: no node pool named "h100"; did you mean "a100"? (pools: a100, vcluster)'),
    "GPUs without a GPU pool": ({"jobs": [{"name": "j", "image": "i", "gpus": 1, "gpuVendor": "amd"}]},
                                "kns:jobs[j].gpus: requests 1 amd GPUs but no node pool has role gpu with vendor amd"),
    "bad cron": ({"schedules": [{"name": "s", "image": "i", "schedule": "0 25 * * *"}]},
                 'kns:schedules[s].schedule: "0 25 * * *" is not a valid cron expression'),
    "six-field cron": ({"schedules": [{"name": "s", "image": "i", "schedule": "0 0 25 * * *"}]},
                       'kns:schedules[s].schedule: "0 0 25 * * *" has 6 fields'),
    "warmUpMinutes and primerSchedule": (
        {"schedules": [{"name": "s", "image": "i", "schedule": "0 3 * * *", "warmUpMinutes": 5, "primerSchedule": "55 2 * * *"}]},
        "kns:schedules[s].primerSchedule: set warmUpMinutes or primerSchedule, not both"),
    "bad name": ({"jobs": [{"name": "Bad.Name", "image": "i"}]},
                 'kns:jobs[Bad.Name].name: "Bad.Name" is not a DNS-1123 label'),
    "too long name": ({"jobs": [{"name": "n" * 41, "image": "i"}]},
                      'is 41 characters long; at most 40 are allowed'),
    "unknown key": ({"jobs": [{"name": "j", "image": "i", "gpuss": 1}]},
                    'kns:jobs[j].gpuss: unknown key; did you mean "gpus"?'),
    "negative CPU": ({"jobs": [{"name": "j", "image": "i", "cpu": "-500m"}]},
                     'kns:jobs[j].cpu: "-500m" must not be negative'),
    "forbidden context": ({"cluster": {"name": "c", "context": "jarvice-upstream", "forbiddenContexts": ["jarvice-upstream"]}},
                          'kns:cluster.context: "jarvice-upstream" is listed in forbiddenContexts'),
}


def _bad_config(extra):
    cfg = copy.deepcopy(BASE)
    for key, value in extra.items():
        cfg[key] = value if key not in ("jobs", "schedules") else cfg[key] + value
    return cfg


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_stops_before_any_resource(case):
    extra, expected = BAD[case]
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        run_program(_bad_config(extra), mocks=mocks)
    message = str(info.value)
    assert message.startswith("kns-platform: invalid configuration, 1 problem; nothing was applied:")
    assert expected in message
    assert mocks.resources == []


def test_two_problems_at_once_are_both_reported_and_nothing_is_registered():
    extra = {"jobs": [{"name": "j", "image": "i", "memory": "12Qi", "pool": "nope"}],
             "schedules": [{"name": "s", "image": "i", "schedule": "0 0 0 * * *"}]}
    mocks = RecordingMocks()
    with pytest.raises(pulumi.RunError) as info:
        run_program(_bad_config(extra), mocks=mocks)
    lines = str(info.value).splitlines()
    assert lines[0] == "kns-platform: invalid configuration, 3 problems; nothing was applied:"
    assert lines[1].startswith('  - kns:jobs[j].memory: "12Qi" is not a quantity')
    assert lines[2].startswith('  - kns:schedules[s].schedule: "0 0 0 * * *" has 6 fields')
    assert lines[3] == '  - kns:jobs[j].pool: no node pool named "nope" (pools: a100, vcluster)'
    assert mocks.resources == []


def test_the_control_run_does_register_resources():
    """The bad-input tests mean something only if the same harness registers a good run."""
    mocks = RecordingMocks()
    run_program(BASE, mocks=mocks)
    assert any(r.type == JOB for r in mocks.resources)


def test_inline_kubeconfig_is_sent_as_a_secret():
    from kns_testing.program import secret_value

    text = ("apiVersion: v1\nkind: Config\ncurrent-context: kns\nusers: [{name: admin, user: {token: t0ken}}]\n"
            "clusters: [{name: kns, cluster: {server: 'https://10.0.0.1:6443'}}]\n"
            "contexts: [{name: kns, context: {cluster: kns, user: admin}}]\n")
    cfg = copy.deepcopy(BASE)
    cfg["cluster"] = {"name": "kns-prod", "kubeconfig": text, "forbiddenContexts": ["jarvice-upstream"]}
    provider = run_program(cfg).named(PROVIDER, "kns-prod-kubernetes")
    assert secret_value(provider.inputs["kubeconfig"]) == text


def test_node_patch_names_cannot_collide():
    cfg = copy.deepcopy(BASE)
    cfg["nodePools"] = [
        {"name": "a", "role": "compute", "nodes": ["b-c"]},
        {"name": "a-b", "role": "compute", "nodes": ["c"]},
    ]
    cfg["jobs"] = [cfg["jobs"][0]]
    names = [r.name for r in run_program(cfg).of_type(PATCH)]
    assert sorted(names) == ["a-b.c", "a.b-c"]


def test_schedule_ttl_applies_only_when_set():
    cfg = copy.deepcopy(BASE)
    run = run_program(cfg)
    assert "ttlSecondsAfterFinished" not in spec_of(run.named(CRON, "nightly"))["jobTemplate"]["spec"]
    cfg["schedules"][0]["ttlHours"] = 6
    run = run_program(cfg)
    assert spec_of(run.named(CRON, "nightly"))["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] == 6 * 3600


def test_a_registration_carries_the_line_that_made_the_resource_not_the_call_stack(monkeypatch):
    """components/source_positions.py: the state would otherwise keep every frame down to
    each resource's constructor (a third of a 1,000-entry stack's state)."""
    registered = registration_requests(monkeypatch)
    run_program(dev_stack_config())
    traces = [(request.type, [frame.pc.uri for frame in request.stackTrace.frames], request.sourcePosition.uri)
              for request in registered.values()]
    objects = [t for t in traces if t[0].startswith("kubernetes:")]
    assert len(objects) > 40
    # The root stack is registered before the program runs (one resource, the host's frames).
    for type_, frames, position in traces:
        assert type_ == "pulumi:pulumi:Stack" or len(frames) <= 1, (type_, frames)
    for type_, frames, position in objects:
        assert frames and frames[0] == position and position.endswith(".py"), (type_, frames, position)
        assert "/components/" in position or position.endswith("/__main__.py"), position


def test_the_innermost_frame_is_the_sdks_first_frame_found_without_the_whole_stack(monkeypatch):
    """components/source_positions.py walks the frames instead of letting the SDK extract
    the whole stack (source lines included) and convert every frame: each registration
    still sends exactly the SDK's own first frame."""
    from pulumi.runtime import resource as runtime
    from components import source_positions

    # The SDK's function (an earlier run in this process may have replaced it already).
    sdk = source_positions.sdk_stack_trace or runtime._get_stack_trace
    assert not getattr(sdk, "innermost_only", False)
    compared = []
    ours = source_positions.innermost_frame

    def checking():
        mine, theirs = ours(), sdk()
        compared.append((list(mine.frames), list(theirs.frames[:1])))
        return mine

    checking.innermost_only = False
    monkeypatch.setattr(runtime, "_get_stack_trace", sdk)
    monkeypatch.setattr(source_positions, "innermost_frame", checking)
    run_program(dev_stack_config())
    assert len(compared) > 40
    assert all(mine == theirs for mine, theirs in compared)
