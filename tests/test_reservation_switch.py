"""The reservation switch's script (plan/reservation_switch.py) against an API that keeps
what it is sent: every run leaves what the calendar says, on time, late or twice; the end
of a window moves the Jobs it evicted to their own queue; the CronJob's next fire is the
next edge. The same script runs for real in tests/test_e2e_queueing.py."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from typing import Any, Optional
from urllib.parse import unquote

import pytest

from plan import kube_api, reservation_switch as switch

UTC = timezone.utc
START = datetime(2027, 3, 2, 9, 0, tzinfo=UTC)
END = START + timedelta(hours=3)
LEAD = timedelta(minutes=10)
NS = "kns-res-course"
HOLDER = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "holder", "namespace": NS}, "spec": {}}


def spec(at_end: str = "requeue", **more: Any) -> dict[str, Any]:
    return {"name": "course", "namespace": NS, "atEnd": at_end, "leadSeconds": int(LEAD.total_seconds()),
            "calendar": {"start": START.isoformat(), "end": END.isoformat()}, "cronJob": "switch",
            "localQueue": "kns-res", "label": "kns.io/reservation", "ownQueueAnnotation": "kns.io/own-queue",
            "holder": HOLDER, **more}


def local_queue(namespace: str, name: str = "kns-res", reservation: str = "course",
                own: Optional[str] = None) -> dict[str, Any]:
    """A LocalQueue as the program creates it (plan/reservations.py entry_objects)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"kns.io/reservation": reservation}}
    if own:
        meta["annotations"] = {"kns.io/own-queue": own}
    return {"metadata": meta, "spec": {"clusterQueue": f"kns-res-{reservation}"}}


QUEUES = {switch.local_queue_path("kns-lab", "kns-res"): local_queue("kns-lab", own="kns"),
          switch.local_queue_path("kns-lab-2", "kns-res"): local_queue("kns-lab-2"),
          # Not the switch's to switch: the holder's queue, and another reservation's.
          switch.local_queue_path(NS, "holder"): local_queue(NS, "holder"),
          switch.local_queue_path("kns-other", "kns-res"): local_queue("kns-other", reservation="exam")}


class Api:
    """Objects by path, as the API server would keep them, and every request made."""

    def __init__(self, objects: Optional[dict[str, dict]] = None):
        # The switch's own CronJob, as the program creates it (plan/reservations.py BOOTSTRAP).
        self.objects = {f"{switch.BATCH}/namespaces/{NS}/cronjobs/switch": {
            "metadata": {"name": "switch", "namespace": NS}, "spec": {"schedule": "* * * * *"}},
            **copy.deepcopy(QUEUES), **(objects or {})}
        self.requests: list[tuple[str, str]] = []
        self.owned: dict[str, set[str]] = {}  # the spec fields the switch's applies own, per object

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             missing_ok: bool = False) -> Optional[dict]:
        self.requests.append((method, path))
        base = path.split("?")[0]
        if method == "GET":
            if base == f"{switch.KUEUE}/localqueues":
                key, _, value = unquote(path.split("labelSelector=", 1)[1]).partition("=")
                return {"items": [copy.deepcopy(o) for p, o in self.objects.items() if "/localqueues/" in p
                                  and o["metadata"].get("labels", {}).get(key) == value]}
            if base.endswith("/workloads"):
                prefix = base
                return {"items": [o for p, o in self.objects.items() if p.startswith(prefix + "/")]}
            if base not in self.objects:
                if missing_ok:
                    return None
                raise kube_api.ApiError(f"GET {base}: 404")
            return copy.deepcopy(self.objects[base])
        if method == "POST":
            name = body["metadata"]["name"]
            if f"{base}/{name}" in self.objects:
                return None
            self.objects[f"{base}/{name}"] = copy.deepcopy(body)
            return body
        if method == "DELETE":
            return self.objects.pop(base, None)
        if method == "PATCH":
            assert content_type == "application/merge-patch+json"
            labels = body["metadata"]["labels"]
            self.objects[base]["metadata"].setdefault("labels", {}).update(labels)
            return self.objects[base]
        raise AssertionError(method)

    def apply(self, path: str, body: dict) -> None:
        """Server-side apply of one field manager: a field it owned and leaves out is removed."""
        self.requests.append(("APPLY", path))
        target = self.objects.setdefault(path.split("?")[0], {"metadata": body["metadata"], "spec": {}})
        for dropped in self.owned.get(path, set()) - set(body["spec"]):
            target["spec"].pop(dropped, None)
        target["spec"].update(body["spec"])
        self.owned[path] = set(body["spec"])


class Clock:
    def __init__(self, moment: datetime):
        self.now = moment.timestamp()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(api: Api, at: datetime, given: Optional[dict] = None) -> dict:
    clock = Clock(at)
    return switch.switch(api, given or spec(), at, sleep=clock.sleep, clock=clock)


def stop_policies(api: Api) -> list[Optional[str]]:
    """The reservation's two entries' queues, then the holder's and another reservation's (never switched)."""
    return [api.objects[path]["spec"].get("stopPolicy") for path in QUEUES]


def schedule(api: Api) -> Optional[str]:
    return api.objects[f"{switch.BATCH}/namespaces/{NS}/cronjobs/switch"]["spec"].get("schedule")


