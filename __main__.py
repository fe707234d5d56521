"""kns-platform: the composition root. Read, check and plan everything, then build.

Config is read and checked once (config/), and every entry is planned (plan/), before the
first resource is registered (components/): bad input stops the run with one message
listing every problem, and nothing is applied. See docs/architecture.md.
"""

import os
import signal

# Ctrl-C (or a CI cancel) sends SIGINT to the whole process group: the engine cancels the
# update and stops this program itself, so a program run by a language host (which hands it
# its config in PULUMI_CONFIG) ignores it rather than dying with a KeyboardInterrupt
# traceback in the middle of the user's output (docs/operations.md, section 1). The minimal
# host starts it with SIGINT ignored already; this covers the upstream host too.
if "PULUMI_CONFIG" in os.environ:
    signal.signal(signal.SIGINT, signal.SIG_IGN)

from pathlib import Path  # noqa: E402
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from components.cluster import KnsCluster, KnsClusterArgs, own_declared_fields
from components.kns_scheduler import KnsScheduler, KnsSchedulerArgs
from components.kueue import KueueInstall, KueueInstallArgs
from components.nodepool import NodePool, NodePoolArgs
from components.packing_scheduler import PackingScheduler, PackingSchedulerArgs
from components.queues import Queues, QueuesArgs
from components.source_positions import innermost_frame_only
from components.system import SystemNamespace, SystemNamespaceArgs
from components.workload import KnsWorkload, KnsWorkloadArgs
from config import fingerprint, source
from config.errors import ConfigError
from config.loader import check_stack_config
from plan import kueue_install, queues
from plan.outputs import stack_outputs
from plan.planner import plan_checked
from plan.targeting import plans_to_register

PROJECT_DIR = Path(__file__).resolve().parent


def engine_config() -> tuple[dict[str, Any], set[str]]:
    """Every config value the engine delivered (full keys, as text) and the secret keys."""
    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    secret = {k for k in keys if runtime_config.is_config_secret(k)} | set(runtime_config.get_config_secret_keys_env())
    return {key: runtime_config.get_config(key) for key in keys}, secret


stack = pulumi.get_stack()
raw, secret_keys = source.kns_config(*engine_config())
try:
    stack_file = source.read_stack_file(PROJECT_DIR, stack)
    checked = check_stack_config(raw, stack_file, project_dir=PROJECT_DIR,
                                 stack=stack, secret_keys=secret_keys)
    plans = plan_checked(checked)
    # Every entry, except in a run by `./kns preview` or `./kns up`, which names those to register
    # (plan/targeting.py).
    registered = plans_to_register(plans, os.environ)
except ConfigError as exc:
    raise pulumi.RunError(str(exc)) from None
cfg = checked.config
# The state keeps no call stacks, only where each resource was made (components/source_positions.py).
innermost_frame_only()

cluster = KnsCluster(cfg.cluster.name, KnsClusterArgs(cfg.cluster, PROJECT_DIR))
# Every object on the cluster: through its provider, and owning the fields it declares.
on_cluster = pulumi.ResourceOptions(providers=[cluster.provider], transformations=[own_declared_fields])

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

queue_dependencies: list[pulumi.Resource] = []
if cfg.queueing.enabled:
    if cfg.queueing.install:
        objects = kueue_install.install_objects(kueue_install.load(PROJECT_DIR), cfg.cluster.name, cfg.node_pools,
                                                cfg.queueing.wait_for_pods_ready)
        queue_dependencies.append(KueueInstall(kueue_install.COMPONENT, KueueInstallArgs(objects), on_cluster))
    if cfg.queues or cfg.priorities:
        queued_pools = queues.queued_pools(cfg)
        queue_dependencies.append(Queues(queues.COMPONENT, QueuesArgs(
            [queues.flavor_manifest(p, cfg.cluster.name) for p in queued_pools],
            [queues.cluster_queue_manifest(q, cfg.cluster.name) for q in cfg.queues],
            list(queue_dependencies),
            [queues.topology_manifest(p, cfg.cluster.name) for p in queued_pools if p.topology is not None],
            [queues.priority_class_manifest(p, cfg.cluster.name) for p in cfg.priorities]),
            on_cluster))

for plan in registered:
    local_queue = queues.local_queue_manifest(plan) if plan.entry.queue is not None else None
    KnsWorkload(plan.entry.name, KnsWorkloadArgs(plan, local_queue, queue_dependencies), on_cluster)

for key, value in stack_outputs(cfg, plans).items():
    pulumi.export(key, value)
# What `./kns up ENTRY...` compares before a targeted apply (config/fingerprint.py).
pulumi.export(fingerprint.OUTPUT, fingerprint.platform_digest(stack_file.config or {}, PROJECT_DIR))
