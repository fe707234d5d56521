"""`kns timeline`: a picture of every schedule's runs and warm-up windows in a time window.

First a row per pool with reservations (docs/reservations.md): each window a band, its
warm-up a lighter band before it. Then one row per schedule entry (config order). Each run
starting in [start, end) is a marker at its start; its warm-up (primer fire to start) is a
shaded bar, cut at the left edge when it began before the window. The axis is UTC with a
grid line every hour; each row notes its schedule's own time zone. Runs and primers come
from `kns_cli.runs` (the program's `next_runs` and derived primer schedules).

It is drawn with matplotlib through `kns_cli.charts`, so the same config and window give
the same bytes every time. Each run, warm-up and band is its own artist with a gid (see
`Drawing`), which the SVG keeps as the element's id: tests and readers find them there.
The layout is in pixels (one SVG unit each): the plot spans PLOT_LEFT to
PLOT_LEFT + PLOT_WIDTH, rows are ROW_HEIGHT high from ROWS_TOP down; in data
coordinates x is hours from the window's start and row i spans y from i to i + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.transforms import blended_transform_factory

from chrono import calendar, cron
from config.platform import PlatformConfig
from plan.model import WorkloadPlan

from . import charts
from .runs import Run, runs_between
from .starts import StartCheck, check_starts

WIDTH = 1200
LABEL_WIDTH = 340
RIGHT = 44
PLOT_LEFT = LABEL_WIDTH
PLOT_WIDTH = WIDTH - LABEL_WIDTH - RIGHT
AXIS_Y = 104
ROWS_TOP = AXIS_Y
ROW_HEIGHT = 46
BAR_HEIGHT = 22
MARK_HEIGHT = 28
BOTTOM = 92
LABEL_STEPS = (1, 2, 3, 4, 6, 12, 24)
# What each kind of mark looks like: (face colour, edge colour); the SVG's styles show them.
COLORS = {
    "run": ("#1f5fa8", "#1f5fa8"),
    "guaranteed": ("#1b7f3b", "#1b7f3b"),
    "best-effort": ("#ffffff", "#c0392b"),
    "warmup": ("#f4a259", "#d9822b"),
    "warm-capacity": ("#4caf7a", "#2e7d4f"),
    "window": ("#3b6fb6", "#3b6fb6"),
    "window-warmup": ("#9fb8e0", "#9fb8e0"),
}
GREY = "#555555"
LEGEND = {
    "run": "run start",
    "warmup": "warm-up: the primer CronJob fires, the pod holds its node until the start",
    "warm-capacity": "warm capacity: Karpenter holds a node for it",
    "guaranteed": "queued, start guaranteed",
    "best-effort": "queued, best effort: may start late (./kns explain says why)",
    "window": "reservation window",
    "window-warmup": "its warm-up",
}


@dataclass(frozen=True)
class Row:
    plan: WorkloadPlan
    runs: list[Run]
    # A prescaled schedule on a queue: which of its starts are guaranteed (docs/queueing.md).
    start: Optional[StartCheck] = None

    def kind(self, run: Run) -> str:
        """run, or for a prescaled schedule on a queue guaranteed or best-effort."""
        if self.start is None:
            return "run"
        return "guaranteed" if self.start.run_guaranteed(run.start) else "best-effort"


def rows(plans: list[WorkloadPlan], start: datetime, end: datetime,
         starts: Optional[dict[str, StartCheck]] = None) -> list[Row]:
    """Every schedule entry with its runs in [start, end), and every other entry that runs
    in a reservation's windows (no runs of its own: its row shows the windows)."""
    return [Row(plan, runs_between(plan, start, end) if plan.is_schedule else [], (starts or {}).get(plan.entry.name))
            for plan in plans if plan.is_schedule or (plan.entry.reservation is not None and plan.pod_spec is not None)]


