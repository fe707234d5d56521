"""Typed stack config: pydantic v2 models for every key of the user contract (docs/reference.md).

Models check what one object can check alone (syntax, ranges, exclusive fields);
cross-entry rules (unique names, pool references, GPU pools) live in `config.checks`.
Messages an editor shows too come from `config.rules`.
Keys are camelCase on the wire; unknown keys are rejected (the loader suggests the
nearest known key).
"""

from __future__ import annotations

import base64
import ipaddress
import json
from types import UnionType
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from chrono import cron
from . import karpenter, multikueue, names, podspec, pointer, queues, rules
from .errors import UNREPEATED, Problem, at
from .quantity import MIB, Kind, QuantityError, kind_for_resource, normalise, parse


class Model(BaseModel):
    """Base: camelCase aliases, unknown keys forbidden, and no boolean taken for a number
    (pydantic would read `weight: true` as 1)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_default=True
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if _numbers_only(annotation):
                raise ValueError(rules.BOOLEAN_IS_NOT_A_NUMBER.message)
        return value


def _numbers_only(annotation: Any) -> bool:
    """Whether a field's type takes numbers and no boolean (int, float, Optional of them)."""
    if annotation in (int, float):
        return True
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is Annotated:
        return _numbers_only(args[0])
    return bool(args) and get_origin(annotation) in (Union, UnionType) and all(_numbers_only(a) for a in args)


def _quantity(kind: Kind, allow_zero: bool = False) -> BeforeValidator:
    def check(value: object) -> str:
        try:
            canonical = normalise(value, kind, allow_zero=allow_zero)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        problem = _unit_mistake(value, canonical, kind, allow_zero)
        if problem:
            raise ValueError(problem)
        return canonical

    return BeforeValidator(check)


def _unit_mistake(value: object, canonical: str, kind: Kind, allow_zero: bool) -> Optional[str]:
    """Under 1Mi is almost surely a unit mistake: the string "4096" is bytes (a number is
    MiB). Zero, where zero is allowed, is meant."""
    if kind is not Kind.BYTES:
        return None
    size = parse(canonical, kind)
    if size >= MIB or (allow_zero and size == 0):
        return None
    return f'"{value}" is only {size} bytes; write a number for MiB (4096) or a unit ("4Gi")'


def _resource_map(value: object) -> object:
    """Normalise a {resource name: quantity} map; the kind comes from each key."""
    return _quantities(value, names.resource_name_problem)


def _extra_resources(value: object) -> object:
    """`extraResources`: a resource with a field of its own is named as that first (its
    value is beside the point: it goes in that field)."""
    if isinstance(value, dict):
        podspec.raise_if_any([at((str(key),), problem) for key in value
                              if (problem := podspec.core_resource_problem(str(key)))])
    return _resource_map(value)


def _quantities(value: object, name_problem) -> object:
    """Normalise a {name: quantity} map whose names `name_problem` accepts, every problem at once."""
    if not isinstance(value, dict):
        return value
    out: dict[str, str] = {}
    problems = []
    for key, raw in value.items():
        problem = name_problem(str(key))
        if problem:
            problems.append(problem)
            continue
        kind = kind_for_resource(str(key))
        try:
            out[str(key)] = normalise(raw, kind, allow_zero=True)
        except QuantityError as exc:
            problems.append(f"{key}: {exc}")
            continue
        mistake = _unit_mistake(raw, out[str(key)], kind, allow_zero=True)
        if mistake:
            problems.append(f"{key}: {mistake}")
    if problems:
        raise ValueError("; ".join(problems))
    return out


def _check(problem_of):
    def check(value):
        problem = problem_of(value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


def duration_text(rule: rules.Rule) -> BeforeValidator:
    """A number where a duration belongs (`duration: 3`, `consolidateAfter: 0`): quoting it
    would not make it one, so the message says what the field's duration is (its `rule`)."""
    shape = rule.message.removeprefix("is ").removeprefix("not ")

    def check(value: object) -> object:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"{value} is a number, not {shape}")
        return value

    check.only_refuses = True  # type: ignore[attr-defined]  # tools/schema.py: the field's own schema stands
    return BeforeValidator(check)


def _without_credentials(way_out: rules.Rule) -> AfterValidator:
    """A URL with no credential in it (config/names.py), else the secret-based `way_out`."""
    def problem(url: str) -> Optional[str]:
        found = names.url_credentials_problem(url)
        return f"{found}; {way_out.message}" if found else None

    return _check(problem)


def _labels(value: dict[str, str]) -> dict[str, str]:
    problems = [p for k, v in value.items() for p in (names.label_key_problem(k), names.label_value_problem(v)) if p]
    if problems:
        raise ValueError("; ".join(problems))
    return value


def _annotation_keys(value: dict[str, str]) -> dict[str, str]:
    problems = [p for k in value for p in (names.label_key_problem(k),) if p]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in value.items())
    if size > rules.ANNOTATIONS_MAX_BYTES:
        problems.append(f"annotations hold {size} bytes; Kubernetes allows {rules.ANNOTATIONS_MAX_BYTES} in all")
    if problems:
        raise ValueError("; ".join(problems))
    return value


def _env_names(value: dict[str, Any]) -> dict[str, Any]:
    problems = [p for k in value for p in (names.env_name_problem(k),) if p]
    if problems:
        raise ValueError("; ".join(problems))
    return value


