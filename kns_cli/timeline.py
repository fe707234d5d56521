"""`kns timeline`: an SVG of every schedule's runs and warm-up windows in a time window.

First a row per pool with reservations (docs/reservations.md): each window a band, its
warm-up a lighter band before it. Then one row per schedule entry (config order). Each run starting in [start, end) is a marker
at its start; its warm-up (primer fire to start) is a shaded bar, cut at the left edge
when it began before the window. The axis is UTC with a tick every hour; each row notes
its schedule's own time zone. Runs and primers come from `kns_cli.runs` (the program's
`next_runs` and derived primer schedules). The output depends only on the config and
the window, so a fixed start gives the same file every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional, Sequence
from xml.sax.saxutils import escape, quoteattr

from chrono import calendar, cron
from config.loader import PlatformConfig
from plan.model import WorkloadPlan

from .runs import Run, runs_between
from .starts import StartCheck, check_starts

WIDTH = 1200
LABEL_WIDTH = 340
RIGHT = 44
PLOT_LEFT = LABEL_WIDTH
PLOT_WIDTH = WIDTH - LABEL_WIDTH - RIGHT
AXIS_Y = 104
ROWS_TOP = 114
ROW_HEIGHT = 46
BAR_HEIGHT = 22
LABEL_STEPS = (1, 2, 3, 4, 6, 12, 24)
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


@dataclass(frozen=True)
class Row:
    plan: WorkloadPlan
    runs: list[Run]
    # A prescaled schedule on a queue: which of its starts are guaranteed (docs/queueing.md).
    start: Optional[StartCheck] = None


def rows(plans: list[WorkloadPlan], start: datetime, end: datetime,
         starts: Optional[dict[str, StartCheck]] = None) -> list[Row]:
    """Every schedule entry with its runs in [start, end)."""
    return [Row(plan, runs_between(plan, start, end), (starts or {}).get(plan.entry.name))
            for plan in plans if plan.is_schedule]


class Scale:
    """Instants to x coordinates across the plot."""

    def __init__(self, start: datetime, end: datetime):
        self.start, self.end = start, end
        self.seconds = (end - start).total_seconds()

    def x(self, moment: datetime) -> float:
        offset = (moment - self.start).total_seconds() / self.seconds
        return PLOT_LEFT + min(max(offset, 0.0), 1.0) * PLOT_WIDTH


def number(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def utc_label(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _local(moment: datetime, zone: str) -> str:
    return moment.astimezone(cron.zone(zone)).strftime("%a %Y-%m-%d %H:%M %Z")


def _describe(plan: WorkloadPlan) -> str:
    entry = plan.entry
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


def _band_row(index: int, pool: str, found: list[Band], scale: Scale) -> list[str]:
    top = ROWS_TOP + index * ROW_HEIGHT
    middle = top + ROW_HEIGHT / 2
    out = [f'<g class="reservations" data-pool={quoteattr(pool)} data-windows="{len(found)}">',
           f'<rect x="0" y="{top}" width="{WIDTH}" height="{ROW_HEIGHT}" fill="#eef3fb"/>',
           f'<text x="16" y="{number(top + 19)}" font-weight="bold">pool {escape(pool)}: reservations</text>',
           f'<text x="16" y="{number(top + 35)}" font-size="11" fill="#555555">'
           f'{escape(", ".join(dict.fromkeys(b.reservation for b in found)) or "no window in this view")}</text>']
    for band in found:
        warm, left, right = scale.x(band.warm_up), scale.x(band.window.start), scale.x(band.window.end)
        y = number(middle - BAR_HEIGHT / 2)
        title = f"{band.reservation}: {utc_label(band.window.start)} to {utc_label(band.window.end)}"
        if left > warm:
            out.append(f'<rect class="reservation-warmup" data-reservation={quoteattr(band.reservation)} '
                       f'x="{number(warm)}" y="{y}" width="{number(left - warm)}" height="{BAR_HEIGHT}" '
                       f'fill="#9fb8e0" fill-opacity="0.6"><title>{escape(title)}: warm-up from '
                       f"{utc_label(band.warm_up)}</title></rect>")
        out.append(f'<rect class="reservation" data-reservation={quoteattr(band.reservation)} '
                   f'data-start="{band.window.start.isoformat()}" data-end="{band.window.end.isoformat()}" '
                   f'x="{number(left)}" y="{y}" width="{number(max(right - left, 0))}" height="{BAR_HEIGHT}" '
                   f'fill="#3b6fb6" fill-opacity="0.75"><title>{escape(title)}</title></rect>')
        if right - left > 60:
            out.append(f'<text x="{number(left + 4)}" y="{number(middle + 4)}" font-size="10" fill="#ffffff">'
                       f"{escape(band.reservation)}</text>")
    out.append("</g>")
    return out


def render(cfg: PlatformConfig, plans: list[WorkloadPlan], start: datetime, hours: float) -> str:
    """The SVG document (text) for the window of `hours` hours from `start` (aware)."""
    start = start.astimezone(timezone.utc)
    end = start + timedelta(hours=hours)
    scale = Scale(start, end)
    table = rows(plans, start, end, check_starts(cfg, plans, start, end - start))
    reserved = bands(cfg, start, end)
    rows_bottom = ROWS_TOP + max(len(table) + len(reserved), 1) * ROW_HEIGHT
    height = rows_bottom + 82
    out: list[str] = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" {FONT} font-size="12">',
        f"<title>kns timeline: stack {escape(cfg.stack)}, {utc_label(start)} to {utc_label(end)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text class="title" x="16" y="28" font-size="17" font-weight="bold">kns timeline: stack '
        f'{escape(cfg.stack)}, {utc_label(start)} to {utc_label(end)} ({number(hours)} h)</text>',
        '<text x="16" y="48" fill="#555555">Time axis in UTC, a tick every hour. One row per schedule, '
        'in its own time zone (noted under its name).</text>',
        '<text x="16" y="64" fill="#555555">A marker is a run start (its local time beside it when there is '
        'room); a shaded bar is its warm-up, from the primer to the start.</text>',
    ]
    out += _axis(scale, start, end, hours, rows_bottom)
    if not table and not reserved:
        out.append(f'<text x="{PLOT_LEFT + 8}" y="{ROWS_TOP + 28}" fill="#555555">'
                   f"no schedule entries in stack {escape(cfg.stack)}</text>")
    for index, (pool, found) in enumerate(reserved.items()):
        out += _band_row(index, pool, found, scale)
    by_reservation = {band.reservation: [] for found in reserved.values() for band in found}
    for found in reserved.values():
        for band in found:
            by_reservation[band.reservation].append(band)
    for index, row in enumerate(table, start=len(reserved)):
        out += _row(index, row, scale, by_reservation.get(row.plan.entry.reservation or "", []))
    out += _legend(height - 48)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _axis(scale: Scale, start: datetime, end: datetime, hours: float, bottom: float) -> list[str]:
    step = next((s for s in LABEL_STEPS if hours / s <= 24), 24)
    out = ['<g class="axis">',
           f'<line x1="{PLOT_LEFT}" y1="{AXIS_Y}" x2="{PLOT_LEFT + PLOT_WIDTH}" y2="{AXIS_Y}" stroke="#333333"/>']
    tick = start.replace(minute=0, second=0, microsecond=0)
    if tick < start:
        tick += timedelta(hours=1)
    while tick <= end:
        x = number(scale.x(tick))
        midnight = tick.hour == 0
        out.append(f'<line class="tick" data-time="{tick.isoformat()}" x1="{x}" y1="{AXIS_Y - 5}" x2="{x}" '
                   f'y2="{bottom}" stroke="{"#999999" if midnight else "#e3e3e3"}"/>')
        if tick.hour % step == 0:
            out.append(f'<text x="{x}" y="{AXIS_Y - 9}" text-anchor="middle" font-size="10" fill="#333333">'
                       f"{tick:%H}</text>")
        if midnight:
            out.append(f'<text x="{x}" y="{AXIS_Y - 22}" text-anchor="middle" font-size="10" '
                       f'font-weight="bold">{tick:%a %m-%d}</text>')
        tick += timedelta(hours=1)
    out.append(f'<text x="{PLOT_LEFT - 16}" y="{AXIS_Y - 9}" text-anchor="end" font-size="10" '
               f'font-weight="bold">UTC hour</text>')
    out.append("</g>")
    return out


def _row(index: int, row: Row, scale: Scale, windows: Sequence[Band] = ()) -> list[str]:
    plan = row.plan
    top = ROWS_TOP + index * ROW_HEIGHT
    middle = top + ROW_HEIGHT / 2
    name = escape(plan.entry.name)
    out = [f'<g class="row" data-entry={quoteattr(plan.entry.name)} data-time-zone={quoteattr(plan.entry.time_zone)} '
           f'data-runs="{len(row.runs)}">']
    if index % 2 == 0:
        out.append(f'<rect x="0" y="{top}" width="{WIDTH}" height="{ROW_HEIGHT}" fill="#f5f7fa"/>')
    for band in windows:  # its reservation's windows under its runs
        left, right = scale.x(band.warm_up), scale.x(band.window.end)
        out.append(f'<rect class="row-reservation" data-reservation={quoteattr(band.reservation)} '
                   f'x="{number(left)}" y="{top}" width="{number(max(right - left, 0))}" height="{ROW_HEIGHT}" '
                   f'fill="#3b6fb6" fill-opacity="0.12"/>')
    out.append(f'<text x="16" y="{number(top + 19)}" font-weight="bold">{name}</text>')
    out.append(f'<text x="16" y="{number(top + 35)}" font-size="11" fill="#555555">{escape(_describe(plan))}</text>')
    out.append(f'<line x1="{PLOT_LEFT}" y1="{number(middle)}" x2="{PLOT_LEFT + PLOT_WIDTH}" y2="{number(middle)}" '
               f'stroke="#d0d5dd" stroke-dasharray="2 3"/>')
    xs = [scale.x(run.start) for run in row.runs]
    # Local start times beside the markers, when they have room.
    labelled = (len(xs) <= 24 and all(b - a >= 64 for a, b in zip(xs, xs[1:]))
                and (not xs or xs[-1] < PLOT_LEFT + PLOT_WIDTH - 50))
    for run, x in zip(row.runs, xs):
        local = _local(run.start, plan.entry.time_zone)
        if run.primer is not None:
            left = scale.x(run.primer)
            clipped = run.primer < scale.start
            # On an autoscaled pool Karpenter adds a node for the primed pod and keeps it to the start.
            warm = plan.on_autoscaled_pool
            kind = f'class="warmup warm-capacity" data-pool={quoteattr(plan.pool.name)}' if warm else 'class="warmup"'
            fill, stroke = ("#4caf7a", "#2e7d4f") if warm else ("#f4a259", "#d9822b")
            held = f" (warm capacity held on autoscaled pool {escape(plan.pool.name)})" if warm else ""
            out.append(
                f'<rect {kind} data-primer="{run.primer.isoformat()}" data-start="{run.start.isoformat()}" '
                f'data-clipped="{"true" if clipped else "false"}" x="{number(left)}" y="{number(middle - BAR_HEIGHT / 2)}" '
                f'width="{number(x - left)}" height="{BAR_HEIGHT}" fill="{fill}" fill-opacity="0.55" '
                f'stroke="{stroke}" stroke-width="0.5">'
                f"<title>{name}: warm-up from {escape(_local(run.primer, plan.entry.time_zone))} ({utc_label(run.primer)})"
                f"{held}</title></rect>"
            )
        kind, color, dash, note = "run", "#1f5fa8", "", ""
        if row.start is not None:
            if row.start.run_guaranteed(run.start):
                kind, color, note = "run guaranteed", "#1b7f3b", ": start guaranteed"
            else:
                kind, color, dash = "run best-effort", "#c0392b", ' stroke-dasharray="3 2"'
                note = ": best effort, " + escape(row.start.late.get(run.start) or "; ".join(row.start.reasons))
        out.append(
            f'<line class="{kind}" data-start="{run.start.isoformat()}" x1="{number(x)}" y1="{number(middle - 14)}" '
            f'x2="{number(x)}" y2="{number(middle + 14)}" stroke="{color}" stroke-width="2.5"{dash}>'
            f"<title>{name}: run at {escape(local)} ({utc_label(run.start)}){note}</title></line>"
        )
        hollow = kind == "run best-effort"
        out.append(f'<circle cx="{number(x)}" cy="{number(middle)}" r="3.5" '
                   f'fill="{"#ffffff" if hollow else color}" stroke="{color}"/>')
        if labelled:
            wall = run.start.astimezone(cron.zone(plan.entry.time_zone)).strftime("%H:%M %Z")
            out.append(f'<text class="local" x="{number(x + 4)}" y="{number(middle - 6)}" font-size="9" '
                       f'fill="#1f5fa8">{escape(wall)}</text>')
    out.append("</g>")
    return out


def _legend(y: float) -> list[str]:
    x = 16  # from the left margin: the legend's widest line fits inside the picture
    return [
        '<g class="legend">',
        f'<line x1="{x}" y1="{y - 9}" x2="{x}" y2="{y + 5}" stroke="#1f5fa8" stroke-width="2.5"/>',
        f'<circle cx="{x}" cy="{y - 2}" r="3.5" fill="#1f5fa8"/>',
        f'<text x="{x + 10}" y="{y + 2}">run start</text>',
        f'<rect x="{x + 100}" y="{y - 9}" width="36" height="14" fill="#f4a259" fill-opacity="0.55" '
        f'stroke="#d9822b" stroke-width="0.5"/>',
        f'<text x="{x + 144}" y="{y + 2}">warm-up: the primer CronJob fires, the pod holds its node until the start</text>',
        f'<rect x="{x + 620}" y="{y - 9}" width="36" height="14" fill="#4caf7a" fill-opacity="0.55" '
        f'stroke="#2e7d4f" stroke-width="0.5"/>',
        f'<text x="{x + 664}" y="{y + 2}">warm capacity: Karpenter holds a node for it</text>',
        f'<line x1="{x}" y1="{y + 9}" x2="{x}" y2="{y + 23}" stroke="#1b7f3b" stroke-width="2.5"/>',
        f'<circle cx="{x}" cy="{y + 16}" r="3.5" fill="#1b7f3b" stroke="#1b7f3b"/>',
        f'<text x="{x + 10}" y="{y + 20}">queued, start guaranteed</text>',
        f'<line x1="{x + 200}" y1="{y + 9}" x2="{x + 200}" y2="{y + 23}" stroke="#c0392b" stroke-width="2.5" '
        'stroke-dasharray="3 2"/>',
        f'<circle cx="{x + 200}" cy="{y + 16}" r="3.5" fill="#ffffff" stroke="#c0392b"/>',
        f'<text x="{x + 210}" y="{y + 20}">queued, best effort: may start late (./kns explain says why)</text>',
        "</g>",
    ]


def default_start(now: Optional[datetime] = None) -> datetime:
    """The current hour, UTC."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return now.replace(minute=0, second=0, microsecond=0)
