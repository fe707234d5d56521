"""The switch of one reservation (docs/reservations.md, "The switch"): what its CronJob's
pod runs at each edge of a window. Standard library only, beside the project modules it
imports, which the pod gets from the same ConfigMap (plan/pod_code.py follows the imports).

Every run derives the state from the calendar and the clock, never from the run before:
a run on time, late (the controller manager was down) or twice leaves the objects as
`calendar.phase_at` says. It then sets its own CronJob to fire at the next edge (a
warm-up or an end: a start changes nothing).

| phase | the entries' LocalQueues `kns-res` | holder Job |
|---|---|---|
| between windows | Hold (atEnd finish) or HoldAndDrain (requeue) | none |
| warm-up and window | open (stopPolicy None) | present |

At the end of a window with `atEnd: requeue`, the Jobs HoldAndDrain evicted are moved to
their entry's own queue. Writes to the LocalQueues and the CronJob are server-side applies
with a field manager of the switch's own, so the fields it switches are its, and the
program's `pulumi up` leaves them alone (`ignore_changes`).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from chrono import calendar
from plan import kube_api

FIELD_MANAGER = "kns-reservation-switch"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
BATCH = "/apis/batch/v1"
# How often, and how long, the end-of-window run waits for the Jobs HoldAndDrain evicted
# to be suspended before it moves them to their own queue.
POLL_SECONDS = 2.0
DRAIN_WAIT_SECONDS = 120.0
# An edge this close is waited for in the run rather than left to the CronJob's next minute.
EDGE_WAIT_SECONDS = 90


class Api(kube_api.Api):
    """The API server, writing as the switch (its own field manager)."""

    field_manager = FIELD_MANAGER


def local_queue_path(namespace: str, name: str) -> str:
    return f"{KUEUE}/namespaces/{namespace}/localqueues/{name}"


def job_path(namespace: str, name: str = "") -> str:
    return f"{BATCH}/namespaces/{namespace}/jobs" + (f"/{name}" if name else "")


def reservation_calendar(spec: dict) -> calendar.Calendar:
    cal, lead = spec["calendar"], timedelta(seconds=spec["leadSeconds"])
    if "schedule" in cal:
        return calendar.Calendar(schedule=cal["schedule"], zone=cal["zone"], length=timedelta(seconds=cal["seconds"]),
                                 lead=lead)
    return calendar.Calendar(once=calendar.Window(datetime.fromisoformat(cal["start"]),
                                                  datetime.fromisoformat(cal["end"])), lead=lead)


def edge_schedule(moment: datetime) -> str:
    """A cron expression (UTC) that fires at `moment`'s minute: the CronJob's next fire."""
    utc = moment.astimezone(timezone.utc)
    return f"{utc.minute} {utc.hour} {utc.day} {utc.month} *"


def conditions(obj: dict) -> dict[str, dict]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}


def local_queues(api: Api, spec: dict) -> list[dict[str, Any]]:
    """The reservation's LocalQueues in its entries' namespaces, found by its label: an
    entry added later (a targeted `./kns up`, an entry stack) is found without a new switch."""
    selector = urllib.parse.quote(f"{spec['label']}={spec['name']}")
    listed = api.call("GET", f"{KUEUE}/localqueues?labelSelector={selector}") or {}
    return [{"namespace": q["metadata"]["namespace"], "name": q["metadata"]["name"],
             "ownQueue": (q["metadata"].get("annotations") or {}).get(spec["ownQueueAnnotation"])}
            for q in listed.get("items") or [] if q["metadata"]["name"] == spec["localQueue"]]


def set_local_queues(api: Api, spec: dict, queues: list[dict[str, Any]], policy: str) -> None:
    for queue in queues:
        api.apply(local_queue_path(queue["namespace"], queue["name"]), {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": queue["name"], "namespace": queue["namespace"]}, "spec": {"stopPolicy": policy}})


def ensure_holder(api: Api, spec: dict) -> None:
    holder = spec["holder"]
    path = job_path(spec["namespace"], holder["metadata"]["name"])
    current = api.call("GET", path, missing_ok=True)
    if current is not None and conditions(current).get("Complete", conditions(current).get("Failed", {})).get(
            "status") == "True":
        remove_holder(api, spec)
        current = None
    if current is None:
        api.call("POST", job_path(spec["namespace"]), holder)


def remove_holder(api: Api, spec: dict) -> None:
    api.call("DELETE", job_path(spec["namespace"], spec["holder"]["metadata"]["name"]),
             {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}, missing_ok=True)


def requeue_drained(api: Api, queues: list[dict[str, Any]], sleep: Callable[[float], None],
                    clock: Callable[[], float]) -> list[str]:
    """The entries' Jobs the end of a window evicted (Kueue's LocalQueueStopped), moved to
    their own queue once suspended. Jobs still waiting for a window are not touched."""
    moved: list[str] = []
    deadline = clock() + DRAIN_WAIT_SECONDS
    while True:
        pending = 0
        for queue in queues:
            own = queue.get("ownQueue")
            if own is None:
                continue
            listed = api.call("GET", f"{KUEUE}/namespaces/{queue['namespace']}/workloads") or {}
            for workload in listed.get("items") or []:
                if workload["spec"].get("queueName") != queue["name"]:
                    continue
                evicted = conditions(workload).get("Evicted", {})
                if evicted.get("status") != "True" or evicted.get("reason") != "LocalQueueStopped":
                    continue
                for ref in workload["metadata"].get("ownerReferences") or []:
                    if ref.get("kind") != "Job":
                        continue
                    job = api.call("GET", job_path(queue["namespace"], ref["name"]), missing_ok=True)
                    if job is None or job["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name") == own:
                        continue  # gone, or moved already (Kueue has not updated its Workload yet)
                    if not job["spec"].get("suspend"):
                        pending += 1
                        continue
                    api.call("PATCH", job_path(queue["namespace"], ref["name"]),
                             {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": own}}},
                             "application/merge-patch+json")
                    moved.append(f"{queue['namespace']}/{ref['name']}")
        if not pending or clock() >= deadline:
            return moved
        sleep(POLL_SECONDS)


def switch(api: Api, spec: dict, now: datetime, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """Leave the reservation's objects as the calendar says at `now`, and set the CronJob
    to fire at the next edge; return what was done. An edge within the minute (the run
    started early by the node's clock, or two edges a minute apart) is waited for here:
    the CronJob fires on minutes, and its next fire must be a later one."""
    cal = reservation_calendar(spec)
    while True:
        done = apply_phase(api, spec, cal, now, sleep, clock)
        current = datetime.fromtimestamp(clock(), timezone.utc)
        upcoming = calendar.next_edge(cal, current, starts=False)
        if upcoming is None or upcoming - current >= timedelta(seconds=EDGE_WAIT_SECONDS):
            break
        sleep((upcoming - current).total_seconds() + 1)
        now = datetime.fromtimestamp(clock(), timezone.utc)
    path = f"{BATCH}/namespaces/{spec['namespace']}/cronjobs/{spec['cronJob']}"
    meta = {"name": spec["cronJob"], "namespace": spec["namespace"]}
    if upcoming is None:
        # The last window is over: nothing is left to switch (a new calendar replaces the
        # CronJob). The apply names the schedule too: a field the switch's manager owns and
        # leaves out of its apply is removed (server-side apply), and a CronJob needs one.
        current = api.call("GET", path) or {}
        schedule = (current.get("spec") or {}).get("schedule", "0 0 1 1 *")
        api.apply(path, {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
                         "spec": {"schedule": schedule, "suspend": True}})
        done["next"] = None
    else:
        schedule = edge_schedule(upcoming)
        api.apply(path, {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": {"schedule": schedule}})
        done["next"] = [upcoming.isoformat(), schedule]
    return done


def apply_phase(api: Api, spec: dict, cal: calendar.Calendar, now: datetime,
                sleep: Callable[[float], None], clock: Callable[[], float]) -> dict[str, Any]:
    phase, window = calendar.phase_at(cal, now)
    queues = local_queues(api, spec)
    done: dict[str, Any] = {"phase": phase, "window": None if window is None else
                            [window.start.isoformat(), window.end.isoformat()],
                            "localQueues": [f"{q['namespace']}/{q['name']}" for q in queues]}
    if phase == calendar.CLOSED:
        set_local_queues(api, spec, queues, "HoldAndDrain" if spec["atEnd"] == "requeue" else "Hold")
        remove_holder(api, spec)
        if spec["atEnd"] == "requeue":
            done["requeued"] = requeue_drained(api, queues, sleep, clock)
    else:
        set_local_queues(api, spec, queues, "None")
        ensure_holder(api, spec)
    return done


def main(environ: dict[str, str]) -> int:
    return kube_api.pod_main(environ, "KNS_RESERVATION", "kns-switch", switch,
                             lambda env, _: Api.in_pod(env))


if __name__ == "__main__":
    sys.exit(main(dict(os.environ)))
