"""docs/outputs.md's example is true: its JSON is what the program exports for its stack
file at the time the page names (issue 32, "docs that cannot drift"). The program itself
runs (under mocks, its clock set to that time): an export dropped or renamed fails here."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timezone

import yaml

from chrono import clock
from config import fingerprint
from kns_testing.program import ROOT, run_program
from plan import digests
from plan.outputs import ENTRY_OUTPUTS

DOC = ROOT / "docs" / "outputs.md"
# "at 02:09 UTC on 22 November 2026": the time the example's next runs are computed from.
WHEN = re.compile(r"at (\d\d):(\d\d) UTC on (\d+) (\w+) (\d{4})")


# What the program exports for its own runs, not for users (digests the next run reads).
INTERNAL = {fingerprint.OUTPUT, digests.CHECKED_OUTPUT, digests.DIGESTS_OUTPUT, digests.ENTRY_STACK_OUTPUT,
            digests.PLATFORM_OUTPUT}


def program_exports(tmp_path, stack: dict, monkeypatch, now: datetime | None = None) -> dict:
    """The outputs the program exports for `stack` (a Pulumi.<stack>.yaml document), run
    from a copy of the project with its clock at `now`."""
    if now is not None:
        monkeypatch.setattr(clock, "now", lambda: now)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "vendor").symlink_to(ROOT / "vendor")
    for folder in ("chrono", "config", "plan", "components"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    config = {key.split(":", 1)[1]: value for key, value in stack["config"].items()}
    outputs = run_program(config, stack="dev", project_dir=tmp_path).outputs
    return json.loads(json.dumps(outputs, default=str))


def test_the_documented_outputs_are_the_program_s(tmp_path, monkeypatch):
    text = DOC.read_text()
    example = text[text.index("## Example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])
    documented = json.loads(example.split("```json\n", 1)[1].split("```", 1)[0])
    hour, minute, day, month, year = WHEN.search(example).groups()
    now = datetime.strptime(f"{year} {month} {day} {hour}:{minute}", "%Y %B %d %H:%M").replace(tzinfo=timezone.utc)
    exported = program_exports(tmp_path, stack, monkeypatch, now)
    assert {k: v for k, v in exported.items() if k not in INTERNAL} == documented
    assert set(ENTRY_OUTPUTS) <= set(documented)
    assert exported["schedules"]["nightly-report"]["nextRuns"][0].startswith(f"{year}-11-23T02:30")


def test_the_documented_queues_output_is_the_program_s(tmp_path, monkeypatch):
    text = DOC.read_text()
    example = text[text.index("## Example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])
    section = text[text.index("## With queues"):]
    queues = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    documented = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    stack["config"].update({"kns:queueing": {"enabled": True}, **queues})
    exported = program_exports(tmp_path, stack, monkeypatch)
    assert exported["queues"] == documented
    # Without queueing there is no `queues` output (the first example).
    assert "queues" not in json.loads(example.split("```json\n", 1)[1].split("```", 1)[0])



def test_the_documented_reservations_and_budgets_outputs_are_the_program_s(tmp_path, monkeypatch):
    """Each time in its own zone (docs/outputs.md, "Times"): a recurring window in its
    reservation's zone, a one-off one in its start's offset, a reset in its budget's."""
    text = DOC.read_text()
    example = text[text.index("## Example"):]
    stack = yaml.safe_load(example.split("```yaml\n", 1)[1].split("```", 1)[0])
    hour, minute, day, month, year = WHEN.search(example).groups()
    now = datetime.strptime(f"{year} {month} {day} {hour}:{minute}", "%Y %B %d %H:%M").replace(tzinfo=timezone.utc)
    section = text[text.index("## With reservations and budgets"):]
    added = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    documented = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    stack["config"].update({"kns:queueing": {"enabled": True}, **added})
    exported = program_exports(tmp_path, stack, monkeypatch, now)
    assert {key: exported[key] for key in documented} == documented
    assert documented["reservations"]["course"]["nextWindows"][0]["start"].endswith("+01:00")
    assert documented["reservations"]["demo"]["nextWindows"][0]["start"].endswith("-05:00")
    assert documented["budgets"]["research-m"]["nextReset"].endswith("+09:00")
