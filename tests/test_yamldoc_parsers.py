"""config/yamldoc.py reads user YAML with libyaml's parser (PyYAML's C loader, a tenth of
the pure-Python parser's time on a 1,000-entry job file): what it reads, the problems it
finds, the lines it records and the errors it raises must be the pure-Python parser's."""

from __future__ import annotations

import re

import pytest
import yaml

from config import yamldoc
from kns_testing.program import ROOT

TRICKY = [
    "a: NO\nb: 0755\nc: yes\nd: 12:30\ne: 2026-01-01\nf: 1e3\ng: .5\nh: ~\ni: null\nj: on\n",
    "'quoted': 'NO'\n\"double\": \"0755\"\nblock: |\n  line one\n  NO\nfolded: >\n  a\n  b\n",
    "jobs:\n  - name: a\n  - name: b\njobs:\n  - name: c\n",
    "base: &b {cpu: 1, memory: 2}\nuse:\n  <<: *b\n  cpu: 2\nalias: *b\n",
    "? [complex, key]\n: value\n",
    "yes: 1\n1: one\n0x1F: hex\n-7: neg\nnull: nothing\n",
    "flow: {a: [1, 2, {b: c}], d: 'e'}\nlist: [NO, 'NO', \"NO\"]\n",
    "unicode: \"caf\u00e9 \u2713\"\nplain: caf\u00e9\n# a comment\nempty:\n",
    "",
    "# only a comment\n",
    "---\na: 1\n...\n",
    "a: 1\n---\nb: 2\n",
    "a:\n\tb: 1\n",
    "a: [1, 2\n",
    "a: 'unterminated\n",
    "key: value: more\n",
    "- a\nb: c\n",
    "[" * 70 + "]" * 70 + "\n",
    "a: !!str 123\nb: !!int '7'\nc: !custom x\n",
]


def corpus() -> list[tuple[str, str]]:
    """The repository's YAML files and the docs' YAML examples (user config), and TRICKY."""
    files = sorted(path for pattern in ("*.yaml", "*.yml") for path in ROOT.rglob(pattern)
                   if not {".venv", "build", ".git", "node_modules"} & set(path.relative_to(ROOT).parts))
    documents = [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")) for path in files]
    for page in sorted((ROOT / "docs").glob("*.md")):
        for i, block in enumerate(re.findall(r"^```yaml\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S)):
            documents.append((f"{page.name} example {i}", block))
    return documents + [(f"tricky {i}", text) for i, text in enumerate(TRICKY)]


def read(monkeypatch, loader, text: str, secret: bool):
    monkeypatch.setattr(yamldoc, "_LOADER", loader)
    lines: dict = {}
    try:
        value, problems = yamldoc.load(text, secret=secret, lines=lines)
    except yamldoc.YamlError as exc:
        return ("error", str(exc))
    return (value, problems, lines)


def test_the_fast_parser_is_the_one_in_use():
    assert yaml.__with_libyaml__, "PyYAML without libyaml: job files are read 10 times slower"
    assert yamldoc._LOADER is yaml.CSafeLoader


@pytest.mark.parametrize("secret", [False, True])
def test_both_parsers_read_every_document_alike(monkeypatch, secret):
    documents = corpus()
    assert len(documents) > len(TRICKY) + 50, "the repository's YAML files and examples were not found"
    differ = []
    for name, text in documents:
        pure = read(monkeypatch, yaml.SafeLoader, text, secret)
        fast = read(monkeypatch, yaml.CSafeLoader, text, secret)
        if pure != fast:
            differ.append((name, pure, fast))
    assert not differ, "\n".join(f"{name}:\n  pure: {pure}\n  fast: {fast}" for name, pure, fast in differ)
