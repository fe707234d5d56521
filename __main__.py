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

from components.cluster import KnsCluster, KnsClusterArgs, cluster_provider, own_declared_fields
from components.multikueue import MultiKueue, MultiKueueArgs, WorkerConnection
from components.output_drain import linear_output_drain
from components.platform import register_platform, register_queues
from components.budget import Budget, BudgetArgs
from components.reservation import Reservation, ReservationArgs, ReservedPool
from components.sdk_messages import debug_messages_on_request
from components.source_positions import innermost_frame_only
from components.worker import KnsWorker, KnsWorkerArgs
from components.workload import KnsWorkload, KnsWorkloadArgs, RemoteSide
from chrono import clock
from config import fingerprint, kubeconfig, source
from config.errors import ConfigError
from config.loader import check_stack_config
from plan import digests, identity, multikueue, stacks
from plan.outputs import ENTRY_OUTPUTS, stack_outputs
from plan.planner import plan_checked, plan_own
from plan.platform import plan_platform
from plan.targeting import plans_to_register

PROJECT_DIR = Path(__file__).resolve().parent


def engine_config() -> tuple[dict[str, Any], set[str]]:
    """Every config value the engine delivered (full keys, as text) and the secret keys."""
    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    secret = {k for k in keys if runtime_config.is_config_secret(k)} | set(runtime_config.get_config_secret_keys_env())
    return {key: runtime_config.get_config(key) for key in keys}, secret


# The stack, or one of its entry stacks (docs/entry-stacks.md): the config is the stack's
# (`./kns` and `make` run an entry stack with --config-file Pulumi.<stack>.yaml).
this = stacks.role(pulumi.get_stack())
raw, secret_keys = source.kns_config(*engine_config())
# The one instant this run computes at (chrono/clock.py).
now = clock.now()
try:
    stack_file = source.read_stack_file(PROJECT_DIR, this.base)
    checked = check_stack_config(raw, stack_file, project_dir=PROJECT_DIR,
                                 stack=this.base, secret_keys=secret_keys, now=now)
    entry_stacks = stacks.check_role(this, checked)
    program = fingerprint.program_digest(PROJECT_DIR)
    checked_now = digests.checked_digest(stack_file.config or {}, checked.config.workloads, program)
    if this.index is not None and os.environ.get(digests.CHECKED_ENV) == checked_now:
        # The platform stack's run checked this config whole: plan only what this stack holds.
        stack_plan = plan_own(checked, lambda name: stacks.holds(this, name, entry_stacks), now)
    else:
        stack_plan = plan_checked(checked, now)
    plans = stack_plan.entries
    held = [plan for plan in plans if stacks.holds(this, plan.entry.name, entry_stacks)]
    # Every entry this stack holds, except in a run by `./kns preview` or `./kns up`, which
    # names those to register (plan/targeting.py).
    registered = plans_to_register(held, os.environ)
except ConfigError as exc:
    raise pulumi.RunError(str(exc)) from None
cfg = checked.config
for warning in cfg.warnings:
    pulumi.log.warn(warning)
# The state keeps no call stacks, only where each resource was made (components/source_positions.py).
innermost_frame_only()
# The program's end waits for its outputs in linear time (components/output_drain.py).
linear_output_drain()
# The SDK's per-resource debug messages stay in the program (components/sdk_messages.py).
debug_messages_on_request()
manager_cluster = multikueue.site_cluster(cfg)
if this.index is None:
    cluster = KnsCluster(cfg.cluster.name, KnsClusterArgs(cluster=manager_cluster, project_dir=PROJECT_DIR))
    provider = cluster.provider
else:
    # An entry stack holds its entries and the providers they use; the platform they run
    # on is the platform stack's, applied before it.
    provider = cluster_provider(cfg.cluster.name, manager_cluster, PROJECT_DIR)
# Every object on the cluster: through its provider, and owning the fields it declares.
on_cluster = pulumi.ResourceOptions(providers=[provider], transformations=[own_declared_fields])

