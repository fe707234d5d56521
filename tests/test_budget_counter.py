"""A budget's counter (plan/budget_counter.py) against an API that keeps what it is sent and
who owns each `spec` field (server-side apply's field managers): a spent budget holds its
queues and says so once, a new period reopens them, a queue the stack holds stays held, a
grant holds outside its dates, and use survives Workloads deleted after a count."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest

from plan import budget_counter as counter, kube_api
from plan.kube_api import ApiError

UTC = timezone.utc
START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)  # a period of the reset "*/10 * * * *"
NS = "kns-budget-physics"


def spec(**more: Any) -> dict[str, Any]:
    return {"name": "physics", "namespace": NS, "queues": ["physics"], "limits": {"nvidia.com/gpu": 1.0},
            "period": {"reset": "*/10 * * * *", "zone": "Etc/UTC"}, "atLimit": "hold", "warnAt": [50, 90], **more}


def workload(uid: str, admitted: datetime, gpus: str = "4", finished: Optional[datetime] = None) -> dict[str, Any]:
    def stamp(at: datetime) -> str:
        return at.isoformat().replace("+00:00", "Z")
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp(admitted)}]
    if finished is not None:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": stamp(finished)})
    return {"metadata": {"uid": uid, "namespace": "kns-train", "name": uid},
            "status": {"conditions": conditions, "admission": {"clusterQueue": "physics", "podSetAssignments": [
                {"name": "main", "resourceUsage": {"nvidia.com/gpu": gpus}}]}}}


class Api:
    """Objects by path, the owners of each spec field, every event posted; lists served a
    page at a time, read by the product's own paging."""

    pages = kube_api.Api.pages

    def __init__(self, manager: str = "kns-budget-physics"):
        self.field_manager = manager
        self.objects: dict[str, dict] = {f"{counter.KUEUE}/clusterqueues/physics": {
            "metadata": {"name": "physics"}, "spec": {"cohort": "research"}}}
        self.owners: dict[str, dict[str, set[str]]] = {}
        self.workloads: list[dict] = []
        self.events: list[dict] = []

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             missing_ok: bool = False) -> Optional[dict]:
        if method == "GET" and path.startswith(f"{counter.KUEUE}/workloads?"):
            query = dict(part.split("=", 1) for part in path.split("?", 1)[1].split("&"))
            start, size = int(query.get("continue", 0)), int(query["limit"])
            more = start + size < len(self.workloads)
            return {"items": copy.deepcopy(self.workloads[start:start + size]),
                    "metadata": {"continue": str(start + size)} if more else {}}
        if method == "GET":
            if path not in self.objects:
                if missing_ok:
                    return None
                raise ApiError(f"GET {path}: 404")
            return copy.deepcopy(self.objects[path])
        if method == "POST" and path.endswith("/events"):
            self.events.append(body)
            return body
        raise AssertionError((method, path))

    def apply(self, path: str, body: dict, manager: Optional[str] = None) -> None:
        manager = manager or self.field_manager
        target = self.objects.setdefault(path, {"metadata": {"name": body["metadata"]["name"]}, "spec": {}})
        annotations = body["metadata"].get("annotations")
        if annotations:
            target["metadata"].setdefault("annotations", {}).update(annotations)
        if "data" in body:
            target["data"] = copy.deepcopy(body["data"])
        owners = self.owners.setdefault(path, {})
        for name, owned in owners.items():
            if manager in owned and name not in body.get("spec", {}):
                owned.discard(manager)
                if not owned:
                    target["spec"].pop(name, None)
        for name, value in body.get("spec", {}).items():
            target["spec"][name] = value
            owners.setdefault(name, set()).add(manager)

    def queue(self) -> dict:
        return self.objects[f"{counter.KUEUE}/clusterqueues/physics"]


def run(api: Api, at: datetime, **more: Any) -> dict:
    return counter.run(api, spec(**more), at)


def test_under_the_limit_nothing_is_held_and_the_warning_levels_are_said_once():
    api = Api()
    api.workloads = [workload("a", START, gpus="4")]
    run(api, START + timedelta(minutes=6))  # 4 GPUs x 6 minutes = 0.4 GPU-hours of 1: no level yet
    assert "stopPolicy" not in api.queue()["spec"] and api.events == []
    done = run(api, START + timedelta(minutes=8))  # 0.53 GPU-hours: 50% reached
    assert done["events"] == {"physics": "BudgetWarning"} and done["state"]["level"] == 50
    run(api, START + timedelta(minutes=8, seconds=30))
    assert [e["reason"] for e in api.events] == ["BudgetWarning"]  # said once per level


