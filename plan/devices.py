"""What GPUs as devices become (pure): a DRA pool's DeviceClasses, an entry's
ResourceClaimTemplate (or the ResourceClaim its pods share), the claims in its pod, and
Kueue's device class mappings (docs/gpus.md).

The DeviceClasses select devices by the attributes NVIDIA's DRA driver publishes
(docs/gpus.md, "What the driver publishes"): `type` is `gpu` for a whole GPU and `mig` for
a MIG device, whose `profile` is the MIG profile (`1g.10gb`); `productName` is the GPU's
product name on both.
"""

from __future__ import annotations

from typing import Any, Optional

from config import devices, names
from config.devices import CLAIM, DeviceAsk
from config.models import NodePool

from .model import WorkloadPlan

API_VERSION = "resource.k8s.io/v1"
# The driver's opaque configuration of a claim's devices (its GpuConfig, with `sharing`).
GPU_CONFIG_API = "resource.nvidia.com/v1beta1"
REQUEST = "gpu"


def selector(pool: NodePool, kind: str) -> str:
    """The CEL expression a pool's DeviceClass of one kind selects devices with."""
    assert pool.gpu is not None and pool.gpu.driver is not None
    driver = pool.gpu.driver
    attributes = f"device.attributes['{driver}']"
    terms = [f"device.driver == '{driver}'"]
    if kind == devices.WHOLE:
        terms.append(f"{attributes}.type == 'gpu'")
    else:
        terms += [f"{attributes}.type == 'mig'", f"{attributes}.profile == '{kind}'"]
    if pool.gpu.model is not None:
        terms.append(f"{attributes}.productName == '{pool.gpu.model}'")
    return " && ".join(terms)


def device_class_manifests(pool: NodePool, cluster: str) -> list[dict[str, Any]]:
    """One DeviceClass per kind of GPU a DRA pool offers (the whole GPU, each partition)."""
    return [{
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": devices.class_name(pool.name, kind),
                     "labels": {names.LABEL_POOL: pool.name, names.LABEL_CLUSTER: cluster, **names.MANAGED_BY}},
        "spec": {"selectors": [{"cel": {"expression": selector(pool, kind)}}]},
    } for kind in devices.kinds(pool)]


def _claim_spec(ask: DeviceAsk) -> dict[str, Any]:
    spec: dict[str, Any] = {"devices": {"requests": [{
        "name": REQUEST,
        "exactly": {"deviceClassName": ask.device_class, "allocationMode": "ExactCount", "count": ask.count},
    }]}}
    if ask.sharing is not None:
        spec["devices"]["config"] = [{"requests": [REQUEST], "opaque": {
            "driver": ask.driver,
            "parameters": {"apiVersion": GPU_CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": ask.sharing}},
        }}]
    return spec


def claim_manifest(plan: WorkloadPlan, ask: DeviceAsk) -> dict[str, Any]:
    """Each pod's own claim (a ResourceClaimTemplate: one ResourceClaim per pod), or, for
    `shared: true`, the one ResourceClaim every pod of the entry shares."""
    metadata = {"name": CLAIM, "namespace": plan.namespace, "labels": dict(plan.labels)}
    if ask.shared:
        return {"apiVersion": API_VERSION, "kind": "ResourceClaim", "metadata": metadata, "spec": _claim_spec(ask)}
    return {"apiVersion": API_VERSION, "kind": "ResourceClaimTemplate", "metadata": metadata,
            "spec": {"spec": _claim_spec(ask)}}


def claim_pod(spec: dict[str, Any], ask: Optional[DeviceAsk]) -> None:
    """The pod's claim (`resourceClaims`) and every app container's use of it."""
    if ask is None:
        return
    source = "resourceClaimName" if ask.shared else "resourceClaimTemplateName"
    spec.setdefault("resourceClaims", []).append({"name": CLAIM, source: CLAIM})
    for container in spec.get("containers") or []:
        container.setdefault("resources", {}).setdefault("claims", []).append({"name": CLAIM})


def mappings(pools: list[NodePool]) -> list[dict[str, Any]]:
    """Kueue's device class mappings (its Configuration's `resources.deviceClassMappings`):
    every DRA pool's class of a kind counts as that kind's one resource (`<driver>/<kind>`),
    which queues name in their quota per pool."""
    by_resource: dict[str, list[str]] = {}
    for pool in pools:
        if devices.is_dra(pool):
            assert pool.gpu is not None and pool.gpu.driver is not None
            for kind in devices.kinds(pool):
                by_resource.setdefault(devices.kueue_resource(pool.gpu.driver, kind), []).append(
                    devices.class_name(pool.name, kind))
    return [{"name": name, "deviceClassNames": classes} for name, classes in by_resource.items()]


def resource_of_class(pools: list[NodePool]) -> dict[str, str]:
    """Device class -> the resource Kueue counts it as (`mappings`)."""
    return {device_class: mapping["name"] for mapping in mappings(pools) for device_class in mapping["deviceClassNames"]}
