"""`kns:budgets` (contract section 17): the model and its checks through both doors, the
program and `./kns validate`, each problem with its path and nothing registered."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from config import rules
from config.loader import check_config
from kns_testing.program import ROOT
from tests.test_pod_classes import refused

CLUSTER = {"name": "kns-budget", "renderDir": "build/manifests/budget"}
POOLS = [{"name": "a100", "role": "gpu", "nodes": ["gpu-1"], "gpu": {"vendor": "nvidia", "perNode": 8}},
         {"name": "cpu", "role": "compute", "nodes": ["cpu-1"]}]
QUEUES = [{"name": "physics", "quota": {"a100": {"nvidia.com/gpu": 8, "cpu": 64}}},
          {"name": "bio", "quota": {"cpu": {"cpu": 32, "memory": "128Gi"}}}]
QUARTERLY = {"name": "physics-q", "queues": ["physics"], "limits": {"nvidia.com/gpu": 10000},
             "reset": "0 0 1 */3 *", "timeZone": "Europe/Paris"}


def stack(*budgets: dict[str, Any], queueing: bool = True) -> dict[str, Any]:
    return {"cluster": CLUSTER, "nodePools": POOLS, "queueing": {"enabled": queueing}, "queues": QUEUES,
            "budgets": list(budgets)}


def test_a_quarterly_budget_and_a_grant_are_read_with_their_periods():
    grant = {"name": "bio-grant", "queues": ["bio"], "limits": {"cpu": 200000, "memory": 5e5},
             "start": "2026-12-01T00:00:00+01:00", "end": "2027-06-01T00:00:00+02:00", "atLimit": "stop",
             "warnAt": [50, 90]}
    cfg = check_config(stack(QUARTERLY, grant), project_dir=ROOT, environ={}).config
    quarterly, bio = cfg.budgets
    assert (quarterly.at_limit, quarterly.warn_at) == ("hold", list(rules.BUDGET_WARN_AT_DEFAULT))
    period = quarterly.periods().at(datetime(2026, 11, 28, tzinfo=timezone.utc))
    assert (period.start.isoformat(), period.end.isoformat()) == ("2026-09-30T22:00:00+00:00",
                                                                  "2026-12-31T23:00:00+00:00")
    assert bio.at_limit == "stop" and bio.periods().at(datetime(2026, 11, 28, tzinfo=timezone.utc)) is None


@pytest.mark.parametrize("budget,lines", [
    ({**QUARTERLY, "queues": ["phyiscs"]},
     ['kns:budgets[physics-q].queues: no queue named "phyiscs"; did you mean "physics"?']),
    ({**QUARTERLY, "limits": {"memory": 10}},
     ['kns:budgets[physics-q].limits: "memory" is counted by none of its queues (cpu, nvidia.com/gpu): '
      f"{rules.BUDGET_RESOURCE_COUNTED.message}"]),
    ({**QUARTERLY, "limits": {"nvidia.com/gpu": 0}},
     ["kns:budgets[physics-q].limits.nvidia.com/gpu: the value is invalid: input should be greater than 0"]),
    ({**QUARTERLY, "start": "2026-12-01T00:00:00+01:00"},
     [f"kns:budgets[physics-q]: {rules.BUDGET_PERIOD_ONE.message}", "kns:budgets[physics-q].end: a grant needs start and end"]),
    ({key: value for key, value in QUARTERLY.items() if key not in ("reset", "timeZone")},
     [f"kns:budgets[physics-q]: {rules.BUDGET_PERIOD_ONE.message}"]),
    ({**{k: v for k, v in QUARTERLY.items() if k != "reset"}, "start": "2027-01-01T00:00:00+01:00",
      "end": "2026-12-01T00:00:00+01:00"},
     ["kns:budgets[physics-q].end: 2026-12-01T00:00:00+01:00 is not after start 2027-01-01T00:00:00+01:00"]),
], ids=["unknown queue", "resource not counted", "limit 0", "both periods", "no period", "start after end"])
def test_a_bad_budget_is_refused_by_both_doors_with_its_path(tmp_path, capsys, budget, lines):
    refused(tmp_path, capsys, stack(budget), lines)


def test_budgets_need_queueing_and_unique_names(tmp_path, capsys):
    refused(tmp_path, capsys, {**stack(QUARTERLY, QUARTERLY), "queues": [], "queueing": {"enabled": False}},
            ["kns:budgets: " + rules.BUDGETS_NEED_QUEUEING.message,
             'kns:budgets[physics-q].queues: no queue named "physics" (queues: none)',
             'kns:budgets[physics-q].name: "physics-q" names another budget too; budget names are unique'])
