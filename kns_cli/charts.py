"""Matplotlib for the `kns` command: the one place its charts are set up and saved.

A chart is part of a review (a timeline in docs, a usage chart in a pull request), so the
same input must give the same bytes on every machine and run: every chart is drawn and
saved inside `style()`, which starts from matplotlib's defaults (a user's matplotlibrc
changes nothing), draws text in DejaVu Sans (shipped with matplotlib, so its metrics do not
depend on the fonts a machine has), keeps SVG text as text, salts SVG ids with a constant
and writes no date or software version. Figures are drawn on the Agg canvas directly,
never through pyplot, so no global backend or figure registry is touched.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from io import BytesIO
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence
from xml.sax.saxutils import escape

import matplotlib
import matplotlib.dates as mdates
import matplotlib.style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 72  # one SVG unit is one pixel of the PNG
SUFFIXES = (".png", ".svg")
RC = {
    "svg.hashsalt": "kns-platform",
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 12,
    "text.usetex": False,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "savefig.bbox": None,
    "savefig.facecolor": "white",
    "savefig.transparent": False,
    "timezone": "UTC",
}
_METADATA = {".svg": {"Date": None, "Creator": None}, ".png": {"Software": None}}


@contextmanager
def style() -> Iterator[None]:
    """Matplotlib's defaults plus RC for the duration of the block, restored after it."""
    with matplotlib.rc_context():
        matplotlib.style.use("default")
        matplotlib.rcParams.update(RC)
        yield


def figure(width: float, height: float) -> Figure:
    """A figure of width x height pixels on the Agg canvas (call inside `style()`)."""
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def suffix_of(path: Path | str) -> str:
    """The format a path asks for, refused unless it is one the charts write."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"cannot write a chart to {str(path)!r}: its name must end in "
                         f"{' or '.join(SUFFIXES)}")
    return suffix


_GID = re.compile(r"[A-Za-z0-9._-]+")


def gid(*parts: object) -> str:
    """An SVG id from parts joined by '-' (names are DNS labels; anything else is refused)."""
    text = "-".join(str(p) for p in parts)
    if not _GID.fullmatch(text):
        raise ValueError(f"{text!r} cannot be an SVG id")
    return text


def svg_text(fig: Figure, tooltips: Optional[Mapping[str, str]] = None) -> str:
    """The figure as SVG text. `tooltips` maps an artist's gid to a hover text, written as
    the SVG <title> of the group matplotlib writes for it (matplotlib has no tooltips)."""
    with style():
        buffer = BytesIO()
        fig.savefig(buffer, format="svg", metadata=_METADATA[".svg"])
    text = buffer.getvalue().decode("utf-8")
    for gid, tip in (tooltips or {}).items():
        opening = f'<g id="{escape(gid, {chr(34): "&quot;"})}">'
        if text.count(opening) != 1:
            raise ValueError(f"no single artist with gid {gid!r} to give a tooltip")
        text = text.replace(opening, f"{opening}\n   <title>{escape(tip)}</title>")
    return text


def save(fig: Figure, path: Path | str, tooltips: Optional[Mapping[str, str]] = None) -> None:
    """Write the figure as its path's suffix says (.svg or .png); SVG gets the tooltips."""
    suffix = suffix_of(path)
    if suffix == ".svg":
        Path(path).write_bytes(svg_text(fig, tooltips).encode("utf-8"))
        return
    with style():
        fig.savefig(path, format="png", metadata=_METADATA[".png"])


# ---- usage charts ----------------------------------------------------------------------


@dataclass(frozen=True)
class UsageSeries:
    """One budget's use of one resource over a period: hours used so far and projected."""

    name: str
    resource: str
    limit: float
    period_start: datetime
    period_end: datetime | None
    used: list[tuple[datetime, float]]
    projected: list[tuple[datetime, float]]


def usage_gids(index: int) -> dict[str, str]:
    """The gids of series `index`'s lines in a usage chart: the SVG element ids."""
    return {kind: f"{kind}-{index}" for kind in ("used", "projected", "limit")}


def _utc(moment: datetime, what: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what}: {moment.isoformat()} has no UTC offset")
    return moment.astimezone(timezone.utc)


def usage_chart(series: Sequence[UsageSeries], title: str, path: Path | str) -> None:
    """One subplot per series (hours against UTC time): used solid, projected dashed, the
    limit a horizontal line; written to `path` (.svg or .png)."""
    suffix_of(path)
    if not series:
        raise ValueError("a usage chart needs at least one series")
    with style():
        fig = figure(900, 90 + 250 * len(series))
        fig.set_layout_engine("constrained")
        fig.suptitle(title, fontweight="bold")
        axes = fig.subplots(len(series), 1, squeeze=False)[:, 0]
        for index, (ax, item) in enumerate(zip(axes, series)):
            _usage_axes(ax, index, item)
        save(fig, path)


def _usage_axes(ax, index: int, item: UsageSeries) -> None:
    where = f"series {item.name!r}"
    used = [(_utc(t, where), v) for t, v in item.used]
    projected = [(_utc(t, where), v) for t, v in item.projected]
    start = _utc(item.period_start, where)
    moments = [t for t, _ in used + projected]
    end = _utc(item.period_end, where) if item.period_end else max(moments + [start + timedelta(days=1)])
    gids = usage_gids(index)
    ax.plot([t for t, _ in used], [v for _, v in used], "-", color="#1f5fa8", linewidth=2,
            label="used", gid=gids["used"])
    ax.plot([t for t, _ in projected], [v for _, v in projected], "--", color="#1f5fa8", linewidth=2,
            label="projected", gid=gids["projected"])
    ax.axhline(item.limit, color="#c0392b", linewidth=1.5, label=f"limit {item.limit:g} h", gid=gids["limit"])
    top = max([item.limit] + [v for _, v in used + projected])
    ax.set_xlim(start, max(end, start + timedelta(minutes=1)))
    ax.set_ylim(0, top * 1.1 if top > 0 else 1)
    ax.set_title(f"{item.name}: {item.resource}", loc="left")
    ax.set_ylabel(f"{item.resource} hours")
    ax.set_xlabel("time (UTC)")
    locator = mdates.AutoDateLocator(tz=timezone.utc)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=timezone.utc))
    ax.grid(True, color="#e3e3e3")
    ax.legend(loc="best")

