"""The kns-platform guard rails, as pure functions: one source for the policy pack and the checks.

Each rule takes Kubernetes objects (type token, URN and inputs) plus the rule's config and
returns the violations it finds. They read objects only, never the stack config: a guard
rail must hold whatever produced the objects, including jsonOverrides, raw pod specs and
changes to the program itself. The policy pack (policy/pack.py) serves them to the engine;
`config_problems` runs the same rules on what the program plans, so that `./kns validate`
and the program refuse, as config errors with their paths, what the pack would refuse of
the program's own objects (docs/policy.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Optional, Sequence

from config import resolve
from config.errors import Problem
from config.loader import POLICY_CONFIG_VARIABLE

from . import identity, manifests, network, nodepools, schedulers

if TYPE_CHECKING:
    from .stackplan import StackPlan

# What a team gets without --policy-pack-config: the registries the platform's own images
# and the examples come from. Entries are registry hosts or host/path prefixes.
DEFAULT_ALLOWED_REGISTRIES = (
    "registry.k8s.io",
    "docker.io",
    "ghcr.io",
    "quay.io",
    "nvcr.io",
    "us-docker.pkg.dev/jarvice",
)
DEFAULT_REQUIRED_LIMITS = ("cpu", "memory")
# Extended resource -> the taint key its node pools carry (the device plugins' convention,
# and what kns:nodePools gives GPU pools).
DEFAULT_GPU_TAINTS = {"nvidia.com/gpu": "nvidia.com/gpu", "amd.com/gpu": "amd.com/gpu"}

ENTRY_LABEL = "kns.io/job"
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"

_POD_TEMPLATE_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


@dataclass(frozen=True)
class Resource:
    """What a rule sees of one resource."""

    type: str
    urn: str
    props: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """The Kubernetes kind of a `kubernetes:<group>/<version>:<Kind>` token, else ''."""
        if not self.type.startswith("kubernetes:"):
            return ""
        return self.type.rsplit(":", 1)[-1]

    @property
    def label(self) -> str:
        """`Kind namespace/name` as users know the object."""
        metadata = _mapping(self.props.get("metadata"))
        name = metadata.get("name") or self.urn.rsplit("::", 1)[-1]
        namespace = metadata.get("namespace")
        return f"{self.kind or self.type} {namespace + '/' if namespace else ''}{name}"

    @property
    def type_chain(self) -> list[str]:
        """The types of this resource's ancestors, outermost first, then its own (from the URN)."""
        parts = self.urn.split("::")
        return parts[2].split("$") if len(parts) >= 4 else [self.type]


@dataclass(frozen=True)
class Violation:
    urn: str
    message: str


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else []


def pod_spec(resource: Resource) -> Optional[Mapping[str, Any]]:
    """The pod spec a workload object runs, or None for objects that run no pods."""
    path = _POD_TEMPLATE_PATHS.get(resource.kind)
    if path is None:
        return None
    node: Any = resource.props
    for key in path:
        node = _mapping(node).get(key)
    return _mapping(node)


def containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(`containers[0] 'name'`-style label, container) for every container of a pod spec."""
    for field in _CONTAINER_LISTS:
        for index, container in enumerate(_sequence(spec.get(field))):
            container = _mapping(container)
            yield f"{field}[{index}] '{container.get('name', '?')}'", container


def pod_containers(resources: Iterable[Resource]) -> Iterator[tuple[Resource, str, Mapping[str, Any]]]:
    """(resource, container label, container) for every container of every pod-running object."""
    for resource in resources:
        spec = pod_spec(resource)
        if spec is not None:
            for where, container in containers(spec):
                yield resource, where, container


def image_repository(image: str) -> str:
    """The fully qualified repository of an image reference, without tag or digest:
    `busybox:1.37` -> `docker.io/library/busybox`, `ghcr.io/a/b:1` -> `ghcr.io/a/b`."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name = name[:colon]
    first, sep, rest = name.partition("/")
    if not sep:
        return f"docker.io/library/{name}"
    if "." in first or ":" in first or first == "localhost":
        return "docker.io/" + rest if first in ("index.docker.io", "registry-1.docker.io") else name
    return f"docker.io/{name}"


def image_allowed(image: str, allowed: Iterable[str]) -> bool:
    """True when the image's repository is an allowed registry or under an allowed prefix
    (matched on whole path segments: `ghcr.io/acme` allows `ghcr.io/acme/x`, not `ghcr.io/acme2/x`)."""
    repository = image_repository(image)
    for prefix in allowed:
        prefix = prefix.strip().rstrip("/")
        if prefix and (repository == prefix or repository.startswith(prefix + "/")):
            return True
    return False


