"""A stand-in for NVIDIA's DRA driver on kwok nodes: each node's ResourceSlice, published as
the driver's kubelet plugin would (docs/gpus.md, "What the driver publishes").

kwok runs no driver, and nothing else publishes devices; the scheduler's DRA plugin
allocates claims from ResourceSlices whoever wrote them. The devices are those of
tests/fixtures/nvidia-dra-devices.yaml (which names the driver source they follow), with
what the driver varies per device: the name (`gpu-<minor>`, MIG devices
`gpu-<minor>-mig-<profile without dots>-<profile id>-<placement start>`), the UUIDs (a MIG
device's `parentUUID` is its GPU's) and the memory slices a MIG device occupies. One slice
per node, its pool named after the node, as the driver publishes them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Sequence, Union

import yaml

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "nvidia-dra-devices.yaml"
# Memory slices (of 8) a MIG instance of a profile occupies, and its profile id (A100).
MIG_SLICES = {"1g.10gb": (1, 19), "3g.40gb": (4, 9)}

# A GPU of a layout: "gpu" (whole, MIG off) or the MIG profiles it is partitioned into.
Gpu = Union[str, Sequence[str]]


def _fixture() -> dict[str, Any]:
    return yaml.safe_load(FIXTURE.read_text())


def _uuid(prefix: str, node: str, *numbers: int) -> str:
    digits = "".join(f"{n:02x}" for n in numbers).ljust(12, "0")[:12]
    tag = sum(map(ord, node)) % 65536
    return f"{prefix}-{tag:08x}-0000-4000-8000-{digits}"


def devices(node: str, layout: Sequence[Gpu]) -> list[dict[str, Any]]:
    """The devices of one node: per GPU (by minor number) the whole GPU, or its MIG devices."""
    templates = _fixture()["devices"]
    out = []
    for minor, gpu in enumerate(layout):
        gpu_uuid = _uuid("GPU", node, minor)
        if gpu == "gpu":
            device = copy.deepcopy(templates["gpu"])
            device["name"] = f"gpu-{minor}"
            device["attributes"]["uuid"] = {"string": gpu_uuid}
            out.append(device)
            continue
        start = 0
        for index, profile in enumerate(gpu):
            slices, profile_id = MIG_SLICES[profile]
            device = copy.deepcopy(templates[profile])
            device["name"] = f"gpu-{minor}-mig-{profile.replace('.', '')}-{profile_id}-{start}"
            device["attributes"]["uuid"] = {"string": _uuid("MIG", node, minor, index + 1)}
            device["attributes"]["parentUUID"] = {"string": gpu_uuid}
            device["capacity"] = {k: v for k, v in device["capacity"].items() if not k.startswith("memorySlice")}
            device["capacity"].update({f"memorySlice{s}": {"value": "1"} for s in range(start, start + slices)})
            out.append(device)
            start += slices
    return out


def resource_slice(node: str, layout: Sequence[Gpu]) -> dict[str, Any]:
    """The node's one ResourceSlice (pool = the node's name)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com", "labels": {"kns-test/dra": "true"}},
        "spec": {"driver": _fixture()["driver"], "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices(node, layout)},
    }
