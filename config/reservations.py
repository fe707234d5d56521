"""`kns:reservations` (contract section 15, docs/reservations.md): the model, and the checks
that need the whole config (pools, queues, entries, other reservations).

A reservation holds part of one pool for windows on the calendar (chrono/calendar.py).
What it holds is counted in the pool's units: GPUs of whole nodes (`nodes`), or the
resources written (`resources`, where `gpus` is the pool's GPU resource). Everything here
is pure; plan/reservations.py turns a checked reservation into Kueue objects and the
switch that opens and closes its windows.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from types import MappingProxyType
from typing import Annotated, Literal, Mapping, Optional, Sequence

from pydantic import BeforeValidator, Field, model_validator

from chrono import calendar, moments
from . import devices, podspec, rules
from .errors import UNREPEATED, Problem, Problems, at, closest
from .models import (CronExpr, DnsLabel, Model, NodePool, Queue, Queueing, TimeZone, Workload, _quantities,
                     duration_text)
from .quantity import kind_for_resource, parse, render
from .queues import resource_name_problem

GPUS = "gpus"


def _held_resources(value: object) -> object:
    """`resources`: `gpus` (the pool's GPU resource) or any resource a queue can hold."""
    return _quantities(value, lambda name: None if name == GPUS else resource_name_problem(name))


HeldResources = Annotated[dict[str, str], BeforeValidator(_held_resources)]


def _moment(value: object) -> object:
    """`start`/`end`: RFC 3339 text (or a timestamp a YAML reader made of it). What is not
    one is refused without repeating it: a value in the wrong place may be a secret."""
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 date and time as text, not {type(value).__name__}")
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError("is not an RFC 3339 date and time (e.g. 2026-12-01T09:00:00+01:00)") from None


# A token pasted as a start is never repeated; a zone, a schedule, a duration are no secret
# and are repeated like a schedule's (config/errors.py UNREPEATED).
Moment = Annotated[Optional[datetime], BeforeValidator(_moment), UNREPEATED]


class Reservation(Model):
    """One `kns:reservations` entry: capacity of one pool held for windows on the calendar."""

    name: DnsLabel
    pool: str
    nodes: Optional[int] = Field(default=None, ge=1)
    resources: Optional[HeldResources] = None
    schedule: Optional[CronExpr] = None
    time_zone: TimeZone = "Etc/UTC"
    duration: Annotated[Optional[str], duration_text(rules.RESERVATION_DURATION)] = None
    start: Moment = None
    end: Moment = None
    warm_up_minutes: int = Field(default=0, ge=0, le=24 * 60)
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    entries: list[str] = Field(default_factory=list)
    at_end: Literal["requeue", "finish"] = "requeue"

    @model_validator(mode="after")
    def _shape(self) -> "Reservation":
        found: list[Problem] = []
        if (self.nodes is None) == (self.resources is None):
            found.append(at((), rules.RESERVATION_HOLDS_ONE.message))
        if self.resources is not None and not any(parse(v, kind_for_resource(k)) > 0
                                                  for k, v in self.resources.items()):
            found.append(at(("resources",), "holds nothing: give at least one resource more than 0"))
        recurring = self.schedule is not None or self.duration is not None
        once = self.start is not None or self.end is not None
        if recurring == once:
            found.append(at((), rules.RESERVATION_WHEN_ONE.message))
        if recurring and (self.schedule is None or self.duration is None):
            missing = "duration" if self.duration is None else "schedule"
            found.append(at((missing,), "a recurring reservation needs schedule and duration"))
        if self.duration is not None:
            try:
                calendar.duration(self.duration)
            except calendar.CalendarError as error:
                found.append(at(("duration",), str(error)))
        if once:
            for key, value in (("start", self.start), ("end", self.end)):
                if value is None:
                    found.append(at((key,), "one window needs start and end"))
                elif value.tzinfo is None:
                    found.append(at((key,), rules.RESERVATION_OFFSET.message))
                elif value.second or value.microsecond:
                    found.append(at((key,), rules.RESERVATION_WHOLE_MINUTE.message))
            if self.start and self.end and self.start.tzinfo and self.end.tzinfo and self.start >= self.end:
                found.append(at(("end",), f"{moments.shown(self.end)} is not after start {moments.shown(self.start)}"))
        podspec.raise_if_any(found)
        return self

    @property
    def recurring(self) -> bool:
        return self.schedule is not None

    def calendar(self) -> calendar.Calendar:
        """Its windows, each held from its warm-up (`warmUpMinutes` before the start)."""
        lead = timedelta(minutes=self.warm_up_minutes)
        if self.schedule is not None:
            return calendar.Calendar(schedule=self.schedule, zone=self.time_zone,
                                     length=calendar.duration(str(self.duration)), lead=lead)
        assert self.start is not None and self.end is not None
        return calendar.Calendar(once=calendar.Window(self.start, self.end), lead=lead)

    def zone(self) -> Optional[str]:
        """The zone its windows are shown in (a one-off window: its start's own offset)."""
        return self.time_zone if self.recurring else None

    def allows(self, entry: Workload) -> bool:
        """Whether an entry may use the reservation: named in `entries`, its user in `users`
        or one of its groups in `groups` (none of them: a maintenance window, no one)."""
        return (entry.name in self.entries or (entry.user is not None and entry.user in self.users)
                or bool(set(entry.groups) & set(self.groups)))


def gpu_resource(pool: NodePool) -> str:
    """What a pool's whole GPUs are counted as: its extended resource, or on a DRA pool the
    resource Kueue counts its whole-GPU devices as (docs/gpus.md)."""
    if devices.is_dra(pool):
        assert pool.gpu is not None and pool.gpu.driver is not None
        return devices.kueue_resource(pool.gpu.driver, devices.WHOLE)
    return "amd.com/gpu" if pool.gpu is not None and pool.gpu.vendor == "amd" else "nvidia.com/gpu"


def is_gpu(resource: str) -> bool:
    """Whole GPUs, counted either way (`nvidia.com/gpu`, `gpu.nvidia.com/gpu`)."""
    return resource.endswith("/gpu")


def holdings(item: Reservation, pool: NodePool) -> dict[str, Decimal]:
    """What the reservation holds of its pool, per resource (`nodes` holds their GPUs)."""
    if item.nodes is not None:
        assert pool.gpu is not None
        return {gpu_resource(pool): Decimal(item.nodes * pool.gpu.per_node)}
    out: dict[str, Decimal] = {}
    for key, value in (item.resources or {}).items():
        name = gpu_resource(pool) if key == GPUS else key
        amount = parse(value, kind_for_resource(key))
        if amount > 0:
            out[name] = amount
    return out


def pool_capacity(pool: NodePool) -> dict[str, Decimal]:
    """What a pool has, where its size is known: a static pool's GPUs (its nodes times GPUs
    per node), an autoscaled pool's Karpenter limits."""
    if pool.nodes is not None:
        return {gpu_resource(pool): Decimal(len(pool.nodes) * pool.gpu.per_node)} if pool.gpu is not None else {}
    assert pool.autoscale is not None
    out = {}
    for key, value in pool.autoscale.limits.items():
        if key != "nodes":  # a count of nodes, not a resource a reservation holds
            out[gpu_resource(pool) if is_gpu(key) else key] = parse(value, kind_for_resource(key))
    return out


def queued_on(pool: str, queues: Sequence[Queue]) -> dict[str, Decimal]:
    """What the pool's queues hold of it, summed over queues (their nominal quotas)."""
    out: dict[str, Decimal] = {}
    for queue in queues:
        for resource, amount in queue.quota.get(pool, {}).items():
            out[resource] = out.get(resource, Decimal(0)) + parse(amount, kind_for_resource(resource))
    return out


def lending_cohort(pool: str, queues: Sequence[Queue]) -> tuple[Optional[str], list[str]]:
    """The cohort a reservation on `pool` lends to between windows: the one cohort of the
    queues with quota on the pool (None: they have none); and those queues."""
    users = [q for q in queues if pool in q.quota]
    cohorts = sorted({q.cohort for q in users if q.cohort is not None})
    return (cohorts[0] if len(cohorts) == 1 else None), [q.name for q in users]


def show(resource: str, amount: Decimal) -> str:
    if is_gpu(resource):
        return f"{amount:f} GPUs".replace(".0 ", " ") if amount != 1 else "1 GPU"
    return f"{render(amount, kind_for_resource(resource))} {resource}"


def check_reservations(reservations: Sequence[Reservation], pools: Mapping[str, NodePool], queueing: Queueing,
                       queues: Sequence[Queue], entries: Sequence[Workload], priorities: Sequence[str],
                       pool_worker: Mapping[str, str], problems: Problems, now: Optional[datetime] = None,
                       base: str = "kns:reservations", broken_entries: Mapping[str, str] = MappingProxyType({})
                       ) -> list[str]:
    """Every problem of the reservations that one alone cannot show; returns warnings (a
    one-off window already over). An entry that is named but invalid (`broken_entries`:
    name -> its path) is pointed at, not said to be missing."""
    now = now or datetime.now(timezone.utc)
    warnings: list[str] = []
    unheld: set[str] = set()  # reservations holding nothing their pool counts (said once)
    queue_names = {q.name for q in queues}
    entry_names = {e.name for e in entries}
    seen: set[str] = set()
    if reservations and rules.RESERVATION_HOLDER_PRIORITY in priorities:
        problems.add(f"kns:priorities[{rules.RESERVATION_HOLDER_PRIORITY}]",
                     "is the name of the priority the reservations' holders use; choose another name")
    for item in reservations:
        path = f"{base}[{item.name}]"
        if item.name in seen:
            problems.add(f"{path}.name", f'"{item.name}" names another reservation too; reservation names are unique')
        seen.add(item.name)
        if not queueing.enabled:
            problems.add(path, rules.RESERVATIONS_NEED_QUEUEING.message)
        if item.name in queue_names:
            problems.add(f"{path}.name", f'"{item.name}" is also the name of a queue (kns:queues[{item.name}]); '
                                         "a reservation's ClusterQueue would meet it")
        for i, name in enumerate(item.entries):
            if name in broken_entries and name not in entry_names:
                problems.add(f"{path}.entries[{i}]", f'entry "{name}" is invalid (its problems are listed under '
                                                     f"{broken_entries[name]})")
            elif name not in entry_names:
                problems.add(f"{path}.entries[{i}]", "names no entry of kns:jobs, kns:schedules or the job files")
        pool = pools.get(item.pool)
        if pool is None:
            close = closest(item.pool, pools)
            hint = f'; did you mean "{close}"?' if close else ""
            problems.add(f"{path}.pool", f'names no node pool{hint} (pools: {", ".join(sorted(pools)) or "none"})')
        elif pool_worker:
            problems.add(path, "a site with kns:workers (MultiKueue) cannot hold reservations yet: a reservation "
                               "holds a pool of the one cluster whose Kueue admits its entries")
        else:
            if not _check_holdings(item, pool, path, problems):
                unheld.add(item.name)
            cohort, users = lending_cohort(item.pool, queues)
            cohorts = sorted({q.cohort or "(none)" for q in queues if q.name in users})
            if len(cohorts) > 1:
                problems.add(f"{path}.pool", f"the queues with quota on pool {item.pool} are in different cohorts "
                                             f"({', '.join(cohorts)}); a reservation lends its capacity to one "
                                             "cohort between windows: put them in one")
        cal = item.calendar()
        if item.recurring:
            clash = cal.runs_into_next(now)
            if clash:
                first, second = clash
                problems.add(f"{path}.duration", f"{item.duration} is longer than the time between two windows: the "
                                                 f"window {calendar.describe(first, item.time_zone)} runs into the "
                                                 f"next, {calendar.describe(second, item.time_zone)}")
            elif not cal.windows(now, now + calendar.HORIZON):
                problems.add(f"{path}.schedule", f'"{item.schedule}" has no window in the next 366 days')
        elif cal.once is not None and cal.once.end <= now:
            warnings.append(f"{path}: its window ended on {cal.once.end.date().isoformat()}; it holds nothing")
    _check_overbooking([item for item in reservations if item.name not in unheld], pools, queues, problems, now, base)
    return warnings


def _check_holdings(item: Reservation, pool: NodePool, path: str, problems: Problems) -> bool:
    """What it holds exists in the pool, and fits it alone; False when it holds nothing the
    pool counts (nothing to sweep with the others)."""
    if item.nodes is not None:
        if pool.gpu is None:
            problems.add(f"{path}.nodes", f"pool {pool.name} has no GPUs, so a node of it holds nothing the platform "
                                          "counts: write the resources it holds (resources: {cpu: 64, memory: 256Gi})")
            return False
        if pool.nodes is not None and item.nodes > len(pool.nodes):
            problems.add(f"{path}.nodes", f"{item.nodes} nodes is more than pool {pool.name} has ({len(pool.nodes)})")
            return True
        most = (pool.autoscale.limits.get("nodes") if pool.autoscale is not None else None)
        if most is not None and item.nodes > parse(most, kind_for_resource("nodes")):
            problems.add(f"{path}.nodes", f"{item.nodes} nodes is more than pool {pool.name} may grow to "
                                          f"({most} nodes by its limits)")
            return True
    elif GPUS in (item.resources or {}) and pool.gpu is None:
        problems.add(f"{path}.resources.gpus", f"pool {pool.name} has no GPUs")
        return False
    capacity = pool_capacity(pool)
    for resource, amount in holdings(item, pool).items():
        limit = capacity.get(resource)
        if limit is not None and amount > limit:
            where = "nodes" if item.nodes is not None else "resources"
            what = "its limits" if pool.autoscale is not None else "it"
            problems.add(f"{path}.{where}", f"holds {show(resource, amount)}, more than pool {pool.name} can have "
                                            f"({show(resource, limit)} by {what})")
    return True


def _check_overbooking(reservations: Sequence[Reservation], pools: Mapping[str, NodePool], queues: Sequence[Queue],
                       problems: Problems, now: datetime, base: str) -> None:
    """Per pool of known size: the reservations' windows swept together, with what the
    pool's queues hold of it throughout."""
    for pool_name in sorted({item.pool for item in reservations}):
        pool = pools.get(pool_name)
        if pool is None:
            continue
        capacity = pool_capacity(pool)
        if not capacity:
            continue
        queued = queued_on(pool_name, queues)
        left = {r: float(amount - queued.get(r, Decimal(0))) for r, amount in capacity.items()}
        mine = [item for item in reservations if item.pool == pool_name]
        held = [calendar.Held(item.name, item.calendar(), {r: float(a) for r, a in holdings(item, pool).items()})
                for item in mine]
        found = calendar.overbooked(left, held, now)
        if found is None:
            continue
        second = next(item for item in mine if item.name == found.second)
        queues_part = (f", and its queues hold {show(found.resource, queued[found.resource])} of it"
                       if queued.get(found.resource) else "")
        others = f'with reservation "{found.first}" ' if found.first != found.second else ""
        when = (f"first from {calendar.moment(found.at, second.zone(), found.window.start)}, the warm-up of its window "
                if found.in_warm_up else "first in the window ")
        problems.add(f"{base}[{found.second}]",
                     f"{others}it holds {show(found.resource, Decimal(str(found.held)))} of pool {pool_name} at once"
                     f"{queues_part}: more than its {show(found.resource, capacity[found.resource])}, {when}"
                     f"{calendar.describe(found.window, second.zone())}")


def check_entry_references(entries: Sequence[Workload], profiles: Sequence[tuple[str, object]],
                           reservations: Sequence[Reservation], paths: Mapping[str, str], problems: Problems,
                           broken: set[str], own: Optional[set[str]] = None) -> None:
    """Each reservation an entry or a profile rule names exists; the entry may use it, runs
    on its pool, and has the queue `atEnd: requeue` requeues it on. `own`: the entries that
    name their reservation themselves; one a profile rule gave that does not exist is said
    once, at the rule."""
    by_name = {r.name: r for r in reservations}
    for rule, profile in profiles:
        name = getattr(profile, "reservation", None)
        if name is not None and name not in by_name and name not in broken:
            problems.add(f"kns:profiles[{rule}].reservation", _unknown(name, by_name))
    for entry in entries:
        if entry.name.startswith("res-") and entry.name[4:] in by_name:
            problems.add(f"{paths[entry.name]}.name", f'its namespace would be reservation "{entry.name[4:]}"\'s '
                                                      "(<prefix>res-<reservation>): rename the entry")
        name = entry.reservation
        if name is None:
            continue
        path = f"{paths[entry.name]}.reservation"
        if name in broken:
            problems.add(path, f'reservation "{name}" is invalid (its problems are listed under '
                               f"kns:reservations[{name}])")
            continue
        item = by_name.get(name)
        if item is None:
            if own is None or entry.name in own:
                problems.add(path, _unknown(name, by_name))
            continue
        if entry.type == "namespace":
            problems.add(path, rules.RESERVATION_NOT_FOR_NAMESPACE.message)
            continue
        if not item.allows(entry):
            who = ", ".join([*(f"user {u}" for u in item.users), *(f"group {g}" for g in item.groups),
                             *(f"entry {e}" for e in item.entries)]) or "no one (a maintenance window)"
            problems.add(path, f'may not use reservation "{name}": it is for {who}')
        if entry.pool is not None and entry.pool != item.pool:
            problems.add(path, f'reservation "{name}" holds pool {item.pool}, but the entry runs on pool {entry.pool}')
        if item.at_end == "requeue" and entry.queue is None:
            problems.add(path, rules.RESERVATION_REQUEUE_NEEDS_QUEUE.message)


def _unknown(name: str, by_name: Mapping[str, Reservation]) -> str:
    """An unknown reservation: the closest name when one is close, and every reservation."""
    close = closest(name, by_name)
    hint = f'; did you mean "{close}"?' if close else ""
    return f'names no reservation{hint} (reservations: {", ".join(sorted(by_name)) or "none are defined"})'
