"""The profile rules (docs/profiles.md): maxima, GPUs, images, placement and privilege.

One set of rules, checked twice: on the entry before `jsonOverrides` (config/checks.py,
with `entry_facts`) and on the pod as finally built after them (plan/planner.py, with
`final_pod_facts`). Each side only says what it saw and in which words; the rules decide,
and every rejection names the profile rule that forbids it the same way, so a rule added
here holds on both sides. The final pod shows no GPU count or privilege of its own (GPUs
and `privileged` are entry fields; Pod Security and the policy pack judge the pod's
securityContext, docs/options.md), so those two rules apply before overrides only; the
planner refuses overrides that change the pod's GPUs (plan/final.py).

A `type: namespace` entry runs whatever its users start, so its ResourceQuota is what the
maxima hold: `quota_facts` shows the rules its own `quota` (before) and the quota as
planned (after), and `cap_quota` keeps the planned defaults within them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping, Optional, Sequence

from . import names
from .errors import Problem
from .rules import NETWORK_FROM_NEEDS_PROFILE
from .models import Profile, Workload
from .quantity import kind_for_resource, parse, render
from .resolve import PlacementError, pod_spec_containers

# The maximum each compared resource is held to, and the unit its amount is shown in.
MAXIMA = {"cpu": ("max_cpu", "CPU"), "memory": ("max_memory", "memory")}


@dataclass(frozen=True)
class Seen:
    """One thing a rule looks at: its value, the entry key a rejection is reported under,
    and how the side that saw it starts the message (empty: the rule's words alone)."""

    value: Any
    field: str
    said: str = ""


@dataclass
class Facts:
    """What one side shows the rules: CPU and memory amounts, the GPU count and vendor,
    images, node selector pairs, and a request for privilege."""

    amounts: dict[str, Seen] = field(default_factory=dict)
    gpus: list[Seen] = field(default_factory=list)
    images: list[Seen] = field(default_factory=list)
    selectors: list[Seen] = field(default_factory=list)
    privileged: Optional[Seen] = None
    workers: Optional[Seen] = None
    network_from: Optional[Seen] = None


def rule_name(source: Mapping[str, str], setting: str) -> str:
    """How every rejection names the rule that set `setting` (as `resolve_profile_sources`
    records it): `profile rule "@ml"`."""
    return f'profile rule "{source.get(setting)}"'


def check(facts: Facts, profile: Profile, source: Mapping[str, str], rules: Sequence[str] = ()) -> list[Problem]:
    """Every problem (at the entry's field) the merged `profile` raises against `facts`. A limit that no
    matching rule sets imposes nothing."""
    problems: list[Problem] = []

    def reject(seen: Seen, words: str) -> None:
        problems.append(Problem(seen.field, f"{seen.said} {words}" if seen.said else words))

    for resource, seen in facts.amounts.items():
        setting, _ = MAXIMA[resource]
        maximum = getattr(profile, setting)
        kind = kind_for_resource(resource)
        if maximum is not None and parse(seen.value, kind) > parse(maximum, kind):
            reject(seen, f"over {_camel(setting)} {maximum} of {rule_name(source, setting)}")
    for seen in facts.gpus:
        count, vendor = seen.value
        maximum = getattr(profile.max_gpus, vendor, None) if profile.max_gpus else None
        if maximum is not None and count > maximum:
            reject(seen, f"over maxGpus.{vendor} {maximum} of {rule_name(source, f'max_gpus.{vendor}')}")
    if facts.workers is not None and profile.max_workers is not None and facts.workers.value > profile.max_workers:
        reject(facts.workers, f"over maxWorkers {profile.max_workers} of {rule_name(source, 'max_workers')}")
    if profile.allow_unknown_images is False:
        allowed = allowed_images(profile)
        listed = ", ".join(sorted(allowed)) or "none"
        for seen in facts.images:
            if seen.value not in allowed:
                reject(seen, f"not an image {rule_name(source, 'allow_unknown_images')} allows "
                             f"(allowUnknownImages: false; images: {listed})")
    if profile.placement_constraints is not None:
        free, fixed = _offered(profile.placement_constraints)
        choices = ", ".join(sorted(free | {f"{k}:{v}" for k, vs in fixed.items() for v in vs})) or "none"
        for seen in facts.selectors:
            key, value = seen.value
            if key not in free and value not in fixed.get(key, set()):
                reject(seen, f"not a placement {rule_name(source, 'placement_constraints')} offers (offered: {choices})")
    if facts.privileged is not None and not profile.allow_privileged:
        where = f"rules applied: {', '.join(rules)}" if rules else "no profile rule matches"
        if "allow_privileged" in source:
            where = f"{rule_name(source, 'allow_privileged')} sets it false"
        reject(facts.privileged, f"needs a profile with allowPrivileged: true ({where})")
    if facts.network_from is not None and not profile.allow_network_from:
        where = f"rules applied: {', '.join(rules)}" if rules else "no profile rule matches"
        if "allow_network_from" in source:
            where = f"{rule_name(source, 'allow_network_from')} sets it false"
        reject(facts.network_from, f"{NETWORK_FROM_NEEDS_PROFILE.message} ({where})")
    return problems


def entry_facts(entry: Workload) -> Facts:
    """What the rules look at before overrides: the entry's own limits (or requests), or
    the totals of a raw pod spec's containers, its GPUs, images, placement and privilege."""
    pod_spec = entry.pod_spec
    if entry.type == "namespace":
        return quota_facts(entry.quota or {}, "quota")
    facts = Facts()
    if pod_spec is not None:
        try:
            containers, _ = pod_spec_containers(pod_spec)
        except PlacementError:
            containers = []  # reported by resolve.apply_profile
        totals: dict[str, Decimal] = {}
        for item in containers:
            for resource, amount in {**item["requests"], **item["limits"]}.items():
                totals[resource] = totals.get(resource, Decimal(0)) + parse(amount, kind_for_resource(resource))
        for resource, (_, unit) in MAXIMA.items():
            if resource in totals:
                value = render(totals[resource], kind_for_resource(resource))
                facts.amounts[resource] = Seen(value, "podSpec", f"{value} {unit} is")
    else:
        for resource, (_, unit) in MAXIMA.items():
            limit = getattr(entry, f"{resource}_limit")
            value = limit or getattr(entry, resource)
            if value is not None:
                key = f"{resource}Limit" if limit else resource
                facts.amounts[resource] = Seen(value, key, f"{value} {unit} is")
    where = "podSpec" if pod_spec is not None else None
    if entry.gpu is not None:
        # Devices of a DRA pool: a partition counts as one GPU, as a whole GPU does (docs/gpus.md).
        count = entry.gpu.count
        facts.gpus = [Seen((count, entry.gpu_vendor), "gpu.count", f"{count} {entry.gpu_vendor} GPU devices are")]
    else:
        facts.gpus = [Seen((entry.gpus, entry.gpu_vendor), where or "gpus", f"{entry.gpus} {entry.gpu_vendor} GPUs are")]
    if pod_spec is not None:
        images = [c.get("image") for c in pod_spec.get("containers", []) + pod_spec.get("initContainers", [])]
    else:
        images = [entry.image] if entry.image else []
    facts.images = [Seen(image, where or "image", f'"{image}" is') for image in images]
    for key_field, selector in (("placement", entry.placement), ("nodeSelector", entry.node_selector),
                                ("podSpec.nodeSelector", (pod_spec or {}).get("nodeSelector") or {})):
        facts.selectors += [Seen((k, v), f"{key_field}.{k}", f'"{k}: {v}" is') for k, v in selector.items()]
    if entry.privileged:
        facts.privileged = Seen(True, "privileged")
    if entry.allow_from:
        facts.network_from = Seen(True, "allowFrom")
    facts.workers = Seen(entry.workers, "workers", f"{entry.workers} workers are")
    return facts


def final_pod_facts(pod_spec: Mapping[str, Any], limits: Mapping[str, str], added: str) -> Facts:
    """What the rules look at after overrides: the final pod's images and node selector
    (leaving out the container named `added`, which the program adds, and the pool label,
    which `pool` sets) and `limits`, what the pod counts against the quota."""
    here = "jsonOverrides"
    facts = Facts()
    for resource in MAXIMA:
        got = limits.get(resource)
        if got is not None:
            facts.amounts[resource] = Seen(got, here, f"they raise the pod's {resource} limit to {got},")
    # What an override wrote is not repeated (it may be a secret in the wrong place): the
    # container and the selector key say where.
    for raw in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or []):
        if raw.get("name") != added:
            facts.images.append(Seen(raw.get("image"), here,
                                     f'they set the image of container "{raw.get("name")}" to one that is'))
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if key != names.LABEL_POOL:
            facts.selectors.append(Seen((key, value), here, f'they set nodeSelector "{key}" to a value that is'))
    return facts


