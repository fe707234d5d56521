"""GPUs as devices (DRA): the names and rules a DRA pool's device classes, claims, quotas
and Kueue mappings share, and what an entry may ask of such a pool (docs/gpus.md).

A DRA pool offers GPU *kinds*: the whole GPU (`gpu`) and each MIG profile it declares
(`1g.10gb`). Each kind is one DeviceClass per pool (`kns-<pool>-<kind>`), one ResourceQuota
key (`<class>.deviceclass.resource.k8s.io/devices`) and, on queues, one Kueue resource
(`<driver>/<kind>`, which every pool's class of that kind maps to: a queue's pools are its
flavors, so the quota stays per pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Optional

from . import rules
from .errors import Problem, closest

if TYPE_CHECKING:
    from .models import NodePool, Workload

# ResourceQuota counts devices per class under this key (Kubernetes' DRA quota).
QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
WHOLE = "gpu"
# The claim name in the pod (`resourceClaims[].name`, `resources.claims[].name`).
CLAIM = "kns-gpu"

def minor_of(version: str) -> int:
    return int(version.lstrip("v").split(".")[1])


def slug(kind: str) -> str:
    """A kind as it appears in names: a MIG profile's `+` (not allowed in names) as `-`."""
    return kind.replace("+", "-")


def class_name(pool: str, kind: str) -> str:
    """The DeviceClass of one kind of a pool's GPUs."""
    return f"kns-{pool}-{slug(kind)}"


def quota_key(device_class: str) -> str:
    """The ResourceQuota key counting the devices of one class."""
    return f"{device_class}{QUOTA_SUFFIX}"


def kueue_resource(driver: str, kind: str) -> str:
    """The resource a queue's quota names for one kind of device (Kueue's device class mapping)."""
    return f"{driver}/{slug(kind)}"


def kinds(pool: "NodePool") -> list[str]:
    """The GPU kinds a DRA pool offers: the whole GPU, then each partition profile."""
    assert pool.gpu is not None and pool.gpu.dra
    return [WHOLE] + [p.profile for p in pool.gpu.partitions]


def per_node(pool: "NodePool", kind: str) -> int:
    """The most devices of a kind one node of the pool has."""
    assert pool.gpu is not None
    if kind == WHOLE:
        return pool.gpu.per_node
    per_gpu = next(p.per_gpu for p in pool.gpu.partitions if p.profile == kind)
    return per_gpu * pool.gpu.per_node


def is_dra(pool: Optional["NodePool"]) -> bool:
    return pool is not None and pool.gpu is not None and pool.gpu.dra


@dataclass(frozen=True)
class DeviceAsk:
    """The devices one pod of an entry claims from a DRA pool."""

    pool: str
    driver: str
    kind: str
    count: int
    shared: bool = False
    sharing: Optional[str] = None

    @property
    def device_class(self) -> str:
        return class_name(self.pool, self.kind)

    @property
    def resource(self) -> str:
        return kueue_resource(self.driver, self.kind)


def ask_of(entry: "Workload", pool: Optional["NodePool"]) -> Optional[DeviceAsk]:
    """What one pod of the entry claims from its pool when the pool is a DRA pool: `gpus: N`
    (whole GPUs) or `gpu: {...}`; None otherwise."""
    if not is_dra(pool):
        return None
    assert pool is not None and pool.gpu is not None and pool.gpu.driver is not None
    if entry.gpu is not None:
        kind = entry.gpu.partition or WHOLE
        sharing = pool.gpu.sharing.strategy if entry.gpu.shared and pool.gpu.sharing else None
        return DeviceAsk(pool.name, pool.gpu.driver, kind, entry.gpu.count, entry.gpu.shared, sharing)
    if entry.gpus and entry.pod_spec is None:  # a raw pod spec's GPUs are its own resources
        return DeviceAsk(pool.name, pool.gpu.driver, WHOLE, entry.gpus)
    return None


