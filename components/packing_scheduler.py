"""PackingScheduler: a second kube-scheduler that packs pods onto the fewest nodes.

The default scheduler spreads small pods over every node, so large multi-core and GPU pods
find no room (docs/schedulers.md). Workloads use this scheduler unless they name another one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi

from config.models import NodePool, PackingScheduler as PackingSchedulerModel
from plan import schedulers as specs
from plan.identity import PACKING_SCHEDULER_TYPE as TYPE

from .children import register_children


@dataclass(kw_only=True)
class PackingSchedulerArgs:
    packing: PackingSchedulerModel
    namespace: str
    pools: list[NodePool]
    cluster_name: str
    depends_on: list[pulumi.Resource]
    # Its namespace has a NetworkPolicy (kns:network, plan/network.py).
    isolated: bool = False


class PackingScheduler(pulumi.ComponentResource):
    scheduler_name: str

    def __init__(self, name: str, args: PackingSchedulerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        self.scheduler_name = args.packing.name
        self.children = register_children(self, specs.packing_children(
            name, args.packing, args.namespace, args.pools, args.cluster_name, args.isolated), args.depends_on)
        self.register_outputs({"schedulerName": self.scheduler_name})
