"""docs/outputs.md's example is true: its JSON is what the program exports for its stack
file at the time the page names (issue 32, "docs that cannot drift")."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timezone

import yaml

from kns_cli.stack import load_stack
from kns_testing.program import ROOT
from plan.outputs import stack_outputs

DOC = ROOT / "docs" / "outputs.md"
# "at 02:09 UTC on 22 November 2026": the time the example's next runs are computed from.
WHEN = re.compile(r"at (\d\d):(\d\d) UTC on (\d+) (\w+) (\d{4})")


def test_the_documented_outputs_are_the_program_s(tmp_path):
    text = DOC.read_text()
    example = text[text.index("## Example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])
    documented = json.loads(example.split("```json\n", 1)[1].split("```", 1)[0])
    hour, minute, day, month, year = WHEN.search(example).groups()
    now = datetime.strptime(f"{year} {month} {day} {hour}:{minute}", "%Y %B %d %H:%M").replace(tzinfo=timezone.utc)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    cfg, plans = load_stack(tmp_path, "dev")
    exported = json.loads(json.dumps(stack_outputs(cfg, plans, now), default=str))
    assert exported == documented
    assert exported["schedules"]["nightly-report"]["nextRuns"][0].startswith(f"{year}-11-23T02:30")


def test_the_documented_queues_output_is_the_program_s(tmp_path):
    text = DOC.read_text()
    example = text[text.index("## Example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])
    section = text[text.index("## With queues"):]
    queues = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    documented = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    stack["config"].update({"kns:queueing": {"enabled": True}, **queues})
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "vendor").symlink_to(ROOT / "vendor")
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    cfg, plans = load_stack(tmp_path, "dev")
    exported = json.loads(json.dumps(stack_outputs(cfg, plans), default=str))
    assert exported["queues"] == documented
    # Without queueing there is no `queues` output (the first example).
    assert "queues" not in json.loads(example.split("```json\n", 1)[1].split("```", 1)[0])

