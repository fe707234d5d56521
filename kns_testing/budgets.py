"""Budgets (docs/budgets.md): the page's worked example, and Kueue Workloads as the budget
counter reads them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from kns_testing.program import ROOT


def doc_blocks() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    import json
    import re
    import yaml
    text = (ROOT / "docs" / "budgets.md").read_text()
    example = text[text.index("## Example"):]
    stack_text = example.split("```yaml\n", 1)[1].split("```", 1)[0]
    outputs = json.loads(example.split("```json\n", 1)[1].split("```", 1)[0])
    texts = re.findall(r"```text\n(.*?)```", text, re.S)
    return yaml.safe_load(stack_text)["config"], outputs, texts


T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)


def stamp(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def workload(uid: str, queue: str = "physics", gpus: str = "4", admitted: float = 0, finished: float | None = None,
             evicted: float | None = None, readmitted: float | None = None) -> dict:
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp(admitted)}]
    if evicted is not None:
        conditions = [{"type": "QuotaReserved", "status": "False", "lastTransitionTime": stamp(evicted)},
                      {"type": "Evicted", "status": "True", "lastTransitionTime": stamp(evicted)}]
        if readmitted is not None:
            conditions[0] = {"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp(readmitted)}
    if finished is not None:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": stamp(finished)})
    return {"metadata": {"uid": uid},
            "status": {"conditions": conditions,
                       "admission": {"clusterQueue": queue, "podSetAssignments": [
                           {"name": "main", "resourceUsage": {"nvidia.com/gpu": gpus, "cpu": "500m"}}]}}}