worker_sides: dict[str, tuple[pulumi.ProviderResource, list[pulumi.Resource]]] = {}
if this.index is None:
    platform = plan_platform(cfg, PROJECT_DIR)
    kueue = register_platform(platform.manager, on_cluster)

    # A MultiKueue site (docs/multicluster.md): each worker with its own provider and platform,
    # then the manager's connection to them.
    workers: dict[str, KnsWorker] = {}
    for name, side in platform.workers.items():
        workers[name] = KnsWorker(name, KnsWorkerArgs(
            worker=side.worker, cluster=side.cluster, server=side.server, platform=side.platform, access=side.access,
            project_dir=PROJECT_DIR))
        worker_sides[name] = (workers[name].provider, workers[name].queue_dependencies)
    connection: list[pulumi.Resource] = []
    if platform.workers:
        connection.append(MultiKueue(multikueue.COMPONENT, MultiKueueArgs(
            workers=[WorkerConnection(name, side.secret_metadata, workers[name].kubeconfig, side.multikueue_cluster)
                     for name, side in platform.workers.items()],
            configs=platform.configs, checks=platform.checks, depends_on=[kueue] if kueue else []), on_cluster))
    queue_dependencies = register_queues(platform.manager, kueue, connection, on_cluster)
    # A pool's reserved capacity from now on (plan/reservations.py pool_cohorts).
    pools_set_aside = [ReservedPool(cohort["metadata"]["name"], cohort, queue_dependencies, on_cluster)
                       for cohort in stack_plan.cohorts]
    for planned in stack_plan.reservations:
        Reservation(identity.reservation_component_name(planned.name),
                    ReservationArgs(objects=planned.objects, depends_on=[*queue_dependencies, *pools_set_aside]),
                    on_cluster)
    for planned_budget in stack_plan.budgets:
        Budget(identity.budget_component_name(planned_budget.name),
               BudgetArgs(objects=planned_budget.objects, depends_on=queue_dependencies), on_cluster)
else:
    for worker in cfg.workers:
        worker_sides[worker.name] = (cluster_provider(worker.name, multikueue.site_cluster(cfg, worker.name),
                                                      PROJECT_DIR), [])
    queue_dependencies = []

for plan in registered:
    name = plan.entry.name
    KnsWorkload(name, KnsWorkloadArgs(
        plan=plan, local_queue=stack_plan.local_queues[name], queue_dependencies=queue_dependencies,
        remote=[RemoteSide(worker, *worker_sides[worker]) for worker in stack_plan.workers[name]],
        reservation_objects=stack_plan.reserved_objects[name]), on_cluster)

outputs = stack_outputs(cfg, held, now)
# The kubeconfig files this stack's providers read: in its digests (plan/digests.py).
reads = kubeconfig.read_digests(cfg.cluster, cfg.workers, PROJECT_DIR, os.environ)
if this.index is None:
    for key, value in outputs.items():
        pulumi.export(key, value)
    # What `./kns up ENTRY...` compares before a targeted apply (config/fingerprint.py).
    pulumi.export(fingerprint.OUTPUT, fingerprint.platform_digest(stack_file.config or {}, PROJECT_DIR, program))
    if entry_stacks is not None:
        # What the run of the entry stacks reads back (plan/digests.py).
        pulumi.export(digests.CHECKED_OUTPUT, checked_now)
        settings = os.environ.get(digests.SETTINGS_ENV, "")
        pulumi.export(digests.DIGESTS_OUTPUT, digests.entry_stack_digests(
            plans, this.base, entry_stacks, stack_file.config or {}, program, settings, reads))
        # What the next full run compares before it starts this stack's engine (plan/digests.py).
        pulumi.export(digests.PLATFORM_OUTPUT, digests.platform_stack_digest(
            stack_file.config or {}, program, stack_plan.reservations, stack_plan.cohorts, settings, reads))
else:
    for key in ENTRY_OUTPUTS:
        pulumi.export(key, outputs[key])
    if len(registered) == len(held):  # a targeted run (./kns up ENTRY...) registers fewer
        pulumi.export(digests.ENTRY_STACK_OUTPUT, digests.entry_stack_digest(
            held, stack_file.config or {}, program, os.environ.get(digests.SETTINGS_ENV, ""), reads))