GPU_VENDORS = ("nvidia", "amd")


def _quota_keys(resource: str) -> tuple[str, ...]:
    """The ResourceQuota keys that bound `resource` in a namespace."""
    if resource in MAXIMA:
        return (resource, f"requests.{resource}", f"limits.{resource}")
    return (f"requests.{resource}",)


def quota_facts(quota: Mapping[str, str], field: str) -> Facts:
    """What the rules look at in a `type: namespace` entry's ResourceQuota (its own `quota`,
    reported under `quota.<key>`, or the quota as planned): per resource, the largest of
    its keys, and the GPUs of each vendor."""
    facts = Facts()
    for resource, (_, unit) in MAXIMA.items():
        kind = kind_for_resource(resource)
        present = [(key, quota[key]) for key in _quota_keys(resource) if key in quota]
        if present:
            key, value = max(present, key=lambda pair: parse(pair[1], kind))
            facts.amounts[resource] = Seen(value, f"{field}.{key}", f"{value} {unit} in the namespace's quota is")
    for vendor in GPU_VENDORS:
        key = f"requests.{vendor}.com/gpu"
        if key in quota:
            count = parse(quota[key])
            shown = int(count) if count == count.to_integral_value() else count
            facts.gpus.append(Seen((count, vendor), f"{field}.{key}", f"{shown} {vendor} GPUs in the namespace's quota are"))
    return facts


