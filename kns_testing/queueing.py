"""A stack with Kueue queueing (queues in a cohort, profiles that choose a queue), and the
same stack without it."""

from __future__ import annotations

import copy
from typing import Any


CONFIG: dict[str, Any] = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [
        {"name": "cpu", "role": "compute", "nodes": ["c1", "c2"]},
        {"name": "a100", "role": "gpu", "gpu": {"vendor": "nvidia", "perNode": 8}, "nodes": ["g1"],
         "taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}]},
        {"name": "sys", "role": "system", "nodes": ["s1"], "taints": [{"key": "kns.io/system", "effect": "NoSchedule"}]},
        {"name": "spare", "role": "compute", "nodes": ["x1"]},
    ],
    "queueing": {"enabled": True},
    "queues": [
        {"name": "batch", "cohort": "shared",
         "quota": {"cpu": {"cpu": 16, "memory": "64Gi", "ephemeral-storage": "10Gi", "pods": 4},
                   "a100": {"nvidia.com/gpu": 8, "cpu": 32, "memory": "256Gi", "pods": 8}},
         "borrowingLimit": {"cpu": {"cpu": 8}},
         "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
         "fairSharingWeight": 0.5},
        {"name": "adhoc", "cohort": "shared", "quota": {"cpu": {"cpu": 8, "memory": "32Gi"}},
         "lendingLimit": {"cpu": {"cpu": 4}}},
    ],
    "profiles": {"@ml": {"queue": "batch"}},
    "jobs": [
        {"name": "etl", "user": "bob", "queue": "adhoc", "image": "busybox:1.37", "cpu": 4, "memory": 2048,
         "pool": "cpu", "parallelism": 3, "completions": 2},
        {"name": "train", "user": "ann", "groups": ["ml"], "image": "pytorch:2", "cpu": 8, "memory": "32Gi",
         "gpus": 4, "pool": "a100"},
        {"name": "sandbox", "user": "ann", "groups": ["ml"], "type": "namespace"},
        {"name": "own-queue", "user": "ann", "groups": ["ml"], "queue": "adhoc", "image": "busybox:1.37", "cpu": 1,
         "memory": 1024},
    ],
    "schedules": [
        {"name": "warm", "user": "cid", "groups": ["ml"], "image": "busybox:1.37", "cpu": 2, "memory": 4096,
         "pool": "cpu", "schedule": "0 6 * * *", "warmUpMinutes": 10},
        {"name": "plain", "user": "cid", "groups": ["ml"], "image": "busybox:1.37", "cpu": 1, "memory": 1024,
         "pool": "cpu", "schedule": "0 7 * * *"},
    ],
}


def without_queueing(config: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(config)
    for key in ("queueing", "queues"):
        out.pop(key)
    out["profiles"] = {}
    out["jobs"] = [{k: v for k, v in j.items() if k != "queue"} for j in out["jobs"]]
    return out