def entry_problems(entry: "Workload", pool: Optional["NodePool"], extended_gpus: dict[str, Any]) -> list[Problem]:
    """Every way an entry's GPU ask does not fit its pool's allocation, at the entry's
    field: `gpu` on an extended-resource pool, a partition the pool does not offer, more
    devices than one node has, `shared` where the pool declares no sharing or on a queue,
    and `nvidia.com/gpu` in a raw pod spec (`extended_gpus`: resource -> amount) on a DRA pool."""
    found: list[Problem] = []
    if pool is None:
        return found  # no pool could run it: resolve_pool says why
    if entry.gpu is not None and not is_dra(pool):
        what = (f'pool "{pool.name}" counts GPUs as an extended resource (allocation: extendedResource): gpu: {{...}} '
                "is for allocation: dra pools; use gpus: N") if pool.gpu is not None else \
            f'pool "{pool.name}" has no GPUs: name a pool with gpu.allocation: dra'
        asked = "a partition" if entry.gpu.partition is not None else "GPU devices"
        found.append(Problem("gpu.partition" if entry.gpu.partition is not None else "gpu",
                             f"asks {asked}, but {what}"))
        return found
    if not is_dra(pool):
        return found
    assert pool is not None and pool.gpu is not None
    if entry.gpu_resource is not None:
        found.append(Problem("gpuResource", f"names the extended resource {entry.gpu_resource}, but pool "
                                            f"\"{pool.name}\" allocates GPUs as devices (allocation: dra): "
                                            "ask gpus: N or gpu: {...}"))
    for resource, amount in extended_gpus.items():
        found.append(Problem("podSpec", f"asks {amount} {resource}, but pool \"{pool.name}\" allocates GPUs as "
                                        "devices (allocation: dra), so no node offers that resource: use gpu: {...}"))
    ask = ask_of(entry, pool)
    if ask is None:
        return found
    field = "gpus" if entry.gpu is None else "gpu.count"
    offered = kinds(pool)
    if ask.kind not in offered:
        found.append(Problem("gpu.partition", f'"{ask.kind}" is not a partition pool "{pool.name}" offers '
                                              f"(its partitions: {', '.join(offered[1:]) or 'none'})"))
        return found
    most = per_node(pool, ask.kind)
    what = "whole GPUs" if ask.kind == WHOLE else f"{ask.kind} partitions"
    if ask.count > most:
        found.append(Problem(field, f"{ask.count} {what} do not fit on one node of pool \"{pool.name}\" "
                                    f"(it has {most}: "
                                    + (f"perNode {pool.gpu.per_node})" if ask.kind == WHOLE else
                                       f"perNode {pool.gpu.per_node} x perGpu {most // pool.gpu.per_node})")))
    if ask.shared and pool.gpu.sharing is None:
        found.append(Problem("gpu.shared", f'pool "{pool.name}" declares no gpu.sharing: its GPUs are not shared'))
    if ask.shared and entry.queue is not None:
        found.append(Problem("gpu.shared", rules.SHARED_NOT_QUEUED.message))
    return found


def offered(pool: "NodePool") -> list[str]:
    """The device resources a queue's quota may name on `pool` (none off a DRA pool)."""
    if not is_dra(pool):
        return []
    assert pool.gpu is not None and pool.gpu.driver is not None
    return [kueue_resource(pool.gpu.driver, kind) for kind in kinds(pool)]


def quota_problem(resource: str, pool: "NodePool", drivers: Iterable[str], queue_offers: Iterable[str]) -> Optional[str]:
    """Why a queue's quota on `pool` may not name `resource`, or None: a resource in a DRA
    driver's domain (`drivers`: those of the stack's DRA pools) is a device resource, and
    one the pool does not offer (another profile, a misspelt one) is a quota Kueue would
    count and nothing would ask. The closest of the device resources the queue's pools
    offer (`queue_offers`) is suggested."""
    if resource.partition("/")[0] not in set(drivers) or resource in offered(pool):
        return None
    # One another pool of the queue offers is no misspelling: it is on the wrong pool.
    close = None if resource in queue_offers else closest(resource, offered(pool)) or closest(resource, queue_offers)
    hint = f'; did you mean "{close}"?' if close else ""
    has = ", ".join(offered(pool)) or "none: its GPUs are not allocated as devices (allocation: dra)"
    return (f'"{resource}" is no device resource pool "{pool.name}" offers, so Kueue would count a quota nothing '
            f"asks{hint} (its device resources: {has})")


def mapping_problems(pools: list["NodePool"], where: dict[str, str]) -> list[Problem]:
    """The problems where the DRA pools need more device class mappings than Kueue's
    Configuration holds: at most 16 kinds of device, each offered by at most 8 pools
    (`where`: pool name -> its config path)."""
    by_kind: dict[str, list[str]] = {}
    for pool in pools:
        if is_dra(pool):
            assert pool.gpu is not None and pool.gpu.driver is not None
            for kind in kinds(pool):
                by_kind.setdefault(kueue_resource(pool.gpu.driver, kind), []).append(pool.name)
    found = []
    if len(by_kind) > rules.KUEUE_DEVICE_MAPPINGS_MAX:
        last = next(p for p in reversed(pools) if is_dra(p))
        found.append(Problem(where[last.name] + ".gpu.partitions",
                             f"the DRA pools offer {len(by_kind)} kinds of device ({', '.join(by_kind)}); Kueue counts at "
                             f"most {rules.KUEUE_DEVICE_MAPPINGS_MAX} (device class mappings)"))
    for resource, owners in by_kind.items():
        if len(owners) > rules.KUEUE_CLASSES_PER_MAPPING_MAX:
            found.append(Problem(where[owners[-1]] + ".gpu", f"{len(owners)} pools offer {resource}; Kueue maps "
                                 f"at most {rules.KUEUE_CLASSES_PER_MAPPING_MAX} device classes to one resource"))
    return found
