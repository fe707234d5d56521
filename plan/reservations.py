"""What a reservation becomes (pure; docs/reservations.md, "What the program creates").

Per pool that reservations hold part of, a Kueue Cohort `kns-res-<pool>` whose quota is
the most the pool's reservations hold at once (a sweep over their windows), child of the
cohort of the pool's queues: between windows those queues borrow it.

Per reservation, on the cluster its queues admit on:
- a namespace of its own (`<prefix>res-<name>`) holding its switch and its holder;
- a ClusterQueue `kns-res-<name>` in the pool's Cohort: no quota of its own, borrowing
  at most what the reservation holds. Its preemption takes back what the pool's queues
  borrowed (reclaimWithinCohort Any: Kueue's hierarchical reclaim, its workloads have
  the advantage of the subtree whose quota they use), and lets its entries preempt the
  holder (withinClusterQueue LowerPriority);
- the holder: a Job the switch creates at warm-up and deletes at the window's end, with
  the lowest priority, admitted partially (as many of its pods as fit), so it reclaims
  what borrowers have of the reservation, brings an autoscaled pool's nodes up, and holds
  whatever the reservation's own entries leave until the end;
- in each entry's namespace a LocalQueue `kns-res` to the ClusterQueue, held between
  windows, and a RoleBinding that lets the switch switch it;
- the switch: a CronJob, its ServiceAccount and RBAC limited by resourceNames, and a
  ConfigMap with its code (plan/reservation_switch.py).

The fields the switch owns (the LocalQueues' stopPolicy, the CronJob's schedule) start as
between windows, and the CronJob starts firing every minute (BOOTSTRAP): its first run,
within a minute of its creation, puts everything where the calendar says and sets the
schedule to the next edge. `identity.SWITCHED` lists them for `ignore_changes`, and the switch
writes them with a field manager of its own: `pulumi up` never sets them back. A change to
what the switch is told (the calendar, the entries) replaces the CronJob (`identity.REPLACED`),
which so starts over at BOOTSTRAP.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Optional

from chrono import calendar
from config import devices as config_devices, names, queues as queue_rules, rules
from config.platform import PlatformConfig
from config.models import NodePool
from config.quantity import kind_for_resource, parse, render
from config.errors import Problem
from config.reservations import Reservation, gpu_resource, holdings, lending_cohort, pool_capacity, show

from . import devices, identity, network, pod_code, queues
from .model import WorkloadPlan
from .schedulers import RESTRICTED_CONTAINER, RESTRICTED_POD

SWITCH = "switch"
HOLDER = "holder"
HOLDER_IMAGE = "registry.k8s.io/pause:3.10"


def switched_fields(manifest: dict[str, Any]) -> list[str]:
    """The fields of one reservation object the switch writes (for `ignore_changes`): the
    entries' LocalQueues `kns-res` and the switch's CronJob; none of the holder's queue or
    of any other object, which `pulumi up` keeps as the program says."""
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    if kind == "LocalQueue" and name != names.RESERVATION_LOCAL_QUEUE:
        return []
    return list(identity.SWITCHED.get(kind, []))


BOOTSTRAP = "* * * * *"
# What a reservation does not hold but its entries ask for is bounded by its nodes, not by
# Kueue: a quota no pool reaches, never lent.
UNBOUNDED = {"memory": "1Ei", "ephemeral-storage": "1Ei"}
UNBOUNDED_COUNT = "1M"
# Kueue's partial admission of a Job (beta, on by default since Kueue 0.5).
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
HOLDER_PODS_MAX = 1000


@dataclass
class EntryQueue:
    """An entry of the reservation: its namespace, and its own LocalQueue (`atEnd: requeue`)."""

    entry: str
    namespace: str
    own_queue: Optional[str]


@dataclass
class ReservationPlan:
    reservation: Reservation
    pool: NodePool
    namespace: str
    cluster_queue: str
    pool_cohort: str
    entries: list[EntryQueue] = field(default_factory=list)
    # Platform objects in registration order.
    objects: list[dict[str, Any]] = field(default_factory=list)
    # What it holds of its pool, per resource; the cohort it lends to between windows (None:
    # none) and the queues with quota on its pool.
    holds: dict[str, Decimal] = field(default_factory=dict)
    lent_to: Optional[str] = None
    pool_queues: list[str] = field(default_factory=list)
    # Its calendar's phase at the run's instant, and the window that phase belongs to (None
    # outside windows and warm-ups): the entries' LocalQueues are created in it, and
    # `./kns explain` shows it.
    phase: str = calendar.CLOSED
    window: Optional[calendar.Window] = None

    @property
    def name(self) -> str:
        return self.reservation.name


# The switch's RoleBinding in each entry's namespace, and the annotation of an entry's
# LocalQueue `kns-res` that names the entry's own queue (`atEnd: requeue`).
SWITCH_BINDING = "kns-reservation-switch"
OWN_QUEUE = "kns.io/own-queue"


def namespace_name(cfg: PlatformConfig, name: str) -> str:
    return names.namespace_name(cfg.cluster.namespace_prefix, f"res-{name}")


def cluster_queue_name(name: str) -> str:
    return names.RESERVATION_QUEUE_PREFIX + name


def _metadata(cfg: PlatformConfig, item: Reservation, name: str, namespace: Optional[str] = None) -> dict[str, Any]:
    return names.labelled_metadata(cfg.cluster.name, names.LABEL_RESERVATION, item.name, name, namespace)


def plan_reservations(cfg: PlatformConfig, plans: list[WorkloadPlan], now: datetime) -> list[ReservationPlan]:
    """Every reservation's objects, and its phase at `now` (the run's instant)."""
    out = []
    for item in cfg.reservations:
        plan = ReservationPlan(item, cfg.pool(item.pool), namespace_name(cfg, item.name),
                               cluster_queue_name(item.name), pool_cohort_name(item.pool))
        plan.phase, plan.window = calendar.phase_at(item.calendar(), now)
        plan.entries = [EntryQueue(p.entry.name, p.namespace,
                                   names.LOCAL_QUEUE if item.at_end == "requeue" and p.entry.queue else None)
                        for p in plans if p.entry.reservation == item.name]
        plan.holds = holdings(item, plan.pool)
        plan.lent_to, plan.pool_queues = lending_cohort(item.pool, cfg.queues)
        plan.objects = _objects(cfg, plan)
        out.append(plan)
    return out


def pool_cohort_name(pool: str) -> str:
    return names.RESERVATION_QUEUE_PREFIX + "pool-" + pool


def pool_cohorts(cfg: PlatformConfig, now: datetime) -> list[dict[str, Any]]:
    """Per pool reservations hold part of: the Cohort that sets aside the most they hold at
    once from `now` on, lent to the pool's queues' cohort between windows."""
    out = []
    for pool_name in dict.fromkeys(r.pool for r in cfg.reservations):
        pool = cfg.pool(pool_name)
        mine = [r for r in cfg.reservations if r.pool == pool_name]
        most = calendar.peak([calendar.Held(r.name, r.calendar(), {k: float(v) for k, v in holdings(r, pool).items()})
                              for r in mine], now)
        held = list(dict.fromkeys(k for r in mine for k in holdings(r, pool)))
        resources = [{"name": k, "nominalQuota": render(Decimal(str(most.get(k, 0))), kind_for_resource(k))}
                     for k in held]
        spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": held,
                                                    "flavors": [{"name": pool_name, "resources": resources}]}]}
        cohort, _ = lending_cohort(pool_name, cfg.queues)
        if cohort is not None:
            spec["parentName"] = cohort
        out.append({"apiVersion": queues.API_VERSION, "kind": "Cohort",
                    "metadata": {"name": pool_cohort_name(pool_name),
                                 "labels": {names.LABEL_CLUSTER: cfg.cluster.name, names.LABEL_POOL: pool_name,
                                            **names.MANAGED_BY}},
                    "spec": spec})
    return out


def _objects(cfg: PlatformConfig, plan: ReservationPlan) -> list[dict[str, Any]]:
    item, ns = plan.reservation, plan.namespace
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(cfg, item, ns)}
    namespace["metadata"]["labels"].update({f"pod-security.kubernetes.io/{m}": "restricted"
                                            for m in ("enforce", "audit", "warn")})
    holder_queue = {"apiVersion": queues.API_VERSION, "kind": "LocalQueue", "metadata": _metadata(cfg, item, HOLDER, ns),
                    "spec": {"clusterQueue": plan.cluster_queue}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(cfg, item, SWITCH, ns)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _metadata(cfg, item, SWITCH, ns),
            "rules": [
                # A create cannot be limited by name: the namespace holds nothing else.
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "delete"], "resourceNames": [HOLDER]},
                {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get", "patch"],
                 "resourceNames": [SWITCH]},
            ]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": _metadata(cfg, item, SWITCH, ns),
               "subjects": [{"kind": "ServiceAccount", "name": SWITCH, "namespace": ns}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SWITCH}}
    # Which LocalQueues are the reservation's: a list (which names no object) of them all,
    # read only; changing one needs the RoleBinding in its namespace (`entry_objects`).
    find = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": _metadata(cfg, item, f"{plan.cluster_queue}-find"),
            "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["list"]}]}
    find_binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": _metadata(cfg, item, f"{plan.cluster_queue}-find"),
                    "subjects": [{"kind": "ServiceAccount", "name": SWITCH, "namespace": ns}],
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": f"{plan.cluster_queue}-find"}}
    claim = holder_claim_manifest(cfg, plan)
    # The switch serves nothing: its namespace admits no one (plan/network.py).
    isolation = network.platform_policy(cfg.network, ns, _metadata(cfg, item, ns)["labels"])
    return [namespace, *([isolation] if isolation is not None else []), cluster_queue_manifest(cfg, plan),
            holder_queue, account, role, binding, find, find_binding, entries_role(cfg, plan),
            code_config_map(cfg, plan), cronjob_manifest(cfg, plan), *([claim] if claim is not None else [])]


def entries_role(cfg: PlatformConfig, plan: ReservationPlan) -> dict[str, Any]:
    """What the switch may do in an entry's namespace (bound there by `entry_objects`):
    switch the reservation's LocalQueue; with `atEnd: requeue`, move the Jobs the end of a
    window evicted to the entry's own queue (their names are the controller's: not
    limited by name, only by namespace)."""
    item = plan.reservation
    found = [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get", "patch"],
              "resourceNames": [names.RESERVATION_LOCAL_QUEUE]}]
    if item.at_end == "requeue":
        found += [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]},
                  {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "patch"]}]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": _metadata(cfg, item, f"{plan.cluster_queue}-entries"), "rules": found}


def covered(cfg: PlatformConfig, plan: ReservationPlan) -> list[str]:
    """What the ClusterQueue covers: what it holds, cpu and memory, and whatever the pool's
    queues cover (the same Jobs must fit it), but `pods`."""
    held = plan.holds
    out = list(held)
    others = [q.quota for q in cfg.queues if plan.pool.name in q.quota]
    for resource in ["cpu", "memory", *(r for quota in others for r in queue_rules.covered_resources(quota))]:
        if resource not in out and resource != queues.PODS:
            out.append(resource)
    return out


def cluster_queue_manifest(cfg: PlatformConfig, plan: ReservationPlan) -> dict[str, Any]:
    """No quota of its own for what it holds: it borrows that from the pool's Cohort, at
    most its holdings. What it does not hold its entries may use without bound here (the
    reservation's nodes bound it), never lent."""
    held = plan.holds
    capacity = pool_capacity(plan.pool)
    resources = []
    for resource in covered(cfg, plan):
        kind = kind_for_resource(resource)
        if resource in held:
            resources.append({"name": resource, "nominalQuota": "0", "borrowingLimit": render(held[resource], kind)})
            continue
        bound = render(capacity[resource], kind) if resource in capacity else UNBOUNDED.get(resource, UNBOUNDED_COUNT)
        resources.append({"name": resource, "nominalQuota": bound, "borrowingLimit": "0", "lendingLimit": "0"})
    return {"apiVersion": queues.API_VERSION, "kind": "ClusterQueue",
            "metadata": _metadata(cfg, plan.reservation, plan.cluster_queue),
            "spec": {"namespaceSelector": {"matchLabels": {names.LABEL_CLUSTER: cfg.cluster.name}},
                     "cohortName": plan.pool_cohort,
                     "resourceGroups": [{"coveredResources": [r["name"] for r in resources],
                                         "flavors": [{"name": plan.pool.name, "resources": resources}]}],
                     "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}}}


def fit_problems(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> list[Problem]:
    """An entry whose Job (all its workers at once, its pod as finally built) asks more of
    a resource its reservation holds than the reservation holds: Kueue would never admit
    it there."""
    found = []
    for plan in plans:
        item = cfg.reservation(plan.entry.reservation)
        if item is None or item.pool not in {p.name for p in cfg.node_pools}:
            continue
        held = holdings(item, cfg.pool(item.pool))
        asks = queues.workload_requests(plan)
        over = [f"{show(r, asks[r])} (it holds {show(r, amount)})" for r, amount in held.items()
                if asks.get(r, Decimal(0)) > amount]
        if over:
            at_once = f"{plan.entry.pods_per_run} pods" if plan.entry.pods_per_run > 1 else "its pod"
            found.append(Problem(f"{cfg.paths[plan.entry.name]}.reservation",
                                 f'reservation "{item.name}" can never admit its Job: {at_once} ask '
                                 f"{', '.join(over)}"))
    return found


def holder_pods(plan: ReservationPlan) -> tuple[int, dict[str, str]]:
    """How many pods the holder runs and what each asks: one GPU each where it holds GPUs,
    else one CPU each (at most HOLDER_PODS_MAX), what else it holds shared among them. Kueue
    admits the holder partially (as many pods as fit, `job-min-parallelism` 1), so it takes
    exactly what the reservation's own entries leave, and gives it up pod by pod."""
    held = plan.holds
    gpu = gpu_resource(plan.pool)
    unit = held.get(gpu) or held.get("cpu") or Decimal(1)
    count = int(max(1, min(HOLDER_PODS_MAX, math.floor(unit))))
    each: dict[str, str] = {}
    for resource, amount in held.items():
        step = Decimal("0.001") if resource == "cpu" else Decimal(1)
        share = (amount / count / step).to_integral_value(rounding="ROUND_FLOOR") * step
        if share > 0:
            each[resource] = render(share, kind_for_resource(resource))
    return count, each


def holder_devices(plan: ReservationPlan, each: dict[str, str]) -> dict[str, int]:
    """Of what each holder pod holds, the devices of a DRA pool, by device class (the
    class Kueue counts as that resource, plan/devices.py): the holder claims them, as the
    reservation's entries do (docs/gpus.md)."""
    by_resource = {r: c for c, r in devices.resource_of_class([plan.pool]).items()}
    return {by_resource[r]: int(parse(amount)) for r, amount in each.items() if r in by_resource}


def holder_claim_manifest(cfg: PlatformConfig, plan: ReservationPlan) -> Optional[dict[str, Any]]:
    """The ResourceClaimTemplate each holder pod's devices come from, on a DRA pool."""
    claimed = holder_devices(plan, holder_pods(plan)[1])
    if not claimed:
        return None
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": _metadata(cfg, plan.reservation, config_devices.CLAIM, plan.namespace),
            "spec": {"spec": {"devices": {"requests": [
                {"name": f"r{i}", "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount",
                                              "count": count}}
                for i, (device_class, count) in enumerate(claimed.items())]}}}}


def holder_manifest(cfg: PlatformConfig, plan: ReservationPlan) -> dict[str, Any]:
    count, each = holder_pods(plan)
    claimed = holder_devices(plan, each)
    if claimed:
        held = set(devices.resource_of_class([plan.pool]).values())
        each = {r: a for r, a in each.items() if r not in held}
    requests = {"cpu": "10m", "memory": "16Mi", **each}
    labels = {names.QUEUE_LABEL: HOLDER, names.PRIORITY_LABEL: rules.RESERVATION_HOLDER_PRIORITY,
              names.LABEL_CLUSTER: cfg.cluster.name, names.LABEL_RESERVATION: plan.name}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": HOLDER, "namespace": plan.namespace, "labels": labels,
                         "annotations": {MIN_PARALLELISM: "1"}},
            "spec": {"parallelism": count, "backoffLimit": 0, "suspend": True,
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "restartPolicy": "Never", "automountServiceAccountToken": False,
                         "terminationGracePeriodSeconds": 0, "securityContext": RESTRICTED_POD,
                         "containers": [{"name": "hold", "image": HOLDER_IMAGE,
                                         "resources": {"requests": requests, "limits": requests,
                                                       **({"claims": [{"name": config_devices.CLAIM}]}
                                                          if claimed else {})},
                                         "securityContext": RESTRICTED_CONTAINER}],
                         **({"resourceClaims": [{"name": config_devices.CLAIM,
                                                 "resourceClaimTemplateName": config_devices.CLAIM}]}
                            if claimed else {})}}}}


