"""Pure derivations from validated config: pool rules, placement, profiles, resources,
LimitRange and quota. Components turn these plain dicts into resources; tests check them
without the Pulumi runtime.
"""

from __future__ import annotations

import string
from decimal import Decimal
from typing import Any, Optional

from . import names
from .errors import REQUIRED, Problem
from .names import gpu_resource_name
from .models import NodePool, Profile, Schedule, Workload
from .quantity import Kind, QuantityError, kind_for_resource, minimum, parse, render, scale

VCLUSTER_KEY = "node-role.jarvice.io/jarvice-vcluster"
GPU_PRESENT = "present"


class PlacementError(ValueError):
    """A workload that cannot be placed; `field` is the entry key it is about."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


# ---- node pools -------------------------------------------------------------------------


def pool_taints(pool: NodePool) -> list[dict[str, str]]:
    """Every taint a pool's nodes carry: the role's (docs/node-pools.md), then the pool's own."""
    taints: list[dict[str, str]] = []
    if pool.role == "vcluster" or (pool.role == "gpu" and pool.vcluster):
        taints.append({"key": VCLUSTER_KEY, "value": "true", "effect": "NoSchedule"})
    if pool.role == "gpu" and pool.gpu is not None:
        taints.append({"key": gpu_resource_name(pool.gpu.vendor), "value": GPU_PRESENT, "effect": "NoSchedule"})
    for taint in pool.taints:
        item = {"key": taint.key, "value": taint.value, "effect": taint.effect}
        if item not in taints:
            taints.append(item)
    return taints


def pool_labels(pool: NodePool, cluster: str) -> dict[str, str]:
    """Every label a pool's nodes carry."""
    labels = dict(pool.labels)
    labels[names.LABEL_POOL] = pool.name
    labels[names.LABEL_CLUSTER] = cluster
    if pool.role == "vcluster" or (pool.role == "gpu" and pool.vcluster):
        labels[VCLUSTER_KEY] = "true"
    if pool.role == "gpu" and pool.gpu is not None:
        labels[gpu_resource_name(pool.gpu.vendor)] = GPU_PRESENT
    return labels


