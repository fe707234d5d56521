"""What a budget's counter computes at each run (docs/budgets.md, "How use is counted"):
standard library and chrono/ only, as the pod runs it.

Use is what Kueue admitted: for each admission of a Workload to one of the budget's
ClusterQueues, its admitted resources (`status.admission.podSetAssignments[].resourceUsage`)
times the time from the admission (its `QuotaReserved` turning True) to its end (`Finished`
or `Evicted` turning True; still admitted: now), the part inside the period. A Workload's
conditions keep only their last transition, so an admission that has ended is written to
the budget's ledger once seen (keyed by the Workload's UID and the admission's start), and
counted from there after the Workload is gone (its Job's TTL) or admitted again. The
ledger belongs to one period: a new period starts an empty one. Every run recomputes from
the Workloads and the ledger, so a run that is late, missed or repeated counts the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping, Optional, Sequence

_SUFFIX = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10) ** 3,
           "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15,
           "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
           "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity as the API serves it ("8", "500m", "64Gi", 2)."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def _condition(workload: Mapping[str, Any], kind: str) -> Optional[Mapping[str, Any]]:
    return next((c for c in (workload.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


@dataclass(frozen=True)
class Admission:
    """One admission of a Workload: what it holds of which queue, from when to when."""

    uid: str
    cluster_queue: str
    resources: dict[str, Decimal]
    start: datetime
    end: Optional[datetime]  # None: still admitted

    @property
    def key(self) -> str:
        """`<uid>@<start, Unix seconds>`: the conditions' times are whole seconds."""
        return f"{self.uid}@{int(self.start.timestamp())}"

    def hours(self, since: datetime, until: datetime) -> dict[str, Decimal]:
        """Resource-hours inside [since, until)."""
        begin, finish = max(self.start, since), min(self.end or until, until)
        seconds = Decimal(str(max(0.0, (finish - begin).total_seconds())))
        return {r: amount * seconds / 3600 for r, amount in self.resources.items()} if seconds else {}


def admission(workload: Mapping[str, Any]) -> Optional[Admission]:
    """The Workload's admission as its status shows it now: held (QuotaReserved True), or
    finished while held (ended at Finished); None when it holds nothing now."""
    status = workload.get("status") or {}
    reserved = _condition(workload, "QuotaReserved")
    admitted = status.get("admission")
    if not admitted or reserved is None or reserved.get("status") != "True" or not reserved.get("lastTransitionTime"):
        return None
    start = moment(reserved["lastTransitionTime"])
    finished = _condition(workload, "Finished")
    end = None
    if finished is not None and finished.get("status") == "True" and finished.get("lastTransitionTime"):
        end = max(start, moment(finished["lastTransitionTime"]))
    resources: dict[str, Decimal] = {}
    for assignment in admitted.get("podSetAssignments") or []:
        for name, amount in (assignment.get("resourceUsage") or {}).items():
            resources[name] = resources.get(name, Decimal(0)) + quantity(amount)
    return Admission((workload.get("metadata") or {}).get("uid", ""), admitted.get("clusterQueue", ""), resources,
                     start, end)


def key_parts(key: str) -> tuple[str, datetime]:
    """An admission's key: its Workload's UID and its start."""
    uid, start = key.split("@", 1)
    return uid, datetime.fromtimestamp(int(start), timezone.utc)


def ended_at(workload: Optional[Mapping[str, Any]], start: datetime, fallback: datetime) -> datetime:
    """When a Workload's admission that started at `start` ended: its Finished or Evicted
    turning True, or its QuotaReserved turning False, after `start`; `fallback` (the last
    count, so at most one counting interval too late) when the Workload is gone or was
    admitted again since."""
    if workload is not None:
        for kind, value in (("Finished", "True"), ("Evicted", "True"), ("QuotaReserved", "False")):
            found = _condition(workload, kind)
            if found is not None and found.get("status") == value and found.get("lastTransitionTime"):
                stamp = moment(found["lastTransitionTime"])
                if stamp >= start:
                    return stamp
    return fallback


