"""Pod accounting: what one pod of an entry asks for, how many of its pods run at once,
and what that makes of its LimitRange, its quota and what one of its Jobs asks of a queue
(docs/architecture.md, "Accounting").

Counting is planning: the planner's LimitRange and quota, the queue fit check, the
autoscaled-pool check, reservations, `./kns explain`, `./kns queues` and the timeline all
read it here, so a new kind of resource (a device class) is counted in one place. What
one pod counts is read off the pod *as finally built* (profiles, ratios, `jsonOverrides`
and the program's own additions applied); the planner settles it once per entry
(`settle`) and every reader takes it from the plan (`of`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Optional

from config import devices as device_rules
from config.models import Profile, Schedule, Workload
from config.names import gpu_resource_name
from config.podspec import CONTAINER_LISTS
from config.quantity import Kind, kind_for_resource, minimum, parse, render, scale
from config.resolve import PlacementError, pod_spec_containers

# The KNS default limit range for job namespaces (the JARVICE KNS scheduler documentation).
DEFAULT_LIMIT = {"cpu": "1", "memory": "1Gi"}
DEFAULT_REQUEST = {"cpu": "200m", "memory": "256Mi"}
NAMESPACE_ENTRY_PODS = 10
PODS = "pods"

__all__ = ["PlacementError", "pod_spec_containers"]


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


def admitted(resources: dict[str, Any], limit_range_spec: dict[str, Any]) -> dict[str, Any]:
    """A container's `resources` as the LimitRanger leaves them: a resource the LimitRange
    has a default for and the container sets no limit for takes that default limit, and,
    when the container requests none of it either, the default request (a limit without a
    request is the request: the API server's own defaulting). What the container sets is
    kept; `pod_usage` counts exactly this."""
    out = copy.deepcopy(resources)
    requests, limits = dict(out.get("requests") or {}), dict(out.get("limits") or {})
    for resource, limit in limit_range_spec["default"].items():
        if resource in limits:
            continue
        limits[resource] = limit
        if resource not in requests and resource in limit_range_spec["defaultRequest"]:
            requests[resource] = limit_range_spec["defaultRequest"][resource]
    for side, values in (("requests", requests), ("limits", limits)):
        if values:
            out[side] = values
    return out


def admit_pod(pod_spec: dict[str, Any], limit_range_spec: dict[str, Any]) -> None:
    """Write into every container and init container of a pod what admission would fill
    in (`admitted`): whoever wrote the container (the program from an entry's fields, a
    raw `podSpec`, an override), the pod the program submits carries the limits it will
    run with, and the pod and quota stay what they were counted as."""
    for key in CONTAINER_LISTS:
        for container in pod_spec.get(key) or []:
            container["resources"] = admitted(container.get("resources") or {}, limit_range_spec)


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


def quota(entry: Workload, resources: dict[str, dict[str, str]], limit_range_spec: dict[str, Any],
          account: Optional["PodAccount"] = None) -> dict[str, str]:
    """ResourceQuota `kns-quota`: what the entry may use (per-pod amounts x pods at once),
    devices per class included (docs/gpus.md).

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
    if account is not None:
        hard.update(device_quota(account, pods))
    if entry.distributed:
        hard["services"] = "1"  # the Service that names the workers
    if entry.quota:
        hard.update(entry.quota)
    return dict(sorted(hard.items()))


# ---- one pod, as finally built -------------------------------------------------------------


@dataclass(frozen=True)
class PodAccount:
    """What one pod of an entry counts, and how many of them one of its Jobs runs at once.

    `requests`/`limits`: the pod's totals as admission fills them in (LimitRange defaults,
    native sidecars; `pod_usage`); `devices`: DRA devices its own claims ask, per device
    class; `shared_devices`: those of a claim all the entry's pods share, counted once
    (docs/gpus.md); `pods`: the pods of one Job that run (and are admitted) together;
    `device_resources`: device class -> the resource Kueue counts it as."""

    containers: list[dict[str, Any]]
    init_containers: list[dict[str, Any]]
    requests: dict[str, str]
    limits: dict[str, str]
    devices: dict[str, int] = field(default_factory=dict)
    shared_devices: dict[str, int] = field(default_factory=dict)
    pods: int = 1
    device_resources: dict[str, str] = field(default_factory=dict)

    def job_requests(self) -> dict[str, Decimal]:
        """What one Job asks of its queue: every pod's requests and devices (by Kueue's
        resource for their class) times the pods that run at once, and `pods` itself."""
        amounts = {resource: parse(amount, kind_for_resource(resource)) for resource, amount in self.requests.items()}
        for device_class, count in self.devices.items():
            name = self.device_resources.get(device_class, device_class)
            amounts[name] = amounts.get(name, Decimal(0)) + count
        out = {resource: amount * self.pods for resource, amount in amounts.items() if amount > 0}
        out[PODS] = Decimal(self.pods)
        return out

    def gpu_devices(self) -> int:
        """GPU devices one pod uses, whole GPUs and partitions alike (what `maxGpus` bounds)."""
        return sum(self.devices.values()) + sum(self.shared_devices.values())


def claim_devices(pod_spec: dict[str, Any], claims: dict[str, dict[str, Any]], kind: str) -> dict[str, int]:
    """Devices per device class of the claims the pod names that are of `kind`: its own
    (`ResourceClaimTemplate`: one claim per pod) or shared (`ResourceClaim`), read off the
    claim object (`exactly` requests: `count`, 1 if unset)."""
    out: dict[str, int] = {}
    for claim in pod_spec.get("resourceClaims") or []:
        name = claim.get("resourceClaimTemplateName") or claim.get("resourceClaimName") or ""
        source = claims.get(name)
        if source is None or source["kind"] != kind:
            continue
        spec = source["spec"]["spec"] if kind == "ResourceClaimTemplate" else source["spec"]
        for request in spec["devices"]["requests"]:
            exactly = request.get("exactly") or {}
            device_class = exactly.get("deviceClassName")
            if device_class:
                out[device_class] = out.get(device_class, 0) + int(exactly.get("count", 1))
    return out


def of(plan: Any) -> Optional[PodAccount]:
    """The account the planner settled for an entry (None: it runs no pod)."""
    return plan.account


def count_pod(pod_spec: dict[str, Any], limit_range_spec: dict[str, Any], pods: int,
              claims: Optional[dict[str, dict[str, Any]]] = None,
              device_resources: Optional[dict[str, str]] = None) -> PodAccount:
    """One pod's account from its spec as finally built (raises `PlacementError` for a bad
    quantity); `claims`: the claim objects the program made for it, by name."""
    containers, init_containers = pod_spec_containers(pod_spec)
    usage = pod_usage(containers, init_containers, limit_range_spec)
    own = claim_devices(pod_spec, claims or {}, "ResourceClaimTemplate")
    shared = claim_devices(pod_spec, claims or {}, "ResourceClaim")
    mapped = {c: r for c, r in (device_resources or {}).items() if c in own or c in shared}
    return PodAccount(containers, init_containers, usage["requests"], usage["limits"], own, shared, pods, mapped)


def device_quota(account: PodAccount, pods: int) -> dict[str, str]:
    """ResourceQuota keys for devices (`<class>.deviceclass.resource.k8s.io/devices`): each
    pod's own claims times the pods, a shared claim once."""
    totals = {c: n * pods for c, n in account.devices.items()}
    for device_class, count in account.shared_devices.items():
        totals[device_class] = totals.get(device_class, 0) + count
    return {device_rules.quota_key(device_class): str(count) for device_class, count in totals.items()}
