"""NodePool: a static pool's labels and taints on existing nodes through server-side apply
patches, or an autoscaled pool's Karpenter NodePool (docs/autoscaling.md).

A static pool never creates or deletes nodes. Each node gets one `NodePatch`, named
`<pool>.<node>` (plan/identity.py `patch_name`: stable keys), so adding a node or
reordering pools touches nothing else. A node's taint list is not keyed for server-side
apply, so the pool owns the whole list (`pulumi.com/patchForce`); see docs/node-pools.md. An autoscaled pool has no node to
patch: its one child is the `karpenter.sh/v1` NodePool that plan/nodepools.py builds, whose
node template carries the same labels and taints. A pool that allocates GPUs as devices
(DRA) also has a DeviceClass per kind of GPU it offers (plan/devices.py, docs/gpus.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import resolve
from config.models import NodePool as NodePoolModel
from config.devices import is_dra
from plan.devices import device_class_manifests
from plan.identity import FORCE_ANNOTATION, NODE_POOL_TYPE as TYPE, class_resource_name, patch_name
from plan.nodepools import autoscale_summary, nodepool_manifest

from .register import Planned


@dataclass
class NodePoolArgs:
    pool: NodePoolModel
    cluster_name: str


class NodePool(pulumi.ComponentResource):
    nodes: list[str]
    taints: list[dict[str, str]]
    labels: dict[str, str]

    def __init__(self, name: str, args: NodePoolArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        pool = args.pool
        self.nodes = pool.static_nodes
        self.labels = resolve.pool_labels(pool, args.cluster_name)
        self.taints = resolve.pool_taints(pool)
        self.node_pool: Optional[pulumi.CustomResource] = None
        outputs = {"nodes": self.nodes, "taints": self.taints, "labels": self.labels}
        self.device_classes = [
            Planned(class_resource_name(manifest["metadata"]["name"]), manifest, pulumi.ResourceOptions(parent=self))
            for manifest in (device_class_manifests(pool, args.cluster_name) if is_dra(pool) else [])
        ]
        if self.device_classes:
            outputs["deviceClasses"] = [c.metadata["name"] for c in self.device_classes]  # type: ignore[attr-defined]
        if pool.autoscale is not None:
            self.node_pool = Planned(pool.name, nodepool_manifest(pool, args.cluster_name),
                                      pulumi.ResourceOptions(parent=self))
            outputs["autoscale"] = autoscale_summary(pool)
        self.patches = [
            k8s.core.v1.NodePatch(
                patch_name(pool.name, node),
                metadata={
                    "name": node,
                    "labels": self.labels,
                    "annotations": {FORCE_ANNOTATION: "true"},
                },
                spec={"taints": self.taints},
                opts=pulumi.ResourceOptions(parent=self),
            )
            for node in self.nodes
        ]
        self.register_outputs(outputs)
