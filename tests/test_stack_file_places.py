"""Every problem in the stack file says where it is: `Pulumi.<stack>.yaml:<line>:<column>:`
before its config path (docs/validation.md), through both doors, for each kind of problem
(a value, a key left out, a key given twice, a misspelt key or name, a problem the
planning finds, a section's), and only where the file says what the program got."""

from __future__ import annotations

import re

from config import yamldoc
from kns_testing.doors import STACK, both, program_lines, project, validate_lines
from kns_testing.program import ROOT

STACK_FILE = f"Pulumi.{STACK}.yaml"
PLACE = re.compile(r"^(?:  - )?(Pulumi\.[^:]+\.yaml):(\d+):(\d+): (\S+): ")

TEXT = """\
config:
  kns:cluster:
    name: kns-case
    renderDir: out
  kns:nodePools:
    - name: cpu
      role: compute
      nodes: [n1]
  kns:jobs:
    - name: train
      image: busybox
      cpu: 2
      memory: 1Gi
      cpu: 3
    - nmae: eval
      image: busybox
    - name: noimage
      cpu: 1
    - name: small
      image: busybox
      cpu: 2
      memory: 1Gi
      quota: {requests.cpu: 1}
    - name: stray
      image: busybox
      pool: gpu
  kns:queues:
    - name: q
      pools: {cpu: {cpu: 4}}
"""


def where(text: str, key: str, occurrence: int = 1) -> tuple[int, int]:
    """The line and column (from 1) of the `occurrence`-th `key:` written in `text`."""
    found = [(n, line.index(key) + 1) for n, line in enumerate(text.splitlines(), 1)
             if re.search(rf"(^|[\s{{-]){re.escape(key)}:", line)]
    return found[occurrence - 1]


def places(lines: list[str]) -> dict[str, tuple[str, int, int]]:
    """Each problem line's path -> (file, line, column)."""
    out = {}
    for line in lines:
        match = PLACE.match(line)
        if match:
            out[match[4]] = (match[1], int(match[2]), int(match[3]))
    return out


def test_each_problem_is_at_its_key_in_the_stack_file(tmp_path, capsys):
    lines = both(capsys, project(tmp_path, TEXT), places=True)
    found = places(lines)
    expected = {
        # a value: its key; a key given twice: the second, the one YAML would keep
        "kns:jobs[train].cpu": where(TEXT, "cpu", 2),
        # a misspelt name still names its item, and the misspelt key is where it is
        "kns:jobs[eval].nmae": where(TEXT, "nmae"),
        # a key left out: the nearest key the file has (the entry's first)
        "kns:jobs[noimage].image": where(TEXT, "name", 4),
        # the planning's problems too: a quota below the pod, a pool no pool is
        "kns:jobs[small].quota.requests.cpu": where(TEXT, "requests.cpu"),
        "kns:jobs[stray].pool": where(TEXT, "pool"),
        # a section's own problem: the section's key
        "kns:queues": where(TEXT, "kns:queues"),
    }
    assert {path: found.get(path) for path in expected} == {
        path: (STACK_FILE, line, column) for path, (line, column) in expected.items()}, lines
    # every problem of this file has a place, each one a key written there
    assert all(PLACE.match(line) for line in lines if not line.startswith("kns-platform")), lines
    marks: dict = {}
    yamldoc.load(TEXT, marks=marks)
    written = {(line, column) for path, (_, line, column) in found.items() if path != "kns:jobs[train].cpu"}
    assert written <= set(marks.values())


def test_a_job_files_problems_keep_their_file_and_line(tmp_path, capsys):
    job_file = "jobs:\n  - name: late\n    image: busybox\n    cpu: -1\n"
    text = TEXT.split("  kns:jobs:")[0] + "  kns:jobFiles: [extra/*.yaml]\n"
    lines = both(capsys, project(tmp_path, text, {"extra/a.yaml": job_file}), places=True)
    late = [line for line in lines if "jobs[late]" in line]
    assert len(late) == 1 and late[0].startswith("extra/a.yaml:4:jobs[late].cpu: "), lines
    assert not places(late)


def test_a_value_the_file_does_not_hold_has_no_place(tmp_path, capsys):
    """Config the program got another way than this file (here: a value changed after it
    was read) is not pointed at a line of the file that says something else."""
    root = project(tmp_path, TEXT)
    value, _ = yamldoc.load((root / STACK_FILE).read_text())
    config = {k.partition(":")[2]: v for k, v in value["config"].items()}
    config["jobs"][3]["quota"] = {"requests.cpu": "1500m"}
    lines = program_lines(root, config)
    small = [line for line in lines if "kns:jobs[small]" in line]
    assert small and not places(small), small
    # the sections the file does say as delivered keep their places
    assert places([line for line in lines if line.startswith("  - Pulumi")]).get("kns:queues")


def test_the_documented_example_is_the_real_output(tmp_path, capsys):
    text = (ROOT / "docs" / "validation.md").read_text()
    stack = re.search(r"```yaml\n(# Pulumi\.prod\.yaml\n.*?)```", text, re.S)[1]
    shown = re.search(r"```\n(kns-platform: invalid configuration, .*?)```", text, re.S)[1].splitlines()
    root = project(tmp_path, stack, stack="prod")
    code, lines, _ = validate_lines(capsys, root, "prod")
    assert code == 1 and lines == shown
    assert program_lines(root, stack="prod") == shown
    assert all(PLACE.match(line) for line in shown[1:])


def test_a_key_given_twice_in_a_job_file_is_at_the_second(tmp_path, capsys):
    job_file = "jobs:\n  - name: twice\n    image: busybox\n    cpu: 1\n    cpu: 2\n"
    text = TEXT.split("  kns:jobs:")[0] + "  kns:jobFiles: [extra/*.yaml]\n"
    lines = both(capsys, project(tmp_path, text, {"extra/a.yaml": job_file}), places=True)
    assert "extra/a.yaml:5:jobs[twice].cpu: is given twice (lines 4 and 5); YAML would keep only the last" in lines

