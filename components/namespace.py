"""JobNamespace: the per-entry namespace and the guard rails around it, as
plan/manifests.py `namespace_children` plans them (docs/namespaces.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi

from plan.manifests import namespace_children
from plan.model import Child, WorkloadPlan
from plan.identity import JOB_NAMESPACE_TYPE as TYPE

from .children import register_children


@dataclass(kw_only=True)
class JobNamespaceArgs:
    plan: WorkloadPlan


class JobNamespace(pulumi.ComponentResource):
    namespace_name: str

    def __init__(self, name: str, args: JobNamespaceArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        self.namespace_name = args.plan.namespace
        self.children = register_children(self, namespace_children(args.plan, name), inputs=_secret_content)
        self.namespace = self.children[f"Namespace/{name}"]
        self.register_outputs({"namespace": self.namespace_name})

    @property
    def guards(self) -> list[pulumi.Resource]:
        """What a workload must wait for: admission defaults, quota, its Secrets and its
        isolation in place."""
        return [r for kind in ("Namespace", "LimitRange", "ResourceQuota", "Secret", "NetworkPolicy")
                for key, r in self.children.items() if key.startswith(kind + "/")]


def _secret_content(child: Child) -> dict:
    """A credential set's files reach the engine only as a Pulumi secret."""
    manifest = child.manifest
    if manifest["kind"] != "Secret":
        return manifest
    return {**manifest, "stringData": pulumi.Output.secret(manifest["stringData"])}
