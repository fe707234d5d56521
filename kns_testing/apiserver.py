"""What the API server would say about a rendered object, offline: the strict OpenAPI
schema of the pinned Kubernetes version (kubeconform's standalone-strict JSON schemas,
made by scripts/linters.sh from that version's own OpenAPI document) checked with the
`jsonschema` library, plus the API server's rules that the schema does not carry (names,
label syntax, annotation size, integer ranges, uniqueness).

Written from the Kubernetes API conventions, not from config/, so it can catch what the
program's own rules miss.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import yaml
from jsonschema import Draft4Validator, FormatChecker

from .program import ROOT, Registered, pinned_versions

_LABEL = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_VALUE = re.compile(rf"^({_LABEL})?$")
_LABEL_NAME = re.compile(rf"^{_LABEL}$")
# Kinds whose names are DNS labels (the rest: DNS subdomains).
_LABEL_NAMED = {"Namespace", "Service"}
_FORMATS = FormatChecker()


@_FORMATS.checks("int32")
def _int32(value: Any) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _int64(value: Any) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@lru_cache(maxsize=1)
def schema_dir() -> Path:
    """The schema directory scripts/linters.sh builds (cached; built once if missing)."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "linters.sh")], capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"scripts/linters.sh failed:\n{done.stderr[-3000:]}"
    return Path(done.stdout.splitlines()[1])