def cap_quota(quota: Mapping[str, str], profile: Profile, own: Mapping[str, str]) -> dict[str, str]:
    """A namespace's planned quota with every key the entry did not write itself (`own`)
    brought within the profile's maxima, and a GPU key for each vendor with a maximum."""
    out = dict(quota)
    for resource, (setting, _) in MAXIMA.items():
        maximum = getattr(profile, setting)
        if maximum is None:
            continue
        kind = kind_for_resource(resource)
        for key in _quota_keys(resource):
            if key in out and key not in own and parse(out[key], kind) > parse(maximum, kind):
                out[key] = render(parse(maximum, kind), kind)
    for vendor in GPU_VENDORS:
        maximum = getattr(profile.max_gpus, vendor, None) if profile.max_gpus else None
        key = f"requests.{vendor}.com/gpu"
        if maximum is not None and key not in own:
            out[key] = str(maximum)
    return dict(sorted(out.items()))


def profile_caps(profile: Profile) -> dict[str, str]:
    """The profile's CPU and memory maxima, as per-container limits (a namespace's
    LimitRange `max`)."""
    return {resource: getattr(profile, setting) for resource, (setting, _) in MAXIMA.items()
            if getattr(profile, setting) is not None}


def allowed_images(profile: Profile) -> set[str]:
    """The images a profile that refuses unknown images lets through: its list and default."""
    return set(profile.images or []) | ({profile.default_image} if profile.default_image else set())


def _offered(constraints: list[str]) -> tuple[set[str], dict[str, set[str]]]:
    """`key` is free-form, `key:value` a fixed choice (the RStudio Workbench Launcher
    Kubernetes plugin documentation's placement constraints)."""
    free: set[str] = set()
    fixed: dict[str, set[str]] = {}
    for item in constraints:
        key, sep, value = item.partition(":")
        if sep:
            fixed.setdefault(key, set()).add(value)
        else:
            free.add(key)
    return free, fixed


def _camel(setting: str) -> str:
    head, *rest = setting.split("_")
    return head + "".join(part.title() for part in rest)
