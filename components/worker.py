"""KnsWorker: one worker cluster of a MultiKueue site (docs/multicluster.md).

Its own provider (KnsCluster, with the dedicated-cluster guard already checked in config),
what a single cluster runs (components/platform.py, names prefixed `<worker>-`), and the
manager's identity there: a ServiceAccount bound to MultiKueue's rules and its token
Secret. The kubeconfig the manager's Kueue uses is built from that Secret's data as a
Pulumi secret (`kubeconfig`), never plain text in the state.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from config.models import Cluster, Worker
from plan import multikueue
from plan.platform import ClusterPlatform
from plan.identity import WORKER_TYPE as TYPE

from .cluster import KnsCluster, KnsClusterArgs, own_declared_fields
from .platform import register_platform, register_queues
from .register import Planned


@dataclass(kw_only=True)
class KnsWorkerArgs:
    worker: Worker
    # What its provider reaches (plan/multikueue.py site_cluster): its context or
    # kubeconfig, or, on a rendered site, its own directory under renderDir.
    cluster: Cluster
    # The URL the manager's Kueue dials (config: apiServer, or the context's server).
    server: str
    platform: ClusterPlatform
    access: list[dict[str, Any]]
    project_dir: Path


class KnsWorker(pulumi.ComponentResource):
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    queue_dependencies: list[pulumi.Resource]

    def __init__(self, name: str, args: KnsWorkerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        worker = args.worker
        self.cluster = KnsCluster(name, KnsClusterArgs(cluster=args.cluster, project_dir=args.project_dir),
                                  pulumi.ResourceOptions(parent=self))
        self.provider = self.cluster.provider
        on_worker = pulumi.ResourceOptions(parent=self, providers=[self.provider],
                                           transformations=[own_declared_fields])
        kueue = register_platform(args.platform, on_worker)
        self.queue_dependencies = register_queues(args.platform, kueue, [], on_worker)
        # The identity lives in Kueue's namespace, which the install creates.
        after_kueue = pulumi.ResourceOptions.merge(on_worker, pulumi.ResourceOptions(
            depends_on=[kueue] if kueue is not None else []))
        made: dict[str, pulumi.CustomResource] = {}
        # Each waits for what it names: the binding for its role and account, the token for its account.
        needs = {"ClusterRoleBinding": ("ClusterRole", "ServiceAccount"), "Secret": ("ServiceAccount",)}
        for manifest in args.access:
            kind = manifest["kind"]
            depends = [made[other] for other in needs.get(kind, ())]
            made[kind] = Planned(f"{name}-{multikueue.ACCESS}", manifest,
                                  pulumi.ResourceOptions.merge(after_kueue, pulumi.ResourceOptions(depends_on=depends)))
        token_data: pulumi.Output = made["Secret"].data  # type: ignore[attr-defined]
        if args.cluster.render_dir:
            # Rendered, no token controller fills the Secret: the kubeconfig says where the
            # token goes (plan/multikueue.py RENDERED_TOKEN).
            self.kubeconfig = pulumi.Output.secret(
                multikueue.kubeconfig_text(worker.name, args.server, multikueue.RENDERED_TOKEN))
        else:
            # The provider returns a service-account-token Secret once the token controller
            # has filled it; its data is a secret output, and so is what is built from it.
            self.kubeconfig = pulumi.Output.secret(token_data.apply(
                lambda data: multikueue.kubeconfig_text(worker.name, args.server, data)))
        self.register_outputs({"server": args.server, "nodePools": [p.name for p in worker.node_pools]})