@pytest.mark.parametrize("at, phase, policy, holder, next_fire", [
    (START - LEAD - timedelta(hours=5), "closed", "HoldAndDrain", False, "50 8 2 3 *"),
    (START - LEAD, "warm-up", "None", True, "0 12 2 3 *"),
    (START + timedelta(hours=1), "open", "None", True, "0 12 2 3 *"),
])
def test_each_run_leaves_what_the_calendar_says_and_sets_the_next_edge(at, phase, policy, holder, next_fire):
    api = Api()
    done = run(api, at)
    assert done["phase"] == phase
    assert stop_policies(api) == [policy, policy, None, None]
    assert (f"{switch.BATCH}/namespaces/{NS}/jobs/holder" in api.objects) == holder
    assert schedule(api) == next_fire
    # The same run again changes nothing: nothing is created twice.
    before = copy.deepcopy(api.objects)
    run(api, at)
    assert api.objects == before
    assert [r for r in api.requests if r[0] == "POST"] == ([("POST", f"{switch.BATCH}/namespaces/{NS}/jobs")]
                                                           if holder else [])  # the holder, once


def test_every_write_to_a_switched_field_is_a_server_side_apply_of_the_switchs_own():
    api = Api()
    seen: list[str] = []
    call = api.call

    def recording(method, path, body=None, content_type="application/json", missing_ok=False):
        if method == "PATCH" and "fieldManager" in path:
            seen.append(path)
            assert content_type == "application/apply-patch+yaml"
            assert f"fieldManager={switch.FIELD_MANAGER}&force=true" in path
            return None
        return call(method, path, body, content_type, missing_ok)

    real = switch.Api("https://example.invalid", "token", None)
    real.call = recording  # type: ignore[method-assign]
    real.apply(switch.local_queue_path("kns-lab", "kns-res"), {"spec": {"stopPolicy": "Hold"}})
    assert seen == [f"{switch.local_queue_path('kns-lab', 'kns-res')}?fieldManager={switch.FIELD_MANAGER}&force=true"]


def test_a_run_late_after_the_window_closes_it_and_the_last_window_suspends_the_switch():
    api = Api()
    run(api, START - LEAD)  # warm-up: open, holder created
    done = run(api, END + timedelta(days=2))  # the end's run came two days late
    assert done["phase"] == "closed" and done["next"] is None
    assert stop_policies(api) == ["HoldAndDrain", "HoldAndDrain", None, None]
    assert f"{switch.BATCH}/namespaces/{NS}/jobs/holder" not in api.objects
    cron = api.objects[f"{switch.BATCH}/namespaces/{NS}/cronjobs/switch"]["spec"]
    assert cron["suspend"] is True and cron["schedule"] == "0 12 2 3 *"  # still a valid CronJob


def test_finish_holds_the_queues_without_draining_them():
    api = Api()
    run(api, END + timedelta(minutes=1), spec("finish"))
    assert stop_policies(api) == ["Hold", "Hold", None, None]


def workload(namespace: str, job: str, queue: str, reason: Optional[str]) -> dict:
    conditions = [{"type": "Evicted", "status": "True", "reason": reason}] if reason else []
    return {"metadata": {"name": f"job-{job}", "namespace": namespace,
                         "ownerReferences": [{"kind": "Job", "name": job}]},
            "spec": {"queueName": queue}, "status": {"conditions": conditions}}


def job(namespace: str, name: str, suspended: bool) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "kns-res"}},
            "spec": {"suspend": suspended}}


def test_at_the_end_the_evicted_jobs_move_to_their_own_queue_once_suspended_and_waiting_ones_stay():
    lab = "kns-lab"
    wl = f"{switch.KUEUE}/namespaces/{lab}/workloads"
    jobs = switch.job_path(lab)
    api = Api({
        f"{wl}/a": workload(lab, "ran", "kns-res", "LocalQueueStopped"),
        f"{wl}/b": workload(lab, "waited", "kns-res", None),  # created before a window: waits for the next
        f"{wl}/c": workload(lab, "slow", "kns-res", "LocalQueueStopped"),
        f"{jobs}/ran": job(lab, "ran", True), f"{jobs}/waited": job(lab, "waited", True),
        f"{jobs}/slow": job(lab, "slow", False),
    })
    clock = Clock(END + timedelta(seconds=5))
    suspended_after = clock.now + 10

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now >= suspended_after:
            api.objects[f"{jobs}/slow"]["spec"]["suspend"] = True

    done = switch.switch(api, spec(), END + timedelta(seconds=5), sleep=sleep, clock=clock)
    labels = {name: api.objects[f"{jobs}/{name}"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
              for name in ("ran", "waited", "slow")}
    assert labels == {"ran": "kns", "waited": "kns-res", "slow": "kns"}
    assert sorted(done["requeued"]) == [f"{lab}/ran", f"{lab}/slow"]


def test_an_edge_within_the_minute_is_waited_for_in_the_run():
    api = Api()
    clock = Clock(START - LEAD - timedelta(seconds=20))  # started 20 s before the warm-up
    done = switch.switch(api, spec(), START - LEAD - timedelta(seconds=20), sleep=clock.sleep, clock=clock)
    assert done["phase"] == "warm-up"  # it waited for the edge and switched again
    assert schedule(api) == "0 12 2 3 *"


def test_the_calendar_in_the_environment_is_the_reservations(monkeypatch):
    recurring = spec(calendar={"schedule": "0 9 * * 2", "zone": "Europe/Paris", "seconds": 10800})
    cal = switch.reservation_calendar(json.loads(json.dumps(recurring)))
    first = cal.windows(datetime(2027, 3, 1, tzinfo=UTC), datetime(2027, 3, 8, tzinfo=UTC))[0]
    assert (first.start, first.end) == (datetime(2027, 3, 2, 8, tzinfo=UTC), datetime(2027, 3, 2, 11, tzinfo=UTC))
