"""Queues: one Kueue ResourceFlavor per node pool a queue names, one ClusterQueue per
queue and one WorkloadPriorityClass per priority (docs/queueing.md). The objects are
plan/queues.py's; this only registers them, flavors first, after Kueue's CRDs and
controller when the program installs them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi

from plan.identity import QUEUES_TYPE as TYPE, kind_name

from .register import Planned


@dataclass(kw_only=True)
class QueuesArgs:
    flavors: list[dict[str, Any]]
    cluster_queues: list[dict[str, Any]]
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    # Kueue Topologies the flavors name (docs/distributed.md), registered before them.
    topologies: list[dict[str, Any]] = field(default_factory=list)
    # WorkloadPriorityClasses (kns:priorities), registered before the queued Jobs that name them.
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    # Before each child's logical name: a worker's queues (`<worker>-`) are apart from the
    # other workers' (components/worker.py).
    prefix: str = ""


def _register(manifest: dict[str, Any], opts: pulumi.ResourceOptions, prefix: str = "") -> pulumi.CustomResource:
    """The object under `<prefix><kind>-<name>` (a WorkloadPriorityClass carries `value`, not
    a `spec`: components/register.py)."""
    return Planned(prefix + kind_name(manifest), manifest, opts)


class Queues(pulumi.ComponentResource):
    def __init__(self, name: str, args: QueuesArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        after_install = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        self.topologies = [_register(m, after_install, args.prefix) for m in args.topologies]
        after_topologies = pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *self.topologies])
        self.flavors = [_register(m, after_topologies, args.prefix) for m in args.flavors]
        after_flavors = pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *self.flavors])
        self.cluster_queues = [_register(m, after_flavors, args.prefix) for m in args.cluster_queues]
        self.priority_classes = [_register(m, after_install, args.prefix) for m in args.priority_classes]
        self.register_outputs({
            "flavors": [m["metadata"]["name"] for m in args.flavors],
            "clusterQueues": [m["metadata"]["name"] for m in args.cluster_queues],
            "priorities": {m["metadata"]["name"]: m["value"] for m in args.priority_classes},
        })
