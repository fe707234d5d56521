"""KnsScheduler: the JARVICE KNS downstream scheduler (docs/schedulers.md).

The KNS needs cluster-admin, which is why this program targets a dedicated cluster; its
ClusterRoleBinding is the only cluster-admin binding the program ever makes. The Keycloak
client secret lives in a Kubernetes Secret and reaches the pod only by `secretKeyRef`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import names
from config.models import KnsScheduler as KnsSchedulerModel, NodePool
from plan import schedulers as specs
from plan.identity import KNS_SCHEDULER_TYPE as TYPE


@dataclass
class KnsSchedulerArgs:
    kns: KnsSchedulerModel
    namespace: str
    pools: list[NodePool]
    cluster_name: str
    keycloak_client_secret: Optional[str]
    depends_on: list[pulumi.Resource]
    # Its namespace has a NetworkPolicy (kns:network, plan/network.py).
    isolated: bool = False


class KnsScheduler(pulumi.ComponentResource):
    def __init__(self, name: str, args: KnsSchedulerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        kns, ns = args.kns, args.namespace
        account = specs.KNS_ACCOUNT
        selector = {"app.kubernetes.io/name": account}
        labels = {**selector, "app.kubernetes.io/component": "scheduler", names.LABEL_CLUSTER: args.cluster_name,
                  **names.MANAGED_BY}
        inside = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)

        def meta(object_name: str, namespace: Optional[str] = ns, annotations: Optional[dict] = None) -> dict:
            out: dict = {"name": object_name, "labels": dict(labels)}
            if namespace:
                out["namespace"] = namespace
            if annotations:
                out["annotations"] = annotations
            return out

        self.service_account = k8s.core.v1.ServiceAccount(name, metadata=meta(account), opts=inside)
        self.cluster_admin = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-cluster-admin",
            metadata=meta(f"{account}-cluster-admin", None),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            subjects=[{"kind": "ServiceAccount", "name": account, "namespace": ns}],
            opts=pulumi.ResourceOptions(parent=self),
        )
        waits: list[pulumi.Resource] = [self.service_account, self.cluster_admin]
        self.secret = None
        has_secret = args.keycloak_client_secret is not None
        if has_secret:
            self.secret = k8s.core.v1.Secret(
                f"{name}-keycloak",
                metadata=meta(specs.KNS_SECRET),
                type="Opaque",
                string_data={specs.KNS_SECRET_KEY: pulumi.Output.secret(args.keycloak_client_secret)},
                opts=inside,
            )
            waits.append(self.secret)
        self.deployment = k8s.apps.v1.Deployment(
            name,
            metadata=meta(account, annotations=specs.kns_annotations(kns, args.isolated)),
            spec={
                "replicas": kns.replicas,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": specs.kns_pod_spec(kns, args.pools, has_secret, selector),
                },
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits),
        )
        self.service = k8s.core.v1.Service(
            name,
            metadata=meta(account),
            spec={"selector": selector, "ports": [{"name": "http", "port": kns.port, "targetPort": "http"}]},
            opts=inside,
        )
        self.disruption_budget = None
        if kns.replicas > 1:
            self.disruption_budget = k8s.policy.v1.PodDisruptionBudget(
                name, metadata=meta(account),
                spec={"minAvailable": 1, "selector": {"matchLabels": selector}}, opts=inside,
            )
        self.ingress = None
        if kns.ingress:
            rule = {"host": kns.jobs_domain, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": account, "port": {"name": "http"}}},
            }]}}
            spec: dict = {"rules": [rule]}
            if kns.ingress_class:
                spec["ingressClassName"] = kns.ingress_class
            # An Ingress is ready only once a controller publishes an address; do not block on it.
            self.ingress = k8s.networking.v1.Ingress(
                name, metadata=meta(account, annotations={"pulumi.com/skipAwait": "true"}), spec=spec,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.service]),
            )
        self.register_outputs({"serviceName": account, "namespace": ns})
