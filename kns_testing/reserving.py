"""Reservations (docs/reservations.md): a stack holding each kind, instants of their windows,
and the page's worked example."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from kns_testing.program import ROOT


def gpu_job(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "user": "ann", "image": "busybox:1.37", "gpus": 2, "cpu": 4, "memory": 4096, **more}


def wednesday() -> date:
    """A Wednesday two to three weeks ahead: the challenge's first day, always to come."""
    day = date.today() + timedelta(days=14)
    return day + timedelta(days=(2 - day.weekday()) % 7)


CHALLENGE = wednesday()


# Pool a100: 8 nodes of 8 GPUs (64). Queue batch holds 16 of them in cohort site; a weekly
# course holds 2 nodes (16 GPUs) on Tuesday mornings in Paris, a challenge 32 GPUs from a
# Wednesday to the Friday (never with the course), the maintenance window 4 nodes (32) on
# Sunday nights: 16 + 32 at most at once, with the queue's 16: 64.
CONFIG: dict[str, Any] = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [{"name": "a100", "role": "gpu", "nodes": [f"g{i}" for i in range(1, 9)],
                   "gpu": {"vendor": "nvidia", "perNode": 8}},
                  {"name": "cpu", "role": "compute", "nodes": ["c1"]}],
    "queueing": {"enabled": True, "install": False},
    "queues": [{"name": "batch", "cohort": "site", "quota": {"a100": {"cpu": 64, "memory": "512Gi",
                                                                      "nvidia.com/gpu": 16}}}],
    "reservations": [
        {"name": "course", "pool": "a100", "nodes": 2, "schedule": "0 9 * * 2", "timeZone": "Europe/Paris",
         "duration": "3h", "warmUpMinutes": 15, "groups": ["teach"]},
        {"name": "challenge", "pool": "a100", "resources": {"gpus": 32, "cpu": 128, "memory": "1Ti"},
         "start": f"{CHALLENGE}T08:00:00+01:00", "end": f"{CHALLENGE + timedelta(days=2)}T20:00:00+01:00",
         "entries": ["train"],
         "atEnd": "finish"},
        {"name": "maint", "pool": "a100", "nodes": 4, "schedule": "0 22 * * 0", "timeZone": "Europe/Paris",
         "duration": "6h"},
    ],
    "jobs": [gpu_job("train", gpus=8, cpu=16, memory=16384, reservation="challenge"),
             gpu_job("lab", groups=["teach"], reservation="course", queue="batch"),
             gpu_job("plain", queue="batch")],
}


def tuesday_in_paris(hour: int, minute: int = 0) -> datetime:
    """A Tuesday to come, at hour:minute in Paris (the course's windows are Tuesdays 09-12)."""
    day = date.today() + timedelta(days=7)
    day += timedelta(days=(1 - day.weekday()) % 7)
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZoneInfo("Europe/Paris"))


DOC_NOW = datetime(2026, 11, 27, 8, 0, tzinfo=timezone.utc)  # the page's example is as of this day


def doc_example() -> tuple[dict[str, Any], str]:
    import yaml
    text = (ROOT / "docs" / "reservations.md").read_text()
    example = text[text.index("## Example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])["config"]
    message = example.split("```text\n", 1)[1].split("```", 1)[0]
    return {k.split(":", 1)[1]: v for k, v in stack.items()}, message
