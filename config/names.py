"""Naming rules: DNS-1123 labels, Kubernetes label keys and values, derived names.

Every derived name comes from an entry's stable key (its name), never from a list
position, so reordering or adding entries never renames (and so replaces) live objects.
"""

from __future__ import annotations

import re
from typing import Optional

from . import rules

_HUGEPAGES = re.compile(rules.HUGEPAGES.pattern)

MAX_ENTRY_NAME = 40
_DNS1123_LABEL = re.compile(rules.DNS1123_LABEL)
_LABEL_VALUE = re.compile(rules.LABEL_VALUE)
_LABEL_NAME = re.compile(rules.LABEL_NAME)
_DNS1123_SUBDOMAIN = re.compile(rules.DNS1123_SUBDOMAIN)
_ENV_NAME = re.compile(rules.ENV_NAME)

# Namespaces an entry must never take over, and the program must never adopt as its own
# (it labels its namespaces and deletes them on destroy). `kube-*` is Kubernetes' own.
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
# The namespaces of the Kueue bundle the program installs (kns:queueing.install: true; the
# vendored manifests of plan/kueue_install.py, which tests/test_queueing.py holds this to):
# the stack owns them as Kueue's, so no entry and no system namespace may be one of them.
KUEUE_INSTALL_NAMESPACES = frozenset({"kueue-system"})
# The Kubernetes names of the KNS scheduler's objects; the packing scheduler's objects
# are named after its scheduler name, so that name must differ from these.
KNS_SCHEDULER = "kns-scheduler"
RESERVED_SCHEDULER_NAMES = {"default-scheduler": "the cluster's own scheduler",
                            KNS_SCHEDULER: "the KNS scheduler's objects"}
# Resource names without a domain prefix that a container or a quota may name.
CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
QUOTA_RESOURCES = frozenset({
    "pods", "services", "services.loadbalancers", "services.nodeports", "secrets", "configmaps",
    "persistentvolumeclaims", "replicationcontrollers", "resourcequotas", "storage",
    *CONTAINER_RESOURCES, *(f"{kind}.{r}" for kind in ("requests", "limits") for r in CONTAINER_RESOURCES),
    "requests.storage",
})

MANAGED_BY = {"app.kubernetes.io/managed-by": "pulumi"}
LABEL_POOL = "kns.io/pool"
LABEL_CLUSTER = "kns.io/cluster"
# Queueing (docs/queueing.md): the LocalQueue in each queued entry's namespace, and the
# label that sends a Job to it.
LOCAL_QUEUE = "kns"
# Reservations (docs/reservations.md): the LocalQueue in the namespace of each entry that
# uses one, its reservation's ClusterQueue (`kns-res-<name>`), and the label that names
# the reservation on its objects.
RESERVATION_LOCAL_QUEUE = "kns-res"
RESERVATION_QUEUE_PREFIX = "kns-res-"
LABEL_RESERVATION = "kns.io/reservation"
# Budgets (docs/budgets.md): the label that names the budget on its objects.
LABEL_BUDGET = "kns.io/budget"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The label that gives a queued Job's Workload its WorkloadPriorityClass (kns:priorities).
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Karpenter's annotation that keeps a pod's node from being disrupted (docs/autoscaling.md).
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
LABEL_JOB = "kns.io/job"
LABEL_OWNER = "kns.io/owner"


def dns1123_label_problem(value: str, max_length: int = 63) -> str | None:
    """Why `value` is not a DNS-1123 label of at most `max_length` characters, or None."""
    if len(value) > max_length:
        return f'"{value}" is {len(value)} characters long; at most {max_length} are allowed'
    if not _DNS1123_LABEL.match(value):
        return (
            f'"{value}" is not a DNS-1123 label (lower-case letters, digits and "-", '
            "starting and ending with a letter or digit)"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid Kubernetes label/annotation key, or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return f'"{key}" has an invalid prefix "{prefix}" (must be a DNS subdomain)'
    if len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            f'"{key}" is not a valid key (at most 63 letters, digits, "-", "_" or ".", '
            "optionally prefixed by a DNS subdomain and \"/\")"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid Kubernetes label value, or None."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f'"{value}" is not a valid label value (at most 63 letters, digits, "-", "_" or ".", '
            "starting and ending with a letter or digit)"
        )
    return None


