"""The policy pack (policy/): each rule on its own, the callbacks the engine calls, and the
real engine running `pulumi preview --policy-pack policy` on a clean and a violating stack."""

from __future__ import annotations

import copy
import subprocess

import pytest
import yaml
from pulumi_policy import ResourceValidationArgs, StackValidationArgs
from pulumi_policy.policy import PolicyResource, PolicyResourceOptions

from kns_testing import tokens
from plan import guardrails as kns_rules
from plan.guardrails import Resource
from policy.pack import POLICIES
from kns_testing.program import PROJECT_FILES, ROOT, engine_project, run_program

STACK = "urn:pulumi:dev::kns-platform::"


def urn(types: str, name: str) -> str:
    return f"{STACK}{types}::{name}"


def container(name="main", image="ghcr.io/acme/app:1", limits=None, requests=None, **extra):
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "image": image, "resources": resources, **extra}


LIMITS = {"cpu": "1", "memory": "1Gi"}


def job(name="train", namespace="kns-train", containers=None, init=None, **pod):
    spec = {"containers": containers or [container(limits=LIMITS)], **pod}
    if init:
        spec["initContainers"] = init
    return Resource(
        "kubernetes:batch/v1:Job",
        urn(f"{tokens.KNS_WORKLOAD}${tokens.JOB}$kubernetes:batch/v1:Job", name),
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"template": {"spec": spec}}},
    )


def cronjob(name="nightly", namespace="kns-nightly", containers=None, **pod):
    spec = {"containers": containers or [container(limits=LIMITS)], **pod}
    return Resource(
        "kubernetes:batch/v1:CronJob",
        urn(f"{tokens.KNS_WORKLOAD}${tokens.SCHEDULE}$kubernetes:batch/v1:CronJob", name),
        {"metadata": {"name": name, "namespace": namespace},
         "spec": {"schedule": "0 2 * * *", "jobTemplate": {"spec": {"template": {"spec": spec}}}}},
    )


def namespace(name, entry=None, level="baseline"):
    labels = {kns_rules.ENFORCE_LABEL: level}
    if entry:
        labels[kns_rules.ENTRY_LABEL] = entry
    return Resource("kubernetes:core/v1:Namespace", urn(f"{tokens.KNS_WORKLOAD}$kubernetes:core/v1:Namespace", name),
                    {"metadata": {"name": name, "labels": labels}})


def messages(violations) -> list[str]:
    return [v.message for v in violations]


# --- containers-have-limits -------------------------------------------------------------


def test_limits_pass_when_every_container_has_cpu_and_memory_limits():
    assert kns_rules.containers_have_limits([job(), cronjob()], {}) == []


def test_limits_name_each_container_and_what_it_lacks_including_init_containers():
    resource = cronjob(containers=[container(limits={"memory": "1Gi"}), container("side", requests={"cpu": "1"})])
    init = job(init=[container("wait", image="busybox:1.37")])
    found = messages(kns_rules.containers_have_limits([resource, init], {}))
    assert found == [
        "CronJob kns-nightly/nightly: containers[0] 'main' has no cpu limit",
        "CronJob kns-nightly/nightly: containers[1] 'side' has no cpu or memory limit",
        "Job kns-train/train: initContainers[0] 'wait' has no cpu or memory limit",
    ]


def test_limits_follow_the_configured_resources_and_ignore_objects_without_pods():
    only_memory = job(containers=[container(limits={"memory": "1Gi"})])
    assert kns_rules.containers_have_limits([only_memory], {"requiredLimits": ["memory"]}) == []
    assert kns_rules.containers_have_limits([only_memory], {"requiredLimits": ["memory", "ephemeral-storage"]})
    config_map = Resource("kubernetes:core/v1:ConfigMap", urn("kubernetes:core/v1:ConfigMap", "c"), {"data": {}})
    assert kns_rules.containers_have_limits([config_map], {}) == []