@lru_cache(maxsize=1)
def karpenter_dir() -> Path:
    """The Karpenter module at the pinned KARPENTER_VERSION (versions.env), from the Go module
    proxy: its CRDs are the schema of the NodePools the program emits."""
    module = f"sigs.k8s.io/karpenter@v{pinned_versions()['KARPENTER_VERSION']}"
    done = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, timeout=1800,
                          cwd=ROOT / "scripts", env={**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off"})
    assert done.returncode == 0, f"go mod download {module} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return Path(json.loads(done.stdout)["Dir"])


@lru_cache(maxsize=None)
def crd_schema(group: str, version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of `kind` in the module's CRD (kwok/charts/crds, as installed)."""
    plural = kind.lower() + "s"
    crd = yaml.safe_load((karpenter_dir() / "kwok" / "charts" / "crds" / f"{group}_{plural}.yaml").read_text())
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return served["schema"]["openAPIV3Schema"]


@lru_cache(maxsize=1)
def _kueue_crds() -> dict[str, dict[str, Any]]:
    """Kind -> CRD of the vendored install manifests (the CRDs the program installs, and the
    pinned module's own), read once."""
    from plan import kueue_install

    return {obj["spec"]["names"]["kind"]: obj for obj in kueue_install.load(ROOT)
            if obj["kind"] == "CustomResourceDefinition"}


def kueue_crd_schema(version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of a Kueue kind at `version`."""
    crd = _kueue_crds()[kind]
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return served["schema"]["openAPIV3Schema"]


@lru_cache(maxsize=None)
def _validator(api_version: str, kind: str) -> Draft4Validator:
    group, _, version = api_version.rpartition("/")
    if group == "karpenter.sh":
        return Draft4Validator(crd_schema(group, version, kind), format_checker=_FORMATS)
    if group == "kueue.x-k8s.io":
        return Draft4Validator(kueue_crd_schema(version, kind), format_checker=_FORMATS)
    suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
    path = schema_dir() / f"{kind.lower()}{suffix}.json"
    assert path.is_file(), f"no schema for {api_version} {kind} ({path.name})"
    return Draft4Validator(json.loads(path.read_text()), format_checker=_FORMATS)


def manifest(resource: Registered) -> dict[str, Any]:
    """A registered Kubernetes resource as the object the provider would send (the mocks
    carry every number as a double, as protobuf's Struct does: whole ones are integers)."""
    _, group_version, kind = resource.type.split(":")
    group, _, version = group_version.partition("/")
    api_version = version if group == "core" else f"{group}/{version}"
    body = {k: v for k, v in resource.inputs.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": api_version, "kind": kind, **_integers(body)}


def _integers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return value


def problems(resources: Iterable[Registered]) -> list[str]:
    """Every reason the API server would refuse one of `resources` (patches are partial
    objects by design: their names and labels are checked, not the schema)."""
    found: list[str] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    for resource in resources:
        if not resource.type.startswith("kubernetes:") or resource.type.startswith("kubernetes:yaml"):
            continue
        obj = manifest(resource)
        where = f"{obj['kind']} {resource.name}"
        meta = obj.get("metadata") or {}
        key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta.get("name", ""))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            found.append(f"{where}: {key[1]} {key[2]}/{key[3]} is defined twice")
        if not obj["kind"].endswith("Patch"):
            for error in _validator(obj["apiVersion"], obj["kind"]).iter_errors(obj):
                found.append(f"{where}: {'/'.join(map(str, error.absolute_path))}: {error.message[:200]}")
        found.extend(f"{where}: {p}" for p in _object_rules(obj))
    return found


def _object_rules(obj: dict[str, Any]) -> list[str]:
    out = []
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    pattern = _DNS_LABEL if obj["kind"].removesuffix("Patch") in _LABEL_NAMED else _SUBDOMAIN
    if not pattern.match(name):
        out.append(f"metadata.name {name!r} is not a valid name")
    for place, labels in _label_sets(obj):
        for key, value in (labels or {}).items():
            if not _label_key_ok(key):
                out.append(f"{place}: label key {key!r}")
            if not isinstance(value, str) or not _LABEL_VALUE.match(value):
                out.append(f"{place}: label value {value!r}")
    annotations = meta.get("annotations") or {}
    if sum(len(k) + len(str(v)) for k, v in annotations.items()) > 256 * 1024:
        out.append("annotations over 256 KiB")
    for pod_place, pod in _pod_specs(obj):
        out.extend(f"{pod_place}: {p}" for p in _pod_rules(pod, batch=obj["kind"] in ("Job", "CronJob")))
    return out


def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return bool(_LABEL_NAME.match(name)) and (not prefix or bool(_SUBDOMAIN.match(prefix)))


def _label_sets(obj: dict[str, Any]):
    yield "metadata.labels", (obj.get("metadata") or {}).get("labels")
    for place, pod in _pod_specs(obj):
        yield f"{place} nodeSelector", pod.get("nodeSelector")
    for place, template in _templates(obj):
        yield f"{place}.metadata.labels", (template.get("metadata") or {}).get("labels")


def _templates(obj: dict[str, Any]):
    spec = obj.get("spec") or {}
    if obj["kind"] == "CronJob":
        job = (spec.get("jobTemplate") or {})
        yield "spec.jobTemplate", job
        spec = job.get("spec") or {}
        if "template" in spec:
            yield "spec.jobTemplate.spec.template", spec["template"]
    elif "template" in spec:
        yield "spec.template", spec["template"]


def _pod_specs(obj: dict[str, Any]):
    if obj["apiVersion"].startswith("karpenter.sh/"):
        return  # a NodePool's template is a node's, not a pod's
    for place, template in _templates(obj):
        if place.endswith("template") and isinstance(template.get("spec"), dict):
            yield place + ".spec", template["spec"]


def _pod_rules(pod: dict[str, Any], batch: bool) -> list[str]:
    out = []
    containers = [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]
    if not pod.get("containers"):
        out.append("a pod needs at least one container")
    names = [c.get("name") for c in containers]
    if len(set(names)) != len(names):
        out.append(f"container names repeat: {names}")
    volumes = [v.get("name") for v in pod.get("volumes") or []]
    if len(set(volumes)) != len(volumes):
        out.append(f"volume names repeat: {volumes}")
    for container in containers:
        if not isinstance(container.get("name"), str) or not _DNS_LABEL.match(container["name"]):
            out.append(f"container name {container.get('name')!r}")
        image = container.get("image")
        if not isinstance(image, str) or not image.strip() or image != image.strip() or " " in image:
            out.append(f"container {container.get('name')!r}: image {image!r}")
        mounts = [m.get("mountPath") for m in container.get("volumeMounts") or []]
        if len(set(mounts)) != len(mounts):
            out.append(f"container {container.get('name')!r}: mount paths repeat: {mounts}")
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") not in volumes:
                out.append(f"container {container.get('name')!r}: mount of unknown volume {mount.get('name')!r}")
        resources = container.get("resources") or {}
        for resource, amount in (resources.get("limits") or {}).items():
            request = (resources.get("requests") or {}).get(resource)
            if "/" in resource and request is not None and str(request) != str(amount):
                out.append(f"container {container.get('name')!r}: extended resource {resource} request != limit")
    if batch and pod.get("restartPolicy") not in ("Never", "OnFailure"):
        out.append(f"restartPolicy {pod.get('restartPolicy')!r} in a Job")
    return out
