"""`./kns usage` (kns_cli/usage.py, docs/budgets.md "Seeing it"): the figures it derives from
what the cluster holds (Workloads, a ledger, the queues' annotations), counted by the
counter's own code; how it reaches the cluster. The real cluster case is in
tests/test_e2e_queueing.py (the budgets scenario)."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from config.loader import check_config
from kns_cli import cli, usage
from kns_testing.budgets import workload
from kns_testing.program import ROOT
from plan.planner import plan_checked
from plan.stackplan import plan_stack

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
CONFIG = {"cluster": {"name": "kns-u", "renderDir": "out"},
          "nodePools": [{"name": "a100", "role": "gpu", "nodes": ["gpu-1"], "gpu": {"perNode": 8}}],
          "queueing": {"enabled": True},
          "queues": [{"name": "physics", "quota": {"a100": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "256Gi"}}}],
          # Daily at 08:00 UTC: the period started an hour before NOW.
          "budgets": [{"name": "daily", "queues": ["physics"], "limits": {"nvidia.com/gpu": 10},
                       "reset": "0 8 * * *"}]}


def planned():
    checked = check_config(CONFIG, project_dir=ROOT, environ={})
    return plan_stack(checked.config, plan_checked(checked).entries, NOW)


def found(workloads, annotations=None) -> usage.Found:
    return usage.Found(workloads, {"daily": None}, annotations or {})


def test_used_share_and_projection_from_the_workloads():
    # T0 of the builder is 08:00: one 4-GPU Job admitted at 08:00 still running, one 2-GPU
    # Job from 08:00 to 08:30; at 09:00, 4 + 1 = 5 GPU-hours, and 4 GPUs running for the
    # 23 hours left project 5 + 92.
    plan = planned()
    document = usage.report(plan.config, plan.budgets, found(
        [workload("a", admitted=0), workload("b", gpus="2", admitted=0, finished=30)]), NOW)
    (item,) = document["budgets"]
    gpu = item["resources"]["nvidia.com/gpu"]
    assert (gpu["used"], gpu["share"], gpu["projected"], gpu["runningNow"]) == (5.0, 50.0, 97.0, 4.0)
    assert item["state"] == "open" and item["period"] == {"start": "2026-12-01T08:00:00+00:00",
                                                          "end": "2026-12-02T08:00:00+00:00"}
    text = usage.render_text(document)
    assert "    nvidia.com/gpu  5       10       50.0%  97" in text and "state: open" in text


def test_a_spent_budget_and_what_its_counter_said_on_the_queue():
    plan = planned()
    said = {"held": True, "why": "spent (nvidia.com/gpu 12.0/10h) until 2026-12-02T08:00:00+00:00"}
    document = usage.report(plan.config, plan.budgets, found(
        [workload("a", gpus="10", admitted=0, finished=60)], {"physics": {"kns.io/budget.daily": json.dumps(said)}}),
        NOW)
    (item,) = document["budgets"]
    assert item["resources"]["nvidia.com/gpu"]["used"] == 10.0 and item["state"] == "spent"
    assert "its queues are held: spent (nvidia.com/gpu 12.0/10h)" in usage.render_text(document)


def test_the_chart_series_follow_the_use_over_the_period():
    plan = planned()
    document = usage.report(plan.config, plan.budgets, found(
        [workload("b", gpus="2", admitted=0, finished=30)]), NOW, samples=4)
    points = document["budgets"][0]["usedOverTime"]
    # Every 15 minutes from 08:00: the 2-GPU Job's hours grow to 1 at 08:30 and stay there.
    assert [p["hours"].get("nvidia.com/gpu", 0) for p in points] == [0, 0.5, 1.0, 1.0, 1.0]


def test_inline_kubeconfig_text_is_handed_over_in_a_private_file_removed_after(tmp_path, monkeypatch):
    monkeypatch.setattr(usage.shutil, "which", lambda _: "/usr/bin/kubectl")
    plan = planned()
    cfg = dataclasses.replace(plan.config, cluster=plan.config.cluster.model_copy(
        update={"kubeconfig": "apiVersion: v1\nkind: Config\n", "context": "site"}))
    with usage.cluster_of(cfg, tmp_path) as cluster:
        path = Path(next(a for a in cluster.args if a.startswith("--kubeconfig=")).split("=", 1)[1])
        assert path.read_text() == "apiVersion: v1\nkind: Config\n"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert "--context=site" in cluster.args
    assert not path.exists()
    cfg = dataclasses.replace(plan.config, cluster=plan.config.cluster.model_copy(update={"kubeconfig": "kc/prod"}))
    with usage.cluster_of(cfg, tmp_path) as cluster:
        assert cluster.args == [f"--kubeconfig={tmp_path / 'kc/prod'}"]


def test_a_chart_file_of_another_kind_is_a_usage_error(tmp_path, capsys):
    import yaml
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.u.yaml").write_text(yaml.safe_dump({"config": {f"kns:{k}": v for k, v in CONFIG.items()}}))
    assert cli.main(["usage", "--stack", "u", "--project-dir", str(tmp_path), "--chart", "out.pdf"]) == 2
    assert "--chart writes .svg or .png, not .pdf" in capsys.readouterr().err
