"""KnsWorkload: one job or schedule entry, with its namespace and its Job or CronJob."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi

from plan.identity import (JOB_TYPE, KUEUE_OWNED_JOB_FIELDS, SCHEDULE_TYPE, claim_resource_name, entry_prefix,
                           local_queue_resource_name)
from plan.model import WorkloadPlan

from .namespace import JobNamespace, JobNamespaceArgs
from .register import Planned
from .reservation import register_reserved


def controller_owned_fields(plan: WorkloadPlan, kind: str) -> list[str]:
    """The `ignore_changes` of one workload object: the fields a controller owns (Kueue's
    `spec.suspend` of a queued Job, plan/identity.py)."""
    queued = plan.entry.queue is not None or plan.entry.reservation is not None
    return list(KUEUE_OWNED_JOB_FIELDS) if kind == "Job" and queued else []


def replaced_by_deletion(kind: str) -> bool:
    """A Job's pod template is immutable, so the provider replaces a Job whose entry changes
    its cpu, image or env. Its name is the entry's, fixed: created first (Pulumi's default),
    the new Job would be the old one applied again, which the API server refuses
    (`spec.template: field is immutable`). The old Job goes first, then the new one."""
    return kind == "Job"


def other_kind(plan: WorkloadPlan) -> pulumi.Alias:
    """The same entry under the other kind. An entry moved between `kns:jobs` and
    `kns:schedules` keeps its name and its namespace; only its component's type changes,
    and with it every URN under it. Without this alias the engine would create the new
    entry's objects (the namespace applied again over the old one) and then delete the old
    entry's, the namespace with them, emptying the new entry. With it, the entry's objects
    are the same resources: the namespace and its guards stay, the Job or CronJob the new
    kind no longer has is deleted, the other created."""
    return pulumi.Alias(type_=JOB_TYPE if plan.is_schedule else SCHEDULE_TYPE)


@dataclass
class RemoteSide:
    """A worker a queued entry's Jobs may be dispatched to (docs/multicluster.md): its
    provider, and its Kueue and queues, which the entry's LocalQueue there waits for."""

    worker: str
    provider: pulumi.ProviderResource
    queue_dependencies: list[pulumi.Resource] = field(default_factory=list)


@dataclass(kw_only=True)
class KnsWorkloadArgs:
    plan: WorkloadPlan
    # A queued entry's LocalQueue `kns` (plan/queues.py), and what it waits for (Kueue's
    # CRDs and the ClusterQueues).
    local_queue: Optional[dict[str, Any]] = None
    queue_dependencies: list[pulumi.Resource] = field(default_factory=list)
    # On a MultiKueue site: the workers of its queue, where MultiKueue creates its Jobs in
    # the same namespace and queue, so each gets the namespace, its guard rails, the
    # LocalQueue and the workers' Service; the Job or CronJob stays on the manager.
    remote: list[RemoteSide] = field(default_factory=list)
    # An entry that uses a reservation (docs/reservations.md): the LocalQueue `kns-res` and
    # the switch's RoleBinding in its namespace (plan/reservations.py entry_objects).
    reservation_objects: list[dict[str, Any]] = field(default_factory=list)


class KnsWorkload(pulumi.ComponentResource):
    """A Job entry (`kns:workload:Job`) or a schedule entry (`kns:workload:Schedule`)."""

    def __init__(self, name: str, args: KnsWorkloadArgs, opts: Optional[pulumi.ResourceOptions] = None):
        plan = args.plan
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[other_kind(plan)]))
        super().__init__(SCHEDULE_TYPE if plan.is_schedule else JOB_TYPE, name, None, opts)
        self.plan = plan
        self.job_namespace = JobNamespace(name, JobNamespaceArgs(plan=plan), pulumi.ResourceOptions(parent=self))
        self.namespace_name = plan.namespace
        guards = list(self.job_namespace.guards)
        made = self._queue_and_service(name, args.local_queue, self.job_namespace, args.queue_dependencies,
                                       pulumi.ResourceOptions(parent=self), guards)
        self.local_queue, self.service = made.get("LocalQueue"), made.get("Service")
        self.claim = self._claim(name, self.job_namespace, pulumi.ResourceOptions(parent=self), guards)
        for manifest in args.reservation_objects:
            guards.append(register_reserved(entry_prefix(name), manifest, pulumi.ResourceOptions(
                parent=self, depends_on=[self.job_namespace.namespace, *args.queue_dependencies])))
        self.remote_namespaces = []
        for side in args.remote:
            on_worker = pulumi.ResourceOptions(parent=self, providers=[side.provider])
            remote = JobNamespace(f"{side.worker}-{name}", JobNamespaceArgs(plan=plan), on_worker)
            self.remote_namespaces.append(remote)
            guards += remote.guards
            self._queue_and_service(f"{side.worker}-{name}", args.local_queue, remote, side.queue_dependencies,
                                    on_worker, guards)
            self._claim(f"{side.worker}-{name}", remote, on_worker, guards)
        self.workloads: list[pulumi.CustomResource] = [
            Planned(object_name, manifest, pulumi.ResourceOptions(
                parent=self, depends_on=guards, ignore_changes=controller_owned_fields(plan, manifest["kind"]),
                delete_before_replace=replaced_by_deletion(manifest["kind"])))
            for object_name, manifest in plan.objects.items()
        ]
        self.register_outputs({"namespace": self.namespace_name})

    def _claim(self, name: str, job_namespace: JobNamespace, opts: pulumi.ResourceOptions,
               guards: list[pulumi.Resource]) -> Optional[pulumi.CustomResource]:
        """The GPU devices' claim object in one cluster's copy of the namespace (docs/gpus.md),
        added to `guards`: the pods' claims are made from it."""
        claim = self.plan.claim
        if claim is None:
            return None
        made = Planned(claim_resource_name(name), claim, pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=[job_namespace.namespace])))
        guards.append(made)
        return made

    def _queue_and_service(self, name: str, local_queue: Optional[dict[str, Any]], job_namespace: JobNamespace,
                           queue_dependencies: list[pulumi.Resource], opts: pulumi.ResourceOptions,
                           guards: list[pulumi.Resource]) -> dict[str, pulumi.CustomResource]:
        """The LocalQueue and the workers' Service in one cluster's copy of the namespace,
        added to `guards`; those made returned by kind."""
        plan = self.plan
        made: dict[str, pulumi.CustomResource] = {}
        if local_queue is not None:
            made["LocalQueue"] = Planned(local_queue_resource_name(name), local_queue, pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[job_namespace.namespace, *queue_dependencies])))
        if plan.service is not None:
            made["Service"] = Planned(f"{name}-workers", plan.service, pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[job_namespace.namespace])))
        guards += made.values()
        return made
