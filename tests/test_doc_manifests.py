"""docs/workloads.md's example is what the program builds (issue 32, "docs that cannot
drift"): its `prod` stack config, run through the loader and the planner (the calls
`__main__.py` makes), gives exactly the Job and the CronJob the page shows."""

from __future__ import annotations

import re

import yaml

from config.loader import check_config
from kns_testing.program import ROOT
from plan.planner import plan_checked


def test_the_workloads_example_shows_the_job_and_cronjob_the_program_builds():
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "workloads.md").read_text(), re.S)
    config = yaml.safe_load(blocks[0])["config"]
    plans = plan_checked(check_config({k.removeprefix("kns:"): v for k, v in config.items()},
                                      project_dir=ROOT, stack="prod", environ={})).entries
    built = {m["kind"]: m for plan in plans for m in plan.objects.values() if m["kind"] in ("Job", "CronJob")}
    job, cron = (yaml.safe_load(block) for block in blocks[1:3])
    assert job == built["Job"], "docs/workloads.md: the Job differs from what the program builds"
    assert cron == built["CronJob"], "docs/workloads.md: the CronJob differs from what the program builds"