def containers_have_limits(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """Every container of every pod-running object sets a limit for each required resource."""
    required = list(config.get("requiredLimits") or DEFAULT_REQUIRED_LIMITS)
    found = []
    for resource, where, container in pod_containers(resources):
        limits = _mapping(_mapping(container.get("resources")).get("limits"))
        missing = [name for name in required if name not in limits]
        if missing:
            found.append(Violation(resource.urn, f"{resource.label}: {where} has no {' or '.join(missing)} limit"))
    return found


def allowed_registries(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """Every image comes from a configured registry (or registry/path prefix)."""
    allowed = list(config.get("allowedRegistries") or DEFAULT_ALLOWED_REGISTRIES)
    found = []
    for resource, where, container in pod_containers(resources):
        image = container.get("image")
        if not isinstance(image, str) or not image:
            found.append(Violation(resource.urn, f"{resource.label}: {where} names no image"))
        elif not image_allowed(image, allowed):
            found.append(Violation(
                resource.urn,
                f"{resource.label}: {where} image '{image}' ({image_repository(image)}) is not from an "
                f"allowed registry ({', '.join(allowed)})",
            ))
    return found


def _tolerates(tolerations: list[Any], key: str) -> bool:
    for toleration in tolerations:
        toleration = _mapping(toleration)
        effect = toleration.get("effect") or ""
        if effect not in ("", "NoSchedule"):
            continue
        operator = toleration.get("operator") or "Equal"
        if not toleration.get("key") and operator == "Exists":
            return True
        if toleration.get("key") == key:
            return True
    return False


def gpu_pods_tolerate_gpu_taint(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """A pod that asks for a GPU tolerates the NoSchedule taint of the GPU pools: without it
    the pod can never start there, and with the taint missing from the pool, CPU pods would
    fill the GPU nodes."""
    taints = dict(config.get("gpuTaints") or DEFAULT_GPU_TAINTS)
    found = []
    for resource in resources:
        spec = pod_spec(resource)
        if spec is None:
            continue
        wanted = set()
        for _, container in containers(spec):
            amounts = _mapping(container.get("resources"))
            for section in ("requests", "limits"):
                wanted |= {name for name in _mapping(amounts.get(section)) if name in taints}
        tolerations = _sequence(spec.get("tolerations"))
        for name in sorted(wanted):
            if not _tolerates(tolerations, taints[name]):
                found.append(Violation(
                    resource.urn,
                    f"{resource.label}: requests {name} but does not tolerate the '{taints[name]}' NoSchedule taint "
                    "of the GPU pools",
                ))
    return found


def _has_noschedule_taint(taints: list[Any], key: str) -> bool:
    return any(_mapping(t).get("key") == key and _mapping(t).get("effect") == "NoSchedule" for t in taints)


def gpu_pools_are_tainted(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """A GPU pool's nodes carry the GPU taint, so that only pods asking for GPUs land there:
    a static pool's node patch labelled with a GPU resource, and a Karpenter NodePool whose
    node template is labelled with one or whose limits count one (docs/autoscaling.md)."""
    taints = dict(config.get("gpuTaints") or DEFAULT_GPU_TAINTS)
    found = []
    for resource in resources:
        props = _mapping(resource.props)
        if resource.kind == "NodePatch":
            labels = _mapping(_mapping(props.get("metadata")).get("labels"))
            node_taints = _sequence(_mapping(props.get("spec")).get("taints"))
            gpus = {name for name in taints if name in labels}
        elif resource.kind == "NodePool" and resource.type.startswith("kubernetes:karpenter.sh/"):
            template = _mapping(_mapping(props.get("spec")).get("template"))
            labels = _mapping(_mapping(template.get("metadata")).get("labels"))
            node_taints = _sequence(_mapping(template.get("spec")).get("taints"))
            limits = _mapping(_mapping(props.get("spec")).get("limits"))
            gpus = {name for name in taints if name in labels or name in limits}
        else:
            continue
        for name in sorted(gpus):
            if not _has_noschedule_taint(node_taints, taints[name]):
                found.append(Violation(
                    resource.urn,
                    f"{resource.label}: a {name} pool's nodes must carry the '{taints[name]}' NoSchedule taint, "
                    "or pods that need no GPU fill them",
                ))
    return found


def _privileged_features(spec: Mapping[str, Any]) -> list[str]:
    features = [f"{field}: true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field) is True]
    for where, container in containers(spec):
        if _mapping(container.get("securityContext")).get("privileged") is True:
            features.append(f"{where} privileged: true")
    return features


def privileged_only_where_allowed(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """A privileged pod (privileged container or host namespaces) runs only in an entry's
    namespace that this stack labels Pod Security `privileged`, which the program does only
    for an entry whose profile allows it. Catches privilege that arrives any other way
    (jsonOverrides, a raw podSpec, a hand-edited program) before the API server does."""
    resources = list(resources)
    namespaces = {}
    for resource in resources:
        if resource.kind == "Namespace":
            metadata = _mapping(resource.props.get("metadata"))
            namespaces[metadata.get("name")] = _mapping(metadata.get("labels"))
    found = []
    for resource in resources:
        spec = pod_spec(resource)
        features = _privileged_features(spec) if spec is not None else []
        if not features:
            continue
        namespace = _mapping(resource.props.get("metadata")).get("namespace") or "default"
        labels = namespaces.get(namespace)
        if labels is None:
            reason = f"namespace '{namespace}' is not an entry namespace of this stack"
        elif ENTRY_LABEL not in labels:
            reason = f"namespace '{namespace}' belongs to no job or schedule entry"
        elif labels.get(ENFORCE_LABEL) != "privileged":
            reason = (f"entry '{labels[ENTRY_LABEL]}' is not privileged through its profile "
                      f"(its namespace enforces Pod Security '{labels.get(ENFORCE_LABEL, 'unset')}'); "
                      "set privileged: true on the entry under a profile with allowPrivileged: true")
        else:
            continue
        found.append(Violation(resource.urn, f"{resource.label}: {', '.join(features)}, but {reason}"))
    return found


def _subject(subject: Any) -> str:
    subject = _mapping(subject)
    namespace = subject.get("namespace")
    return f"{subject.get('kind', '?')} {namespace + '/' if namespace else ''}{subject.get('name', '?')}"


def cluster_admin_only_kns(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """cluster-admin is bound only to the KNS scheduler's ServiceAccount (the one this stack
    creates inside its KnsScheduler component), plus any `allowedSubjects` ("namespace/name"
    of ServiceAccounts) a team configures."""
    resources = list(resources)
    allowed = {str(s) for s in config.get("allowedSubjects") or ()}
    for resource in resources:
        if resource.kind == "ServiceAccount" and identity.KNS_SCHEDULER_TYPE in resource.type_chain[:-1]:
            metadata = _mapping(resource.props.get("metadata"))
            allowed.add(f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}")
    found = []
    for resource in resources:
        if resource.kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        role = _mapping(resource.props.get("roleRef"))
        if role.get("kind") != "ClusterRole" or role.get("name") != "cluster-admin":
            continue
        binding_namespace = _mapping(resource.props.get("metadata")).get("namespace") or "default"
        subjects = _sequence(resource.props.get("subjects"))
        bad = []
        for subject in subjects:
            subject = _mapping(subject)
            key = f"{subject.get('namespace') or binding_namespace}/{subject.get('name')}"
            if subject.get("kind") != "ServiceAccount" or key not in allowed:
                bad.append(_subject(subject))
        if bad:
            found.append(Violation(
                resource.urn,
                f"{resource.label}: binds cluster-admin to {', '.join(bad)}; only the KNS scheduler's ServiceAccount "
                f"({', '.join(sorted(allowed)) or 'none in this stack'}) may have it",
            ))
    return found


ISOLATED = (network.ISOLATED_LABEL, network.ISOLATED)


def _widening(rule: Mapping[str, Any]) -> Optional[str]:
    """Why an ingress rule lets in more than named namespaces: no `from` (every source), a
    peer selecting every namespace, or addresses (an ipBlock)."""
    peers = _sequence(rule.get("from"))
    if not peers:
        return "admits every source (a rule without from)"
    for peer in map(_mapping, peers):
        if "ipBlock" in peer:
            return f"admits addresses ({_mapping(peer['ipBlock']).get('cidr')})"
        selector = peer.get("namespaceSelector")
        if selector is not None and not _mapping(selector).get("matchLabels") and \
                not _sequence(_mapping(selector).get("matchExpressions")):
            return "admits every namespace (an empty namespaceSelector)"
    return None


def entry_namespaces_are_isolated(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """An entry namespace labelled isolated (`kns.io/network: isolated`, kns:network) has a
    NetworkPolicy selecting all its pods for ingress and egress, and no NetworkPolicy in it
    admits every source, every namespace or addresses (docs/network.md)."""
    resources = list(resources)
    policies: dict[str, list[Resource]] = {}
    for resource in resources:
        if resource.kind == "NetworkPolicy":
            namespace = _mapping(resource.props.get("metadata")).get("namespace") or "default"
            policies.setdefault(namespace, []).append(resource)
    found = []
    for resource in resources:
        labels = _mapping(_mapping(resource.props.get("metadata")).get("labels"))
        if resource.kind != "Namespace" or ENTRY_LABEL not in labels or labels.get(ISOLATED[0]) != ISOLATED[1]:
            continue
        namespace = _mapping(resource.props.get("metadata")).get("name")
        inside = policies.get(namespace, [])
        if not any(not _mapping(_mapping(p.props.get("spec")).get("podSelector")) and
                   {"Ingress", "Egress"} <= set(_sequence(_mapping(p.props.get("spec")).get("policyTypes")))
                   for p in inside):
            found.append(Violation(resource.urn, f"{resource.label}: is labelled {ISOLATED[0]}: {ISOLATED[1]}, but no "
                                                 "NetworkPolicy selects all its pods for ingress and egress"))
        for policy in inside:
            for index, rule in enumerate(_sequence(_mapping(policy.props.get("spec")).get("ingress"))):
                why = _widening(_mapping(rule))
                if why:
                    found.append(Violation(policy.urn, f"{policy.label}: ingress[{index}] {why} into isolated entry "
                                                       f"namespace {namespace}"))
    return found


# ---- the guard rails as the pack serves them, and as the checks run them ------------------

RESERVATION_LABEL = "kns.io/reservation"
# What a reservation's switch may touch only by name (docs/reservations.md, "The switch").
NAMED_ONLY = {"localqueues", "clusterqueues", "cohorts", "cronjobs"}


def _writes(role: Resource) -> bool:
    return any(set(_sequence(_mapping(rule).get("verbs"))) - {"get", "list", "watch"}
               for rule in _sequence(role.props.get("rules")))


def reservation_rbac_is_narrow(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """A reservation's switch changes nothing cluster-wide: the roles labelled with a
    reservation that may change objects are bound only inside namespaces (RoleBindings),
    none grants a wildcard, and they name the queues and CronJob they may change."""
    resources = list(resources)
    roles = {(r.kind, _mapping(r.props.get("metadata")).get("name")): r for r in resources
             if r.kind in ("Role", "ClusterRole") and RESERVATION_LABEL in _mapping(
                 _mapping(r.props.get("metadata")).get("labels"))}
    found = []
    for resource in resources:
        if resource.kind != "ClusterRoleBinding":
            continue
        role = roles.get(("ClusterRole", _mapping(resource.props.get("roleRef")).get("name")))
        if role is not None and _writes(role):
            found.append(Violation(resource.urn, f"{resource.label}: binds reservation role "
                                                 f"{_mapping(role.props.get('metadata')).get('name')} cluster-wide, and "
                                                 "it may change objects; bind it with a RoleBinding in the namespaces "
                                                 "it serves"))
    for (kind, name), role in roles.items():
        for rule in _sequence(role.props.get("rules")):
            rule = _mapping(rule)
            fields = [*_sequence(rule.get("verbs")), *_sequence(rule.get("resources")), *_sequence(rule.get("apiGroups"))]
            if "*" in fields:
                found.append(Violation(role.urn, f"{role.label}: grants a wildcard ({kind} {name})"))
            named = set(_sequence(rule.get("resources"))) & NAMED_ONLY
            writes = set(_sequence(rule.get("verbs"))) - {"get", "list", "watch"}
            if named and writes and not _sequence(rule.get("resourceNames")):
                found.append(Violation(role.urn, f"{role.label}: may {', '.join(sorted(writes))} any "
                                                 f"{', '.join(sorted(named))}; name the objects (resourceNames)"))
    return found


CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


def device_claims_are_counted(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """Every device a claim asks is counted (docs/gpus.md): an `exactly` request of a count
    of devices of one class, which the ResourceQuota and Kueue count. `allocationMode: All`
    takes however many match, `firstAvailable` alternatives Kueue refuses, and `adminAccess`
    reaches devices allocated to other pods."""
    found = []
    for resource in resources:
        if resource.kind not in CLAIM_KINDS:
            continue
        spec = _mapping(resource.props.get("spec"))
        if resource.kind == "ResourceClaimTemplate":
            spec = _mapping(spec.get("spec"))
        for request in _sequence(_mapping(spec.get("devices")).get("requests")):
            request = _mapping(request)
            name = request.get("name") or "?"
            exactly = _mapping(request.get("exactly"))
            if not exactly:
                found.append(Violation(resource.urn, f"{resource.label}: request {name} asks no exact device class "
                                                     "and count (firstAvailable is counted by neither quota nor queue)"))
                continue
            if (exactly.get("allocationMode") or "ExactCount") != "ExactCount":
                found.append(Violation(resource.urn, f"{resource.label}: request {name} takes every matching device "
                                                     f"(allocationMode {exactly.get('allocationMode')}); ask a count"))
            if exactly.get("adminAccess"):
                found.append(Violation(resource.urn, f"{resource.label}: request {name} asks adminAccess, which "
                                                     "reaches devices allocated to other pods"))
    return found


_STRINGS = {"type": "array", "items": {"type": "string"}}
# Extended resource -> the taint key of its pools: read by both GPU rules.
_GPU_TAINTS = {"type": "object", "additionalProperties": {"type": "string"}, "default": dict(DEFAULT_GPU_TAINTS)}


@dataclass(frozen=True)
class GuardRail:
    """One policy of the pack: `stack` rules need the other resources of the stack
    (namespaces, the KNS account); the others judge one resource at a time."""

    name: str
    description: str
    rule: Any
    schema: Mapping[str, Any]
    stack: bool = False


GUARD_RAILS = (
    GuardRail("containers-have-limits",
              "Every container (init containers included) sets limits for the required resources.",
              containers_have_limits,
              {"requiredLimits": {**_STRINGS, "default": list(DEFAULT_REQUIRED_LIMITS)}}),
    GuardRail("privileged-only-where-allowed",
              "Privileged containers and host namespaces only in entries whose profile allows them.",
              privileged_only_where_allowed, {}, stack=True),
    GuardRail("allowed-registries", "Images come only from the allowed registries.", allowed_registries,
              {"allowedRegistries": {**_STRINGS, "default": list(DEFAULT_ALLOWED_REGISTRIES)}}),
    GuardRail("gpu-pods-tolerate-gpu-taint", "Pods that request a GPU tolerate the GPU pools' taint.",
              gpu_pods_tolerate_gpu_taint, {"gpuTaints": _GPU_TAINTS}),
    GuardRail("gpu-pools-are-tainted",
              "GPU node pools, static or autoscaled (Karpenter NodePools), taint their nodes for GPU pods only.",
              gpu_pools_are_tainted, {"gpuTaints": _GPU_TAINTS}),
    GuardRail("cluster-admin-only-kns", "cluster-admin is bound only to the KNS scheduler's ServiceAccount.",
              cluster_admin_only_kns, {"allowedSubjects": {**_STRINGS, "default": []}}, stack=True),
    GuardRail("device-claims-are-counted",
              "Device claims ask a count of devices of one class, which the quota and the queues count.",
              device_claims_are_counted, {}),
    GuardRail("entry-namespaces-are-isolated",
              "An isolated entry namespace has a NetworkPolicy for all its pods, and none that lets everyone in.",
              entry_namespaces_are_isolated, {}, stack=True),
    GuardRail("reservation-rbac-is-narrow",
              "A reservation's switch is bound only inside namespaces, with no wildcard, naming what it changes.",
              reservation_rbac_is_narrow, {}, stack=True),
)
_LEVELS = ("advisory", "mandatory", "remediate", "disabled")


def pack_settings(text: Optional[str]) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    """Each guard rail's config from the text of a `--policy-pack-config` file (Pulumi's
    format: policy name, or "all", to an enforcement level or an object of properties and
    `enforcementLevel`), the rails it disables left out; and the problems of the file, which
    never quote its content. No file: every rail with its defaults."""
    settings: dict[str, dict[str, Any]] = {rail.name: {} for rail in GUARD_RAILS}
    if text is None:
        return settings, []
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return settings, [_file_problem(f"is not JSON (line {getattr(exc, 'lineno', '?')})")]
    if not isinstance(raw, dict):
        return settings, [_file_problem("is not a JSON object of policy names")]
    problems = []
    known = {rail.name for rail in GUARD_RAILS} | {"all"}
    for name, value in raw.items():
        if name not in known:
            problems.append(_file_problem(f"names no policy of the pack: {name!r} "
                                          f"(policies: {', '.join(sorted(known - {'all'}))})"))
        elif not isinstance(value, (str, dict)) or (isinstance(value, str) and value not in _LEVELS):
            problems.append(_file_problem(f"{name}: an enforcement level ({', '.join(_LEVELS)}) "
                                          "or an object of properties"))
    everyone = raw.get("all")
    for rail in GUARD_RAILS:
        value = raw.get(rail.name, everyone)
        level = value if isinstance(value, str) else (value or {}).get("enforcementLevel") if isinstance(value, dict) \
            else None
        if level == "disabled":
            del settings[rail.name]
        elif isinstance(raw.get(rail.name), dict):
            settings[rail.name] = {k: v for k, v in raw[rail.name].items() if k != "enforcementLevel"}
    return settings, problems


def _file_problem(message: str) -> Problem:
    """A problem of the policy pack's config file, at the variable that names it."""
    return Problem(POLICY_CONFIG_VARIABLE, f"the policy pack config {message}")


def _objects(planned: "StackPlan") -> Iterator[tuple[str, Resource]]:
    """(config path, object) for every object the program builds from config that a guard
    rail judges: each entry's namespace and workloads, each pool's NodePool or node patches,
    the two schedulers' Deployments, each reservation's objects. The config path stands in for
    the URN."""
    cfg, plans = planned.config, planned.entries
    for plan in plans:
        path = cfg.paths[plan.entry.name]
        yield path, Resource("kubernetes:core/v1:Namespace", path, {
            "metadata": {"name": plan.namespace, "labels": manifests.namespace_labels(plan)}})
        if plan.network_policy is not None:
            yield path, Resource(identity.type_token(plan.network_policy), path, plan.network_policy)
        for manifest in plan.objects.values():
            yield path, Resource(f"kubernetes:batch/v1:{manifest['kind']}", path, manifest)
        if plan.claim is not None:
            yield path, Resource(f"kubernetes:{plan.claim['apiVersion']}:{plan.claim['kind']}", path, plan.claim)
    for pool in cfg.node_pools:
        path = f"kns:nodePools[{pool.name}]"
        if pool.autoscale is not None:
            yield path, Resource("kubernetes:karpenter.sh/v1:NodePool", path,
                                 nodepools.nodepool_manifest(pool, cfg.cluster.name))
        labels, taints = resolve.pool_labels(pool, cfg.cluster.name), resolve.pool_taints(pool)
        for node in pool.static_nodes:
            yield path, Resource("kubernetes:core/v1:NodePatch", path, {
                "metadata": {"name": node, "labels": labels}, "spec": {"taints": taints}})
    for reserved in planned.reservations:
        path = f"kns:reservations[{reserved.name}]"
        for manifest in reserved.objects:
            yield path, Resource(identity.type_token(manifest), path, manifest)
    system = cfg.cluster.system_namespace
    if cfg.packing_scheduler.enabled:
        spec = schedulers.packing_pod_spec(cfg.packing_scheduler, system, cfg.node_pools, "config")
        yield "kns:packingScheduler", Resource("kubernetes:apps/v1:Deployment", "kns:packingScheduler", {
            "metadata": {"name": cfg.packing_scheduler.name, "namespace": system}, "spec": {"template": {"spec": spec}}})
    if cfg.kns_scheduler.enabled:
        spec = schedulers.kns_pod_spec(cfg.kns_scheduler, cfg.node_pools, cfg.keycloak_client_secret is not None, {})
        yield "kns:knsScheduler", Resource("kubernetes:apps/v1:Deployment", "kns:knsScheduler", {
            "metadata": {"name": schedulers.KNS_ACCOUNT, "namespace": system}, "spec": {"template": {"spec": spec}}})


def config_problems(planned: "StackPlan", settings: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """The problem, at its config path, of each violation a guard rail of the pack finds in what the
    program plans, under the settings of `pack_settings`: the pack would refuse the update,
    so `./kns validate` and the program refuse the config first (docs/policy.md)."""
    objects = [resource for _, resource in _objects(planned)]
    labels = {resource.label for resource in objects}
    found: list[Problem] = []
    for rail in GUARD_RAILS:
        if rail.name not in settings:
            continue
        for violation in rail.rule(objects, settings[rail.name]):
            # The config path names the entry or pool; which of its objects (a primer's
            # CronJobs, a static pool's nodes) does not add to what the user must change.
            label, _, rest = violation.message.partition(": ")
            item = Problem(violation.urn, f"{rest if label in labels else violation.message} "
                                          f"(policy {rail.name}, docs/policy.md)")
            if item not in found:
                found.append(item)
    return found
