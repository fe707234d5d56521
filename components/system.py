"""SystemNamespace: where the platform's own services (the schedulers) run, and what it
admits (docs/network.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import names
from plan.identity import SYSTEM_NAMESPACE_TYPE as TYPE

from .register import Planned


@dataclass
class SystemNamespaceArgs:
    name: str
    cluster_name: str
    # Its NetworkPolicy (plan/network.py), None with kns:network.isolation: none.
    policy: Optional[dict] = None


class SystemNamespace(pulumi.ComponentResource):
    def __init__(self, name: str, args: SystemNamespaceArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        self.name = args.name
        labels = {names.LABEL_CLUSTER: args.cluster_name, **names.MANAGED_BY}
        labels.update({f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "audit", "warn")})
        self.namespace = k8s.core.v1.Namespace(
            name, metadata={"name": args.name, "labels": labels}, opts=pulumi.ResourceOptions(parent=self)
        )
        self.policy = Planned(f"{name}-isolation", args.policy, pulumi.ResourceOptions(
            parent=self, depends_on=[self.namespace])) if args.policy is not None else None
        self.register_outputs({"namespace": self.name})
