"""Each component on its own, from a plan made by hand: no config file, no planner, no
`__main__.py` (docs/architecture.md, "Worked example": the resource tested at its own layer).

A component registered under the recording mocks of kns_testing must register exactly the
children its plan says, with their names and key fields; the tests read them both through
what the mocks were sent and through the component's own attributes (resolved outputs), so
a child registered but not kept, or kept but not registered, fails one or the other. Children are
compared as a set: the engine registers them as their dependencies resolve, not in order.
"""

from __future__ import annotations

from components.namespace import JobNamespace, JobNamespaceArgs
from components.nodepool import NodePool, NodePoolArgs
from components.system import SystemNamespace, SystemNamespaceArgs
from config.models import Job, NodePool as PoolModel, Profile
from kns_testing import tokens
from kns_testing.program import register_components
from plan.model import WorkloadPlan

LIMITS = {"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}, "defaultRequest": {"cpu": "500m"}}
QUOTA = {"requests.cpu": "4", "limits.memory": "8Gi"}
RULES = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list"]}]
ISOLATION = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
             "metadata": {"name": "kns-isolation", "namespace": "kns-train"},
             "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}


def job_plan(**over) -> WorkloadPlan:
    """One entry's plan as the planner would hand it to the components, written out."""
    fields = dict(entry=Job.model_validate({"name": "train", "user": "ann", "image": "busybox:1.37"}),
                  namespace="kns-train", labels={"kns.io/job": "train", "kns.io/user": "ann"},
                  pod_security="restricted", pool=None, profile=Profile(), profile_rules=[], resources={},
                  limit_range=LIMITS, quota=QUOTA, role_rules=RULES, scheduler_name=None,
                  credentials={"s3": {"key": "x"}}, network_policy=ISOLATION)
    fields.update(over)
    return WorkloadPlan(**fields)


def test_a_job_namespace_registers_its_guard_rails_from_its_plan():
    def build():
        component = JobNamespace("train", JobNamespaceArgs(plan=job_plan()))
        made = component.children
        return {"namespace": component.namespace.metadata, "quota": made["ResourceQuota/train-quota"].spec,
                "binding": made["RoleBinding/train-runner"].subjects, "runner": made["ServiceAccount/train-runner"].metadata,
                "policy": made["NetworkPolicy/train-isolation"].metadata,
                "secrets": [r.metadata["name"] for key, r in made.items() if key.startswith("Secret/")]}

    run = register_components(build)
    assert sorted((r.type, r.name) for r in run.resources) == sorted([
        (tokens.JOB_NAMESPACE, "train"),
        ("kubernetes:core/v1:Namespace", "train"),
        ("kubernetes:core/v1:LimitRange", "train-defaults"),
        ("kubernetes:core/v1:ResourceQuota", "train-quota"),
        ("kubernetes:core/v1:ServiceAccount", "train-runner"),
        ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "train-isolation"),
        ("kubernetes:rbac.authorization.k8s.io/v1:Role", "train-runner"),
        ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "train-runner"),
        ("kubernetes:core/v1:Secret", "train-cred-s3"),
    ])
    out = run.outputs
    assert out["namespace"]["name"] == "kns-train"
    assert out["namespace"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert out["namespace"]["labels"]["kns.io/job"] == "train"
    assert out["quota"] == {"hard": QUOTA}
    assert run.named("kubernetes:core/v1:LimitRange", "train-defaults").inputs["spec"] == {"limits": [LIMITS]}
    assert run.named("kubernetes:rbac.authorization.k8s.io/v1:Role", "train-runner").inputs["rules"] == RULES
    assert out["binding"] == [{"kind": "ServiceAccount", "name": "kns-runner", "namespace": "kns-train"}]
    assert out["runner"]["name"] == "kns-runner" and out["runner"]["namespace"] == "kns-train"
    assert out["policy"]["name"] == "kns-isolation"
    assert out["secrets"] == ["kns-cred-s3"]
    runner = run.named("kubernetes:core/v1:ServiceAccount", "train-runner")
    assert runner.inputs["automountServiceAccountToken"] is False


def test_a_job_namespace_without_isolation_or_credentials_registers_neither():
    def build():
        component = JobNamespace("train", JobNamespaceArgs(plan=job_plan(network_policy=None, credentials={})))
        kinds = [key.split("/")[0] for key in component.children]
        return {"policy": "NetworkPolicy" not in kinds, "secrets": kinds.count("Secret")}

    run = register_components(build)
    assert run.outputs == {"policy": True, "secrets": 0}
    assert not run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    assert not run.of_type("kubernetes:core/v1:Secret")
    assert len(run.resources) == 7


def test_a_static_node_pool_patches_each_of_its_nodes_with_its_labels_and_taints():
    pool = PoolModel.model_validate({
        "name": "gpu", "role": "gpu", "nodes": ["g1", "g2"], "gpu": {"vendor": "nvidia", "perNode": 8},
        "labels": {"team": "ml"}, "taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}]})

    def build():
        component = NodePool("gpu", NodePoolArgs(pool=pool, cluster_name="kns-test"))
        patches = [r for key, r in component.children.items() if key.startswith("NodePatch/")]
        return {"nodes": [p.metadata["name"] for p in patches], "taints": [p.spec["taints"] for p in patches],
                "autoscaled": "NodePool/gpu" not in component.children}

    run = register_components(build)
    assert sorted((r.type, r.name) for r in run.resources) == sorted([
        (tokens.NODE_POOL, "gpu"), ("kubernetes:core/v1:NodePatch", "gpu.g1"), ("kubernetes:core/v1:NodePatch", "gpu.g2")])
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
              {"key": "team", "value": "ml", "effect": "NoSchedule"}]
    assert run.outputs == {"nodes": ["g1", "g2"], "taints": [taints, taints], "autoscaled": True}
    patch = run.named("kubernetes:core/v1:NodePatch", "gpu.g1")
    assert patch.metadata["labels"] == {"kns.io/pool": "gpu", "nvidia.com/gpu": "present", "team": "ml",
                                        "kns.io/cluster": "kns-test"}
    assert patch.metadata["annotations"] == {"pulumi.com/patchForce": "true"}


def test_a_system_namespace_is_restricted_and_isolated_when_its_plan_says_so():
    def build():
        isolated = SystemNamespace("kns-system", SystemNamespaceArgs(name="kns-system", cluster_name="kns-test",
                                                                      policy=ISOLATION))
        open_ = SystemNamespace("kns-open", SystemNamespaceArgs(name="kns-open", cluster_name="kns-test"))
        return {"labels": isolated.namespace.metadata["labels"],
                "policy": isolated.children["NetworkPolicy/kns-system-isolation"].metadata,
                "open": list(open_.children) == ["Namespace/kns-open"]}

    run = register_components(build)
    assert sorted((r.type, r.name) for r in run.resources) == sorted([
        (tokens.SYSTEM_NAMESPACE, "kns-system"), ("kubernetes:core/v1:Namespace", "kns-system"),
        ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "kns-system-isolation"),
        (tokens.SYSTEM_NAMESPACE, "kns-open"), ("kubernetes:core/v1:Namespace", "kns-open")])
    labels = run.outputs["labels"]
    assert labels["kns.io/cluster"] == "kns-test"
    assert {labels[f"pod-security.kubernetes.io/{m}"] for m in ("enforce", "audit", "warn")} == {"restricted"}
    assert run.outputs["policy"] == ISOLATION["metadata"] and run.outputs["open"] is True
    policy = run.named("kubernetes:networking.k8s.io/v1:NetworkPolicy", "kns-system-isolation")
    assert policy.inputs["spec"] == ISOLATION["spec"]
