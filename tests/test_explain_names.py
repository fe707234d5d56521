"""What `./kns explain`, `./kns timeline` and `./kns validate` tell a new user of
reservations and GPUs (docs/reservations.md, docs/gpus.md): queueing advice that knows a
reservation queues its entries, any name of the stack explained, quantities as a person
writes them, a legend of what is drawn, and a summary that counts every kind."""

from __future__ import annotations

import copy
from typing import Any

from kns_cli import timeline
from kns_testing.doors import run, write_project
from kns_testing.reserving import CONFIG, DOC_NOW, doc_example, gpu_job, tuesday_in_paris
from kns_testing.svg import svg_ids
from plan.stackplan import plan_stack

NOW = DOC_NOW.isoformat()


def reservations_page() -> dict[str, Any]:
    """docs/reservations.md's example as accepted (the queue's 32 GPUs), rendered to files."""
    config, _ = doc_example()
    config["cluster"] = {"name": "hpc-prod", "renderDir": "out"}
    config["queues"][0]["quota"]["h100"]["nvidia.com/gpu"] = "32"
    return config


def test_an_entry_queued_by_its_reservation_is_not_told_to_set_a_queue(tmp_path, capsys):
    code, out, _ = run(tmp_path, capsys, reservations_page(), "explain", "train-llm", "--now", NOW)
    assert code == 0 and "train-llm  (job" in out
    assert "without a queue" not in out and "set queue" not in out
    # One queued by nothing is still told.
    config = reservations_page()
    config["jobs"][0].pop("reservation")
    code, out, _ = run(tmp_path / "alone", capsys, config, "explain", "train-llm", "--now", NOW)
    assert "8 workers without a queue start as they fit, not together: set queue" in out


def test_a_reservation_named_to_explain_is_described(tmp_path, capsys):
    code, out, _ = run(tmp_path, capsys, reservations_page(), "explain", "course", "--now", NOW)
    assert code == 0
    assert "reservation course" in out and "pool:             h100" in out and "holds:            32 GPUs" in out
    assert "used by:          lab" in out and "2026-12-01T09:00:00+01:00 to 2026-12-01T12:00:00+01:00" in out
    assert "train-llm  (job" not in out


def test_a_pool_a_queue_a_priority_and_a_budget_are_described(tmp_path, capsys):
    config = reservations_page()
    config["priorities"] = [{"name": "urgent", "value": 1000}]
    config["schedules"][0]["priority"] = "urgent"
    config["budgets"] = [{"name": "gpu-hours", "queues": ["batch"], "limits": {"nvidia.com/gpu": 500},
                          "reset": "0 0 1 * *", "timeZone": "Europe/Paris"}]
    code, out, _ = run(tmp_path, capsys, config, "explain", "h100", "batch", "urgent", "gpu-hours", "--now", NOW,
                       "--format", "json")
    assert code == 0
    import json
    document = json.loads(out)
    (pool,) = document["pools"]
    assert pool["autoscale"]["limits"]["memory"] == "16Ti" and pool["queues"] == {
        "batch": {"cpu": "1024", "memory": "8Ti", "nvidia.com/gpu": "32"}}
    assert pool["reservations"] == ["course", "challenge", "maint"] and pool["entries"] == ["train-llm", "lab"]
    (queue,) = document["queues"]
    assert queue["entries"] == ["lab"] and queue["budgets"] == ["gpu-hours"] and queue["cohort"] == "site"
    (priority,) = document["priorities"]
    assert priority["value"] == 1000 and priority["entries"] == ["lab"]
    (budget,) = document["budgets"]
    assert budget["queues"] == ["batch"] and budget["period"] == {"reset": "0 0 1 * *", "timeZone": "Europe/Paris"}
    assert budget["nextReset"] == "2026-11-30T23:00:00+00:00" and budget["entries"] == ["lab"]
    assert document["entries"] == [] and document["reservations"] == []
    code, text, _ = run(tmp_path / "text", capsys, config, "explain", "h100", "batch", "urgent", "gpu-hours",
                        "--now", NOW)
    assert "pool h100" in text and "queue batch" in text and "priority urgent" in text and "budget gpu-hours" in text
    assert "limits cpu=2048 memory=16Ti nvidia.com/gpu=128" in text


def test_a_name_two_kinds_use_shows_both_and_an_unknown_one_gets_the_closest_of_any_kind(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["jobs"].append(gpu_job("cpu", pool="cpu", gpus=0))  # named like the pool "cpu"
    code, out, _ = run(tmp_path, capsys, config, "explain", "cpu")
    assert code == 0 and "cpu  (job" in out and "pool cpu" in out
    code, _, err = run(tmp_path / "unknown", capsys, config, "explain", "challeng")
    assert code == 2 and 'nothing named "challeng"; did you mean "challenge"?' in err


def test_gang_limits_print_quantities_as_a_person_writes_them(tmp_path, capsys):
    code, out, _ = run(tmp_path, capsys, reservations_page(), "explain", "train-llm", "--now", NOW)
    cpu = next(line.split() for line in out.splitlines() if line.strip().startswith("autoscale limits  cpu "))
    memory = next(line.split() for line in out.splitlines() if line.strip().startswith("autoscale limits  memory "))
    assert cpu[-3:] == ["1.6", "2048", "2046.4"] and memory[-3:] == ["2Gi", "16Ti", "16Ti"]
    assert "2046400m" not in out and "16382Gi" not in out


def test_validate_counts_the_reservations_and_budgets(tmp_path, capsys):
    config = reservations_page()
    config["budgets"] = [{"name": "gpu-hours", "queues": ["batch"], "limits": {"nvidia.com/gpu": 500},
                          "reset": "0 0 1 * *"}]
    code, out, _ = run(tmp_path, capsys, config, "validate")
    assert code == 0 and "1 queue, 3 reservations, 1 budget," in out
    # An entry on a reservation is queued (its reservation's LocalQueue): both of the page's are.
    assert "2 queued" in out


def test_the_timeline_rows_jobs_on_a_reservation_and_its_legend_names_only_what_is_drawn(tmp_path):
    from kns_cli.stack import load_stack
    root = write_project(tmp_path / "project", CONFIG)  # a static pool: nothing autoscaled
    cfg, plans = load_stack(root, "case")
    drawing = timeline.draw(cfg, plans, tuesday_in_paris(6), 12)
    ids = svg_ids(drawing.svg())
    # The jobs lab (course, Tuesday mornings) and train (the challenge) each get a row.
    assert {"label-lab", "label-train"} <= set(ids) and "shade-lab-0" in ids
    legend = drawing.figure.legends[0]
    texts = [t.get_text() for t in legend.get_texts()]
    assert timeline.LEGEND["warm-capacity"] not in texts and timeline.LEGEND["window"] in texts
    assert timeline.LEGEND["warmup"] not in texts  # no schedule, no warm-up drawn
