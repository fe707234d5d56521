"""What a pool becomes (pure): node patches for a static pool, one Karpenter NodePool for an
autoscaled one (docs/node-pools.md, docs/autoscaling.md).

An autoscaled pool's labels and taints are in the NodePool's node template, so every node
Karpenter creates for it arrives labelled and tainted: there is no node to patch, and a
workload's pod targets it with the same selector and tolerations as a static pool's.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from config import devices as config_devices, karpenter, resolve, rules
from config.errors import Problem
from config.models import NodePool
from config.names import LABEL_CLUSTER, MANAGED_BY
from config.quantity import kind_for_resource, parse

from . import accounting, devices, identity
from .model import Child, WorkloadPlan

API_VERSION = "karpenter.sh/v1"
KIND = "NodePool"


def autoscale_summary(pool: NodePool) -> Optional[dict[str, Any]]:
    """`{nodePool, limits}` of an autoscaled pool, as the stack outputs and `./kns explain`
    show it; None for a static pool."""
    if pool.autoscale is None:
        return None
    return {"nodePool": pool.name, "limits": dict(pool.autoscale.limits)}


def gpu_requirement(pool: NodePool) -> list[dict[str, Any]]:
    """The requirement the program adds for a GPU pool's `perNode` (config/karpenter.py)."""
    if pool.autoscale is None:
        return []
    return karpenter.gpu_requirement(pool.gpu_per_node, pool.autoscale.node_class_ref.group,
                                     pool.autoscale.requirements)


def _taint(taint: dict[str, str]) -> dict[str, str]:
    # The CRD's pattern refuses an empty value: leave it out instead.
    return {k: v for k, v in taint.items() if v != "" or k != "value"}


def nodepool_manifest(pool: NodePool, cluster: str) -> dict[str, Any]:
    """The Karpenter v1 NodePool of an autoscaled pool, named after the pool."""
    auto = pool.autoscale
    if auto is None:
        raise ValueError(f'pool "{pool.name}" is static: it has no NodePool')
    requirements = [
        {"key": r.key, "operator": r.operator,
         **({"values": list(r.values)} if r.values or r.operator in ("In", "NotIn") else {}),
         **({"minValues": r.min_values} if r.min_values is not None else {})}
        for r in auto.requirements
    ] + gpu_requirement(pool)
    template_spec: dict[str, Any] = {
        "nodeClassRef": auto.node_class_ref.model_dump(),
        "requirements": requirements,
    }
    taints = [_taint(t) for t in resolve.pool_taints(pool)]
    if taints:
        template_spec["taints"] = taints
    if auto.expire_after is not None:
        template_spec["expireAfter"] = auto.expire_after
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": resolve.pool_labels(pool, cluster)}, "spec": template_spec},
        "disruption": {"consolidationPolicy": auto.consolidation, "consolidateAfter": auto.consolidate_after},
    }
    if auto.limits:
        spec["limits"] = dict(auto.limits)
    if auto.weight is not None:
        spec["weight"] = auto.weight
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": pool.name, "labels": {**MANAGED_BY, LABEL_CLUSTER: cluster}},
        "spec": spec,
    }


def most_gpus_per_node(pool: NodePool) -> Optional[int]:
    """The most GPUs a node of the autoscaled pool may have, from its requirements on the
    node class's GPU-count label (In, Lt, Lte); None when they set no upper bound."""
    label = rules.GPU_COUNT_LABELS.get(pool.autoscale.node_class_ref.group) if pool.autoscale else None
    bounds = []
    for requirement in pool.autoscale.requirements if label else ():
        if requirement.key != label:
            continue
        numbers = [int(v) for v in requirement.values if v.isdigit()]
        if requirement.operator == "In" and numbers:
            bounds.append(max(numbers))
        elif requirement.operator in ("Lt", "Lte") and numbers:
            bounds.append(numbers[0] - (requirement.operator == "Lt"))
    return min(bounds) if bounds else None