def test_every_pod_running_kind_is_inspected():
    bare = {"containers": [container()]}
    shapes = {
        "kubernetes:core/v1:Pod": {"spec": bare},
        "kubernetes:apps/v1:Deployment": {"spec": {"template": {"spec": bare}}},
        "kubernetes:apps/v1:StatefulSet": {"spec": {"template": {"spec": bare}}},
        "kubernetes:apps/v1:DaemonSet": {"spec": {"template": {"spec": bare}}},
        "kubernetes:batch/v1:CronJob": {"spec": {"jobTemplate": {"spec": {"template": {"spec": bare}}}}},
    }
    for type_, props in shapes.items():
        resource = Resource(type_, urn(type_, "x"), {"metadata": {"name": "x"}, **props})
        assert len(kns_rules.containers_have_limits([resource], {})) == 1, type_


# --- allowed-registries -----------------------------------------------------------------


@pytest.mark.parametrize("image, repository", [
    ("busybox:1.37", "docker.io/library/busybox"),
    ("rclone/rclone:1.68", "docker.io/rclone/rclone"),
    ("ghcr.io/acme/app@sha256:abc", "ghcr.io/acme/app"),
    ("localhost:5000/app:1", "localhost:5000/app"),
    ("index.docker.io/library/ubuntu", "docker.io/library/ubuntu"),
    ("us-docker.pkg.dev/jarvice/images/init-kns:jarvice-3.21.9", "us-docker.pkg.dev/jarvice/images/init-kns"),
])
def test_image_references_normalise_to_their_repository(image, repository):
    assert kns_rules.image_repository(image) == repository


def test_registry_prefixes_match_whole_path_segments():
    assert kns_rules.image_allowed("ghcr.io/acme/app:1", ["ghcr.io/acme"])
    assert not kns_rules.image_allowed("ghcr.io/acme2/app:1", ["ghcr.io/acme"])
    assert not kns_rules.image_allowed("evil.io/ghcr.io/acme/app", ["ghcr.io"])
    assert kns_rules.image_allowed("busybox", ["docker.io/library"])


def test_registries_default_and_configured():
    pulled = job(containers=[container(image="registry.example.com/x/app:1", limits=LIMITS)],
                 init=[container("wait", image="busybox:1.37", limits=LIMITS)])
    found = messages(kns_rules.allowed_registries([pulled], {}))
    assert len(found) == 1 and "containers[0] 'main' image 'registry.example.com/x/app:1'" in found[0]
    found = messages(kns_rules.allowed_registries([pulled], {"allowedRegistries": ["registry.example.com"]}))
    assert found == [
        "Job kns-train/train: initContainers[0] 'wait' image 'busybox:1.37' (docker.io/library/busybox) "
        "is not from an allowed registry (registry.example.com)"
    ]
    no_image = job(containers=[{"name": "main", "resources": {"limits": LIMITS}}])
    assert messages(kns_rules.allowed_registries([no_image], {})) == ["Job kns-train/train: containers[0] 'main' names no image"]


# --- gpu-pods-tolerate-gpu-taint --------------------------------------------------------

GPU = container(limits={**LIMITS, "nvidia.com/gpu": "2"})
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


def test_gpu_pod_with_the_taint_toleration_passes():
    assert kns_rules.gpu_pods_tolerate_gpu_taint([job(containers=[GPU], tolerations=[GPU_TOLERATION])], {}) == []
    everything = {"operator": "Exists"}
    assert kns_rules.gpu_pods_tolerate_gpu_taint([job(containers=[GPU], tolerations=[everything])], {}) == []


def test_gpu_pod_without_the_toleration_is_refused():
    wrong_effect = {**GPU_TOLERATION, "effect": "NoExecute"}
    other_key = {"key": "kns.io/system", "operator": "Exists"}
    for tolerations in ([], [wrong_effect], [other_key]):
        found = messages(kns_rules.gpu_pods_tolerate_gpu_taint([job(containers=[GPU], tolerations=tolerations)], {}))
        assert found == ["Job kns-train/train: requests nvidia.com/gpu but does not tolerate the 'nvidia.com/gpu' "
                         "NoSchedule taint of the GPU pools"], tolerations


