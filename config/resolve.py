"""Pure derivations from validated config: pool rules, placement, profiles, resources,
LimitRange and quota. Components turn these plain dicts into resources; tests check them
without the Pulumi runtime.
"""

from __future__ import annotations

import string
from decimal import Decimal
from typing import Any, Optional

from . import names
from .names import gpu_resource_name
from .models import NodePool, Profile, Schedule, Workload
from .quantity import Kind, QuantityError, kind_for_resource, minimum, parse, render, scale

VCLUSTER_KEY = "node-role.jarvice.io/jarvice-vcluster"
GPU_PRESENT = "present"
# The KNS default limit range for job namespaces (the JARVICE KNS scheduler documentation).
DEFAULT_LIMIT = {"cpu": "1", "memory": "1Gi"}
DEFAULT_REQUEST = {"cpu": "200m", "memory": "256Mi"}
NAMESPACE_ENTRY_PODS = 10


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
        if entry.gpus and (pool.gpu is None or pool.gpu.vendor != vendor):
            what = f"{pool.gpu.vendor} GPU pool" if pool.gpu else f'"{pool.role}" pool'
            raise PlacementError(
                "pool", f'requests {entry.gpus} {vendor} GPUs but "{pool.name}" is a {what}'
            )
        return pool
    if not entry.gpus:
        return None
    candidates = [p for p in pools if p.gpu is not None and p.gpu.vendor == vendor]
    if not candidates:
        raise PlacementError(
            "gpus", f"requests {entry.gpus} {vendor} GPUs but no node pool has role gpu with vendor {vendor}"
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


def apply_profile(entry: Workload, profile: Profile) -> tuple[Workload, list[tuple[str, str]]]:
    """The entry with the merged profile's defaults filled in, and the (field, problem)
    pairs filling them in raises. The profile's limits are `config.profile_rules`'."""
    problems: list[tuple[str, str]] = []
    update: dict[str, Any] = {}
    if entry.type == "pod" and entry.pod_spec is None:
        if entry.cpu is None and entry.cpu_limit is None and profile.default_cpu is not None:
            update["cpu"] = profile.default_cpu
        if entry.memory is None and entry.memory_limit is None and profile.default_memory is not None:
            update["memory"] = profile.default_memory
        default_gpus = getattr(profile.default_gpus, entry.gpu_vendor, None) if profile.default_gpus else None
        if "gpus" not in entry.model_fields_set and default_gpus:
            update["gpus"] = default_gpus
        if entry.image is None:
            if profile.default_image is not None:
                update["image"] = profile.default_image
            else:
                problems.append(("image", "is required (no matching profile rule sets defaultImage)"))
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
            problems.append((exc.field, str(exc)))
            containers = []
        for vendor in ("nvidia", "amd"):
            count = sum(int(parse(c["limits"].get(gpu_resource_name(vendor)) or c["requests"].get(gpu_resource_name(vendor)) or "0"))
                        for c in containers)
            if count:
                update.update({"gpus": count, "gpu_vendor": vendor})
                break
    return (entry.model_copy(update=update) if update else entry), problems


# ---- resources --------------------------------------------------------------------------


def container_resources(entry: Workload, profile: Optional[Profile] = None) -> dict[str, dict[str, str]]:
    """Requests and limits: a limit defaults to its request; profile ratios set requests."""
    profile = profile or Profile()
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    ratios = {"cpu": profile.cpu_request_ratio, "memory": profile.memory_request_ratio}
    for resource, request, limit in (
        ("cpu", entry.cpu, entry.cpu_limit),
        ("memory", entry.memory, entry.memory_limit),
        ("ephemeral-storage", entry.storage, entry.storage_limit),
    ):
        cap = limit or request
        if cap is None:
            continue
        limits[resource] = cap
        ratio = ratios.get(resource)
        kind = kind_for_resource(resource)
        if ratio is not None:
            requests[resource] = _ratio(cap, Decimal(str(ratio)), kind)
        else:
            requests[resource] = request or cap
    if entry.gpus:
        gpu = entry.gpu_resource or gpu_resource_name(entry.gpu_vendor)
        requests[gpu] = limits[gpu] = str(entry.gpus)
    for resource, amount in entry.extra_resources.items():
        requests[resource] = limits[resource] = amount
    return {"requests": requests, "limits": limits}


def _ratio(limit: str, ratio: Decimal, kind: Kind) -> str:
    amount = parse(limit, kind) * ratio
    step = Decimal("0.001") if kind is Kind.CPU else Decimal(1)
    return render((amount / step).to_integral_value(rounding="ROUND_CEILING") * step, kind)


COMPUTE = ("cpu", "memory", "ephemeral-storage")


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


def pod_spec_limits(containers: list[dict[str, dict[str, str]]]) -> dict[str, dict[str, str]]:
    """Per-container maxima (what LimitRange max must allow) and the GPUs asked for."""
    limits: dict[str, str] = {}
    for item in containers:
        for resource, amount in {**item["requests"], **item["limits"]}.items():
            kind = kind_for_resource(resource)
            if resource not in limits or parse(amount, kind) > parse(limits[resource], kind):
                limits[resource] = amount
    return {"requests": dict(limits), "limits": limits}


def pod_usage(
    containers: list[dict[str, dict[str, str]]],
    init_containers: list[dict[str, dict[str, str]]],
    limit_range_spec: dict[str, Any],
) -> dict[str, dict[str, str]]:
    """What one pod counts against the quota, as the scheduler, quota admission and Kueue
    count it (Kubernetes' pod-requests rules): unset compute resources at the LimitRange
    defaults, a lone limit also being the request; the containers and every native sidecar
    (an init container with `restartPolicy: Always`, which keeps running) summed; then the
    larger of that and each init container's start, which is its own amount plus the
    sidecars started before it (docs/options.md, "Native sidecars")."""

    def effective(item: dict[str, dict[str, str]]) -> dict[str, dict[str, Decimal]]:
        requests = dict(item["requests"])
        limits = dict(item["limits"])
        for resource, amount in limits.items():
            requests.setdefault(resource, amount)  # the API server's own defaulting
        for resource in ("cpu", "memory"):
            if resource not in requests:
                requests[resource] = limit_range_spec["defaultRequest"].get(resource)
            if resource not in limits:
                limits[resource] = limit_range_spec["default"].get(resource)
        return {
            side: {r: parse(a, kind_for_resource(r)) for r, a in values.items() if a is not None}
            for side, values in (("requests", requests), ("limits", limits))
        }

    def add(into: dict[str, Decimal], values: dict[str, Decimal]) -> None:
        for resource, amount in values.items():
            into[resource] = into.get(resource, Decimal(0)) + amount

    total: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for item in containers:
        for side, values in effective(item).items():
            add(total[side], values)
    sidecars: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    starts: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    for item in init_containers:
        for side, values in effective(item).items():
            if item.get("sidecar"):
                add(total[side], values)
                add(sidecars[side], values)
            start = dict(sidecars[side])
            if not item.get("sidecar"):
                add(start, values)
            for resource, amount in start.items():
                starts[side][resource] = max(starts[side].get(resource, Decimal(0)), amount)
    for side, values in starts.items():
        for resource, amount in values.items():
            total[side][resource] = max(total[side].get(resource, Decimal(0)), amount)
    return {side: {r: render(a, kind_for_resource(r)) for r, a in values.items()} for side, values in total.items()}


def pods_per_entry(entry: Workload) -> int:
    """Pods an entry may run at once: its workers or parallelism, doubled for overlapping
    schedule runs."""
    if entry.type == "namespace":
        return NAMESPACE_ENTRY_PODS
    pods = entry.workers if entry.distributed else entry.parallelism or 1
    if isinstance(entry, Schedule) and entry.concurrency_policy != "Forbid":
        pods *= 2
    return pods


def limit_range(entry: Workload, resources: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """LimitRange `kns-defaults` (type Container): default, defaultRequest, max.

    Max is the entry's own limits (no container may outgrow the entry); defaults are the
    KNS reference defaults clamped under max, since the API server rejects default > max.
    """
    override = entry.limit_range
    maximum = dict(resources["limits"])
    for key in list(maximum):
        if kind_for_resource(key) is Kind.COUNT:
            del maximum[key]
    if override is not None:
        maximum.update(override.max)
    default = {**DEFAULT_LIMIT, **(override.default if override else {})}
    default_request = {**DEFAULT_REQUEST, **(override.default_request if override else {})}
    for key, cap in maximum.items():
        kind = kind_for_resource(key)
        if key in default:
            default[key] = minimum(default[key], cap, kind)
    for key, value in default.items():
        if key in default_request:
            default_request[key] = minimum(default_request[key], value, kind_for_resource(key))
    spec = {"type": "Container", "default": default, "defaultRequest": default_request}
    if maximum:
        spec["max"] = maximum
    if override is not None and override.min:
        spec["min"] = dict(override.min)
    return spec


def quota(entry: Workload, resources: dict[str, dict[str, str]], limit_range_spec: dict[str, Any]) -> dict[str, str]:
    """ResourceQuota `kns-quota`: what the entry may use (per-pod amounts x pods at once).

    A resource the entry leaves unset counts at the LimitRange default, which is what
    admission fills in for it.
    """
    pods = pods_per_entry(entry)
    hard: dict[str, str] = {"pods": str(pods)}
    for side, fallback in (("requests", limit_range_spec["defaultRequest"]), ("limits", limit_range_spec["default"])):
        amounts = {**fallback, **resources[side]}
        for resource, amount in amounts.items():
            kind = kind_for_resource(resource)
            key = f"{side}.{resource}"
            if side == "limits" and kind is Kind.COUNT:
                continue  # extended resources are quota'd by requests only
            hard[key] = scale(amount, pods, kind)
    if entry.distributed:
        hard["services"] = "1"  # the Service that names the workers
    if entry.quota:
        hard.update(entry.quota)
    return dict(sorted(hard.items()))


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
