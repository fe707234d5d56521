"""The counter of one budget (docs/budgets.md): what its CronJob's pod runs every interval.
Standard library only, beside the project modules it imports, which the pod gets from its
ConfigMap (plan/pod_code.py follows the imports).

Each run reads the budget's ledger (a ConfigMap of its namespace) and every Workload, counts
the use of the period (plan/budget_count.py), writes the ledger back, and sets each of the
budget's ClusterQueues: spent, or outside its grant, `stopPolicy` Hold (`atLimit: hold`) or
HoldAndDrain (`stop`) applied by the budget's own field manager, with an annotation saying
why; otherwise that field manager's claim on `stopPolicy` is given up (an apply without it),
so a queue held by the stack (`hold: true`) or by another budget stays held. An event on the
queue says each change of state and each `warnAt` level reached. A late, missed or repeated
run leaves the same.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from typing import Any, Optional

from chrono import periods
from plan import budget_count, kube_api

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
EVENTS_NAMESPACE = "default"
ANNOTATION = "kns.io/budget."  # + the budget's name: its state on each of its queues


class Api(kube_api.Api):
    """Set per budget: `field_manager` is `kns-budget-<name>` (`for_budget`)."""


def field_manager(name: str) -> str:
    return f"kns-budget-{name}"


def slim(workload: dict[str, Any]) -> dict[str, Any]:
    """What the count reads of a Workload (its pod templates, most of it, are dropped as its
    page is read)."""
    meta, status = workload.get("metadata") or {}, workload.get("status") or {}
    return {"metadata": {"uid": meta.get("uid"), "namespace": meta.get("namespace")},
            "status": {"conditions": status.get("conditions") or [], "admission": status.get("admission")}}


def budget_periods(spec: dict[str, Any]) -> periods.Periods:
    when = spec["period"]
    if "reset" in when:
        return periods.Periods(reset=when["reset"], zone=when["zone"])
    return periods.Periods(start=datetime.fromisoformat(when["start"]), end=datetime.fromisoformat(when["end"]))


def ledger_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps/ledger"


def read_ledger(api: kube_api.Api, spec: dict[str, Any], period: str) -> budget_count.Ledger:
    found = api.call("GET", ledger_path(spec["namespace"]), missing_ok=True)
    data = json.loads(((found or {}).get("data") or {}).get("ledger.json") or "null")
    return budget_count.Ledger.from_json(data, period)


def write_ledger(api: kube_api.Api, spec: dict[str, Any], ledger: budget_count.Ledger) -> None:
    api.apply(ledger_path(spec["namespace"]), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ledger", "namespace": spec["namespace"]},
        "data": {"ledger.json": json.dumps(ledger.to_json(), sort_keys=True, separators=(",", ":"))}})


def state(spec: dict[str, Any], used: dict, now: datetime, period: Optional[periods.Period]) -> dict[str, Any]:
    """What the budget says now: `held` and why, the warning level reached, the use."""
    limits = spec["limits"]
    shown = {r: f"{float(used.get(r, 0)):.1f}/{limits[r]:g}h" for r in limits}
    if period is None:
        return {"held": True, "why": "outside its grant", "level": None, "used": shown}
    spent = budget_count.spent(used, limits)
    levels = [level for _, level in budget_count.warnings(used, limits, spec["warnAt"])]
    why = f"spent ({', '.join(f'{r} {shown[r]}' for r in spent)}) until {period.end.isoformat()}" if spent and \
        period.end else (f"spent ({', '.join(spent)})" if spent else None)
    return {"held": bool(spent), "why": why, "level": max(levels) if levels else None, "used": shown}


def set_queue(api: kube_api.Api, spec: dict[str, Any], queue: str, now_state: dict[str, Any],
              now: datetime) -> Optional[str]:
    """Apply the budget's claim on one ClusterQueue; the event reason when its state changed,
    said before the claim is applied, so a run that fails between the two says it again."""
    path = f"{KUEUE}/clusterqueues/{queue}"
    current = api.call("GET", path, missing_ok=True)
    if current is None:
        return None  # not created yet (or removed): nothing to hold
    key = ANNOTATION + spec["name"]
    before = json.loads(((current.get("metadata") or {}).get("annotations") or {}).get(key) or "{}")
    reason = None
    if bool(before.get("held")) != now_state["held"]:
        reason = "BudgetSpent" if now_state["held"] else "BudgetReopened"
    elif now_state["level"] is not None and now_state["level"] != before.get("level"):
        reason = "BudgetWarning"
    if reason is not None:
        event(api, spec, queue, reason, now_state, now)
    body: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                            "metadata": {"name": queue, "annotations": {key: json.dumps(now_state, sort_keys=True)}},
                            "spec": {}}
    if now_state["held"]:
        body["spec"]["stopPolicy"] = "HoldAndDrain" if spec["atLimit"] == "stop" else "Hold"
    api.apply(path, body)
    return reason


def event(api: kube_api.Api, spec: dict[str, Any], queue: str, reason: str, now_state: dict[str, Any],
          now: datetime) -> None:
    message = {"BudgetSpent": f"budget {spec['name']}: {now_state['why']}: nothing new is admitted",
               "BudgetReopened": f"budget {spec['name']}: admits again ({', '.join(now_state['used'].values())})",
               "BudgetWarning": f"budget {spec['name']}: {now_state['level']}% used "
                                f"({', '.join(now_state['used'].values())})"}[reason]
    stamp = now.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    # A cluster-scoped object's events live in `default` (the API server refuses them elsewhere).
    api.call("POST", f"/api/v1/namespaces/{EVENTS_NAMESPACE}/events", {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{queue}.{spec['name']}.{int(now.timestamp())}", "namespace": EVENTS_NAMESPACE},
        "involvedObject": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": queue},
        "reason": reason, "message": message, "type": "Normal" if reason == "BudgetReopened" else "Warning",
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "source": {"component": field_manager(spec["name"])}})


def run(api: kube_api.Api, spec: dict[str, Any], now: datetime) -> dict[str, Any]:
    """One count; what it found and did."""
    when = budget_periods(spec)
    period = when.at(now)
    used: dict = {}
    if period is not None:
        ledger = read_ledger(api, spec, period.start.isoformat())
        reserved = spec.get("reserved") or {}
        queues = {*spec["queues"], *reserved}
        known = {key.split("@", 1)[0] for key in ledger.open}
        present: set[str] = set()
        workloads = []
        for page in api.pages(f"{KUEUE}/workloads"):
            for item in page:
                uid = (item.get("metadata") or {}).get("uid")
                present.add(uid)
                if ((item.get("status") or {}).get("admission") or {}).get("clusterQueue") in queues or uid in known:
                    workloads.append(slim(item))
        counted = budget_count.count(workloads, spec["queues"], period.start, now, ledger, reserved,
                                     limited=list(spec["limits"]), present=present)
        write_ledger(api, spec, counted.ledger)
        used = counted.used
    now_state = state(spec, used, now, period)
    events = {}
    for queue in spec["queues"]:
        reason = set_queue(api, spec, queue, now_state, now)
        if reason is not None:
            events[queue] = reason
    return {"state": now_state, "events": events}


def connect(environ: dict[str, str], spec: dict[str, Any]) -> Api:
    api = Api.in_pod(environ)
    api.field_manager = field_manager(spec["name"])
    return api


def main(environ: dict[str, str]) -> int:
    return kube_api.pod_main(environ, "KNS_BUDGET", "kns-budget", run, connect)


if __name__ == "__main__":
    sys.exit(main(dict(os.environ)))