def test_a_spent_budget_holds_its_queues_says_why_once_and_the_next_period_reopens_them():
    api = Api()
    api.workloads = [workload("a", START, gpus="8")]
    done = run(api, START + timedelta(minutes=9))  # 8 GPUs x 9 minutes = 1.2 GPU-hours of 1
    assert api.queue()["spec"]["stopPolicy"] == "Hold" and api.queue()["spec"]["cohort"] == "research"
    assert done["events"] == {"physics": "BudgetSpent"} and "until 2026-12-01T00:10:00+00:00" in done["state"]["why"]
    assert "budget physics: spent (nvidia.com/gpu 1.2/1h)" in api.events[-1]["message"]
    run(api, START + timedelta(minutes=9, seconds=30))
    assert [e["reason"] for e in api.events] == ["BudgetSpent"]
    # The next period: the Workload finished before it, so nothing is used yet.
    api.workloads = [workload("a", START, gpus="8", finished=START + timedelta(minutes=9, seconds=40))]
    done = run(api, START + timedelta(minutes=10, seconds=5))
    assert "stopPolicy" not in api.queue()["spec"] and done["events"] == {"physics": "BudgetReopened"}


def test_stop_drains_what_runs():
    api = Api()
    api.workloads = [workload("a", START, gpus="8")]
    run(api, START + timedelta(minutes=9), atLimit="stop")
    assert api.queue()["spec"]["stopPolicy"] == "HoldAndDrain"


def test_a_queue_the_stack_holds_stays_held_when_the_budget_reopens():
    api = Api()
    api.apply(f"{counter.KUEUE}/clusterqueues/physics", {"metadata": {"name": "physics"},
                                                       "spec": {"stopPolicy": "Hold"}}, manager="pulumi")
    api.workloads = [workload("a", START, gpus="8")]
    run(api, START + timedelta(minutes=9))
    api.workloads = []
    run(api, START + timedelta(minutes=10, seconds=5))
    assert api.queue()["spec"]["stopPolicy"] == "Hold"  # the stack's hold: true, not the budget's


def test_use_survives_a_workload_deleted_after_a_count():
    api = Api()
    api.workloads = [workload("a", START, gpus="4", finished=START + timedelta(minutes=5))]
    run(api, START + timedelta(minutes=6))
    api.workloads = []
    done = run(api, START + timedelta(minutes=7))
    assert done["state"]["used"] == {"nvidia.com/gpu": "0.3/1h"}


def test_a_grant_holds_its_queues_outside_its_dates():
    api = Api()
    grant = {"start": (START + timedelta(days=1)).isoformat(), "end": (START + timedelta(days=2)).isoformat()}
    done = run(api, START, period=grant)
    assert api.queue()["spec"]["stopPolicy"] == "Hold" and done["state"]["why"] == "outside its grant"
    done = run(api, START + timedelta(days=1, hours=1), period=grant)
    assert "stopPolicy" not in api.queue()["spec"] and done["events"] == {"physics": "BudgetReopened"}


def test_every_page_of_workloads_is_read_and_only_the_budgets_are_kept(monkeypatch):
    """1,203 Workloads (three pages of 500) of which one in three is the budget's: each of
    those counts, the others are dropped as their page is read, and only the limited
    resource goes to the ledger."""
    api = Api()
    for i in range(1203):
        item = workload(f"w{i}", START, gpus="1")
        item["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] = "2"
        if i % 3:
            item["status"]["admission"]["clusterQueue"] = "bio"
        api.workloads.append(item)
    kept = []
    real = counter.budget_count.count
    monkeypatch.setattr(counter.budget_count, "count", lambda workloads, *a, **k: kept.append(len(workloads))
                        or real(workloads, *a, **k))
    done = run(api, START + timedelta(minutes=6))  # 401 GPUs x 6 minutes
    assert kept == [401] and done["state"]["used"] == {"nvidia.com/gpu": "40.1/1h"}
    ledger = counter.read_ledger(api, spec(), START.isoformat())
    assert len(ledger.open) == 401 and all(set(v) == {"nvidia.com/gpu"} for v in ledger.open.values())


def test_a_run_whose_event_is_refused_leaves_the_queue_as_it_was_and_the_next_says_it():
    api = Api()
    api.workloads = [workload("a", START, gpus="8")]
    real = api.call

    def refuse_events(method, path, *args, **kwargs):
        if method == "POST" and path.endswith("/events"):
            raise ApiError(f"POST {path}: 403")
        return real(method, path, *args, **kwargs)
    api.call = refuse_events
    with pytest.raises(ApiError):
        run(api, START + timedelta(minutes=9))
    assert "stopPolicy" not in api.queue()["spec"]
    api.call = real
    done = run(api, START + timedelta(minutes=9, seconds=30))
    assert done["events"] == {"physics": "BudgetSpent"} and api.queue()["spec"]["stopPolicy"] == "Hold"
    assert api.events[-1]["metadata"]["namespace"] == "default"
