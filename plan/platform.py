"""What every cluster of a site runs, planned once per run: its pools, its system
namespace's policy, the schedulers' settings, Kueue's install objects and its queues. The
manager's plan has the names a single cluster always had (no prefix); a worker's are
prefixed `<worker>-`, so that two workers' objects never meet (components/platform.py
registers either the same way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from config import names
from config.platform import PlatformConfig
from config.models import Cluster, KnsScheduler, NodePool, PackingScheduler, Worker

from . import devices, kueue_install, multikueue, network
from .model import Child, child_key


@dataclass(kw_only=True)
class ClusterPlatform:
    """One cluster's platform objects."""

    site: str  # kns:cluster.name: the label every object of the site carries
    system_namespace: str
    pools: list[NodePool]
    packing: PackingScheduler
    kns: KnsScheduler
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


@dataclass(kw_only=True)
class WorkerPlatform:
    """A worker of a MultiKueue site (docs/multicluster.md): what its provider reaches (its
    context or kubeconfig, or on a rendered site its own directory), the URL the manager's
    Kueue dials, the account the manager's Kueue uses there, its platform, and, on the
    manager, the Secret with its kubeconfig and its MultiKueueCluster."""

    worker: Worker
    cluster: Cluster
    server: str
    access: list[dict[str, Any]]
    platform: ClusterPlatform
    secret_metadata: dict[str, Any]
    multikueue_cluster: dict[str, Any]


@dataclass
class SitePlatform:
    manager: ClusterPlatform
    # Worker name -> its side, in kns:workers order (docs/multicluster.md).
    workers: dict[str, WorkerPlatform] = field(default_factory=dict)
    # On a site, per queue its MultiKueueConfig (the workers that serve it) and AdmissionCheck.
    configs: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)


def plan_platform(cfg: PlatformConfig, project_dir: Path) -> SitePlatform:
    """The manager's platform, each worker's, and the manager's connection to them. Kueue's
    upstream objects are read from the project's vendored release only when the program
    installs Kueue."""
    site = bool(cfg.workers)
    upstream = (kueue_install.load(project_dir) if cfg.queueing.enabled and cfg.queueing.install else None)
    # Every Kueue of the site counts each kind of GPU device the same way (docs/gpus.md).
    device_mappings = devices.mappings(cfg.node_pools)
    queue_objects = multikueue.queue_objects(cfg) if cfg.queueing.enabled else multikueue.QueueObjects()
    system_policy = network.system_policy(cfg.network, cfg.cluster.system_namespace, cfg.cluster.name,
                                          cfg.packing_scheduler, cfg.kns_scheduler)

    def cluster(pools: list[NodePool], objects: tuple[list, list, list, list], prefix: str,
                kueue_objects: Optional[list[dict[str, Any]]]) -> ClusterPlatform:
        flavors, cluster_queues, topologies, priority_classes = objects
        return ClusterPlatform(
            site=cfg.cluster.name, system_namespace=cfg.cluster.system_namespace, pools=pools,
            packing=cfg.packing_scheduler, kns=cfg.kns_scheduler, keycloak_client_secret=cfg.keycloak_client_secret,
            kueue_objects=kueue_objects, flavors=flavors, cluster_queues=cluster_queues, topologies=topologies,
            priority_classes=priority_classes, prefix=prefix, system_policy=system_policy)

    manager_kueue = None if upstream is None else kueue_install.install_objects(
        upstream, cfg.cluster.name, cfg.pools_of(None), cfg.queueing.wait_for_pods_ready, device_mappings,
        cfg.queueing.multi_kueue if site else None, cfg.queueing.fair_sharing, cfg.network)
    out = SitePlatform(cluster(cfg.pools_of(None), queue_objects.manager, "", manager_kueue))
    for worker in cfg.workers:
        worker_kueue = None if upstream is None else kueue_install.install_objects(
            upstream, cfg.cluster.name, worker.node_pools, cfg.queueing.wait_for_pods_ready, device_mappings,
            fair_sharing=cfg.queueing.fair_sharing, isolation=cfg.network)
        out.workers[worker.name] = WorkerPlatform(
            worker=worker, cluster=multikueue.site_cluster(cfg, worker.name), server=cfg.worker_servers[worker.name],
            access=multikueue.worker_access(cfg.cluster.name),
            platform=cluster(worker.node_pools, queue_objects.workers[worker.name], f"{worker.name}-", worker_kueue),
            secret_metadata=multikueue.kubeconfig_secret_metadata(worker.name, cfg.cluster.name),
            multikueue_cluster=multikueue.multikueue_cluster(worker.name, cfg.cluster.name))
    if site:
        out.configs, out.checks = multikueue.connection_objects(cfg)
    return out


def system_children(name: str, namespace: str, site: str, policy: Optional[dict[str, Any]]) -> list[Child]:
    """The schedulers' namespace, `name` its component's: Pod Security `restricted` in every
    mode, and its NetworkPolicy (plan/network.py) unless the network is the site's."""
    labels = {names.LABEL_CLUSTER: site, **names.MANAGED_BY}
    labels.update({f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")})
    out = [Child(name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}})]
    if policy is not None:
        out.append(Child(f"{name}-isolation", policy, after=(child_key("Namespace", name),)))
    return out
