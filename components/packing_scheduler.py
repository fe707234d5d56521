"""PackingScheduler: a second kube-scheduler that packs pods onto the fewest nodes.

The default scheduler spreads small pods over every node, so large multi-core and GPU pods
find no room (docs/schedulers.md). Workloads use this scheduler unless they name another one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import names
from config.models import NodePool, PackingScheduler as PackingSchedulerModel
from plan import schedulers as specs
from plan.identity import PACKING_SCHEDULER_TYPE as TYPE


@dataclass
class PackingSchedulerArgs:
    packing: PackingSchedulerModel
    namespace: str
    pools: list[NodePool]
    cluster_name: str
    depends_on: list[pulumi.Resource]
    # Its namespace has a NetworkPolicy (kns:network, plan/network.py).
    isolated: bool = False


class PackingScheduler(pulumi.ComponentResource):
    scheduler_name: str

    def __init__(self, name: str, args: PackingSchedulerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        packing, ns = args.packing, args.namespace
        self.scheduler_name = packing.name
        labels = {"app.kubernetes.io/name": packing.name, "app.kubernetes.io/component": "scheduler",
                  names.LABEL_CLUSTER: args.cluster_name, **names.MANAGED_BY}
        selector = {"app.kubernetes.io/name": packing.name}
        inside = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)

        def meta(object_name: str, namespace: Optional[str] = ns) -> dict:
            out = {"name": object_name, "labels": dict(labels)}
            if namespace:
                out["namespace"] = namespace
            return out

        self.service_account = k8s.core.v1.ServiceAccount(f"{name}", metadata=meta(packing.name), opts=inside)
        subject = [{"kind": "ServiceAccount", "name": packing.name, "namespace": ns}]
        self.cluster_role_bindings = [
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-{role.split(':')[1]}",
                metadata=meta(f"{packing.name}-{role.split(':')[1]}", None),
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                subjects=subject,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role in ("system:kube-scheduler", "system:volume-scheduler")
        ]
        # system:kube-scheduler only covers the Lease named kube-scheduler.
        self.lease_role = k8s.rbac.v1.Role(
            f"{name}-lease",
            metadata=meta(f"{packing.name}-lease"),
            rules=[
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "resourceNames": [packing.name], "verbs": ["get", "update"]},
            ],
            opts=inside,
        )
        self.lease_binding = k8s.rbac.v1.RoleBinding(
            f"{name}-lease",
            metadata=meta(f"{packing.name}-lease"),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{packing.name}-lease"},
            subjects=subject,
            opts=inside,
        )
        self.auth_reader = k8s.rbac.v1.RoleBinding(
            f"{name}-auth-reader",
            metadata=meta(f"{packing.name}-auth-reader", "kube-system"),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                      "name": "extension-apiserver-authentication-reader"},
            subjects=subject,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata=meta(f"{packing.name}-config"),
            data={specs.CONFIG_FILE: specs.scheduler_configuration_yaml(packing, ns)},
            opts=inside,
        )
        self.deployment = k8s.apps.v1.Deployment(
            name,
            metadata={**meta(packing.name), "annotations": specs.packing_annotations(packing, args.isolated)},
            spec={
                "replicas": packing.replicas,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": specs.packing_pod_spec(packing, ns, args.pools, f"{packing.name}-config"),
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.config_map, self.service_account, *self.cluster_role_bindings,
                            self.lease_binding, self.auth_reader],
            ),
        )
        self.disruption_budget = None
        if packing.replicas > 1:
            self.disruption_budget = k8s.policy.v1.PodDisruptionBudget(
                name, metadata=meta(packing.name),
                spec={"minAvailable": 1, "selector": {"matchLabels": selector}}, opts=inside,
            )
        self.register_outputs({"schedulerName": self.scheduler_name})
