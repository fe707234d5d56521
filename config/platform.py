"""`PlatformConfig`: the stack's config as read and checked, the one value every layer
above config/ reads (the planner, the components, the offline `kns` commands).

Apart from the loader (config/loader.py), which makes it, so that reading the config's
shape does not mean importing how it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from chrono.prescale import Primers
from .budgets import Budget
from .models import (Cluster, Job, KnsScheduler, Network, NodePool, PackingScheduler, Priority, Profile, Queue,
                     Queueing, Schedule, StateLayout, Worker, Workload)
from .reservations import Reservation


@dataclass
class PlatformConfig:
    """Validated stack config; components receive parts of it, never raw dicts."""

    cluster: Cluster
    node_pools: list[NodePool]
    packing_scheduler: PackingScheduler
    kns_scheduler: KnsScheduler
    profiles: list[tuple[str, Profile]]
    jobs: list[Job]
    schedules: list[Schedule]
    keycloak_client_secret: Optional[str] = None
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    stack: str = "dev"
    primers: dict[str, Primers] = field(default_factory=dict)
    queueing: Queueing = field(default_factory=Queueing)
    queues: list[Queue] = field(default_factory=list)
    # Entry name -> the profile rule that gave the entry its queue (the entry names none).
    queue_rules: dict[str, str] = field(default_factory=dict)
    priorities: list[Priority] = field(default_factory=list)
    # Entry name -> where its priority came from (the entry, a profile rule, a default).
    priority_sources: dict[str, str] = field(default_factory=dict)
    # The text of the policy pack's config file (KNS_POLICY_CONFIG), None without one.
    policy_config: Optional[str] = None
    # A MultiKueue site (docs/multicluster.md): the worker clusters; `node_pools` then holds
    # every pool of the site, and `pool_worker` names the worker of each worker's pool.
    workers: list[Worker] = field(default_factory=list)
    pool_worker: dict[str, str] = field(default_factory=dict)
    # Worker name -> the URL the manager's Kueue dials (its apiServer, or its context's server).
    worker_servers: dict[str, str] = field(default_factory=dict)
    # `kns:state` (docs/entry-stacks.md): None, one stack holds everything.
    state: Optional[StateLayout] = None
    # `kns:reservations` (docs/reservations.md).
    reservations: list[Reservation] = field(default_factory=list)
    # `kns:budgets` (docs/budgets.md).
    budgets: list[Budget] = field(default_factory=list)
    # `kns:network` (docs/network.md).
    network: Network = field(default_factory=Network)
    # What is allowed but likely not meant (a one-off window already over); shown by
    # `./kns validate`, `./kns explain` and the program.
    warnings: list[str] = field(default_factory=list)

    @property
    def workloads(self) -> list[Workload]:
        return [*self.jobs, *self.schedules]

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.node_pools if p.name == name)

    def reservation(self, name: Optional[str]) -> Optional[Reservation]:
        """The reservation named `name` (an entry's `reservation`), if there is one."""
        return next((r for r in self.reservations if r.name == name), None)

    def pools_of(self, worker: Optional[str]) -> list[NodePool]:
        """The pools of one cluster of the site: a worker's, or the manager's (None)."""
        return [p for p in self.node_pools if self.pool_worker.get(p.name) == worker]