def switch_spec(cfg: PlatformConfig, plan: ReservationPlan) -> dict[str, Any]:
    """What the switch is told (its one environment variable, plan/reservation_switch.py)."""
    item = plan.reservation
    cal = item.calendar()
    if cal.once is not None:
        when: dict[str, Any] = {"start": cal.once.start.isoformat(), "end": cal.once.end.isoformat()}
    else:
        assert cal.length is not None
        when = {"schedule": cal.schedule, "zone": cal.zone, "seconds": int(cal.length.total_seconds())}
    return {"name": item.name, "namespace": plan.namespace, "atEnd": item.at_end,
            "leadSeconds": item.warm_up_minutes * 60, "calendar": when, "cronJob": SWITCH,
            "localQueue": names.RESERVATION_LOCAL_QUEUE, "label": names.LABEL_RESERVATION,
            "ownQueueAnnotation": OWN_QUEUE, "holder": holder_manifest(cfg, plan)}


def _code_files(zones: tuple[str, ...]) -> tuple[dict[str, str], dict[str, bytes], list[dict[str, str]]]:
    """The switch's code (plan/pod_code.py): the script and what it imports."""
    return pod_code.code_files("switch.py", "plan/reservation_switch.py", zones)


def code_zones(item: Reservation) -> tuple[str, ...]:
    """The zones the switch computes in: its reservation's, and UTC."""
    return tuple(sorted({"Etc/UTC", item.time_zone}))


