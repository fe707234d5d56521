"""MultiKueue: the manager's side of a site (docs/multicluster.md). Per worker, the Secret
holding the kubeconfig its KnsWorker built (a Pulumi secret) and a MultiKueueCluster
naming it; per queue, a MultiKueueConfig of the workers that serve it and the
AdmissionCheck its ClusterQueue carries. The objects are plan/multikueue.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi

from plan import multikueue
from plan.identity import MULTIKUEUE_TYPE as TYPE, kind_name

from .register import Planned


@dataclass
class WorkerConnection:
    name: str
    secret_metadata: dict[str, Any]
    kubeconfig: pulumi.Output[str]
    cluster: dict[str, Any]  # its MultiKueueCluster


@dataclass(kw_only=True)
class MultiKueueArgs:
    workers: list[WorkerConnection]
    configs: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    # Kueue's CRDs and controller, when the program installs them.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class MultiKueue(pulumi.ComponentResource):
    def __init__(self, name: str, args: MultiKueueArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        after_install = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        self.secrets = []
        self.clusters = []
        for worker in args.workers:
            secret = Planned(f"{worker.name}-kubeconfig", {
                "apiVersion": "v1", "kind": "Secret", "metadata": worker.secret_metadata, "type": "Opaque",
                "stringData": pulumi.Output.secret(worker.kubeconfig.apply(lambda text: {multikueue.SECRET_KEY: text}))},
                after_install)
            self.secrets.append(secret)
            self.clusters.append(Planned(kind_name(worker.cluster), worker.cluster, pulumi.ResourceOptions(
                parent=self, depends_on=[*args.depends_on, secret])))
        self.configs = [Planned(kind_name(m), m, pulumi.ResourceOptions(
            parent=self, depends_on=[*args.depends_on, *self.clusters])) for m in args.configs]
        self.checks = [Planned(kind_name(m), m, pulumi.ResourceOptions(
            parent=self, depends_on=[*args.depends_on, *self.configs])) for m in args.checks]
        self.register_outputs({
            "workers": [w.name for w in args.workers],
            "admissionChecks": [m["metadata"]["name"] for m in args.checks],
        })
