"""NodePool: a static pool's labels and taints on existing nodes through server-side apply
patches, or an autoscaled pool's Karpenter NodePool, and a DRA pool's DeviceClasses, as
plan/nodepools.py plans them (docs/node-pools.md, docs/autoscaling.md, docs/gpus.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi

from config.models import NodePool as NodePoolModel
from plan.nodepools import pool_children, pool_outputs
from plan.identity import NODE_POOL_TYPE as TYPE

from .children import register_children


@dataclass(kw_only=True)
class NodePoolArgs:
    pool: NodePoolModel
    cluster_name: str


class NodePool(pulumi.ComponentResource):
    def __init__(self, name: str, args: NodePoolArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        self.children = register_children(self, pool_children(args.pool, args.cluster_name))
        self.register_outputs(pool_outputs(args.pool, args.cluster_name))