def number(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def utc_label(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _local(moment: datetime, zone: str) -> str:
    return moment.astimezone(cron.zone(zone)).strftime("%a %Y-%m-%d %H:%M %Z")


def _describe(plan: WorkloadPlan) -> str:
    entry = plan.entry
    if not plan.is_schedule:
        return f"runs in the windows of reservation {entry.reservation}"
    text = f"cron {entry.schedule} in {entry.time_zone}"
    if plan.primers is not None:
        text += f" \u00b7 warm-up {plan.primers.lead} min"
    if plan.on_autoscaled_pool:
        text += f" \u00b7 autoscaled pool {plan.pool.name}"
    if entry.distributed:
        text += f" \u00b7 {entry.workers} workers"
    return text


@dataclass(frozen=True)
class Band:
    """A reservation's window (docs/reservations.md) and its warm-up, in [start, end)."""

    reservation: str
    warm_up: datetime
    window: calendar.Window


def bands(cfg: PlatformConfig, start: datetime, end: datetime) -> dict[str, list[Band]]:
    """Per pool with reservations (config order), the windows open at some moment in
    [start, end), warm-ups included."""
    out: dict[str, list[Band]] = {}
    for item in cfg.reservations:
        found = [Band(item.name, hold.start, hold.window) for hold in item.calendar().holds(start, end)]
        out.setdefault(item.pool, []).extend(found)
    return out


@dataclass
class Drawing:
    """The figure and what was drawn on it, for the command to save and tests to check.

    gids: `label-<entry>` and `note-<entry>` (a row's name and what it runs),
    `run-<entry>-<i>` and `warmup-<entry>-<i>` (run i of the row's runs in the window),
    `local-<entry>-<i>` (its local start time), `shade-<entry>-<i>` (its reservation's
    window i under the row), `pool-<pool>` and `poolnote-<pool>` (a reservation row's name
    and its reservations), `window-<pool>-<i>` and `window-<pool>-<i>-warmup` (band i of
    the pool's row), `hours` and `midnights` (the grid), `title`, `legend`.
    """

    figure: Figure
    ax: Axes
    start: datetime
    end: datetime
    rows: list[Row]
    bands: dict[str, list[Band]]
    kinds: dict[str, str] = field(default_factory=dict)  # gid -> COLORS key
    tooltips: dict[str, str] = field(default_factory=dict)  # gid -> hover text in the SVG

    def hours(self, moment: datetime) -> float:
        """x in data coordinates: hours from the start, clamped to the window."""
        span = (self.end - self.start).total_seconds()
        return min(max((moment - self.start).total_seconds(), 0.0), span) / 3600

    def pixel_x(self, moment: datetime) -> float:
        """x of an instant in SVG units, through the axes' data-to-pixel transform."""
        return float(self.ax.transData.transform((self.hours(moment), 0))[0])

    def svg(self) -> str:
        return charts.svg_text(self.figure, self.tooltips)

    def save(self, path: Path) -> None:
        charts.save(self.figure, path, self.tooltips)


def render(cfg: PlatformConfig, plans: list[WorkloadPlan], start: datetime, hours: float) -> str:
    """The SVG document (text) for the window of `hours` hours from `start` (aware)."""
    return draw(cfg, plans, start, hours).svg()


def draw(cfg: PlatformConfig, plans: list[WorkloadPlan], start: datetime, hours: float) -> Drawing:
    """The timeline of the window of `hours` hours from `start` (aware), as a figure."""
    start = start.astimezone(timezone.utc)
    end = start + timedelta(hours=hours)
    table = rows(plans, start, end, check_starts(cfg, plans, start, end - start))
    reserved = bands(cfg, start, end)
    count = max(len(table) + len(reserved), 1)
    height = ROWS_TOP + count * ROW_HEIGHT + BOTTOM
    with charts.style():
        fig = charts.figure(WIDTH, height)
        ax = fig.add_axes((PLOT_LEFT / WIDTH, (height - ROWS_TOP - count * ROW_HEIGHT) / height,
                           PLOT_WIDTH / WIDTH, count * ROW_HEIGHT / height))
        drawing = Drawing(fig, ax, start, end, table, reserved)
        ax.set_xlim(0, hours)
        ax.set_ylim(count, 0)
        ax.patch.set_visible(False)
        for side in ("left", "right", "bottom"):
            ax.spines[side].set_visible(False)
        ax.spines["top"].set_color("#333333")
        ax.set_yticks([])
        title = f"kns timeline: stack {cfg.stack}, {utc_label(start)} to {utc_label(end)} ({number(hours)} h)"
        fig.text(16 / WIDTH, 1 - 28 / height, title, fontsize=17, fontweight="bold", gid="title")
        fig.text(16 / WIDTH, 1 - 48 / height, "Time axis in UTC, a grid line every hour. One row per schedule, "
                 "in its own time zone (noted under its name).", color=GREY)
        fig.text(16 / WIDTH, 1 - 64 / height, "A marker is a run start (its local time beside it when there is "
                 "room); a shaded bar is its warm-up, from the primer to the start.", color=GREY)
        _axis(drawing, hours)
        if not table and not reserved:
            ax.text(8 / PLOT_WIDTH * hours, 0.5, f"no schedule entries in stack {cfg.stack}", color=GREY, va="center")
        for index, (pool, found) in enumerate(reserved.items()):
            _band_row(drawing, index, pool, found)
        by_reservation: dict[str, list[Band]] = {}
        for found in reserved.values():
            for band in found:
                by_reservation.setdefault(band.reservation, []).append(band)
        for index, row in enumerate(table, start=len(reserved)):
            _row(drawing, index, row, by_reservation.get(row.plan.entry.reservation or "", []))
        _legend(drawing, height)
    return drawing


def _backdrop(drawing: Drawing, index: int, color: str) -> None:
    """A row's background across the whole width, labels included."""
    across = blended_transform_factory(drawing.figure.transFigure, drawing.ax.transData)
    drawing.ax.add_artist(Rectangle((0, index), 1, 1, transform=across, facecolor=color, edgecolor="none",
                                    clip_on=False, zorder=0))


def _label(drawing: Drawing, index: int, name: str, note: str, gids: tuple[str, str]) -> None:
    across = blended_transform_factory(drawing.figure.transFigure, drawing.ax.transData)
    drawing.ax.text(16 / WIDTH, index + 19 / ROW_HEIGHT, name, transform=across, fontweight="bold",
                    va="baseline", gid=gids[0])
    drawing.ax.text(16 / WIDTH, index + 35 / ROW_HEIGHT, note, transform=across, fontsize=11, color=GREY,
                    va="baseline", gid=gids[1])


def _rectangle(drawing: Drawing, gid: str, kind: str, left: datetime, right: datetime, top: float,
               height: float, alpha: float, tooltip: str = "") -> None:
    x = drawing.hours(left)
    face, edge = COLORS[kind]
    drawing.ax.add_patch(Rectangle((x, top), max(drawing.hours(right) - x, 0), height, facecolor=face,
                                   edgecolor=edge, linewidth=0.5, alpha=alpha, gid=gid, zorder=2))
    drawing.kinds[gid] = kind
    if tooltip:
        drawing.tooltips[gid] = tooltip


def _band_row(drawing: Drawing, index: int, pool: str, found: list[Band]) -> None:
    _backdrop(drawing, index, "#eef3fb")
    names = ", ".join(dict.fromkeys(b.reservation for b in found)) or "no window in this view"
    _label(drawing, index, f"pool {pool}: reservations", names,
           (charts.gid("pool", pool), charts.gid("poolnote", pool)))
    bar = BAR_HEIGHT / ROW_HEIGHT
    top = index + (1 - bar) / 2
    for i, band in enumerate(found):
        gid = charts.gid("window", pool, i)
        title = f"{band.reservation}: {utc_label(band.window.start)} to {utc_label(band.window.end)}"
        if drawing.hours(band.window.start) > drawing.hours(band.warm_up):
            _rectangle(drawing, f"{gid}-warmup", "window-warmup", band.warm_up, band.window.start, top, bar, 0.6,
                       f"{title}: warm-up from {utc_label(band.warm_up)}")
        _rectangle(drawing, gid, "window", band.window.start, band.window.end, top, bar, 0.75, title)
        left, right = drawing.hours(band.window.start), drawing.hours(band.window.end)
        if (right - left) * PLOT_WIDTH / drawing.hours(drawing.end) > 60:
            drawing.ax.text(left + 4 * drawing.hours(drawing.end) / PLOT_WIDTH, index + 0.5, band.reservation,
                            fontsize=10, color="#ffffff", va="center", zorder=3)


def _row(drawing: Drawing, index: int, row: Row, windows: Sequence[Band] = ()) -> None:
    plan, ax = row.plan, drawing.ax
    name = plan.entry.name
    if index % 2 == 0:
        _backdrop(drawing, index, "#f5f7fa")
    for i, band in enumerate(windows):  # its reservation's windows under its runs
        _rectangle(drawing, charts.gid("shade", name, i), "window", band.warm_up, band.window.end, index, 1, 0.12)
    _label(drawing, index, name, _describe(plan), (charts.gid("label", name), charts.gid("note", name)))
    middle = index + 0.5
    ax.plot([0, drawing.hours(drawing.end)], [middle, middle], color="#d0d5dd", linewidth=1,
            linestyle=(0, (2, 3)), zorder=1)
    span = drawing.hours(drawing.end)
    xs = [drawing.hours(run.start) * PLOT_WIDTH / span for run in row.runs]
    # Local start times beside the markers, when they have room.
    labelled = (len(xs) <= 24 and all(b - a >= 64 for a, b in zip(xs, xs[1:]))
                and (not xs or xs[-1] < PLOT_WIDTH - 50))
    bar, mark = BAR_HEIGHT / ROW_HEIGHT, MARK_HEIGHT / ROW_HEIGHT / 2
    for i, run in enumerate(row.runs):
        zone = plan.entry.time_zone
        x = drawing.hours(run.start)
        if run.primer is not None:
            # On an autoscaled pool Karpenter adds a node for the primed pod and keeps it to the start.
            warm = plan.on_autoscaled_pool
            held = f" (warm capacity held on autoscaled pool {plan.pool.name})" if warm else ""
            _rectangle(drawing, charts.gid("warmup", name, i), "warm-capacity" if warm else "warmup",
                       run.primer, run.start, middle - bar / 2, bar, 0.55,
                       f"{name}: warm-up from {_local(run.primer, zone)} ({utc_label(run.primer)}){held}")
        kind = row.kind(run)
        face, edge = COLORS[kind]
        note = ""
        if kind == "guaranteed":
            note = ": start guaranteed"
        elif kind == "best-effort":
            note = ": best effort, " + (row.start.late.get(run.start) or "; ".join(row.start.reasons))
        gid = charts.gid("run", name, i)
        ax.add_line(Line2D([x, x, x], [middle - mark, middle, middle + mark], color=edge, linewidth=2.5,
                           linestyle=(0, (3, 2)) if kind == "best-effort" else "-", marker="o", markevery=[1],
                           markersize=7, markerfacecolor=face, markeredgecolor=edge, markeredgewidth=1,
                           clip_on=False, zorder=4, gid=gid))
        drawing.kinds[gid] = kind
        drawing.tooltips[gid] = f"{name}: run at {_local(run.start, zone)} ({utc_label(run.start)}){note}"
        if labelled:
            wall = run.start.astimezone(cron.zone(zone)).strftime("%H:%M %Z")
            ax.text(x + 4 * span / PLOT_WIDTH, middle - 6 / ROW_HEIGHT, wall, fontsize=9, color=COLORS["run"][1],
                    zorder=4, gid=charts.gid("local", name, i))


def _axis(drawing: Drawing, hours: float) -> None:
    """Hour labels along the top (the date above each midnight) and a grid line every hour,
    or every few hours when an hourly grid would be denser than 4 pixels."""
    ax, start, end = drawing.ax, drawing.start, drawing.end
    step = next((s for s in LABEL_STEPS if hours / s <= 24), 24)
    grid = next((s for s in LABEL_STEPS if PLOT_WIDTH / (hours / s) >= 4), 24)
    tick = start.replace(minute=0, second=0, microsecond=0)
    if tick < start:
        tick += timedelta(hours=1)
    lines, midnights, labels = [], [], {}
    while tick <= end:
        x = drawing.hours(tick)
        if tick.hour == 0:
            midnights.append(x)
        elif tick.hour % grid == 0:
            lines.append(x)
        if tick.hour % step == 0:
            labels[x] = f"{tick:%a %m-%d}\n{tick:%H}" if tick.hour == 0 else f"{tick:%H}"
        tick += timedelta(hours=1)
    count = len(drawing.rows) + len(drawing.bands)
    ax.vlines(lines, 0, max(count, 1), colors="#e3e3e3", linewidth=1, zorder=1, gid="hours")
    ax.vlines(midnights, 0, max(count, 1), colors="#999999", linewidth=1, zorder=1, gid="midnights")
    ax.xaxis.tick_top()
    ax.set_xticks(list(labels), list(labels.values()), fontsize=10, color="#333333")
    ax.tick_params(axis="x", length=5, color="#333333")
    drawing.figure.text((PLOT_LEFT - 16) / WIDTH, ax.get_position().y1 + 9 / drawing.figure.bbox.height,
                        "UTC hour", ha="right", fontsize=10, fontweight="bold")


def _legend(drawing: Drawing, height: float) -> None:
    """What each kind of mark drawn means: only the kinds the drawing has."""
    drawn = set(drawing.kinds.values())
    handles = []
    for kind in [kind for kind in LEGEND if kind in drawn]:
        face, edge = COLORS[kind]
        if kind in ("run", "guaranteed", "best-effort"):
            handles.append(Line2D([], [], color=edge, linewidth=2.5, marker="o", markersize=7, markerfacecolor=face,
                                  linestyle=(0, (3, 2)) if kind == "best-effort" else "-", label=LEGEND[kind]))
        else:
            handles.append(Patch(facecolor=face, edgecolor=edge, linewidth=0.5, alpha=0.6, label=LEGEND[kind]))
    legend = drawing.figure.legend(handles=handles, loc="lower left", bbox_to_anchor=(8 / WIDTH, 4 / height),
                                   ncols=2, frameon=False, fontsize=11, handlelength=2.2, columnspacing=1.5)
    legend.set_gid("legend")


def default_start(now: Optional[datetime] = None) -> datetime:
    """The current hour, UTC."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return now.replace(minute=0, second=0, microsecond=0)
