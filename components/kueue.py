"""KueueInstall: Kueue's CRDs and controller, installed by the program
(`kns:queueing.install: true`, docs/queueing.md).

The objects are upstream's install manifests of the pinned version, vendored in the
repository, as plan/kueue_install.py adapts them to the platform's system-namespace rules;
nothing is downloaded when the program runs. Each is registered as its typed resource,
named by plan/kueue_install.py's `resource_name` (which plan/inventory.py reads too).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional

import pulumi

from plan.kueue_install import resource_name

TYPE = "kns:queueing:Kueue"
# API group -> pulumi_kubernetes module, for the kinds upstream's install holds (and the
# NetworkPolicy of its namespace, plan/network.py).
MODULES = {
    "": "core", "apps": "apps", "rbac.authorization.k8s.io": "rbac", "apiextensions.k8s.io": "apiextensions",
    "admissionregistration.k8s.io": "admissionregistration", "apiregistration.k8s.io": "apiregistration",
    "networking.k8s.io": "networking",
}
# Top-level keys of those kinds, as the resource classes take them.
ARGUMENTS = {"roleRef": "role_ref", "aggregationRule": "aggregation_rule", "stringData": "string_data",
             "automountServiceAccountToken": "automount_service_account_token"}


@dataclass(kw_only=True)
class KueueInstallArgs:
    objects: list[dict[str, Any]]
    # Before each child's logical name: a worker's install (`<worker>-`) is apart from the
    # other workers' (components/worker.py).
    prefix: str = ""


def resource_class(api_version: str, kind: str) -> type[pulumi.CustomResource]:
    group, _, version = api_version.rpartition("/")
    return getattr(importlib.import_module(f"pulumi_kubernetes.{MODULES[group]}.{version}"), kind)


class KueueInstall(pulumi.ComponentResource):
    def __init__(self, name: str, args: KueueInstallArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.resources = []
        kinds: dict[str, int] = {}
        for obj in args.objects:
            fields = {ARGUMENTS.get(k, k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            cls = resource_class(obj["apiVersion"], obj["kind"])
            self.resources.append(cls(args.prefix + resource_name(obj), opts=child, **fields))
            kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
        self.register_outputs({"version": _version(args.objects), "objects": kinds})


def _version(objects: list[dict[str, Any]]) -> Optional[str]:
    """The controller image's tag: the Kueue version installed."""
    for obj in objects:
        if obj["kind"] == "Deployment":
            return obj["spec"]["template"]["spec"]["containers"][0]["image"].rpartition(":")[2]
    return None
