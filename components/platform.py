"""What every cluster of a site runs, registered the same way on each: its node pools, the
system namespace and schedulers, Kueue and its queues. The manager's have the names a
single cluster always had (no prefix); a worker's are named `<worker>-...`
(components/worker.py), so that the URNs of two workers' objects never meet.
"""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi

from plan import kueue_install, queues
from plan.platform import ClusterPlatform

from .kns_scheduler import KnsScheduler, KnsSchedulerArgs
from .kueue import KueueInstall, KueueInstallArgs
from .nodepool import NodePool, NodePoolArgs
from .packing_scheduler import PackingScheduler, PackingSchedulerArgs
from .queues import Queues, QueuesArgs
from .system import SystemNamespace, SystemNamespaceArgs


def register_platform(args: ClusterPlatform, opts: pulumi.ResourceOptions) -> Optional[KueueInstall]:
    """Register one cluster's platform but its queues (`register_queues`) with `opts` (its
    provider, its parent); the Kueue install, if the program installs it."""
    prefix = args.prefix
    for pool in args.pools:
        NodePool(pool.name, NodePoolArgs(pool=pool, cluster_name=args.site), opts)
    if args.packing.enabled or args.kns.enabled:
        system = SystemNamespace(prefix + args.system_namespace, SystemNamespaceArgs(
            name=args.system_namespace, cluster_name=args.site, policy=args.system_policy), opts)
        if args.packing.enabled:
            PackingScheduler(prefix + args.packing.name, PackingSchedulerArgs(
                packing=args.packing, namespace=system.name, pools=args.pools, cluster_name=args.site,
                depends_on=[system.namespace], isolated=args.system_policy is not None), opts)
        if args.kns.enabled:
            KnsScheduler(prefix + "kns-scheduler", KnsSchedulerArgs(
                kns=args.kns, namespace=system.name, pools=args.pools, cluster_name=args.site,
                keycloak_client_secret=args.keycloak_client_secret, depends_on=[system.namespace],
                isolated=args.system_policy is not None), opts)
    if args.kueue_objects is None:
        return None
    return KueueInstall(prefix + kueue_install.COMPONENT, KueueInstallArgs(objects=args.kueue_objects, prefix=prefix),
                        opts)


def register_queues(args: ClusterPlatform, kueue: Optional[KueueInstall], after: Sequence[pulumi.Resource],
                    opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """Register one cluster's queues after its Kueue and `after` (on the manager of a site,
    the MultiKueue objects: a ClusterQueue is deleted before the AdmissionCheck it names,
    which Kueue keeps while one does). What a queued entry's LocalQueue waits for."""
    dependencies: list[pulumi.Resource] = [*([kueue] if kueue is not None else []), *after]
    if args.cluster_queues or args.priority_classes:
        dependencies.append(Queues(args.prefix + queues.COMPONENT, QueuesArgs(
            flavors=args.flavors, cluster_queues=args.cluster_queues, depends_on=list(dependencies),
            topologies=args.topologies, priority_classes=args.priority_classes, prefix=args.prefix), opts))
    return dependencies
