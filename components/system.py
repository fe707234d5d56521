"""SystemNamespace: where the platform's own services (the schedulers) run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import names

TYPE = "kns:cluster:SystemNamespace"


@dataclass
class SystemNamespaceArgs:
    name: str
    cluster_name: str


class SystemNamespace(pulumi.ComponentResource):
    def __init__(self, name: str, args: SystemNamespaceArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        self.name = args.name
        labels = {names.LABEL_CLUSTER: args.cluster_name, **names.MANAGED_BY}
        labels.update({f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "audit", "warn")})
        self.namespace = k8s.core.v1.Namespace(
            name, metadata={"name": args.name, "labels": labels}, opts=pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({"namespace": self.name})
