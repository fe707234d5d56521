"""`./kns usage` (docs/budgets.md): each budget's use of its period, read from the cluster
through the stack's own context, counted by the counter's own code (plan/budget_count.py)
from the Workloads and the budget's ledger, without writing anything: used, limit, share,
projected use at the period's end, state (open, held and why), next reset.

The projection assumes what is admitted now keeps running to the period's end (an upper
bound while nothing new is admitted)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator, Optional

from chrono import moments
from config import kubeconfig
from config.platform import PlatformConfig
from plan import budget_count, budget_counter
from plan.budgets import BudgetPlan, LEDGER, counter_spec

from .explain import table
from .stack import UsageError

LEDGER_KEY = "ledger.json"


class Cluster:
    """kubectl against the stack's cluster: its `kubeconfig` (a path, or inline text written
    to a private temporary file) and `context`, or kubectl's own default."""

    def __init__(self, args: list[str]):
        self.args = args

    def get(self, *what: str, missing_ok: bool = False) -> Optional[dict[str, Any]]:
        done = subprocess.run(["kubectl", *self.args, "get", *what, "-o", "json"], capture_output=True, text=True)
        if done.returncode != 0:
            if missing_ok and "NotFound" in done.stderr:
                return None
            raise UsageError(f"kubectl get {' '.join(what)} failed: {done.stderr.strip()}")
        return json.loads(done.stdout)


@contextmanager
def cluster_of(cfg: PlatformConfig, project_dir: Path) -> Iterator[Cluster]:
    if shutil.which("kubectl") is None:
        raise UsageError("./kns usage reads the cluster with kubectl, which is not on PATH")
    args: list[str] = []
    if cfg.cluster.context:
        args.append(f"--context={cfg.cluster.context}")
    source = cfg.cluster.kubeconfig
    if source and kubeconfig.is_inline(source):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "kubeconfig"
            path.touch(mode=0o600)
            path.write_text(source)
            yield Cluster([*args, f"--kubeconfig={path}"])
        return
    if source:
        args.append(f"--kubeconfig={kubeconfig.resolve_path(source, project_dir)}")
    yield Cluster(args)


@dataclass
class Found:
    """What the cluster holds for the budgets: every Workload, each budget's ledger, the
    queues' annotations."""

    workloads: list[dict[str, Any]]
    ledgers: dict[str, Optional[dict[str, Any]]]
    annotations: dict[str, dict[str, str]]


def read(cluster: Cluster, planned: list[BudgetPlan]) -> Found:
    workloads = (cluster.get("workloads.kueue.x-k8s.io", "-A") or {}).get("items") or []
    ledgers = {}
    for plan in planned:
        found = cluster.get("configmap", LEDGER, "-n", plan.namespace, missing_ok=True)
        ledgers[plan.name] = json.loads(((found or {}).get("data") or {}).get(LEDGER_KEY) or "null")
    queues = (cluster.get("clusterqueues.kueue.x-k8s.io") or {}).get("items") or []
    annotations = {q["metadata"]["name"]: q["metadata"].get("annotations") or {} for q in queues}
    return Found(workloads, ledgers, annotations)


def _number(value: Decimal) -> float:
    return round(float(value), 4)