def test_gpu_taints_are_configurable_and_cpu_pods_are_left_alone():
    amd = job(containers=[container(requests={"amd.com/gpu": "1"}, limits=LIMITS)],
              tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert kns_rules.gpu_pods_tolerate_gpu_taint([amd], {}) != []
    assert kns_rules.gpu_pods_tolerate_gpu_taint([amd], {"gpuTaints": {"amd.com/gpu": "gpu"}}) == []
    assert kns_rules.gpu_pods_tolerate_gpu_taint([job()], {}) == []


# --- gpu-pools-are-tainted --------------------------------------------------------------

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node_patch(labels, taints):
    return kns_rules.Resource("kubernetes:core/v1:NodePatch", urn(f"{tokens.NODE_POOL}$kubernetes:core/v1:NodePatch",
                                                                  "a100.gpu-1"),
                              {"metadata": {"name": "gpu-1", "labels": labels}, "spec": {"taints": taints}})


def karpenter_pool(labels, taints, limits=None):
    spec = {"template": {"metadata": {"labels": labels},
                         "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": [],
                                  "taints": taints}}}
    if limits:
        spec["limits"] = limits
    return kns_rules.Resource("kubernetes:karpenter.sh/v1:NodePool",
                              urn(f"{tokens.NODE_POOL}$kubernetes:karpenter.sh/v1:NodePool", "h100"),
                              {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "h100"},
                               "spec": spec})


def test_gpu_pools_static_and_autoscaled_with_the_taint_pass():
    labels = {"kns.io/pool": "x", "nvidia.com/gpu": "present"}
    assert kns_rules.gpu_pools_are_tainted([node_patch(labels, [GPU_TAINT]),
                                            karpenter_pool(labels, [GPU_TAINT])], {}) == []
    # pools without GPUs need no taint
    assert kns_rules.gpu_pools_are_tainted([node_patch({"kns.io/pool": "c"}, []),
                                            karpenter_pool({"kns.io/pool": "c"}, [], {"cpu": "64"})], {}) == []


def test_a_gpu_pool_without_the_gpu_taint_is_refused_static_or_autoscaled():
    labels = {"kns.io/pool": "x", "nvidia.com/gpu": "present"}
    wrong = [{**GPU_TAINT, "effect": "PreferNoSchedule"}]
    for taints in ([], wrong, [{"key": "other", "effect": "NoSchedule"}]):
        found = messages(kns_rules.gpu_pools_are_tainted(
            [node_patch(labels, taints), karpenter_pool(labels, taints),
             karpenter_pool({"kns.io/pool": "x"}, taints, {"nvidia.com/gpu": "16"})], {}))
        message = "a nvidia.com/gpu pool's nodes must carry the 'nvidia.com/gpu' NoSchedule taint, or pods that need no GPU fill them"
        assert found == [f"NodePatch gpu-1: {message}", f"NodePool h100: {message}", f"NodePool h100: {message}"], taints


def test_the_program_tolerates_no_untainted_gpu_pool_and_overrides_are_caught():
    """Through the real program: its GPU pools pass; a NodePool stripped of the taint does not."""
    from kns_testing.autoscale import CONFIG

    done = run_program(CONFIG)
    resources = [kns_rules.Resource(r.type, urn(r.type, r.name), r.inputs) for r in done.resources]
    pools = [r for r in resources if r.kind == "NodePool"]
    assert len(pools) == 3 and kns_rules.gpu_pools_are_tainted(resources, {}) == []
    h100 = next(r for r in pools if r.props["metadata"]["name"] == "h100")
    stripped = copy.deepcopy(dict(h100.props))
    stripped["spec"]["template"]["spec"]["taints"] = []
    found = kns_rules.gpu_pools_are_tainted([kns_rules.Resource(h100.type, h100.urn, stripped)], {})
    assert [v.message.split(":")[0] for v in found] == ["NodePool h100"]


