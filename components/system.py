"""SystemNamespace: where the platform's own services (the schedulers) run, and what it
admits (docs/network.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi

from plan.platform import system_children
from plan.identity import SYSTEM_NAMESPACE_TYPE as TYPE

from .children import register_children


@dataclass(kw_only=True)
class SystemNamespaceArgs:
    name: str
    cluster_name: str
    # Its NetworkPolicy (plan/network.py), None with kns:network.isolation: none.
    policy: Optional[dict] = None


class SystemNamespace(pulumi.ComponentResource):
    def __init__(self, name: str, args: SystemNamespaceArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        self.name = args.name
        self.children = register_children(self, system_children(name, args.name, args.cluster_name, args.policy))
        self.namespace = self.children[f"Namespace/{name}"]
        self.register_outputs({"namespace": self.name})
