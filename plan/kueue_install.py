"""Kueue as the program installs it (`kns:queueing.install: true`, docs/queueing.md): the
upstream install manifests of the pinned version, vendored in vendor/kueue/ with the
command that made them, held to the platform's rules for its own system namespaces.

What changes from upstream, and nothing else: every object carries the cluster label
(the stack owns it); namespace `kueue-system` enforces Pod Security `restricted`, as the
platform's system namespace does; the controller's pods tolerate and prefer the `system`
pools, as the schedulers' do; its container runs as a numeric non-root user with the
RuntimeDefault seccomp profile (upstream already drops every capability, forbids
privilege escalation and mounts the root read-only). The controller image stays
upstream's, pinned by version.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from config import names
from config.models import PLATFORM_UID, NodePool

from .schedulers import system_placement

# The Kueue version the vendored manifests are of; versions.env pins the same one for the
# manager the tests build (tests/test_versions.py holds them together).
KUEUE_VERSION = "0.19.2"
IMAGE = f"registry.k8s.io/kueue/kueue:v{KUEUE_VERSION}"
POD_SECURITY = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}


def manifest_path(project_dir: Path) -> Path:
    return project_dir / "vendor" / "kueue" / f"v{KUEUE_VERSION}" / "manifests.yaml"


def load(project_dir: Path) -> list[dict[str, Any]]:
    """The vendored upstream objects, in file order."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(manifest_path(project_dir), encoding="utf-8") as handle:
        return [doc for doc in yaml.load_all(handle, Loader=loader) if doc]


def install_objects(upstream: list[dict[str, Any]], cluster: str, pools: list[NodePool]) -> list[dict[str, Any]]:
    """The upstream objects with the platform's rules applied (see the module docstring)."""
    out = []
    for document in upstream:
        obj = copy.deepcopy(document)
        metadata = obj.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), names.LABEL_CLUSTER: cluster}
        if obj["kind"] == "Namespace":
            metadata["labels"].update(POD_SECURITY)
        if obj["kind"] == "Deployment":
            _harden(obj["spec"]["template"]["spec"], pools)
        out.append(obj)
    return out


def _harden(pod: dict[str, Any], pools: list[NodePool]) -> None:
    pod.update(system_placement(pools))
    pod.setdefault("securityContext", {}).update(
        {"runAsNonRoot": True, "runAsUser": PLATFORM_UID, "runAsGroup": PLATFORM_UID,
         "seccompProfile": {"type": "RuntimeDefault"}})
    for container in pod.get("containers", []):
        container.setdefault("securityContext", {}).update({
            "runAsNonRoot": True, "runAsUser": PLATFORM_UID, "runAsGroup": PLATFORM_UID,
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        })