# --- privileged-only-where-allowed ------------------------------------------------------

PRIVILEGED = container(limits=LIMITS, securityContext={"privileged": True})


def test_privileged_pod_in_an_entry_namespace_its_profile_made_privileged_passes():
    stack = [namespace("kns-train", "train", "privileged"), job(containers=[PRIVILEGED])]
    assert kns_rules.privileged_only_where_allowed(stack, {}) == []


def test_privileged_pod_elsewhere_is_refused_with_the_reason():
    found = messages(kns_rules.privileged_only_where_allowed(
        [namespace("kns-train", "train", "baseline"), job(containers=[PRIVILEGED])], {}))
    assert found == ["Job kns-train/train: containers[0] 'main' privileged: true, but entry 'train' is not privileged "
                     "through its profile (its namespace enforces Pod Security 'baseline'); set privileged: true on "
                     "the entry under a profile with allowPrivileged: true"]
    found = messages(kns_rules.privileged_only_where_allowed([job(containers=[PRIVILEGED], namespace="kube-system")], {}))
    assert found == ["Job kube-system/train: containers[0] 'main' privileged: true, but namespace 'kube-system' is not "
                     "an entry namespace of this stack"]
    system = namespace("kns-system", None, "privileged")
    found = messages(kns_rules.privileged_only_where_allowed([system, job(namespace="kns-system", hostPID=True)], {}))
    assert found == ["Job kns-system/train: hostPID: true, but namespace 'kns-system' belongs to no job or schedule entry"]


def test_unprivileged_pods_need_no_privileged_namespace():
    assert kns_rules.privileged_only_where_allowed([job(), cronjob(hostNetwork=False)], {}) == []


# --- cluster-admin-only-kns -------------------------------------------------------------


def service_account(name, ns, types):
    return Resource("kubernetes:core/v1:ServiceAccount", urn(f"{types}$kubernetes:core/v1:ServiceAccount", name),
                    {"metadata": {"name": name, "namespace": ns}})


def binding(name, subjects, role="cluster-admin", kind="ClusterRoleBinding"):
    return Resource(f"kubernetes:rbac.authorization.k8s.io/v1:{kind}",
                    urn(f"kubernetes:rbac.authorization.k8s.io/v1:{kind}", name),
                    {"metadata": {"name": name}, "roleRef": {"kind": "ClusterRole", "name": role,
                                                              "apiGroup": "rbac.authorization.k8s.io"},
                     "subjects": subjects})


KNS_SA = {"kind": "ServiceAccount", "name": "kns-scheduler", "namespace": "kns-system"}


def test_cluster_admin_for_the_kns_schedulers_own_account_passes():
    stack = [service_account("kns-scheduler", "kns-system", tokens.KNS_SCHEDULER),
             binding("kns-scheduler-cluster-admin", [KNS_SA])]
    assert kns_rules.cluster_admin_only_kns(stack, {}) == []


def test_cluster_admin_for_anyone_else_is_refused():
    lookalike = service_account("kns-scheduler", "kns-system", tokens.KNS_WORKLOAD)  # not the KNS component's
    runner = {"kind": "ServiceAccount", "name": "kns-runner", "namespace": "kns-train"}
    group = {"kind": "Group", "name": "system:masters"}
    found = messages(kns_rules.cluster_admin_only_kns(
        [lookalike, binding("kns-admin", [KNS_SA]), binding("oops", [runner, group], kind="RoleBinding")], {}))
    assert found == [
        "ClusterRoleBinding kns-admin: binds cluster-admin to ServiceAccount kns-system/kns-scheduler; only the KNS "
        "scheduler's ServiceAccount (none in this stack) may have it",
        "RoleBinding oops: binds cluster-admin to ServiceAccount kns-train/kns-runner, Group system:masters; only the "
        "KNS scheduler's ServiceAccount (none in this stack) may have it",
    ]


