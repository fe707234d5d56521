"""Durations the docs promise a reader (how long a build, a first `make up` or a run takes,
in minutes or hours) are measured numbers with their date: a paragraph that says one says
"measured YYYY-MM-DD" too. An undated number outlives the machine and versions it was true
for (the README said 22 minutes for a cold toolchain build; a first `make up` took 10 min
29 s)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|twenty|thirty|forty|fifty|a few)"
# A wait in minutes or hours, as a claim of what something takes: "takes about 22 minutes",
# "about 1.5 hours", "ten cold minutes", "10 min 29 s".
CLAIM = re.compile(rf"\b(?:takes?|took|about|around|roughly|over|under)\s+{NUMBER}\s*(?:cold\s+)?(?:minutes?|min|hours?)\b"
                   rf"|\b{NUMBER}\s+cold\s+(?:minutes?|hours?)\b", re.I)
DATED = re.compile(r"measured \d{4}-\d{2}-\d{2}")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def undated_claims(text: str) -> list[str]:
    return [claim.group(0) for paragraph in re.split(r"\n\s*\n", text) if not DATED.search(paragraph)
            for claim in CLAIM.finditer(paragraph)]


def test_the_rule_sees_an_undated_claim_and_accepts_a_dated_one():
    assert undated_claims("A cold build takes about 22 minutes on 2 cores.") == ["about 22 minutes"]
    assert undated_claims("It builds Kueue on first use: ten cold minutes.") == ["ten cold minutes"]
    assert undated_claims("A first `make up` took 10 min 29 s (measured 2026-11-28).") == []


def test_every_duration_the_docs_promise_is_measured_and_dated():
    found = {path.relative_to(ROOT).as_posix(): undated_claims(path.read_text(encoding="utf-8")) for path in doc_files()}
    assert {path: claims for path, claims in found.items() if claims} == {}
