"""Messages a new user meets (issue 32, item 6): a unit Kubernetes does not write, a pool
name one letter off, a schedule's key on a job, and `./kns --version` and `--help`. Each
config message through both doors (the program under mocks and `./kns validate`)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from kns_cli import versions
from kns_testing.doors import refused_edited
from kns_testing.program import ROOT

BASE: dict[str, Any] = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [{"name": "a100", "role": "compute", "nodes": ["g1"]}, {"name": "cpu", "role": "compute", "nodes": ["c1"]}],
    "jobs": [{"name": "train", "user": "ann", "image": "busybox:1.37", "cpu": 1, "memory": 512, "pool": "cpu"}],
}

CASES = {
    "a decimal byte unit": (
        lambda c: c["jobs"][0].update(memory="64GB"),
        ['kns:jobs[train].memory: "64GB" is not a quantity; did you mean "64G" or "64Gi"?']),
    "a binary byte unit": (
        lambda c: c["jobs"][0].update(storage="512MiB"),
        ['kns:jobs[train].storage: "512MiB" is not a quantity; did you mean "512Mi"?']),
    "a pool one letter off": (
        lambda c: c["jobs"][0].update(pool="a10"),
        ['kns:jobs[train].pool: no node pool named "a10"; did you mean "a100"? (pools: a100, cpu)']),
    "a pool in capitals": (
        lambda c: c["jobs"][0].update(pool="CPU"),
        ['kns:jobs[train].pool: no node pool named "CPU"; did you mean "cpu"? (pools: a100, cpu)']),
    "a pool nothing like any": (
        lambda c: c["jobs"][0].update(pool="zz"),
        ['kns:jobs[train].pool: no node pool named "zz" (pools: a100, cpu)']),
    "a schedule's key on a job": (
        lambda c: c["jobs"][0].update(warmUpMinutes=10, timeZone="Europe/Paris"),
        [f"kns:jobs[train].{key}: is a schedule's key: a job runs once, when it is applied; to run on a schedule, "
         "make the entry one of kns:schedules (or schedules: in a job file) with schedule: ..."
         for key in ("warmUpMinutes", "timeZone")]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_message_says_what_to_write(case, tmp_path, capsys):
    refused_edited(tmp_path, capsys, BASE, CASES[case])


def kns(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "kns"), *args], capture_output=True, text=True, timeout=120)


def test_version_names_the_checkout_and_the_pinned_versions():
    done = kns("--version")
    assert done.returncode == 0, done.stderr
    pins = versions.pinned(ROOT)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kns-platform ") and lines[0] != "kns-platform unknown"
    for label, key in versions.SHOWN:
        assert f"  {label} {pins[key]}" in lines
    assert pins["KUEUE_VERSION"] in done.stdout and pins["KARPENTER_VERSION"] in done.stdout


def test_help_says_which_commands_run_the_engine():
    done = kns("--help")
    text = " ".join(done.stdout.split())
    assert "preview, up and recover run the Pulumi engine" in text
    assert "validate, explain, queues, timeline and changed are offline" in text


def test_the_timeline_legend_fits_inside_the_picture():
    """The legend and each of its texts lie inside the figure, as matplotlib lays them out
    in the font they are drawn in (its right end was cut off once)."""
    from datetime import datetime, timezone

    from kns_cli import stack, timeline
    cfg, plans = stack.load_stack(ROOT, "dev")
    drawing = timeline.draw(cfg, plans, datetime(2026, 3, 2, tzinfo=timezone.utc), 12.0)
    figure = drawing.figure
    (legend,) = figure.legends
    figure.draw_without_rendering()  # lays the legend out
    renderer = figure.canvas.get_renderer()
    # One text per kind of mark drawn (the dev stack's morning: runs, warm-ups, warm capacity, guaranteed).
    assert len(legend.get_texts()) == len(set(drawing.kinds.values())) >= 4
    for artist in (legend, *legend.get_texts()):
        box = artist.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= timeline.WIDTH and 0 <= box.y0 and box.y1 <= figure.bbox.height, (
            artist, box)
    assert 'id="legend"' in drawing.svg()