def test_other_roles_and_configured_subjects_pass():
    runner = {"kind": "ServiceAccount", "name": "ops", "namespace": "tools"}
    assert kns_rules.cluster_admin_only_kns([binding("view", [runner], role="view")], {}) == []
    assert kns_rules.cluster_admin_only_kns([binding("ops", [runner])], {"allowedSubjects": ["tools/ops"]}) == []


# --- the callbacks the engine calls -----------------------------------------------------


def policy(name):
    return next(p for p in POLICIES if p.name == name)


def policy_resource(resource: Resource) -> PolicyResource:
    return PolicyResource(resource.type, resource.props, resource.urn, resource.urn.rsplit("::", 1)[-1],
                          PolicyResourceOptions(False, [], False, [], None, []), None, None, [], {})


def test_resource_policies_report_through_the_engine_callback():
    bad = job(containers=[container(image="evil.example/x:1", limits={"memory": "1Gi", "nvidia.com/gpu": "1"})])
    args = ResourceValidationArgs(bad.type, bad.props, bad.urn, "train", PolicyResourceOptions(False, [], False, [], None, []),
                                  None, {}, None)
    for name, expected in (("containers-have-limits", "has no cpu limit"),
                           ("allowed-registries", "is not from an allowed registry"),
                           ("gpu-pods-tolerate-gpu-taint", "does not tolerate")):
        reported = []
        policy(name).validate(args, lambda message, urn=None: reported.append((message, urn)))
        assert len(reported) == 1 and expected in reported[0][0] and reported[0][1] == bad.urn, name


def test_stack_policies_report_through_the_engine_callback():
    stack = [policy_resource(r) for r in (namespace("kns-train", "train"), job(containers=[PRIVILEGED]),
                                          binding("wide", [{"kind": "Group", "name": "devs"}]))]
    args = StackValidationArgs(stack, {})
    for name in ("privileged-only-where-allowed", "cluster-admin-only-kns"):
        reported = []
        policy(name).validate(args, lambda message, urn=None: reported.append((message, urn)))
        assert len(reported) == 1 and reported[0][1] in {r.urn for r in stack}, name


def test_every_policy_is_mandatory_and_documented():
    assert {p.name for p in POLICIES} == {"containers-have-limits", "privileged-only-where-allowed", "allowed-registries",
                                         "gpu-pods-tolerate-gpu-taint", "gpu-pools-are-tainted", "cluster-admin-only-kns",
                                         "device-claims-are-counted", "reservation-rbac-is-narrow",
                                         "entry-namespaces-are-isolated"}
    assert all(p.enforcement_level.value == "mandatory" for p in POLICIES)
    page = (ROOT / "docs" / "policy.md").read_text()
    assert all(f"`{p.name}`" in page for p in POLICIES)


# --- the real engine --------------------------------------------------------------------

PASSPHRASE = "kns-dev-local"


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    toolchain = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], capture_output=True, text=True,
                               timeout=5400)
    assert toolchain.returncode == 0, f"scripts/toolchain.sh failed:\n{toolchain.stderr[-3000:]}"
    root = tmp_path_factory.mktemp("policy") / "kns-platform"
    env = engine_project(root, toolchain.stdout.strip(), PASSPHRASE, files=(*PROJECT_FILES, "Pulumi.dev.yaml"))

    def pulumi(*args, **extra_env):
        return subprocess.run(["pulumi", *args, "--non-interactive"], cwd=root, env={**env, **extra_env},
                              capture_output=True, text=True, timeout=600)

    assert pulumi("stack", "init", "dev").returncode == 0
    return root, pulumi


def preview_with_policy(pulumi, **extra_env):
    return pulumi("preview", "--policy-pack", str(ROOT / "policy"), **extra_env)


def test_engine_preview_with_the_policy_pack_passes_the_dev_stack(engine):
    _, pulumi = engine
    done = preview_with_policy(pulumi)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Policies:" in done.stdout and "kns-platform@v0.1.0" in done.stdout
    assert "mandatory" not in done.stdout


