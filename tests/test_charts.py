"""kns_cli/charts.py: the one matplotlib set-up of the `kns` command, and what it promises.

The same input gives the same bytes, in this process and in a fresh one with another
matplotlib configuration around it (a matplotlibrc in its working directory, an empty
font cache), and nothing of the set-up stays in matplotlib's global state. The usage
chart draws each series' used, projected and limit lines under ids the SVG keeps.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path

import matplotlib
import pytest
from matplotlib import font_manager

from kns_cli import charts, stack, timeline
from kns_testing.program import ROOT

SVG = "{http://www.w3.org/2000/svg}"
PNG = b"\x89PNG\r\n\x1a\n"
START = datetime(2026, 3, 2, tzinfo=timezone.utc)
RENDER = f"""
import sys
from datetime import datetime
from pathlib import Path
from kns_cli import stack, timeline
cfg, plans = stack.load_stack(Path({str(ROOT)!r}), "dev")
sys.stdout.buffer.write(timeline.render(cfg, plans, datetime.fromisoformat({START.isoformat()!r}), 12.0).encode())
"""


def dev_svg() -> str:
    cfg, plans = stack.load_stack(ROOT, "dev")
    return timeline.render(cfg, plans, START, 12.0)


def test_the_timeline_is_the_same_bytes_here_twice_and_in_a_fresh_process_configured_otherwise(tmp_path):
    first, second = dev_svg(), dev_svg()
    assert first == second
    (tmp_path / "matplotlibrc").write_text("font.size: 30\nsvg.fonttype: path\nsvg.hashsalt: other\n"
                                           "font.sans-serif: Liberation Sans\ntext.color: red\naxes.linewidth: 4\n")
    env = dict(os.environ, MPLCONFIGDIR=str(tmp_path / "mplconfig"), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", RENDER], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == first.encode()


def test_nothing_of_the_set_up_stays_in_matplotlibs_globals():
    before = dict(matplotlib.rcParams)
    dev_svg()
    assert dict(matplotlib.rcParams) == before
    assert matplotlib.rcParams["svg.hashsalt"] != charts.RC["svg.hashsalt"]  # not set but in the context


def test_text_is_text_in_matplotlibs_own_font_and_no_date_or_version_is_written():
    svg = dev_svg()
    assert "<text " in svg and ">kns timeline: stack dev, " in svg
    assert 'id="DejaVuSans-' not in svg  # glyphs as paths would be
    assert "<dc:date>" not in svg and "<dc:creator>" not in svg and matplotlib.__version__ not in svg
    bundled = (Path(matplotlib.get_data_path()) / "fonts" / "ttf").resolve()
    with charts.style():
        for weight in ("normal", "bold"):
            found = Path(font_manager.findfont(font_manager.FontProperties(weight=weight))).resolve()
            assert found.parent == bundled and found.name.startswith("DejaVuSans"), found


# ---- usage charts ---------------------------------------------------------------------------


def series() -> list[charts.UsageSeries]:
    day = timedelta(days=1)
    used = [(START + i * day, 3.0 * i) for i in range(10)]
    projected = [(START + i * day, 3.5 * i - 4.5) for i in range(9, 31)]
    return [charts.UsageSeries("team-a", "nvidia.com/gpu", 100.0, START, START + 30 * day, used, projected),
            charts.UsageSeries("team-b", "cpu", 40.0, START, None, used[:3], [])]


def test_a_usage_chart_draws_each_series_used_projected_and_limit(tmp_path):
    path = tmp_path / "usage.svg"
    charts.usage_chart(series(), "budgets of stack dev", path)
    text = path.read_text()
    ids = {e.get("id"): e for e in ET.fromstring(text.encode()).iter() if e.get("id")}
    assert ">budgets of stack dev<" in text and ">team-a: nvidia.com/gpu<" in text
    for index, item in enumerate(series()):
        gids = charts.usage_gids(index)
        assert set(gids.values()) <= set(ids), (index, gids)
        for kind, points in (("used", item.used), ("projected", item.projected)):
            paths = ids[gids[kind]].findall(f"{SVG}path")
            assert len(paths) == (1 if points else 0)
            if points:
                assert len(re.findall(r"[ML] ", paths[0].get("d"))) == len(points)
                dashed = "stroke-dasharray" in paths[0].get("style")
                assert dashed == (kind == "projected"), kind
        (limit,) = ids[gids["limit"]].findall(f"{SVG}path")
        ys = [float(y) for y in re.findall(r"[ML] [-0-9.]+ ([-0-9.]+)", limit.get("d"))]
        assert len(ys) == 2 and ys[0] == ys[1]  # horizontal
    assert "limit 100 h" in text and "limit 40 h" in text


def test_a_usage_chart_is_the_same_bytes_each_time_as_svg_and_as_png(tmp_path):
    for suffix in (".svg", ".png"):
        a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
        charts.usage_chart(series(), "budgets", a)
        charts.usage_chart(series(), "budgets", b)
        assert a.read_bytes() == b.read_bytes()
        assert a.read_bytes().startswith(PNG) == (suffix == ".png")


def test_a_usage_chart_refuses_other_suffixes_naive_times_and_no_series(tmp_path):
    for name in ("usage.pdf", "usage", "usage.svgz"):
        with pytest.raises(ValueError, match=r"must end in \.png or \.svg"):
            charts.usage_chart(series(), "budgets", tmp_path / name)
        assert not (tmp_path / name).exists()
    naive = charts.UsageSeries("x", "cpu", 1.0, datetime(2026, 3, 2), None, [], [])
    with pytest.raises(ValueError, match="has no UTC offset"):
        charts.usage_chart([naive], "budgets", tmp_path / "naive.svg")
    with pytest.raises(ValueError, match="at least one series"):
        charts.usage_chart([], "budgets", tmp_path / "none.svg")


def test_a_gid_is_refused_when_it_cannot_be_an_svg_id():
    assert charts.gid("run", "nightly-report", 3) == "run-nightly-report-3"
    with pytest.raises(ValueError):
        charts.gid("run", 'a"b', 0)


def test_only_the_timeline_command_loads_matplotlib():
    """It takes most of a second to import: `./kns validate` and the rest do without it."""
    code = "import sys, kns_cli.cli; sys.exit('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr.decode() or "kns_cli.cli imports matplotlib"