def _short(hours: Decimal) -> str:
    """Hours to the nanohour (3.6 microseconds of one unit): what is stored stays short."""
    text = format(hours.quantize(Decimal("1e-9")), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass
class Ledger:
    """One period's record: the admissions seen held (`open`: key -> resources)
    and those that ended (`closed`: key -> resource -> hours in the period). A closed one
    whose Workload is gone can never be seen again, so it is kept no longer by key but in
    `retired` (the hour it ended -> resource -> hours): the ledger grows with the Workloads
    that exist, not with the period's."""

    period: str
    counted_at: Optional[str] = None
    open: dict[str, dict[str, Any]] = field(default_factory=dict)
    closed: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    # When each closed admission ended (key -> RFC 3339): `./kns usage --chart` draws use
    # over time from it.
    ends: dict[str, str] = field(default_factory=dict)
    retired: dict[str, dict[str, Decimal]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"period": self.period, "countedAt": self.counted_at,
                "open": {k: v for k, v in sorted(self.open.items())},
                "closed": {k: {r: _short(v) for r, v in amounts.items()} for k, amounts in sorted(self.closed.items())},
                "ends": dict(sorted(self.ends.items())),
                "retired": {h: {r: _short(v) for r, v in amounts.items()} for h, amounts in sorted(self.retired.items())}}

    @classmethod
    def from_json(cls, data: Optional[Mapping[str, Any]], period: str) -> "Ledger":
        """The stored ledger if it is this period's, else an empty one for it."""
        if not data or data.get("period") != period:
            return cls(period)
        return cls(period, data.get("countedAt"), dict(data.get("open") or {}),
                   {k: {r: Decimal(v) for r, v in amounts.items()} for k, amounts in (data.get("closed") or {}).items()},
                   dict(data.get("ends") or {}),
                   {h: {r: Decimal(v) for r, v in amounts.items()} for h, amounts in (data.get("retired") or {}).items()})


@dataclass(frozen=True)
class Count:
    used: dict[str, Decimal]  # resource -> hours in the period so far
    ledger: Ledger


def count(workloads: Sequence[Mapping[str, Any]], queues: Sequence[str], since: datetime, now: datetime,
          ledger: Ledger, reserved: Optional[Mapping[str, Sequence[str]]] = None,
          limited: Optional[Sequence[str]] = None, present: Optional[set[str]] = None) -> Count:
    """The budget's use in [since, now), and the ledger to store: every admission of its
    queues held now (and recorded open), every one the ledger saw held that is not any more
    (closed at its end, read from its Workload, or at the last count when it is gone), and
    the ledger's closed ones. `reserved` (a reservation's ClusterQueue -> the namespaces of
    the budget's entries that use it) charges their windows' use to the budget too; with
    `limited`, only those resources are counted and kept (the ledger stays small); with
    `present` (the UIDs of every Workload of the cluster now), the closed admissions of
    Workloads not among them are retired."""
    reserved = reserved or {}
    by_uid = {(w.get("metadata") or {}).get("uid", ""): w for w in workloads}
    last = moment(ledger.counted_at) if ledger.counted_at else since
    opened: dict[str, dict[str, Any]] = {}
    closed = dict(ledger.closed)
    ends = dict(ledger.ends)
    live: list[dict[str, Decimal]] = []
    for workload in workloads:
        found = admission(workload)
        namespace = (workload.get("metadata") or {}).get("namespace", "")
        charged = found is not None and (found.cluster_queue in queues
                                         or namespace in reserved.get(found.cluster_queue, ()))
        if found is None or not charged or found.key in closed:
            continue
        if limited is not None:
            found = Admission(found.uid, found.cluster_queue, {r: v for r, v in found.resources.items() if r in limited},
                              found.start, found.end)
        if found.end is not None:
            closed[found.key] = found.hours(since, now)
            ends[found.key] = found.end.isoformat()
        else:
            live.append(found.hours(since, now))
            opened[found.key] = {r: str(v) for r, v in found.resources.items()}
    for key, seen in ledger.open.items():
        if key in opened or key in closed:
            continue
        uid, start = key_parts(key)
        gone = Admission(uid, "", {r: Decimal(v) for r, v in seen.items()},
                         start, ended_at(by_uid.get(uid), start, last))
        closed[key] = gone.hours(since, now)
        ends[key] = (gone.end or now).isoformat()
    retired = {h: dict(amounts) for h, amounts in ledger.retired.items()}
    for key in [k for k in closed if present is not None and key_parts(k)[0] not in present]:
        hour = moment(ends.pop(key, now.isoformat())).replace(minute=0, second=0, microsecond=0).isoformat()
        into = retired.setdefault(hour, {})
        for resource, hours in closed.pop(key).items():
            into[resource] = into.get(resource, Decimal(0)) + hours
    used: dict[str, Decimal] = {}
    for amounts in [*closed.values(), *retired.values(), *live]:
        for resource, hours in amounts.items():
            used[resource] = used.get(resource, Decimal(0)) + hours
    return Count(used, Ledger(ledger.period, now.isoformat(), opened, closed, ends, retired))


def spent(used: Mapping[str, Decimal], limits: Mapping[str, float]) -> list[str]:
    """The limited resources whose use has reached the limit."""
    return [r for r, limit in limits.items() if used.get(r, Decimal(0)) >= Decimal(str(limit))]


def warnings(used: Mapping[str, Decimal], limits: Mapping[str, float], warn_at: Sequence[int]) -> list[tuple[str, int]]:
    """(resource, the highest percentage of `warn_at` its use has reached) per limited resource."""
    out = []
    for resource, limit in limits.items():
        share = used.get(resource, Decimal(0)) * 100 / Decimal(str(limit))
        reached = [p for p in warn_at if share >= p]
        if reached:
            out.append((resource, max(reached)))
    return out


def used_until(ledger: Ledger, live: Sequence[Admission], since: datetime, until: datetime) -> dict[str, Decimal]:
    """The use counted in [since, until) for an earlier `until` than the ledger's count: each
    closed admission's hours spread evenly over its time in the period (its rate was
    constant: what Kueue admitted), and each live one's own (for `./kns usage --chart`)."""
    used: dict[str, Decimal] = {}
    for key, amounts in ledger.closed.items():
        start = max(key_parts(key)[1], since)
        end = moment(ledger.ends[key]) if key in ledger.ends else start
        whole = (end - start).total_seconds()
        part = Decimal(str(max(0.0, min(1.0, (until - start).total_seconds() / whole)))) if whole > 0 else (
            Decimal(1) if until >= end else Decimal(0))
        for resource, hours in amounts.items():
            used[resource] = used.get(resource, Decimal(0)) + hours * part
    for hour, amounts in ledger.retired.items():
        part = Decimal(str(max(0.0, min(1.0, (until - moment(hour)).total_seconds() / 3600))))
        for resource, hours in amounts.items():
            used[resource] = used.get(resource, Decimal(0)) + hours * part
    for admission in live:
        for resource, hours in admission.hours(since, until).items():
            used[resource] = used.get(resource, Decimal(0)) + hours
    return used
