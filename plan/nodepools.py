"""What a pool becomes (pure): node patches for a static pool, one Karpenter NodePool for an
autoscaled one (docs/node-pools.md, docs/autoscaling.md).

An autoscaled pool's labels and taints are in the NodePool's node template, so every node
Karpenter creates for it arrives labelled and tainted: there is no node to patch, and a
workload's pod targets it with the same selector and tolerations as a static pool's.
"""

from __future__ import annotations

from typing import Any, Optional

from config import resolve, rules
from config.models import NodePool
from config.names import LABEL_CLUSTER, MANAGED_BY

API_VERSION = "karpenter.sh/v1"
KIND = "NodePool"


def autoscale_summary(pool: NodePool) -> Optional[dict[str, Any]]:
    """`{nodePool, limits}` of an autoscaled pool, as the stack outputs and `./kns explain`
    show it; None for a static pool."""
    if pool.autoscale is None:
        return None
    return {"nodePool": pool.name, "limits": dict(pool.autoscale.limits)}


def gpu_requirement(pool: NodePool) -> list[dict[str, Any]]:
    """A GPU pool's `perNode` as a requirement on the instance's GPU count, where the node
    class's provider labels it (config/rules.py GPU_COUNT_LABELS) and the pool does not
    already require something of that label; elsewhere none (docs/autoscaling.md: the
    workload's GPU request alone steers Karpenter to instance types that have them)."""
    if pool.gpu is None or pool.autoscale is None:
        return []
    label = rules.GPU_COUNT_LABELS.get(pool.autoscale.node_class_ref.group)
    if label is None or any(r.key == label for r in pool.autoscale.requirements):
        return []
    return [{"key": label, "operator": "In", "values": [str(pool.gpu.per_node)]}]


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
