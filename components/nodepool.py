"""NodePool: labels and taints on existing nodes through server-side apply patches.

The pool never creates or deletes nodes. Each node gets one `NodePatch`, named
`<pool>.<node>` (stable keys; a pool name has no dot, so no two patches can share a name),
so adding a node or reordering pools touches nothing else. A node's
taint list is not keyed for server-side apply, so the pool owns the whole list
(`pulumi.com/patchForce`); see docs/node-pools.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import resolve
from config.models import NodePool as NodePoolModel

TYPE = "kns:cluster:NodePool"


def patch_name(pool: str, node: str) -> str:
    return f"{pool}.{node}"


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
        self.nodes = list(pool.nodes)
        self.labels = resolve.pool_labels(pool, args.cluster_name)
        self.taints = resolve.pool_taints(pool)
        self.patches = [
            k8s.core.v1.NodePatch(
                patch_name(pool.name, node),
                metadata={
                    "name": node,
                    "labels": self.labels,
                    "annotations": {"pulumi.com/patchForce": "true"},
                },
                spec={"taints": self.taints},
                opts=pulumi.ResourceOptions(parent=self),
            )
            for node in pool.nodes
        ]
        self.register_outputs({"nodes": self.nodes, "taints": self.taints, "labels": self.labels})