def _violating_preview(engine, **extra_env):
    """`pulumi preview --policy-pack policy` of the dev stack with the docs' worked example:
    privilege and a private image through overrides (docs/policy.md)."""
    root, pulumi = engine
    stack_file = root / "Pulumi.dev.yaml"
    original = stack_file.read_text()
    document = yaml.safe_load(original)
    jobs = document["config"]["kns:jobs"]
    smoke = next(j for j in jobs if j["name"] == "vcluster-smoke")
    violating = copy.deepcopy(smoke)
    violating["jsonOverrides"] = [
        {"path": "/spec/template/spec/containers/0/securityContext", "value": {"privileged": True}},
        {"path": "/spec/template/spec/containers/0/image", "value": "registry.example.com/tools/debug:1"},
    ]
    jobs[jobs.index(smoke)] = violating
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    try:
        done = preview_with_policy(pulumi, **extra_env)
    finally:
        stack_file.write_text(original)
    return done, done.stdout + done.stderr


def test_engine_preview_refuses_a_violating_stack_in_the_program_with_the_packs_rules(engine):
    """The program runs the pack's rules on what it plans (tests/test_guardrails.py): the
    update stops at the config error, before a resource is registered."""
    done, output = _violating_preview(engine)
    assert done.returncode != 0, output
    assert "invalid configuration, 2 problems; nothing was applied" in output
    assert ("kns:jobs[vcluster-smoke]: containers[0] 'vcluster-smoke' privileged: true, but entry 'vcluster-smoke' "
            "is not privileged through its profile") in output
    assert "(policy privileged-only-where-allowed, docs/policy.md)" in output
    assert "registry.example.com/tools/debug:1" in output and "(policy allowed-registries, docs/policy.md)" in output


def test_engine_preview_with_the_policy_pack_blocks_what_the_program_lets_through(engine, tmp_path):
    """The pack is the second look: with the program's checks of the pack's rules switched
    off (its KNS_POLICY_CONFIG disables them all), the pack itself stops the preview."""
    off = tmp_path / "off.json"
    off.write_text('{"all": "disabled"}')
    done, output = _violating_preview(engine, KNS_POLICY_CONFIG=str(off))
    assert done.returncode != 0, output
    assert "invalid configuration" not in output
    assert "privileged-only-where-allowed" in output and "allowed-registries" in output
    assert "Job kns-vcluster-smoke/vcluster-smoke: containers[0] 'vcluster-smoke' privileged: true" in output
    assert "registry.example.com/tools/debug:1" in output
    assert "containers-have-limits" not in output  # only the rules that were broken fire


def test_engine_passes_the_policy_pack_config_to_the_rules(engine, tmp_path):
    _, pulumi = engine
    narrowed = tmp_path / "policy-config.json"
    narrowed.write_text('{"allowed-registries": {"allowedRegistries": ["nvcr.io", "ghcr.io"]}}')
    done = pulumi("preview", "--policy-pack", str(ROOT / "policy"), "--policy-pack-config", str(narrowed))
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "image 'busybox:1.37' (docker.io/library/busybox) is not from an allowed registry (nvcr.io, ghcr.io)" in output
    assert "image 'nvcr.io/" not in output


def test_the_device_claim_policy_reports_through_the_engine_callback():
    claim = Resource("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate",
                     "urn:pulumi:s::p::kubernetes:resource.k8s.io/v1:ResourceClaimTemplate::train-gpu-claim",
                     {"metadata": {"name": "kns-gpu", "namespace": "kns-train"}, "spec": {"spec": {"devices": {
                         "requests": [{"name": "gpu", "exactly": {"deviceClassName": "kns-a100-gpu",
                                                                  "adminAccess": True}}]}}}})
    args = ResourceValidationArgs(claim.type, claim.props, claim.urn, "train-gpu-claim",
                                  PolicyResourceOptions(False, [], False, [], None, []), None, {}, None)
    reported = []
    policy("device-claims-are-counted").validate(args, lambda message, urn=None: reported.append((message, urn)))
    assert len(reported) == 1 and "adminAccess" in reported[0][0] and reported[0][1] == claim.urn
