"""kns-platform: the composition root. Validate everything, then build.

Config is read and checked once, and every entry is planned, before the first resource
is registered: bad input stops the run with one message and nothing is applied.
"""

from pathlib import Path

import pulumi

from components.cluster import KnsCluster, KnsClusterArgs
from components.kns_scheduler import KnsScheduler, KnsSchedulerArgs
from components.manifests import prepare
from components.nodepool import NodePool, NodePoolArgs
from components.outputs import stack_outputs
from components.packing_scheduler import PackingScheduler, PackingSchedulerArgs
from components.system import SystemNamespace, SystemNamespaceArgs
from components.workload import KnsWorkload, KnsWorkloadArgs

PROJECT_DIR = Path(__file__).resolve().parent

cfg, plans = prepare(PROJECT_DIR)

cluster = KnsCluster(cfg.cluster.name, KnsClusterArgs(cfg.cluster, PROJECT_DIR))
on_cluster = pulumi.ResourceOptions(providers=[cluster.provider])

for pool in cfg.node_pools:
    NodePool(pool.name, NodePoolArgs(pool, cfg.cluster.name), on_cluster)

if cfg.packing_scheduler.enabled or cfg.kns_scheduler.enabled:
    system = SystemNamespace(
        cfg.cluster.system_namespace, SystemNamespaceArgs(cfg.cluster.system_namespace, cfg.cluster.name), on_cluster
    )
    if cfg.packing_scheduler.enabled:
        PackingScheduler(
            cfg.packing_scheduler.name,
            PackingSchedulerArgs(cfg.packing_scheduler, system.name, cfg.node_pools, cfg.cluster.name, [system.namespace]),
            on_cluster,
        )
    if cfg.kns_scheduler.enabled:
        KnsScheduler(
            "kns-scheduler",
            KnsSchedulerArgs(cfg.kns_scheduler, system.name, cfg.node_pools, cfg.cluster.name,
                             cfg.keycloak_client_secret, [system.namespace]),
            on_cluster,
        )

for plan in plans:
    KnsWorkload(plan.entry.name, KnsWorkloadArgs(plan), on_cluster)

for key, value in stack_outputs(cfg, plans).items():
    pulumi.export(key, value)
