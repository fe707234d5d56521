"""Reading the SVG charts `./kns` draws: elements by id (matplotlib writes an artist's gid as
its id), their tooltips and where they lie across the plot."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime

from kns_cli import timeline


SVG = "{http://www.w3.org/2000/svg}"


def parse_svg(text: str) -> ET.Element:
    return ET.fromstring(text.encode())


def svg_ids(text: str) -> dict[str, ET.Element]:
    """Every element of the SVG with an id (matplotlib writes an artist's gid as its id),
    in document order; an id twice is a failure."""
    found = [e for e in parse_svg(text).iter() if e.get("id") is not None]
    ids = {e.get("id"): e for e in found}
    assert len(ids) == len(found), "an id is used twice"
    return ids


def path_xs(element: ET.Element) -> list[float]:
    """The x coordinates of the points of the element's paths (SVG units), not those of
    the shapes it defines for its markers."""
    out = []
    for path in element.findall(f"{SVG}path"):
        numbers = [float(n) for n in re.findall(r"-?[0-9.]+", path.get("d"))]
        out += numbers[0::2]
    return out


def tooltip(element: ET.Element) -> str:
    return element.find(f"{SVG}title").text


def plot_x(moment: datetime, start: datetime, hours: float) -> float:
    """Where an instant of the window lies across the plot, from the layout's constants."""
    offset = (moment - start).total_seconds() / (hours * 3600)
    return timeline.PLOT_LEFT + min(max(offset, 0.0), 1.0) * timeline.PLOT_WIDTH