def code_config_map(cfg: PlatformConfig, plan: ReservationPlan) -> dict[str, Any]:
    return pod_code.config_map(_metadata(cfg, plan.reservation, SWITCH, plan.namespace),
                               _code_files(code_zones(plan.reservation)))


def cronjob_manifest(cfg: PlatformConfig, plan: ReservationPlan) -> dict[str, Any]:
    item = plan.reservation
    labels = {names.LABEL_CLUSTER: cfg.cluster.name, names.LABEL_RESERVATION: item.name}
    container = {
        "name": SWITCH, "image": pod_code.IMAGE, "command": ["python3", "-B", f"{pod_code.CODE_DIR}/switch.py"],
        "env": [{"name": "KNS_RESERVATION", "value": json.dumps(switch_spec(cfg, plan), sort_keys=True)},
                pod_code.NO_IMAGE_ZONES],
        "volumeMounts": [pod_code.MOUNT],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi", "ephemeral-storage": "16Mi"},
                      "limits": {"cpu": "500m", "memory": "128Mi", "ephemeral-storage": "64Mi"}},
        "securityContext": RESTRICTED_CONTAINER,
    }
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _metadata(cfg, item, SWITCH, plan.namespace),
            "spec": {"schedule": BOOTSTRAP, "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
                     "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
                     "jobTemplate": {"metadata": {"labels": labels}, "spec": {
                         "backoffLimit": 4, "activeDeadlineSeconds": item.warm_up_minutes * 60 + 900,
                         "ttlSecondsAfterFinished": 7 * 86400,
                         "template": {"metadata": {"labels": labels}, "spec": {
                             "serviceAccountName": SWITCH, "restartPolicy": "Never",
                             "securityContext": RESTRICTED_POD, "containers": [container],
                             "volumes": [pod_code.volume(SWITCH, _code_files(code_zones(item)))]}}}}}}


