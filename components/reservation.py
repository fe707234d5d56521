"""A reservation (`kns:queueing:Reservation`, docs/reservations.md): its namespace,
ClusterQueue, holder LocalQueue, switch CronJob with its ConfigMap, ServiceAccount and
RBAC; and per reserved pool its Cohort (`kns:queueing:ReservedPool`); as
plan/reservations.py makes them. The fields the switch owns are left to it
(`ignore_changes`), so `pulumi up` inside a window neither shows them nor closes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi

from plan.identity import REPLACED, RESERVATION_TYPE as TYPE, RESERVED_POOL_TYPE as POOL_TYPE, child_name
from plan.reservations import switched_fields

from .register import Planned


def register_reserved(prefix: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One object under `<prefix>-<kind>-<name>`, the switched fields ignored."""
    return Planned(child_name(prefix, manifest), manifest, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
        ignore_changes=switched_fields(manifest),
        # A new switch starts over (plan/reservations.py, BOOTSTRAP).
        replace_on_changes=REPLACED.get(manifest["kind"], []),
        delete_before_replace=manifest["kind"] in REPLACED)))


@dataclass(kw_only=True)
class ReservationArgs:
    objects: list[dict[str, Any]]
    # Kueue (its CRDs) and the queues' flavors, which the ClusterQueue names.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class ReservedPool(pulumi.ComponentResource):
    """The Cohort that sets a pool's reserved capacity aside (`kns:queueing:ReservedPool`)."""

    def __init__(self, name: str, cohort: dict[str, Any], depends_on: list[pulumi.Resource],
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(POOL_TYPE, name, None, opts)
        self.cohort = register_reserved(name, cohort, pulumi.ResourceOptions(parent=self, depends_on=depends_on))
        self.register_outputs({"cohort": cohort["metadata"]["name"]})


class Reservation(pulumi.ComponentResource):
    def __init__(self, name: str, args: ReservationArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        namespace, *rest = args.objects
        self.namespace = register_reserved(name, namespace, pulumi.ResourceOptions(parent=self))
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace, *args.depends_on])
        self.children = [register_reserved(name, manifest, after) for manifest in rest]
        self.register_outputs({"namespace": namespace["metadata"]["name"],
                               "clusterQueue": next(m["metadata"]["name"] for m in rest if m["kind"] == "ClusterQueue")})