Cpu = Annotated[str, _quantity(Kind.CPU)]
Bytes = Annotated[str, _quantity(Kind.BYTES)]
ResourceMap = Annotated[dict[str, str], BeforeValidator(_resource_map)]
EntryName = Annotated[str, _check(lambda v: names.dns1123_label_problem(v, names.MAX_ENTRY_NAME))]
DnsLabel = Annotated[str, _check(names.dns1123_label_problem)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
Annotations = Annotated[dict[str, str], AfterValidator(_annotation_keys)]
CronExpr = Annotated[str, _check(cron.cron_problem)]
TimeZone = Annotated[str, _check(cron.zone_problem)]
LabelValue = Annotated[str, _check(names.label_value_problem)]
Int32 = Annotated[int, Field(le=rules.INT32_MAX)]
KubernetesVersion = Annotated[str, _check(names.version_problem)]
Hours = Annotated[float, Field(allow_inf_nan=False)]
Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
Vendor = Literal["nvidia", "amd"]
# Kubernetes fragments and the pod rules: config/podspec.py.
ImageRef = Annotated[str, _check(podspec.image_problem)]
ImageTag = Annotated[str, _check(podspec.tag_problem)]
MountPath = Annotated[str, _check(podspec.mount_path_problem)]


def _fragment(shape: str, rule=None):
    """A raw Kubernetes value (`podSpec`, `volumes`, ...) of the Kubernetes shape `shape`,
    and, when the shape is right, `rule`'s problems; each reported at its own path."""

    def check(value: Any) -> Any:
        found = podspec.shape_problems(value, shape)
        podspec.raise_if_any(found or (rule(value) if rule else []))
        return value

    return AfterValidator(check)


# ---- 1. cluster -------------------------------------------------------------------------


class Cluster(Model):
    name: DnsLabel
    context: Optional[str] = None
    kubeconfig: Optional[str] = None
    render_dir: Optional[str] = None
    forbidden_contexts: list[str] = Field(default_factory=list)
    namespace_prefix: str = "kns-"
    system_namespace: Annotated[DnsLabel, _check(names.reserved_namespace_problem)] = "kns-system"
    # The cluster's Kubernetes version, where the site declares it: what the program may
    # use depends on it (DRA needs 1.34, docs/gpus.md).
    kubernetes_version: Optional[KubernetesVersion] = None

    @model_validator(mode="after")
    def _prefix(self) -> "Cluster":
        if self.namespace_prefix and names.dns1123_label_problem(self.namespace_prefix + "x"):
            raise ValueError(
                f'namespacePrefix "{self.namespace_prefix}" cannot start a DNS-1123 label '
                '(lower-case letters, digits and "-")'
            )
        longest = len(self.namespace_prefix) + names.MAX_ENTRY_NAME
        if longest > 63:
            raise ValueError(
                f'namespacePrefix "{self.namespace_prefix}" is too long: with a 40-character '
                f"entry name the namespace would have {longest} characters (at most 63)"
            )
        return self


# ---- 2. node pools ----------------------------------------------------------------------


class Taint(Model):
    key: str
    value: str = ""
    effect: Effect

    @model_validator(mode="after")
    def _valid(self) -> "Taint":
        problem = names.label_key_problem(self.key) or (self.value and names.label_value_problem(self.value))
        if problem:
            raise ValueError(problem)
        return self


MigProfile = Annotated[str, _check(names.profile_problem)]
GpuModel = Annotated[str, _check(names.model_problem)]
DriverName = Annotated[str, _check(names.driver_problem)]


class GpuPartition(Model):
    """A MIG profile the pool's GPUs are partitioned into, and how many of it one GPU holds."""

    profile: MigProfile
    per_gpu: int = Field(strict=True, ge=1, le=rules.MIG_PER_GPU_MAX)


class GpuSharing(Model):
    """How entries with `gpu: {shared: true}` share one whole GPU (the driver's GpuConfig)."""

    strategy: Literal["TimeSlicing", "MPS"] = "TimeSlicing"


class GpuSpec(Model):
    vendor: Vendor = "nvidia"
    per_node: Int32 = Field(ge=1)
    # How pods get GPUs: counted as an extended resource (`nvidia.com/gpu`) or allocated as
    # devices through Dynamic Resource Allocation (docs/gpus.md).
    allocation: Literal["extendedResource", "dra"] = "extendedResource"
    driver: Optional[DriverName] = None
    model: Optional[GpuModel] = None
    partitions: list[GpuPartition] = Field(default_factory=list)
    sharing: Optional[GpuSharing] = None

    @model_validator(mode="after")
    def _allocation(self) -> "GpuSpec":
        found: list[Problem] = []
        if self.allocation != "dra":
            found += [at((to_camel(f),), rules.DRA_FIELDS_NEED_DRA.message)
                      for f in ("driver", "model", "partitions", "sharing") if f in self.model_fields_set]
        else:
            if self.driver is None:
                found.append(at(("driver",), rules.DRA_NEEDS_DRIVER.message))
            if self.vendor != "nvidia":
                found.append(at(("vendor",), rules.DRA_NEEDS_NVIDIA.message))
        seen: dict[str, int] = {}
        for index, partition in enumerate(self.partitions):
            if partition.profile in seen:
                found.append(at(("partitions", index, "profile"),
                              f'"{partition.profile}" is already partitions[{seen[partition.profile]}]'))
            seen.setdefault(partition.profile, index)
        podspec.raise_if_any(found)
        return self

    @property
    def dra(self) -> bool:
        return self.allocation == "dra"


def _limits(value: object) -> object:
    """A NodePool's limits: resources a node offers, each a quantity."""
    return _quantities(value, karpenter.limit_name_problem)


Limits = Annotated[dict[str, str], BeforeValidator(_limits)]
DurationOrNever = Annotated[str, _check(karpenter.duration_or_never_problem), duration_text(rules.DURATION_OR_NEVER)]
NonEmpty = Annotated[str, Field(min_length=1)]


class NodeClassRef(Model):
    """The cloud's node class the NodePool's nodes are made from (EC2NodeClass, AKSNodeClass,
    KWOKNodeClass, ...): the program checks the reference is complete, not that it exists."""

    group: Annotated[NonEmpty, _check(karpenter.group_problem)]
    kind: NonEmpty
    name: Annotated[NonEmpty, _check(lambda v: names.dns1123_subdomain_problem(v) and
                                     f"node class name {names.dns1123_subdomain_problem(v)}")]


class Requirement(Model):
    """A node selector requirement of the NodePool (`{key, operator, values}`), as Karpenter
    reads it: which instance types, zones, capacity types or architectures the pool may use."""

    key: str
    operator: Literal[rules.REQUIREMENT_OPERATORS]  # type: ignore[valid-type]
    values: list[str] = Field(default_factory=list)
    min_values: Optional[int] = Field(default=None, ge=1, le=rules.MIN_VALUES_MAX)

    @model_validator(mode="after")
    def _valid(self) -> "Requirement":
        problems = karpenter.requirement_problems(self.key, self.operator, self.values, self.min_values)
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Autoscale(Model):
    """An autoscaled pool: one Karpenter NodePool (docs/autoscaling.md)."""

    node_class_ref: NodeClassRef
    requirements: list[Requirement] = Field(default_factory=list, max_length=rules.MAX_REQUIREMENTS)
    limits: Limits = Field(default_factory=dict)
    consolidation: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = "WhenEmptyOrUnderutilized"
    consolidate_after: DurationOrNever = "30s"
    expire_after: Optional[DurationOrNever] = None
    weight: Optional[int] = Field(default=None, ge=rules.WEIGHT_MIN, le=rules.WEIGHT_MAX)


class PoolTopology(Model):
    """The pool's network topology (docs/distributed.md): node labels from the coarsest
    domain to the node, which Kueue's Topology Aware Scheduling places workers within."""

    levels: list[str] = Field(min_length=1, max_length=rules.TOPOLOGY_LEVELS_MAX)

    @model_validator(mode="after")
    def _levels(self) -> "PoolTopology":
        found: list[Problem] = [at(("levels", i), problem) for i, level in enumerate(self.levels)
                                if (problem := names.label_key_problem(level))]
        found += [at(("levels", i), f'"{level}" is already level {self.levels.index(level)}')
                  for i, level in enumerate(self.levels) if self.levels.index(level) != i]
        if self.levels[-1] != rules.TOPOLOGY_LAST_LEVEL:
            found.append(at(("levels",), rules.TOPOLOGY_ENDS_WITH_HOST.message))
        podspec.raise_if_any(found)
        return self


class NodePool(Model):
    name: EntryName
    role: Literal["vcluster", "gpu", "compute", "system"]
    nodes: Optional[list[str]] = Field(default=None, min_length=1)
    autoscale: Optional[Autoscale] = None
    labels: Labels = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    gpu: Optional[GpuSpec] = None
    vcluster: bool = False
    topology: Optional[PoolTopology] = None

    @model_validator(mode="after")
    def _role(self) -> "NodePool":
        if self.role == "gpu" and self.gpu is None:
            raise ValueError(rules.GPU_POOL_NEEDS_GPU.message)
        if self.role != "gpu" and self.gpu is not None:
            raise ValueError(f'{rules.GPU_ONLY_ON_GPU_POOLS.message} (this pool has role "{self.role}")')
        if self.vcluster and self.role != "gpu":
            raise ValueError(rules.VCLUSTER_ONLY_ON_GPU_POOLS.message)
        if (self.nodes is None) == (self.autoscale is None):
            raise ValueError(rules.NODES_OR_AUTOSCALE.message)
        if self.topology is not None and self.autoscale is not None:
            podspec.raise_if_any([at(("topology",), rules.TOPOLOGY_ON_AUTOSCALED.message)])
        if self.gpu is not None and self.gpu.dra and self.autoscale is not None:
            podspec.raise_if_any([at(("gpu", "allocation"), rules.DRA_NEEDS_STATIC_POOL.message)])
        for node in self.static_nodes:
            if names.dns1123_subdomain_problem(node):
                raise ValueError(f'node name {names.dns1123_subdomain_problem(node)}')
        if len(set(self.static_nodes)) != len(self.static_nodes):
            raise ValueError("nodes lists a node more than once")
        if self.autoscale is not None:
            group = self.autoscale.node_class_ref.group
            podspec.raise_if_any([at(("labels", key), problem) for key in self.labels
                                  if (problem := karpenter.restricted_key_problem(key, group))]
                                 + [at(("autoscale", "requirements", i, "key"), problem)
                                    for i, requirement in enumerate(self.autoscale.requirements)
                                    if (problem := karpenter.provider_key_problem(requirement.key, group, False))]
                                 + [p.below(("autoscale", "limits")) for p in
                                    karpenter.limits_below_one_node(self.autoscale.limits, self.gpu_per_node,
                                                                    self.gpu_resource)]
                                 + [at(("autoscale", "requirements"), problem) for problem in self._requirement_count()])
        return self

    def _requirement_count(self) -> list[str]:
        assert self.autoscale is not None
        requirements = self.autoscale.requirements
        added = karpenter.gpu_requirement(self.gpu_per_node, self.autoscale.node_class_ref.group, requirements)
        if added and len(requirements) + len(added) > rules.MAX_REQUIREMENTS:
            return [f"{len(requirements)} requirements and the one the program adds for gpu.perNode "
                    f"({added[0]['key']}) are more than the {rules.MAX_REQUIREMENTS} a NodePool holds"]
        return []

    @property
    def gpu_per_node(self) -> int:
        return self.gpu.per_node if self.gpu is not None else 0

    @property
    def gpu_resource(self) -> Optional[str]:
        return names.gpu_resource_name(self.gpu.vendor) if self.gpu is not None else None

    @property
    def static_nodes(self) -> list[str]:
        """The existing nodes of a static pool; none for an autoscaled one."""
        return list(self.nodes or [])


class Worker(Model):
    """One `kns:workers` entry: a worker cluster of a MultiKueue site (docs/multicluster.md).
    `context` or `kubeconfig` is how Pulumi reaches it; `apiServer` the URL the manager's
    Kueue dials (by default the server of that context). Its `nodePools` are validated one
    by one by the loader, each at its own named path."""

    name: DnsLabel
    context: Optional[str] = None
    kubeconfig: Optional[str] = None
    api_server: Optional[Annotated[str, _check(multikueue.api_server_problem)]] = None
    node_pools: list[NodePool] = Field(default_factory=list)
    # The worker's Kubernetes version, where the site declares it (as kns:cluster's).
    kubernetes_version: Optional[KubernetesVersion] = None
    # Admit nothing new there; what runs finishes (docs/operations.md, section 5).
    drain: bool = False

    @model_validator(mode="after")
    def _access(self) -> "Worker":
        if (self.context is None) == (self.kubeconfig is None):
            raise ValueError(rules.SITE_WORKER_ACCESS.message)
        return self


# ---- 3. and 4. schedulers ---------------------------------------------------------------


class PackingScheduler(Model):
    enabled: bool = True
    name: Annotated[DnsLabel, _check(lambda v: v in names.RESERVED_SCHEDULER_NAMES and (
        f'"{v}" is the name of {names.RESERVED_SCHEDULER_NAMES[v]}; the packing scheduler needs its own'))] = "kns-packing"
    image: ImageRef = "registry.k8s.io/kube-scheduler:v1.36.1"
    replicas: Int32 = Field(default=1, ge=1)
    strategy: Literal["MostAllocated", "RequestedToCapacityRatio"] = "MostAllocated"
    weights: dict[Annotated[str, _check(names.resource_name_problem)], Annotated[int, Field(ge=1, le=100)]] = Field(
        default_factory=lambda: {"cpu": 1, "memory": 1}
    )


class ContainerResources(Model):
    requests: ResourceMap = Field(default_factory=dict)
    limits: ResourceMap = Field(default_factory=dict)


class Keycloak(Model):
    url: Annotated[str, _without_credentials(rules.KEYCLOAK_URL_CREDENTIALS)]
    realm: str
    client_id: str


# `JARVICE_KNS_DEFAULT_LIMIT_RANGE` when `defaultLimitRange` is unset: the JSON of the JARVICE
# KNS scheduler documentation, byte for byte (its snake-case `default_request` is what the KNS
# reads).
KNS_DEFAULT_LIMIT_RANGE_JSON = (
    '{"default":{"cpu": 1, "memory": "1Gi"}, "default_request":{"cpu": "200m", "memory": "256Mi"}, '
    '"type":"Container"}'
)
KNS_DEFAULT_LIMIT_RANGE: dict[str, Any] = json.loads(KNS_DEFAULT_LIMIT_RANGE_JSON)

# The platform's own containers run as this numeric user and group (the "nonroot" user of
# distroless images; any UID above 10000 stays clear of users an image or node defines).
PLATFORM_UID = 65532


class Capabilities(Model):
    """Linux capabilities to add and drop (names such as NET_BIND_SERVICE, or ALL)."""

    add: Optional[list[Annotated[str, Field(pattern=r"^[A-Z_]+$")]]] = None
    drop: Optional[list[Annotated[str, Field(pattern=r"^[A-Z_]+$")]]] = None


class SeccompProfile(Model):
    """The container's seccomp profile: RuntimeDefault, or a Localhost file (localhostProfile)."""

    type: Literal["RuntimeDefault", "Localhost", "Unconfined"]
    localhost_profile: Optional[str] = None

    @model_validator(mode="after")
    def _localhost(self) -> "SeccompProfile":
        if (self.type == "Localhost") != (self.localhost_profile is not None):
            raise ValueError("localhostProfile is set exactly when type is Localhost")
        return self


class ContainerSecurityContext(Model):
    """The container securityContext fields a site may need to change for the KNS image
    (docs/schedulers.md). Each defaults to the hardened value (Pod Security `restricted`);
    `null` leaves a field out of the manifest."""

    run_as_user: Optional[int] = Field(default=PLATFORM_UID, ge=0, le=2**31 - 1)
    run_as_group: Optional[int] = Field(default=PLATFORM_UID, ge=0, le=2**31 - 1)
    run_as_non_root: Optional[bool] = True
    read_only_root_filesystem: Optional[bool] = True
    allow_privilege_escalation: Optional[bool] = False
    capabilities: Optional[Capabilities] = Field(default_factory=lambda: Capabilities(drop=["ALL"]))
    seccomp_profile: Optional[SeccompProfile] = Field(default_factory=lambda: SeccompProfile(type="RuntimeDefault"))

    @model_validator(mode="after")
    def _can_start(self) -> "ContainerSecurityContext":
        if self.run_as_non_root and self.run_as_user == 0:
            raise ValueError("runAsNonRoot: true with runAsUser: 0 can never start (the kubelet refuses it)")
        return self

    def manifest(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


def _limit_order_problems(limits: Any) -> list[str]:
    """min <= defaultRequest <= default <= max per resource, as the API server demands of a
    LimitRange (the program's own and the one the KNS makes)."""
    problems = []
    order = (("min", limits.min), ("defaultRequest", limits.default_request), ("default", limits.default),
             ("max", limits.max))
    for resource in sorted({r for _, values in order for r in values}):
        present = [(key, values[resource]) for key, values in order if resource in values]
        kind = kind_for_resource(resource)
        for (low_key, low), (high_key, high) in zip(present, present[1:]):
            if parse(low, kind) > parse(high, kind):
                problems.append(f"{resource}: {low_key} {low} is more than {high_key} {high}")
    return problems


class KnsLimitRange(Model):
    """`JARVICE_KNS_DEFAULT_LIMIT_RANGE`: the limit range the KNS gives each vcluster
    namespace, in camelCase here and encoded in the KNS's own snake-case shape."""

    default: ResourceMap = Field(default_factory=dict)
    default_request: ResourceMap = Field(default_factory=dict)
    max: ResourceMap = Field(default_factory=dict)
    min: ResourceMap = Field(default_factory=dict)
    type: Literal["Container", "Pod", "PersistentVolumeClaim"] = "Container"

    @model_validator(mode="after")
    def _ordered(self) -> "KnsLimitRange":
        problems = []
        if self.type != "Container" and (self.default or self.default_request):
            problems.append(f"default and defaultRequest are only for type Container, not {self.type}")
        problems.extend(_limit_order_problems(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def kns_json(self) -> str:
        """The documented shape: `default`, `default_request`, `max`, `min` (each only when
        set), `type`."""
        out: dict[str, Any] = {}
        for key, values in (("default", self.default), ("default_request", self.default_request),
                            ("max", self.max), ("min", self.min)):
            if values:
                out[key] = dict(values)
        out["type"] = self.type
        return json.dumps(out)


class KnsScheduler(Model):
    """The JARVICE KNS downstream scheduler; defaults are those of its documentation."""

    enabled: bool = False
    image: Optional[ImageRef] = None
    replicas: Int32 = Field(default=1, ge=1)
    jobs_domain: Optional[Annotated[str, _check(names.host_problem)]] = None
    ingress_class: Optional[str] = None
    keep_vclusters: bool = False
    default_limit_range: Optional[KnsLimitRange] = None
    vcluster_spawn_delay: Int32 = Field(default=300, ge=1)
    init_image: ImageRef = "us-docker.pkg.dev/jarvice/images/init-kns"
    images_tag: Optional[ImageTag] = None
    allow_gotty_shell: bool = False
    gotty_image: ImageRef = "us-docker.pkg.dev/jarvice/images/kns-gotty"
    gotty_image_tag: ImageTag = "n1.3.0"
    keycloak: Optional[Keycloak] = None
    port: int = Field(default=8080, ge=1, le=65535)
    ingress: bool = False
    resources: ContainerResources = Field(default_factory=lambda: ContainerResources(
        requests={"cpu": "250m", "memory": "256Mi"}, limits={"cpu": "1", "memory": "1Gi"}))
    security_context: ContainerSecurityContext = Field(default_factory=ContainerSecurityContext)

    @model_validator(mode="after")
    def _image(self) -> "KnsScheduler":
        problems = []
        if self.enabled and not self.image:
            problems.append(rules.KNS_NEEDS_IMAGE.message)
        if self.ingress and not self.jobs_domain:
            problems.append(rules.INGRESS_NEEDS_DOMAIN.message)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def encoded_limit_range(self) -> str:
        """`JARVICE_KNS_DEFAULT_LIMIT_RANGE`: the limit range as base64-encoded JSON, in the
        shape of the JARVICE KNS documentation; its documented default when unset."""
        text = KNS_DEFAULT_LIMIT_RANGE_JSON if self.default_limit_range is None else self.default_limit_range.kns_json()
        return base64.b64encode(text.encode()).decode()


# ---- 18. network (docs/network.md) ------------------------------------------------------


def _cidr_problem(value: str) -> Optional[str]:
    """A CIDR as the API server takes it in an ipBlock: an address, a slash and a prefix
    length, with no bits set past the prefix."""
    address, slash, _ = value.partition("/")
    try:
        network = ipaddress.ip_network(value, strict=False)
        first = ipaddress.ip_address(address)
    except ValueError:
        return rules.NETWORK_CIDR.message
    if not slash:
        return rules.NETWORK_CIDR.message
    if network.network_address != first:
        return f"has bits set past its prefix length: the network is {network}"
    return None


Cidr = Annotated[str, _check(_cidr_problem)]
def _port(value: Any) -> Any:
    """A number out of range says what a port is (the bounds stand in the schema)."""
    if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= 65535:
        raise ValueError(f"{value} is not a port: {rules.PORTS.message}")
    return value


_port.only_refuses = True  # type: ignore[attr-defined]  # tools/schema.py: the field's own schema stands


Port = Annotated[int, BeforeValidator(_port), Field(strict=True, ge=1, le=65535)]


class NetworkSource(Model):
    """Who may open connections to an entry's pods: the pods of one namespace, by name or
    by its labels, on some TCP ports (all, left out)."""

    namespace: Optional[DnsLabel] = None
    namespace_labels: Optional[Labels] = None
    ports: Optional[list[Port]] = None

    @model_validator(mode="after")
    def _one(self) -> "NetworkSource":
        found: list[Problem] = []
        if (self.namespace is None) == (self.namespace_labels is None):
            found.append(at((), rules.NETWORK_SOURCE_ONE.message))
        if self.namespace_labels == {}:
            found.append(at(("namespaceLabels",), rules.NETWORK_EVERY_NAMESPACE.message))
        if self.ports == []:
            found.append(at(("ports",), rules.NETWORK_NO_PORTS.message))
        podspec.raise_if_any(found)
        return self


class NetworkDestination(Model):
    """Where an entry's pods may open connections when egress is restricted: addresses
    (a CIDR) or the pods of one namespace, on some TCP ports (all, left out)."""

    cidr: Optional[Cidr] = None
    namespace: Optional[DnsLabel] = None
    ports: Optional[list[Port]] = None

    @model_validator(mode="after")
    def _one(self) -> "NetworkDestination":
        found: list[Problem] = []
        if (self.cidr is None) == (self.namespace is None):
            found.append(at((), rules.NETWORK_DESTINATION_ONE.message))
        if self.ports == []:
            found.append(at(("ports",), rules.NETWORK_NO_PORTS.message))
        podspec.raise_if_any(found)
        return self


class Network(Model):
    """`kns:network`: every entry's namespace a tenant on the network (docs/network.md)."""

    isolation: Literal["namespace", "none"] = "namespace"
    allow_from: list[NetworkSource] = Field(default_factory=list)
    egress: Literal["all", "cluster", "none"] = "all"
    allow_to: list[NetworkDestination] = Field(default_factory=list)
    # The cluster's pod addresses: what "outside the cluster" excludes where the platform's
    # own pods admit callers that are no pod (the API server to Kueue's webhooks).
    pod_network: list[Cidr] = Field(default_factory=list)

    @model_validator(mode="after")
    def _isolated(self) -> "Network":
        if self.isolation == "none":
            given = {"allowFrom": self.allow_from, "egress": self.egress != "all", "allowTo": self.allow_to,
                     "podNetwork": self.pod_network}
            podspec.raise_if_any([at((key,), rules.NETWORK_OFF_SETTING.message) for key, value in given.items()
                                  if value])
        return self

    @property
    def isolated(self) -> bool:
        return self.isolation == "namespace"


# ---- 5. profiles ------------------------------------------------------------------------


class GpuCounts(Model):
    nvidia: Optional[int] = Field(default=None, ge=0)
    amd: Optional[int] = Field(default=None, ge=0)


class JsonOverride(Model):
    path: Annotated[str, _check(pointer.syntax_problem)]
    value: Any


Ratio = Annotated[float, Field(gt=0, le=1)]


class Profile(Model):
    """One profile rule. Unset fields (None) leave earlier rules' values in place."""

    default_cpu: Optional[Cpu] = None
    max_cpu: Optional[Cpu] = None
    default_memory: Optional[Bytes] = None
    max_memory: Optional[Bytes] = None
    default_gpus: Optional[GpuCounts] = None
    max_gpus: Optional[GpuCounts] = None
    # maxCpu, maxMemory and maxGpus hold each worker's pod; this, how many workers an
    # entry may have (docs/profiles.md).
    max_workers: Optional[Annotated[int, Field(strict=True, ge=1, le=rules.WORKERS_MAX)]] = None
    images: Optional[list[ImageRef]] = None
    default_image: Optional[ImageRef] = None
    allow_unknown_images: Optional[bool] = None
    placement_constraints: Optional[list[str]] = None
    cpu_request_ratio: Optional[Ratio] = None
    memory_request_ratio: Optional[Ratio] = None
    allow_privileged: Optional[bool] = None
    # Whether the entries it covers may set their own `allowFrom` (docs/network.md).
    allow_network_from: Optional[bool] = None
    json_overrides: Annotated[Optional[list[JsonOverride]], UNREPEATED] = None
    queue: Optional[DnsLabel] = None
    # For the queued entries it covers (kns:priorities; docs/queueing.md).
    priority: Optional[DnsLabel] = None
    # For the entries it covers that may use it (kns:reservations; docs/reservations.md).
    reservation: Optional[DnsLabel] = None


# ---- 6. workloads -----------------------------------------------------------------------


class Toleration(Model):
    key: Optional[str] = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Optional[str] = None
    effect: Optional[Effect] = None
    toleration_seconds: Optional[int] = Field(default=None, ge=-(2**63), le=2**63 - 1)

    @model_validator(mode="after")
    def _valid(self) -> "Toleration":
        """The API server's own toleration rules, so a refusal comes with its config path."""
        problems = [p for p in (self.key and names.label_key_problem(self.key),
                                self.value and names.label_value_problem(self.value)) if p]
        if not self.key and self.operator != "Exists":
            problems.append('a toleration without key must have operator "Exists" (it tolerates every taint)')
        if self.operator == "Exists" and self.value:
            problems.append('operator "Exists" takes no value')
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            problems.append('tolerationSeconds is only for effect "NoExecute"')
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def manifest(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class LimitRangeSpec(Model):
    """Overrides for the LimitRange `kns-defaults` (type Container)."""

    default: ResourceMap = Field(default_factory=dict)
    default_request: ResourceMap = Field(default_factory=dict)
    max: ResourceMap = Field(default_factory=dict)
    min: ResourceMap = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ordered(self) -> "LimitRangeSpec":
        problems = _limit_order_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


EnvValue = Annotated[
    Any,
    _check(
        lambda v: None
        if isinstance(v, (str, int, float, bool)) or (isinstance(v, dict) and set(v) <= {"valueFrom"} and v)
        else rules.ENV_VALUE.message
    ),
]

class GpuAsk(Model):
    """GPU devices one pod asks of a DRA pool (docs/gpus.md): `count` whole GPUs, or `count`
    partitions of one MIG profile, or one whole GPU shared with the entry's other pods."""

    count: Int32 = Field(default=1, ge=1)
    partition: Optional[MigProfile] = None
    shared: bool = False

    @model_validator(mode="after")
    def _shared(self) -> "GpuAsk":
        if self.shared and (self.partition is not None or self.count > 1):
            raise ValueError(rules.SHARED_IS_ONE_GPU.message)
        return self


class TopologyAsk(Model):
    """Where an entry's workers go (docs/distributed.md): all within one domain of `level`
    of its pool's topology, or as close as Kueue can (`preferred`)."""

    level: str
    mode: Literal["required", "preferred"] = "required"


# What an entry of `type: namespace` (no workload) cannot set, beside the container fields.
WORKLOAD_ONLY_FIELDS = ("pod_spec", "gpu", "json_overrides", "credentials", "queue", "priority", "reservation", "workers", "leader_port",
                        "restart_workers", "topology")

CONTAINER_FIELDS = (
    "image", "image_pull_policy", "command", "args", "env", "cpu", "memory", "storage", "gpus",
    "gpu_resource", "extra_resources", "cpu_limit", "memory_limit", "storage_limit", "privileged",
    "volumes", "volume_mounts",
)


class Workload(Model):
    """Fields shared by jobs and schedules (docs/reference.md)."""

    name: EntryName
    user: Optional[LabelValue] = None
    groups: list[str] = Field(default_factory=list)
    type: Literal["pod", "namespace"] = "pod"
    image: Optional[ImageRef] = None
    image_pull_policy: Optional[Literal["Always", "IfNotPresent", "Never"]] = None
    # What a container is given may be a secret: a problem never repeats it (config/errors.py).
    command: Annotated[Optional[list[str]], UNREPEATED] = None
    args: Annotated[Optional[list[str]], UNREPEATED] = None
    env: Annotated[dict[str, EnvValue], AfterValidator(_env_names), UNREPEATED] = Field(default_factory=dict)
    cpu: Optional[Cpu] = None
    memory: Optional[Bytes] = None
    storage: Optional[Bytes] = None
    gpus: Int32 = Field(default=0, ge=0)
    gpu_vendor: Vendor = "nvidia"
    gpu_resource: Optional[Annotated[str, _check(lambda v: names.resource_name_problem(v, extended_only=True))]] = None
    # GPU devices of a DRA pool (docs/gpus.md); `gpus` asks whole GPUs of either kind of pool.
    gpu: Optional[GpuAsk] = None
    extra_resources: Annotated[dict[str, str], BeforeValidator(_extra_resources), AfterValidator(
        lambda v: podspec.raise_if_any(podspec.extra_resource_problems(v)) or v)] = Field(default_factory=dict)
    cpu_limit: Optional[Cpu] = None
    memory_limit: Optional[Bytes] = None
    storage_limit: Optional[Bytes] = None
    pool: Optional[str] = None
    placement: Labels = Field(default_factory=dict)
    node_selector: Labels = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    scheduler_name: Optional[DnsLabel] = None
    privileged: bool = False
    volumes: Annotated[list[dict[str, Any]], _fragment(["@Volume"]), UNREPEATED] = Field(default_factory=list)
    volume_mounts: Annotated[list[dict[str, Any]], _fragment(["@VolumeMount"])] = Field(default_factory=list)
    labels: Labels = Field(default_factory=dict)
    annotations: Annotations = Field(default_factory=dict)
    dynamic_labels: dict[str, str] = Field(default_factory=dict)
    pod_spec: Annotated[Optional[Annotated[dict[str, Any], _fragment("@PodSpec", podspec.pod_problems)]],
                        UNREPEATED] = None
    json_overrides: Annotated[list[JsonOverride], UNREPEATED] = Field(default_factory=list)
    credentials: list[str] = Field(default_factory=list)
    credentials_mount_path: MountPath = "/credentials"
    ttl_hours: Hours = Field(default=24, ge=0, le=rules.INT32_MAX // 3600)  # ttlSecondsAfterFinished is int32
    backoff_limit: Optional[Int32] = Field(default=None, ge=0)
    active_deadline_seconds: Optional[int] = Field(default=None, ge=1, le=2**63 - 1)
    parallelism: Optional[Int32] = Field(default=None, ge=1)
    completions: Optional[Int32] = Field(default=None, ge=1)
    limit_range: Optional[LimitRangeSpec] = None
    quota: Optional[ResourceMap] = None
    queue: Optional[DnsLabel] = None
    # A kns:priorities name: Kueue's admission order and preemption (docs/queueing.md).
    priority: Optional[DnsLabel] = None
    # A kns:reservations name: the entry's Jobs run in its windows (docs/reservations.md).
    reservation: Optional[DnsLabel] = None
    # A distributed entry (docs/distributed.md): N workers of one Indexed Job.
    workers: Annotated[int, Field(strict=True, ge=1, le=rules.WORKERS_MAX)] = 1
    leader_port: Optional[Annotated[int, Field(strict=True, ge=1, le=65535)]] = None
    restart_workers: Literal["together", "individually"] = "together"
    topology: Optional[TopologyAsk] = None
    # Sources this entry admits beyond kns:network.allowFrom (docs/network.md).
    allow_from: Optional[list[NetworkSource]] = None

    @property
    def distributed(self) -> bool:
        return self.workers >= 2

    @property
    def queued(self) -> bool:
        """Whether Kueue admits the entry's Jobs: through its own queue (a profile rule's
        included, resolved into `queue`) or its reservation's LocalQueue (docs/reservations.md)."""
        return self.queue is not None or self.reservation is not None

    @property
    def pods_per_run(self) -> int:
        """The pods one Job of the entry runs at once: its workers, or parallelism (fewer
        completions)."""
        if self.distributed:
            return self.workers
        count = self.parallelism or 1
        return min(count, self.completions) if self.completions is not None else count

    @classmethod
    def key_problems(cls, raw: Any) -> list[Problem]:
        """Rules about which keys may be set together, each at the key it refuses; they need
        only the raw keys, so the loader reports them even when a value elsewhere in the
        entry is invalid."""
        if not isinstance(raw, dict):
            return []
        problems: list[Problem] = []

        def written(fields: tuple[str, ...]) -> list[str]:
            return [to_camel(f) for f in fields if to_camel(f) in raw or f in raw]

        container = written(CONTAINER_FIELDS)
        if raw.get("type") == "namespace":
            problems += [at((key,), rules.NAMESPACE_NO_WORKLOAD.message)
                         for key in container + written(WORKLOAD_ONLY_FIELDS)]
        elif raw.get("podSpec") is not None:
            problems += [at((key,), rules.POD_SPEC_VERBATIM.message) for key in container]
        if not raw.get("credentials"):
            problems += [at((key,), rules.MOUNT_PATH_NEEDS_CREDENTIALS.message)
                         for key in written(("credentials_mount_path",))]
        return problems

    @model_validator(mode="after")
    def _shape(self) -> "Workload":
        problems = self.key_problems(self.model_dump(by_alias=True, exclude_unset=True))
        for field, limit in (("cpu", "cpu_limit"), ("memory", "memory_limit"), ("storage", "storage_limit")):
            request, cap = getattr(self, field), getattr(self, limit)
            kind = Kind.CPU if field == "cpu" else Kind.BYTES
            if request is not None and cap is not None and parse(request, kind) > parse(cap, kind):
                problems.append(at((field,), f"{field} {request} is more than {to_camel(limit)} {cap}"))
        for field in ("node_selector", "placement"):
            if names.LABEL_POOL in getattr(self, field):
                problems.append(at((to_camel(field), names.LABEL_POOL), f"{to_camel(field)} cannot set "
                                 f"{names.LABEL_POOL}; use pool (it also adds the pool's tolerations)"))

        owned = [at(("labels", key), rules.PROGRAM_OWNED_LABEL.message) for key in self.labels if key == names.QUEUE_LABEL]
        owned += [at(("labels", key), rules.PROGRAM_OWNED_PRIORITY_LABEL.message) for key in self.labels
                  if key == names.PRIORITY_LABEL]
        owned += [at(("annotations", key), "is set by the program from topology: {level, mode}; use that")
                  for key in self.annotations if key in rules.TOPOLOGY_ANNOTATIONS.values()]
        if self.gpu_resource and self.gpu is not None:
            owned.append(at(("gpuResource",), rules.GPU_RESOURCE_NOT_WITH_GPU.message))
        elif self.gpu_resource and not self.gpus:
            owned.append(at(("gpuResource",), rules.GPU_RESOURCE_NEEDS_GPUS.message))
        if self.gpus and self.gpu is not None:
            owned.append(at(("gpu",), rules.GPU_ASK_EXCLUSIVE.message))
        podspec.raise_if_any(problems + owned + self._pod_problems() + self._worker_problems())
        return self

    def _worker_problems(self) -> list[Problem]:
        """What a distributed entry derives, and what only a distributed entry may set."""
        if self.type != "pod":
            return []
        if not self.distributed:
            return [at((to_camel(f),), rules.WORKERS_ONLY.message) for f in ("leader_port", "restart_workers")
                    if f in self.model_fields_set]
        found: list[Problem] = [at((to_camel(f),), rules.WORKERS_DERIVE.message)
                                for f in ("parallelism", "completions") if getattr(self, f) is not None]
        if self.backoff_limit is not None and self.restart_workers == "together":
            found.append(at(("backoffLimit",), rules.WORKERS_BACKOFF.message))
        taken = f"is set by the program for every worker ({', '.join(rules.WORKER_ENV)})"
        found += [at(("env", key), taken) for key in self.env if key in rules.WORKER_ENV]
        if self.pod_spec is not None:
            found += [at(("podSpec", key), rules.WORKERS_POD_NAMES.message) for key in ("hostname", "subdomain")
                      if key in self.pod_spec]
            for field in ("initContainers", "containers"):
                for index, container in enumerate(self.pod_spec.get(field) or []):
                    for position, item in enumerate((container or {}).get("env") or []):
                        if isinstance(item, dict) and item.get("name") in rules.WORKER_ENV:
                            found.append(at(("podSpec", field, index, "env", position, "name"), taken))
        return found

    def generated_names(self) -> dict[str, dict[str, str]]:
        """What the program adds to this entry's pod, by scope: {name: what it is}."""
        out: dict[str, dict[str, str]] = {}
        if self.credentials:
            out["volumes"] = {podspec.CREDENTIALS_VOLUME: "the credentials volume the program adds (credentials)"}
            out["mountPaths"] = {self.credentials_mount_path: "where the program mounts the credentials "
                                                              "(credentialsMountPath)"}
        return out

    def _pod_problems(self) -> list[Problem]:
        """The pod rules that need the whole entry: names the program generates, mounts of
        the entry's volumes, `env` sources, `gpuResource` of the GPU vendor."""
        if self.type != "pod":
            return []
        user = podspec.user_names(self.pod_spec, self.name, self.volumes, self.volume_mounts)
        found = podspec.reserved_problems(user, self.generated_names())
        if self.pod_spec is None:
            volumes = [v.get("name") for v in self.volumes] + (
                [podspec.CREDENTIALS_VOLUME] if self.credentials else [])
            found += podspec.mount_problems(self.volume_mounts, volumes)
            for key, value in self.env.items():
                if isinstance(value, dict):
                    found += [p.below(("env", key, "valueFrom"))
                              for p in podspec.shape_problems(value["valueFrom"], "@EnvVarSource")]
            if self.gpu_resource:
                problem = podspec.gpu_resource_problem(self.gpu_resource, self.gpu_vendor)
                if problem:
                    found.append(at(("gpuResource",), problem))
        return found


class Job(Workload):
    @classmethod
    def key_elsewhere(cls, key: str) -> Optional[str]:
        """A schedule's key on a job: say where it belongs rather than list a job's keys."""
        if key in {f.alias or name for name, f in Schedule.model_fields.items()} - {
                f.alias or name for name, f in cls.model_fields.items()}:
            return (f"is a schedule's key: a job runs once, when it is applied; to run on a schedule, make the "
                    "entry one of kns:schedules (or schedules: in a job file) with schedule: ...")
        return None


class Schedule(Workload):
    schedule: CronExpr
    time_zone: TimeZone = "Etc/UTC"
    warm_up_minutes: Optional[int] = Field(default=None, ge=1, le=1440)
    primer_schedule: Optional[CronExpr] = None
    wait_image: ImageRef = "busybox:1.37"
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = "Forbid"
    starting_deadline_seconds: Optional[int] = Field(default=None, ge=1, le=2**63 - 1)
    suspend: bool = False
    successful_jobs_history_limit: Int32 = Field(default=3, ge=0)
    failed_jobs_history_limit: Int32 = Field(default=1, ge=0)

    @classmethod
    def key_problems(cls, raw: Any) -> list[Problem]:
        problems = super().key_problems(raw)
        if isinstance(raw, dict):
            if raw.get("warmUpMinutes") is not None and raw.get("primerSchedule") is not None:
                problems.append(at(("primerSchedule",), rules.WARM_UP_OR_PRIMER.message))
            if raw.get("type") == "namespace":
                problems.append(at(("type",), 'a schedule runs a workload; type "namespace" is only for jobs'))
        return problems

    @property
    def prescaled(self) -> bool:
        return self.warm_up_minutes is not None or self.primer_schedule is not None

    def generated_names(self) -> dict[str, dict[str, str]]:
        out = super().generated_names()
        if self.prescaled:
            key = "warmUpMinutes" if self.warm_up_minutes is not None else "primerSchedule"
            out["containers"] = {podspec.WAIT_CONTAINER: "the wait init container the program adds to a "
                                                         f"prescaled schedule ({key})"}
        return out


class JobFile(Model):
    """A file named by `kns:jobFiles`."""

    jobs: list[Any] = Field(default_factory=list)
    schedules: list[Any] = Field(default_factory=list)


# ---- 11. queueing ------------------------------------------------------------------------


def _queue_resources(value: object) -> object:
    """A queue's {resource: quantity} for one pool: resources Kueue can hold, each a quantity."""
    return _quantities(value, queues.resource_name_problem)


QueueResources = Annotated[dict[str, str], BeforeValidator(_queue_resources)]
# A resource a queue's quota can count (Kueue's resource names).
QueueResourceName = Annotated[str, _check(queues.resource_name_problem)]
PoolResources = dict[str, QueueResources]


class MultiKueueSettings(Model):
    """`kns:queueing.multiKueue`: the manager's MultiKueue settings in the Kueue the program
    installs (docs/multicluster.md, "MultiKueue's settings"); unset, Kueue's defaults."""

    # How long a Job's admission stays Ready on a worker the manager lost (default 15m).
    worker_lost_timeout: Optional[Annotated[str, duration_text(rules.WORKER_LOST_TIMEOUT),
                                            _check(karpenter.worker_lost_timeout_problem)]] = None
    # Between two garbage collections of the workers' orphaned copies (default 1m; 0s: off).
    gc_interval: Optional[Annotated[str, duration_text(rules.GC_INTERVAL),
                                    _check(karpenter.gc_interval_problem)]] = None


class AdmissionFairSharing(Model):
    """`kns:queueing.fairSharing.admission`: Kueue's admission fair sharing, which orders the
    entries (LocalQueues) of a queue whose `admissionMode` is `usageBased` by their decayed
    past usage (docs/queueing.md, "Fair share")."""

    usage_half_life: Annotated[str, duration_text(rules.USAGE_HALF_LIFE),
                               _check(lambda v: karpenter.positive_duration_problem(v, rules.USAGE_HALF_LIFE))] \
        = rules.USAGE_HALF_LIFE_DEFAULT
    sampling_interval: Optional[Annotated[
        str, duration_text(rules.USAGE_SAMPLING_INTERVAL),
        _check(lambda v: karpenter.positive_duration_problem(v, rules.USAGE_SAMPLING_INTERVAL))]] = None
    resource_weights: dict[QueueResourceName, Annotated[float, Field(ge=0, le=rules.FAIR_SHARING_WEIGHT_MAX,
                                                                allow_inf_nan=False)]] = Field(default_factory=dict)


class FairSharing(Model):
    """`kns:queueing.fairSharing`: Kueue's fair sharing between the queues of a cohort (each
    queue's `fairSharingWeight` weighs it), and with `admission`, between the entries of one
    queue."""

    preemption_strategies: Optional[list[Literal[rules.FAIR_SHARING_STRATEGIES]]] = None  # type: ignore[valid-type]
    admission: Optional[AdmissionFairSharing] = None


class Queueing(Model):
    """`kns:queueing`: whether entries may be queued, and whether the program installs Kueue."""

    enabled: bool = False
    install: bool = True
    # Kueue's waitForPodsReady timeout (docs/distributed.md): unset, off.
    wait_for_pods_ready: Optional[Annotated[str, duration_text(rules.WAIT_FOR_PODS_READY),
                                            _check(karpenter.wait_for_pods_ready_problem)]] = None
    multi_kueue: Optional[MultiKueueSettings] = None
    # Kueue's fair sharing (docs/queueing.md, "Fair share"): unset, off.
    fair_sharing: Optional[FairSharing] = None

    @model_validator(mode="after")
    def _installed(self) -> "Queueing":
        found = []
        if not self.enabled:
            # Kueue's settings with no Kueue to take them: said once, for each given.
            given = {"waitForPodsReady": self.wait_for_pods_ready, "multiKueue": self.multi_kueue,
                     "fairSharing": self.fair_sharing}
            podspec.raise_if_any([at((key,), rules.QUEUEING_OFF_SETTING.message) for key, value in given.items()
                                  if value is not None])
        if self.wait_for_pods_ready is not None and not self.install:
            found.append(at(("waitForPodsReady",), rules.WAIT_NEEDS_INSTALL.message))
        if self.multi_kueue is not None and not self.install:
            found.append(at(("multiKueue",), rules.MULTIKUEUE_NEEDS_INSTALL.message))
        if self.fair_sharing is not None and not self.install:
            found.append(at(("fairSharing",), rules.FAIR_SHARING_NEEDS_INSTALL.message))
        podspec.raise_if_any(found)
        return self


class StateLayout(Model):
    """`kns:state`: where the stack's state lives (docs/entry-stacks.md). Unset, everything is
    in one Pulumi stack; with `entryStacks: N` the platform stays in the stack and its
    entries are spread over N entry stacks (`<stack>.entries-<i>`, by a hash of the entry's
    name), so a one-entry `./kns up` reads and writes one small stack."""

    entry_stacks: Annotated[int, Field(strict=True, ge=1, le=rules.ENTRY_STACKS_MAX)]


class Priority(Model):
    """One `kns:priorities` entry: a Kueue WorkloadPriorityClass (docs/queueing.md, "Start
    times on a busy queue"). Higher values are admitted first and may preempt lower ones."""

    name: DnsLabel
    value: Annotated[int, Field(strict=True, ge=rules.PRIORITY_VALUE_MIN, le=rules.INT32_MAX)]
    default: bool = False
    description: Optional[Annotated[str, Field(max_length=rules.PRIORITY_DESCRIPTION_MAX)]] = None


class QueuePreemption(Model):
    """Kueue's preemption policy of a ClusterQueue (its own values)."""

    within_cluster_queue: Literal[rules.WITHIN_CLUSTER_QUEUE] = "Never"  # type: ignore[valid-type]
    reclaim_within_cohort: Literal[rules.RECLAIM_WITHIN_COHORT] = "Never"  # type: ignore[valid-type]


class Queue(Model):
    """One `kns:queues` entry: a Kueue ClusterQueue with a nominal quota per node pool
    (docs/queueing.md)."""

    name: DnsLabel
    quota: PoolResources
    cohort: Optional[DnsLabel] = None
    borrowing_limit: Optional[PoolResources] = None
    lending_limit: Optional[PoolResources] = None
    preemption: QueuePreemption = Field(default_factory=QueuePreemption)
    fair_sharing_weight: Optional[Annotated[float, Field(ge=0, le=rules.FAIR_SHARING_WEIGHT_MAX,
                                                        allow_inf_nan=False)]] = None
    # Kueue's `stopPolicy: Hold` on its ClusterQueue (the manager's, on a site): nothing new
    # is admitted, what runs goes on (docs/queueing.md).
    hold: bool = False
    # `usageBased`: the queue's entries are admitted in the order of their past usage
    # (admission fair sharing, docs/queueing.md "Fair share").
    admission_mode: Optional[Literal[rules.ADMISSION_MODE_USAGE_BASED]] = None  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _limits(self) -> "Queue":
        found = queues.limit_problems(self.quota, self.cohort, self.borrowing_limit, self.lending_limit)
        if self.cohort is None and self.preemption.reclaim_within_cohort != "Never":
            found.append(at(("preemption", "reclaimWithinCohort"), rules.RECLAIM_NEEDS_COHORT.message))
        podspec.raise_if_any(found)
        return self