def budget_usage(plan: BudgetPlan, found: Found, now: datetime, samples: int = 0) -> dict[str, Any]:
    """One budget's figures as of `now` (what its counter would count now); with `samples`,
    also its use at that many instants from the period's start to now (`usedOverTime`)."""
    spec = counter_spec(plan)
    period = budget_counter.budget_periods(spec).at(now)
    budget = plan.budget
    after = budget.periods().next_reset(now)
    item: dict[str, Any] = {"name": budget.name, "queues": list(budget.queues), "atLimit": budget.at_limit,
                            "period": None, "nextReset": moments.shown(after, budget.zone()) if after else None, "resources": {}}
    held = [json.loads(found.annotations.get(q, {}).get(budget_counter.ANNOTATION + budget.name) or "{}")
            for q in budget.queues]
    item["counterSays"] = next((h for h in held if h), None)
    if period is None:
        item["state"] = "outside its period"
        return item
    ledger = budget_count.Ledger.from_json(found.ledgers.get(budget.name), period.start.isoformat())
    counted = budget_count.count(found.workloads, spec["queues"], period.start, now, ledger, spec["reserved"])
    live = [a for a in (budget_count.admission(w) for w in found.workloads)
            if a is not None and a.key in counted.ledger.open]
    rate: dict[str, Decimal] = {}
    for admission in live:
        for resource, amount in admission.resources.items():
            rate[resource] = rate.get(resource, Decimal(0)) + amount
    left = Decimal(str(max(0.0, (period.end - now).total_seconds()) / 3600)) if period.end else Decimal(0)
    zone = budget.zone()
    item["period"] = {"start": moments.shown(period.start, zone, budget.start),
                      "end": moments.shown(period.end, zone, budget.start) if period.end else None}
    item["countedAt"] = ledger.counted_at
    for resource, limit in budget.limits.items():
        used = counted.used.get(resource, Decimal(0))
        projected = used + rate.get(resource, Decimal(0)) * left
        item["resources"][resource] = {"used": _number(used), "limit": limit,
                                       "share": _number(used * 100 / Decimal(str(limit))),
                                       "projected": _number(projected), "runningNow": _number(rate.get(resource, 0))}
    if samples:
        step = (now - period.start) / samples
        instants = [period.start + step * i for i in range(samples + 1)]
        item["usedOverTime"] = [{"at": moments.shown(t, zone, budget.start), "hours": {r: _number(h) for r, h in budget_count.used_until(
            counted.ledger, live, period.start, t).items()}} for t in instants]
    spent = budget_count.spent(counted.used, budget.limits)
    item["state"] = "spent" if spent else "open"
    return item


def report(cfg: PlatformConfig, planned: list[BudgetPlan], found: Found, now: datetime,
           samples: int = 0) -> dict[str, Any]:
    return {"stack": cfg.stack, "at": moments.shown(now),
            "budgets": [budget_usage(p, found, now, samples) for p in planned]}


def render_text(document: dict[str, Any]) -> str:
    budgets = document["budgets"]
    if not budgets:
        return f"stack {document['stack']}: no budgets (kns:budgets)\n"
    lines = [f"stack {document['stack']}: {len(budgets)} budget{'' if len(budgets) == 1 else 's'} at "
             f"{document['at']} (times in UTC)"]
    for item in budgets:
        period = item["period"]
        when = f"{period['start']} to {period['end'] or 'open end'}" if period else "no period now"
        lines.append("")
        lines.append(f"{item['name']}: queues {', '.join(item['queues'])}; {when}; "
                     f"next reset {item['nextReset'] or 'none (a grant)'}")
        rows = [["resource", "used h", "limit h", "share", "projected h"]]
        for resource, figures in item["resources"].items():
            rows.append([resource, f"{figures['used']:g}", f"{figures['limit']:g}", f"{figures['share']:.1f}%",
                         f"{figures['projected']:g}"])
        if len(rows) > 1:
            lines += table(rows)
        said = item.get("counterSays") or {}
        state = item["state"]
        if said.get("held"):
            state += f"; its queues are held: {said.get('why')}"
        elif state == "spent":
            state += f"; the counter holds its queues ({item['atLimit']}) at its next run"
        lines.append(f"    state: {state}")
    return "\n".join(lines) + "\n"


def series(document: dict[str, Any]):
    """The chart's data (a report made with samples): per budget and limited resource, used
    hours from the period's start to now, and projected to the period's end at the rate
    admitted now."""
    from .charts import UsageSeries
    out = []
    at = datetime.fromisoformat(document["at"])
    for item in document["budgets"]:
        if not item["period"]:
            continue
        start = datetime.fromisoformat(item["period"]["start"])
        end = datetime.fromisoformat(item["period"]["end"]) if item["period"]["end"] else None
        for resource, figures in item["resources"].items():
            used = [(datetime.fromisoformat(p["at"]), p["hours"].get(resource, 0.0)) for p in item["usedOverTime"]]
            projected = [(at, figures["used"])] + ([(end, figures["projected"])] if end else [])
            out.append(UsageSeries(item["name"], resource, figures["limit"], start, end, used, projected))
    return out


def fill_admits(explained: dict[str, Any], found: Found) -> None:
    """`./kns explain --live`: each entry's budgets say whether they admit it now, as their
    counters last set their queues (the annotation naming the budget)."""
    for entry in explained.get("entries") or []:
        queue = (entry.get("queue") or {}).get("name")
        for budget in entry.get("budgets") or []:
            said = json.loads(found.annotations.get(queue, {}).get(budget_counter.ANNOTATION + budget["name"]) or "{}")
            budget["admitsNow"] = not said.get("held", False)
            budget["why"] = said.get("why") if said.get("held") else None
