"""What every cluster of a site runs, registered the same way on each: its node pools, the
system namespace and schedulers, Kueue and its queues. The manager's have the names a
single cluster always had (no prefix); a worker's are named `<worker>-...`
(components/worker.py), so that the URNs of two workers' objects never meet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import pulumi

from config.models import KnsScheduler as KnsSchedulerModel, NodePool as NodePoolModel
from config.models import PackingScheduler as PackingSchedulerModel
from plan import kueue_install, queues

from .kns_scheduler import KnsScheduler, KnsSchedulerArgs
from .kueue import KueueInstall, KueueInstallArgs
from .nodepool import NodePool, NodePoolArgs
from .packing_scheduler import PackingScheduler, PackingSchedulerArgs
from .queues import Queues, QueuesArgs
from .system import SystemNamespace, SystemNamespaceArgs


@dataclass
class PlatformArgs:
    """One cluster's platform objects, planned (plan/)."""

    site: str  # kns:cluster.name: the label every object of the site carries
    system_namespace: str
    pools: list[NodePoolModel]
    packing: PackingSchedulerModel
    kns: KnsSchedulerModel
    keycloak_client_secret: Optional[str]
    # Kueue's install objects (plan/kueue_install.py), None when the program installs none.
    kueue_objects: Optional[list[dict[str, Any]]] = None
    flavors: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    topologies: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    # Before every component name: "" on the manager, "<worker>-" on a worker.
    prefix: str = ""
    # The system namespace's NetworkPolicy (plan/network.py), None without isolation.
    system_policy: Optional[dict[str, Any]] = None


def register_platform(args: PlatformArgs, opts: pulumi.ResourceOptions) -> Optional[KueueInstall]:
    """Register one cluster's platform but its queues (`register_queues`) with `opts` (its
    provider, its parent); the Kueue install, if the program installs it."""
    prefix = args.prefix
    for pool in args.pools:
        NodePool(pool.name, NodePoolArgs(pool, args.site), opts)
    if args.packing.enabled or args.kns.enabled:
        system = SystemNamespace(prefix + args.system_namespace,
                                 SystemNamespaceArgs(args.system_namespace, args.site, args.system_policy), opts)
        if args.packing.enabled:
            PackingScheduler(prefix + args.packing.name, PackingSchedulerArgs(
                args.packing, system.name, args.pools, args.site, [system.namespace],
                isolated=args.system_policy is not None), opts)
        if args.kns.enabled:
            KnsScheduler(prefix + "kns-scheduler", KnsSchedulerArgs(
                args.kns, system.name, args.pools, args.site, args.keycloak_client_secret, [system.namespace],
                isolated=args.system_policy is not None), opts)
    if args.kueue_objects is None:
        return None
    return KueueInstall(prefix + kueue_install.COMPONENT, KueueInstallArgs(args.kueue_objects, prefix), opts)


def register_queues(args: PlatformArgs, kueue: Optional[KueueInstall], after: Sequence[pulumi.Resource],
                    opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """Register one cluster's queues after its Kueue and `after` (on the manager of a site,
    the MultiKueue objects: a ClusterQueue is deleted before the AdmissionCheck it names,
    which Kueue keeps while one does). What a queued entry's LocalQueue waits for."""
    dependencies: list[pulumi.Resource] = [*([kueue] if kueue is not None else []), *after]
    if args.cluster_queues or args.priority_classes:
        dependencies.append(Queues(args.prefix + queues.COMPONENT, QueuesArgs(
            args.flavors, args.cluster_queues, list(dependencies), args.topologies, args.priority_classes, args.prefix),
            opts))
    return dependencies
