"""What the program registers each resource as (pure, no Pulumi): the component type tokens,
the Kubernetes type token and id of an object, the logical names it derives, and the fields
of its objects that something else owns.

A resource's URN is its type, its parents' types and its logical name, so these are what a
stack's state is keyed on: a change here replaces resources on every stack. The components
register by them and plan/inventory.py, plan/guardrails.py and `./kns` read them here, so
what is checked before a run is what the run registers.
"""

from __future__ import annotations

from typing import Any, Mapping

# ---- component type tokens ----------------------------------------------------------------

CLUSTER_TYPE = "kns:cluster:KnsCluster"
NODE_POOL_TYPE = "kns:cluster:NodePool"
SYSTEM_NAMESPACE_TYPE = "kns:cluster:SystemNamespace"
WORKER_TYPE = "kns:cluster:Worker"
PACKING_SCHEDULER_TYPE = "kns:scheduling:PackingScheduler"
# The KNS downstream scheduler is the one component that needs cluster-admin (the JARVICE KNS
# scheduler documentation); the guard rails know its objects by this type.
KNS_SCHEDULER_TYPE = "kns:scheduling:KnsScheduler"
KUEUE_TYPE = "kns:queueing:Kueue"
QUEUES_TYPE = "kns:queueing:Queues"
MULTIKUEUE_TYPE = "kns:queueing:MultiKueue"
RESERVATION_TYPE = "kns:queueing:Reservation"
RESERVED_POOL_TYPE = "kns:queueing:ReservedPool"
BUDGET_TYPE = "kns:queueing:Budget"
# An entry's component, registered under the stack itself, and its namespace's.
JOB_TYPE = "kns:workload:Job"
SCHEDULE_TYPE = "kns:workload:Schedule"
ENTRY_TYPES = (JOB_TYPE, SCHEDULE_TYPE)
JOB_NAMESPACE_TYPE = "kns:workload:JobNamespace"
# An entry's component in states written before entries were split into jobs and
# schedules: previews of those stacks still show it.
OLD_ENTRY_TYPE = "kns:workload:KnsWorkload"
PROVIDER_TYPE = "pulumi:providers:kubernetes"


# ---- Kubernetes objects ---------------------------------------------------------------------


def kubernetes_type(api_version: str, kind: str) -> str:
    """The type pulumi_kubernetes registers an object of `api_version` and `kind` as: the
    core group is `core` (`kubernetes:core/v1:Namespace`, `kubernetes:apps/v1:Deployment`,
    `kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue`)."""
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{kind}"


def type_token(manifest: Mapping[str, Any], patch: bool = False) -> str:
    """The type an object (planned, or read from a cluster) is registered as; with `patch`,
    as a server-side apply patch of an object it does not own (`kubernetes:core/v1:NodePatch`,
    whose manifest's kind is the object's, `Node`)."""
    return kubernetes_type(manifest["apiVersion"], manifest["kind"] + ("Patch" if patch else ""))


def object_id(manifest: Mapping[str, Any]) -> str:
    """An object's key in its cluster as the provider's resource id spells it:
    `<namespace>/<name>`, or `<name>` when cluster-scoped. Also the logical name of each of
    Kueue's install objects (the type tells kinds apart)."""
    metadata = manifest["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]


def kind_name(manifest: Mapping[str, Any]) -> str:
    """The logical name of one child among a component's objects of several kinds:
    `<kind>-<name>` (`clusterqueue-research`), so a flavor and a queue of one name stay apart."""
    return f"{manifest['kind'].lower()}-{manifest['metadata']['name']}"


# ---- logical names ------------------------------------------------------------------------


def child_name(prefix: str, manifest: Mapping[str, Any]) -> str:
    """`<prefix>-<kind>-<name>`: a reservation's or budget's child, apart from every other
    component's."""
    return f"{prefix}-{kind_name(manifest)}"


def reservation_component_name(name: str) -> str:
    """A reservation's component (components/reservation.py)."""
    return f"reservation-{name}"


def budget_component_name(name: str) -> str:
    """A budget's component (components/budget.py)."""
    return f"budget-{name}"


def entry_prefix(entry: str) -> str:
    """Before the logical names of a reservation's objects in an entry's component."""
    return f"{entry}-reservation"


def local_queue_resource_name(entry: str) -> str:
    """The logical name of a queued entry's LocalQueue, a child of its workload component."""
    return f"{entry}-queue"


def claim_resource_name(entry: str) -> str:
    """The logical name of an entry's claim object (its ResourceClaimTemplate or ResourceClaim)."""
    return f"{entry}-gpu-claim"


def class_resource_name(device_class: str) -> str:
    """The logical name of a DeviceClass: its own name (unique in the cluster)."""
    return device_class


def patch_name(pool: str, node: str) -> str:
    """A static pool's patch of one node: `<pool>.<node>` (a pool name has no dot, so no two
    patches share a name)."""
    return f"{pool}.{node}"


# ---- fields something else owns ----------------------------------------------------------

# The provider's server-side apply takes a field back from another field manager only with
# this annotation. A field the stack declares and someone changed by hand (`kubectl patch`,
# `edit`, `label`, `taint`, `apply --server-side`) belongs to that manager from then on, so
# without it `pulumi up --refresh` (and the preview's dry run) fails with an apply conflict
# instead of restoring the field. Fields the stack does not declare stay the other
# managers'; a field a controller owns is left to it with `ignore_changes`
# (KUEUE_OWNED_JOB_FIELDS, SWITCHED).
FORCE_ANNOTATION = "pulumi.com/patchForce"

# What Kueue owns in a queued Job once it exists: the program creates it suspended (and
# Kueue's webhook keeps it so), then Kueue's controller sets `spec.suspend` false when the
# queue admits the Job, and true again if it evicts it. A refresh reads Kueue's value; were
# it compared with the program's, `pulumi preview --refresh` would show every admitted Job
# as drift, and `pulumi up --refresh` would suspend it again, Kueue unsuspend it, and the
# next refreshed preview show it again (tests/test_drift.py). Ignored, the field is left
# out of the apply while Kueue owns it. The CronJob of a queued schedule is not Kueue's.
KUEUE_OWNED_JOB_FIELDS = ["spec.suspend"]

# The fields a reservation's switch owns, per kind (docs/reservations.md, "Why pulumi up
# leaves a window alone"), and what, changed, replaces its CronJob so that it starts over
# (plan/reservations.py, BOOTSTRAP).
SWITCHED = {"LocalQueue": ["spec.stopPolicy"], "CronJob": ["spec.schedule", "spec.suspend"]}
REPLACED = {"CronJob": ["spec.jobTemplate"]}