def tolerations_for(pool: NodePool) -> list[dict[str, str]]:
    return [{"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]} for t in pool_taints(pool)]


def resolve_pool(entry: Workload, pools: list[NodePool]) -> Optional[NodePool]:
    """The pool a workload targets: named, or the only GPU pool of its vendor for GPU work."""
    vendor = entry.gpu_vendor
    if entry.pool is not None:
        pool = next(p for p in pools if p.name == entry.pool)
        if (entry.gpus or entry.gpu is not None) and (pool.gpu is None or pool.gpu.vendor != vendor):
            what = f"{pool.gpu.vendor} GPU pool" if pool.gpu else f'"{pool.role}" pool'
            raise PlacementError(
                "pool", f'requests {entry.gpus or entry.gpu.count} {vendor} GPUs but "{pool.name}" is a {what}'
            )
        return pool
    if not entry.gpus and entry.gpu is None:
        return None
    candidates = [p for p in pools if p.gpu is not None and p.gpu.vendor == vendor]
    if entry.gpu is not None and len(candidates) > 1:
        # Devices are asked of DRA pools only: the others cannot be meant.
        candidates = [p for p in candidates if p.gpu is not None and p.gpu.dra] or candidates
    if not candidates:
        raise PlacementError(
            "gpus" if entry.gpus else "gpu",
            f"requests {entry.gpus or entry.gpu.count} {vendor} GPUs but no node pool has role gpu with vendor {vendor}"
        )
    if len(candidates) > 1:
        raise PlacementError(
            "pool",
            f"several {vendor} GPU pools ({', '.join(p.name for p in candidates)}) could run it; set pool",
        )
    return candidates[0]


# ---- profiles ---------------------------------------------------------------------------


def matching_rules(profiles: list[tuple[str, Profile]], user: Optional[str], groups: list[str]) -> list[tuple[str, Profile]]:
    """Rules that apply to a user, in file order: `*`, `@group` for their groups, their name."""
    out = []
    for rule, profile in profiles:
        if rule == "*" or (rule.startswith("@") and rule[1:] in groups) or (user is not None and rule == user):
            out.append((rule, profile))
    return out


def resolve_profile(profiles: list[tuple[str, Profile]], user: Optional[str], groups: list[str]) -> tuple[Profile, list[str]]:
    """Merge matching rules top to bottom, later values winning (as in the RStudio Workbench
    Launcher Kubernetes plugin documentation)."""
    merged, rules, _ = resolve_profile_sources(profiles, user, groups)
    return merged, rules


def resolve_profile_sources(
    profiles: list[tuple[str, Profile]], user: Optional[str], groups: list[str]
) -> tuple[Profile, list[str], dict[str, str]]:
    """As `resolve_profile`, plus which rule set each field (to name it in rejections)."""
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    rules = matching_rules(profiles, user, groups)
    for rule, profile in rules:
        for key in profile.model_fields_set:
            value = getattr(profile, key)
            if value is None:
                continue
            if key in ("default_gpus", "max_gpus"):
                # Each vendor is its own setting (default-nvidia-gpus, max-amd-gpus in RStudio's profiles).
                vendors = {v: getattr(value, v) for v in value.model_fields_set if getattr(value, v) is not None}
                earlier = merged[key].model_dump(exclude_none=True) if key in merged else {}
                merged[key] = type(value)(**{**earlier, **vendors})
                for vendor in vendors:
                    source[f"{key}.{vendor}"] = rule
                continue
            merged[key] = value
            source[key] = rule
    return Profile.model_validate(merged), [rule for rule, _ in rules], source


def apply_profile(entry: Workload, profile: Profile) -> tuple[Workload, list[Problem]]:
    """The entry with the merged profile's defaults filled in, and the problems (at the
    entry's fields) filling them in raises. The profile's limits are `config.profile_rules`'."""
    problems: list[Problem] = []
    update: dict[str, Any] = {}
    if entry.type == "pod" and entry.pod_spec is None:
        if entry.cpu is None and entry.cpu_limit is None and profile.default_cpu is not None:
            update["cpu"] = profile.default_cpu
        if entry.memory is None and entry.memory_limit is None and profile.default_memory is not None:
            update["memory"] = profile.default_memory
        default_gpus = getattr(profile.default_gpus, entry.gpu_vendor, None) if profile.default_gpus else None
        if "gpus" not in entry.model_fields_set and entry.gpu is None and default_gpus:
            update["gpus"] = default_gpus
        if entry.image is None:
            if profile.default_image is not None:
                update["image"] = profile.default_image
            else:
                problems.append(Problem("image", f"{REQUIRED} (no matching profile rule sets defaultImage)"))
    if entry.queue is None and profile.queue is not None and entry.type != "namespace":
        # A profile's queue is for the workloads it covers: a namespace entry runs none.
        update["queue"] = profile.queue
    if entry.priority is None and profile.priority is not None and update.get("queue", entry.queue) is not None:
        # A profile's priority is for the queued entries it covers; others have no use for it.
        update["priority"] = profile.priority
    if entry.reservation is None and getattr(profile, "reservation", None) is not None and entry.type != "namespace":
        update["reservation"] = profile.reservation
    if entry.pod_spec is not None:
        # GPUs asked for inside a raw pod spec place the pod like `gpus` does.
        try:
            containers, _ = pod_spec_containers(entry.pod_spec)
        except PlacementError as exc:
            problems.append(Problem(exc.field, str(exc)))
            containers = []
        for vendor in ("nvidia", "amd"):
            count = sum(int(parse(c["limits"].get(gpu_resource_name(vendor)) or c["requests"].get(gpu_resource_name(vendor)) or "0"))
                        for c in containers)
            if count:
                update.update({"gpus": count, "gpu_vendor": vendor})
                break
    return (entry.model_copy(update=update) if update else entry), problems


# ---- raw pod specs ----------------------------------------------------------------------


def pod_spec_containers(pod_spec: dict[str, Any]) -> tuple[list[dict[str, dict[str, str]]], list[dict[str, dict[str, str]]]]:
    """Normalised requests and limits of a raw pod spec's containers and init containers.

    Raises `PlacementError` (field `podSpec`) for a resource that is not a quantity.
    """
    out: tuple[list, list] = ([], [])
    for target, key in zip(out, ("containers", "initContainers")):
        for index, container in enumerate(pod_spec.get(key) or []):
            resources = (container or {}).get("resources") or {}
            item: dict[str, dict[str, str]] = {}
            for side in ("requests", "limits"):
                item[side] = {}
                for resource, amount in (resources.get(side) or {}).items():
                    kind = kind_for_resource(resource)
                    try:
                        # the API server reads strings: a bare number is not MiB here
                        item[side][resource] = render(parse(str(amount), kind), kind)
                    except QuantityError as exc:
                        raise PlacementError("podSpec", f"{key}[{index}].resources.{side}.{resource}: {exc}") from None
            if key == "initContainers":
                # A native sidecar runs beside the containers: pod_usage adds it, not maxes it.
                item["sidecar"] = (container or {}).get("restartPolicy") == "Always"
            target.append(item)
    return out


# ---- labels -----------------------------------------------------------------------------

PLACEHOLDERS = ("name", "user", "groups", "cluster", "stack")


def placeholders_in(template: str) -> list[str]:
    return [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]


def dynamic_labels(entry: Workload, cluster: str, stack: str) -> dict[str, str]:
    values = {
        "name": entry.name,
        "user": entry.user or "",
        "groups": ".".join(entry.groups),
        "cluster": cluster,
        "stack": stack,
    }
    return {key: template.format(**values) for key, template in entry.dynamic_labels.items()}


def entry_labels(entry: Workload, cluster: str) -> dict[str, str]:
    """Labels on everything an entry produces."""
    return {
        names.LABEL_JOB: entry.name,
        names.LABEL_OWNER: names.owner_label(entry.user),
        names.LABEL_CLUSTER: cluster,
        **names.MANAGED_BY,
    }