def entry_objects(cfg: PlatformConfig, plan: ReservationPlan, entry: EntryQueue) -> list[dict[str, Any]]:
    """In an entry's namespace: the LocalQueue its Jobs go to, and the binding that lets the
    switch switch it. The LocalQueue is created in the phase the plan has (an entry
    added inside a window runs in it; the switch owns the field from then on), labelled
    with its reservation so the switch finds it, and naming the entry's own queue where the
    end of a window requeues its Jobs."""
    item = plan.reservation
    closed = "HoldAndDrain" if item.at_end == "requeue" else "Hold"
    metadata = _metadata(cfg, item, names.RESERVATION_LOCAL_QUEUE, entry.namespace)
    if entry.own_queue is not None:
        metadata["annotations"] = {OWN_QUEUE: entry.own_queue}
    queue = {"apiVersion": queues.API_VERSION, "kind": "LocalQueue", "metadata": metadata,
             "spec": {"clusterQueue": plan.cluster_queue,
                      "stopPolicy": closed if plan.phase == calendar.CLOSED else "None"}}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": _metadata(cfg, item, SWITCH_BINDING, entry.namespace),
               "subjects": [{"kind": "ServiceAccount", "name": SWITCH, "namespace": plan.namespace}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": f"{plan.cluster_queue}-entries"}}
    return [queue, binding]
