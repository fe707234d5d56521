"""JobNamespace: the per-entry namespace and the guard rails around it.

Namespace (owner labels, Pod Security level), LimitRange `kns-defaults`, ResourceQuota
`kns-quota`, NetworkPolicy `kns-isolation` (docs/network.md), and a least-privilege
runner: ServiceAccount `kns-runner` with a Role that has no wildcard verbs and no access
to secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from plan.identity import JOB_NAMESPACE_TYPE as TYPE
from plan.manifests import namespace_labels
from plan.model import WorkloadPlan, credential_secret_name

from .register import Planned

LIMIT_RANGE = "kns-defaults"
QUOTA = "kns-quota"
RUNNER = "kns-runner"


@dataclass
class JobNamespaceArgs:
    plan: WorkloadPlan


class JobNamespace(pulumi.ComponentResource):
    namespace_name: str

    def __init__(self, name: str, args: JobNamespaceArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        plan = args.plan
        child = pulumi.ResourceOptions(parent=self)
        self.namespace_name = plan.namespace
        self.namespace = k8s.core.v1.Namespace(
            name, metadata={"name": plan.namespace, "labels": namespace_labels(plan)}, opts=child
        )
        inside = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])

        def meta(object_name: str) -> dict:
            return {"name": object_name, "namespace": plan.namespace, "labels": dict(plan.labels)}

        self.limit_range = k8s.core.v1.LimitRange(
            f"{name}-defaults", metadata=meta(LIMIT_RANGE), spec={"limits": [plan.limit_range]}, opts=inside
        )
        self.quota = k8s.core.v1.ResourceQuota(
            f"{name}-quota", metadata=meta(QUOTA), spec={"hard": plan.quota}, opts=inside
        )
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-runner", metadata=meta(RUNNER), automount_service_account_token=False, opts=inside
        )
        # Its tenancy on the network (plan/network.py): registered before anything runs in it.
        self.network_policy = Planned(f"{name}-isolation", plan.network_policy, inside) \
            if plan.network_policy is not None else None
        self.role = k8s.rbac.v1.Role(f"{name}-runner", metadata=meta(RUNNER), rules=plan.role_rules, opts=inside)
        self.role_binding = k8s.rbac.v1.RoleBinding(
            f"{name}-runner",
            metadata=meta(RUNNER),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RUNNER},
            subjects=[{"kind": "ServiceAccount", "name": RUNNER, "namespace": plan.namespace}],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.role, self.service_account]),
        )
        # One Secret per credential set; its content is sent only as a Pulumi secret.
        self.credential_secrets = [
            k8s.core.v1.Secret(
                f"{name}-cred-{set_name}",
                metadata=meta(credential_secret_name(set_name)),
                type="Opaque",
                string_data=pulumi.Output.secret(dict(files)),
                opts=inside,
            )
            for set_name, files in plan.credentials.items()
        ]
        self.register_outputs({"namespace": self.namespace_name})

    @property
    def guards(self) -> list[pulumi.Resource]:
        """What a workload must wait for: admission defaults, quota, its Secrets and its
        isolation in place."""
        return [self.namespace, self.limit_range, self.quota, *self.credential_secrets,
                *([self.network_policy] if self.network_policy is not None else [])]