def selector_reasons(pool: NodePool, selector: dict[str, str], cluster: str) -> list[str]:
    """Why no node of the autoscaled pool matches the pod's node selector: a node Karpenter
    creates carries the template's labels, one value of each requirement, and the labels it
    knows from the instance type (rules.KARPENTER_WELL_KNOWN_LABELS, rules.PROVIDER_LABELS)."""
    assert pool.autoscale is not None
    labels = resolve.pool_labels(pool, cluster)
    labels[rules.KARPENTER_NODEPOOL_LABEL] = pool.name
    provider = pool.autoscale.node_class_ref.group
    out = []
    for key, value in selector.items():
        requirements = [r for r in pool.autoscale.requirements if r.key == key]
        if key in labels:
            if labels[key] != value:
                out.append(f"the node selector {key}={value}, but every node of the pool has {key}={labels[key]}")
        elif requirements:
            for requirement in requirements:
                if not karpenter.satisfies(requirement.operator, requirement.values, value):
                    out.append(f"the node selector {key}={value}, which its requirement "
                               f"{karpenter.describe(requirement.operator, requirement.values, key)} rules out")
        elif karpenter.provider_key_problem(key, provider, False):
            out.append(f"the node selector {key}={value}, a label the node class's provider ({provider}) "
                       "never sets on its nodes")
        elif key not in rules.KARPENTER_WELL_KNOWN_LABELS and key.split("/", 1)[0] != provider:
            out.append(f"the node selector {key}={value}, a label no node of the pool carries (the pool neither "
                       "sets it in labels nor requires it)")
    return out


def fit_problems(plans: Iterable[WorkloadPlan], paths: dict[str, str], cluster: str) -> list[Problem]:
    """Each entry on an autoscaled pool whose pod no node of the pool could hold: it asks
    more of a resource than the pool's `limits` allow all its nodes together, more GPUs
    than its requirements let a node have, or a node selector no node of the pool matches.
    Karpenter would never create the node, and the pod would wait for ever
    (docs/autoscaling.md)."""
    problems = []
    for plan in plans:
        pool = plan.pool
        if pool is None or pool.autoscale is None or plan.pod_spec is None:
            continue
        account = accounting.of(plan)
        asked = account.requests if account is not None else {}
        reasons = []
        for resource, limit in pool.autoscale.limits.items():
            kind = kind_for_resource(resource)
            if resource in asked and parse(asked[resource], kind) > parse(limit, kind):
                reasons.append(f"{resource} {asked[resource]}, more than autoscale.limits.{resource} {limit} "
                               "allows all its nodes together")
        most, gpu = most_gpus_per_node(pool), pool.gpu_resource
        gpus = int(parse(asked.get(gpu, "0"), kind_for_resource(gpu))) if gpu else 0
        if most is not None and gpus > most:
            label = rules.GPU_COUNT_LABELS[pool.autoscale.node_class_ref.group]
            reasons.append(f"{gpus} {gpu}, more than its requirements let a node have ({label} at most {most})")
        reasons += selector_reasons(pool, plan.pod_spec.get("nodeSelector") or {}, cluster)
        if reasons:
            problems.append(Problem(f"{paths[plan.entry.name]}.pool",
                                    f'pool "{pool.name}" could never get a node for its pod, which asks '
                                    + "; ".join(reasons) + ": Karpenter would never create one"))
    return problems


def pool_children(pool: NodePool, cluster: str) -> list[Child]:
    """What a pool's component registers: a DeviceClass per kind of GPU a DRA pool offers
    (plan/devices.py), an autoscaled pool's Karpenter NodePool, and a static pool's patch of
    each of its nodes, `<pool>.<node>` (stable keys: adding a node or reordering pools
    touches nothing else). A node's taint list is not keyed for server-side apply, so the
    pool owns the whole list (`pulumi.com/patchForce`, docs/node-pools.md)."""
    out = [Child(identity.class_resource_name(m["metadata"]["name"]), m)
           for m in (devices.device_class_manifests(pool, cluster) if config_devices.is_dra(pool) else [])]
    if pool.autoscale is not None:
        out.append(Child(pool.name, nodepool_manifest(pool, cluster)))
    labels, taints = resolve.pool_labels(pool, cluster), resolve.pool_taints(pool)
    out += [Child(identity.patch_name(pool.name, node), {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": labels, "annotations": {identity.FORCE_ANNOTATION: "true"}},
        "spec": {"taints": taints}}, patch=True) for node in pool.static_nodes]
    return out


def pool_outputs(pool: NodePool, cluster: str) -> dict[str, Any]:
    """A pool component's outputs: its nodes, the labels and taints they carry, its
    DeviceClasses and, autoscaled, its NodePool's summary."""
    out: dict[str, Any] = {"nodes": pool.static_nodes, "taints": resolve.pool_taints(pool),
                           "labels": resolve.pool_labels(pool, cluster)}
    classes = devices.device_class_manifests(pool, cluster) if config_devices.is_dra(pool) else []
    if classes:
        out["deviceClasses"] = [m["metadata"]["name"] for m in classes]
    if pool.autoscale is not None:
        out["autoscale"] = autoscale_summary(pool)
    return out
