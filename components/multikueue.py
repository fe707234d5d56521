"""MultiKueue: the manager's side of a site (docs/multicluster.md). Per worker, the Secret
holding the kubeconfig its KnsWorker built (a Pulumi secret) and a MultiKueueCluster
naming it; per queue, a MultiKueueConfig of the workers that serve it and the
AdmissionCheck its ClusterQueue carries. The objects are plan/multikueue.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from plan import multikueue

TYPE = "kns:queueing:MultiKueue"


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


def _custom(manifest: dict[str, Any], name: str, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(name, api_version=manifest["apiVersion"], kind=manifest["kind"],
                                            metadata=manifest["metadata"], spec=manifest["spec"], opts=opts)


class MultiKueue(pulumi.ComponentResource):
    def __init__(self, name: str, args: MultiKueueArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        after_install = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        self.secrets = []
        self.clusters = []
        for worker in args.workers:
            secret = k8s.core.v1.Secret(
                f"{worker.name}-kubeconfig", metadata=worker.secret_metadata, type="Opaque",
                string_data=pulumi.Output.secret(worker.kubeconfig.apply(lambda text: {multikueue.SECRET_KEY: text})),
                opts=after_install)
            self.secrets.append(secret)
            self.clusters.append(_custom(worker.cluster, f"multikueuecluster-{worker.name}", pulumi.ResourceOptions(
                parent=self, depends_on=[*args.depends_on, secret])))
        self.configs = [_custom(m, f"multikueueconfig-{m['metadata']['name']}", pulumi.ResourceOptions(
            parent=self, depends_on=[*args.depends_on, *self.clusters])) for m in args.configs]
        self.checks = [_custom(m, f"admissioncheck-{m['metadata']['name']}", pulumi.ResourceOptions(
            parent=self, depends_on=[*args.depends_on, *self.configs])) for m in args.checks]
        self.register_outputs({
            "workers": [w.name for w in args.workers],
            "admissionChecks": [m["metadata"]["name"] for m in args.checks],
        })