def labelled_metadata(cluster: str, label: str, value: str, name: str,
                      namespace: str | None = None) -> dict:
    """Metadata of a platform object that belongs to one named thing of the stack (a
    reservation, a budget): its cluster's label and `label: value`."""
    meta: dict = {"name": name, "labels": {LABEL_CLUSTER: cluster, label: value, **MANAGED_BY}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def namespace_name(prefix: str, entry: str) -> str:
    """The per-entry namespace: `<namespacePrefix><entry name>`."""
    return f"{prefix}{entry}"


def owner_label(user: str | None) -> str:
    """Value of `kns.io/owner`: the entry's user, or `platform` for unowned entries."""
    return user or "platform"


def reserved_namespace_problem(name: str) -> str | None:
    """Why the program must not own namespace `name`, or None."""
    if name in RESERVED_NAMESPACES or name.startswith("kube-"):
        return f'"{name}" is a namespace of Kubernetes itself; the program labels its namespaces and deletes them on destroy'
    return None


def dns1123_subdomain_problem(value: str) -> str | None:
    """Why `value` is not a DNS-1123 subdomain (a node name, a host), or None."""
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.match(value):
        return (f'"{value}" is not a DNS-1123 subdomain (at most 253 lower-case letters, digits, "-" and ".", '
                "starting and ending with a letter or digit)")
    return None


def host_problem(value: str) -> str | None:
    """Why `value` is not an Ingress host (a DNS subdomain, optionally `*.` first), or None."""
    return dns1123_subdomain_problem(value.removeprefix("*.")) if value else '"" is not a host name'


def url_credentials_problem(url: str) -> Optional[str]:
    """Why `url` may hold a credential (user information before its host, a query), or None."""
    authority = re.split(r"[/?#]", url.split("://", 1)[-1], maxsplit=1)[0]
    if "@" in authority or "?" in url.split("#", 1)[0]:
        return rules.URL_CREDENTIALS.message
    return None


def env_name_problem(name: str) -> str | None:
    if not _ENV_NAME.match(name):
        return (f'"{name}" is not a valid environment variable name (letters, digits, "_", "-" and ".", '
                "not starting with a digit)")
    return None


def gpu_resource_name(vendor: str) -> str:
    """The extended resource a vendor's device plugin offers (`nvidia.com/gpu`)."""
    return f"{vendor}.com/gpu"


def is_hugepages(name: str) -> bool:
    """`hugepages-<page size>` (rules.HUGEPAGES)."""
    return bool(_HUGEPAGES.match(name))


def resource_name_problem(name: str, extended_only: bool = False) -> str | None:
    """Why `name` is not a resource name Kubernetes accepts in requests, limits or a quota
    (a known name, `hugepages-<size>`, or a `domain/name` extended resource), or None.
    `extended_only`: only a `domain/name` resource (a GPU resource)."""
    if "/" in name:
        return None if not label_key_problem(name) else (
            f'"{name}" is not a valid resource name (domain/name, for example nvidia.com/gpu)')
    if extended_only:
        return f'"{name}" is not an extended resource name (domain/name, for example nvidia.com/gpu)'
    if name in QUOTA_RESOURCES:
        return None
    page = name.removeprefix("requests.").removeprefix("limits.")
    if page.startswith("hugepages-"):
        return None if is_hugepages(page) else f'"{name}" is {rules.HUGEPAGES.message}'
    return f'"{name}" is not a resource Kubernetes knows (cpu, memory, ephemeral-storage, or domain/name)'


# ---- device and version identifiers (the models' field checks; docs/gpus.md) ------------

_PROFILE = re.compile(rules.MIG_PROFILE.pattern)
_MODEL = re.compile(rules.GPU_MODEL.pattern)
_VERSION = re.compile(rules.KUBERNETES_VERSION.pattern)


def profile_problem(value: str) -> Optional[str]:
    return None if _PROFILE.match(value) else f'"{value}" is {rules.MIG_PROFILE.message}'


def model_problem(value: str) -> Optional[str]:
    if len(value) > (rules.GPU_MODEL.max_length or 0) or not _MODEL.match(value):
        return f"{value!r} is not {rules.GPU_MODEL.message}"
    return None


def driver_problem(value: str) -> Optional[str]:
    problem = dns1123_subdomain_problem(value)
    return problem and f"the driver name {problem}"


def version_problem(value: str) -> Optional[str]:
    return None if _VERSION.match(value) else f'"{value}" is {rules.KUBERNETES_VERSION.message}'
