"""Reading user YAML (job files, the stack file) without its silent surprises.

PyYAML reads YAML 1.1, the engine reads the stack file as YAML 1.2, and both quietly
change what a person meant: a second `jobs:` key replaces the first, `NO` becomes false,
`0755` becomes 493 and `12:30` becomes 750. Each of those is a problem here, with the
place it is at, and the document is never echoed into the message (a job file may hold
credentials). See docs/validation.md, "YAML".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Union

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_DEPTH = 64
"""Deeper than any config this program reads; a bound keeps a hostile file from
exhausting the parser's recursion."""

Step = Union[str, int]

# libyaml's parser when PyYAML has it (its wheels do): the same events and nodes, with the
# same resolver, at about a tenth of the pure-Python parser's time. A 1,000-entry job file
# is read by every program run (docs/benchmarks.md, section 14).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Plain scalars whose meaning every YAML version agrees on; any other plain scalar that a
# YAML 1.1 reader turns into a boolean, number or date is ambiguous.
_CANONICAL = {
    "tag:yaml.org,2002:bool": re.compile(r"^(true|false|True|False|TRUE|FALSE)$"),
    "tag:yaml.org,2002:int": re.compile(r"^-?(0|[1-9][0-9]*)$"),
    "tag:yaml.org,2002:float": re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$"),
}
# Integers of YAML 1.2 (the engine's reader of the stack file) that YAML 1.1 reads as text.
_YAML12_INT = re.compile(r"^0o[0-7]+$")
_RESOLVED = {
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:timestamp": "a date",
}


@dataclass(frozen=True)
class YamlProblem:
    """A problem at `steps` inside the document (keys and list indices from its root)."""

    steps: tuple[Step, ...]
    message: str
    # The mapping at `steps` lost keys in the reading (a merge key, a key that is not a
    # plain value): what it then lacks follows from this problem.
    dropped: bool = False
    # About a scalar kept as its text: what checks would say of that text depends on the
    # reader, so this problem is all that is said of the value.
    value: bool = False
    # Where the problem is when not at the first use of `steps` (a key given twice: the
    # second), as (line, column).
    mark: Optional[tuple[int, int]] = None


class YamlError(ValueError):
    """The text cannot be read at all; the message says why, never what it contains."""


def load(data: Union[bytes, str], *, secret: bool = False,
         lines: Optional[dict[tuple[Step, ...], int]] = None,
         marks: Optional[dict[tuple[Step, ...], tuple[int, int]]] = None) -> tuple[Any, list[YamlProblem]]:
    """The document's value and every problem in it. Raises `YamlError` when it cannot be
    read (not UTF-8, not YAML, nested beyond `MAX_DEPTH`, more than one document).
    `secret`: the text holds credentials, so an error names only the line and column, not
    even the character the parser stumbled on. `lines`, when given, gets the line of each
    key and list item, by its steps from the root; `marks` its line and column."""
    text = _text(data)
    try:
        root = _compose(text, secret, _LOADER)
    except YamlError:
        if _LOADER is yaml.SafeLoader:
            raise
        # Read again by the pure-Python parser, whose wording of the problem is the one the
        # docs show (libyaml's differs); only a document that cannot be read pays for it.
        root = _compose(text, secret, yaml.SafeLoader)
    if root is None:
        return None, []
    problems: list[YamlProblem] = []
    value = _build(root, (), problems, {} if lines is None else lines, {} if marks is None else marks)
    return value, problems


def _compose(text: str, secret: bool, loader: type) -> Optional[Node]:
    _check_depth(text, secret, loader)
    try:
        return yaml.compose(text, Loader=loader)
    except yaml.composer.ComposerError as exc:
        raise YamlError(_position("holds more than one document", exc, secret)) from None
    except yaml.YAMLError as exc:
        raise YamlError(_position("is not valid YAML", exc, secret)) from None


def _text(data: Union[bytes, str]) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise YamlError(f"is not UTF-8 text (invalid byte at line {line}); save it as UTF-8") from None


def _position(what: str, exc: yaml.YAMLError, secret: bool) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    reason = None if secret else getattr(exc, "problem", None)
    return f"{what}{where}" + (f": {reason}" if reason else "")


def _check_depth(text: str, secret: bool, loader: type) -> None:
    """The parser streams events without recursing; the composer recurses, so the nesting
    is measured on the events first."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    line = event.start_mark.line + 1
                    raise YamlError(f"is nested more than {MAX_DEPTH} levels deep (at line {line})")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as exc:
        raise YamlError(_position("is not valid YAML", exc, secret)) from None


_constructor = yaml.SafeLoader("")


def _build(node: Node, steps: tuple[Step, ...], problems: list[YamlProblem],
           at: dict[tuple[Step, ...], int], marks: dict[tuple[Step, ...], tuple[int, int]]) -> Any:
    if isinstance(node, MappingNode):
        out: dict[Any, Any] = {}
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                problems.append(YamlProblem(steps, "uses a merge key (<<); write the keys out", dropped=True))
                continue
            if not isinstance(key_node, ScalarNode):
                problems.append(YamlProblem(steps, "has a key that is not a plain value", dropped=True))
                continue
            key = _key(key_node, steps, problems)
            line = key_node.start_mark.line + 1
            if key in lines:
                problems.append(YamlProblem(
                    (*steps, key),
                    f"is given twice (lines {lines[key]} and {line}); YAML would keep only the last",
                    mark=(line, key_node.start_mark.column + 1),
                ))
                continue
            lines[key] = line
            at[(*steps, key)] = line
            marks[(*steps, key)] = (line, key_node.start_mark.column + 1)
            out[key] = _build(value_node, (*steps, key), problems, at, marks)
        return out
    if isinstance(node, SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            at[(*steps, i)] = item.start_mark.line + 1
            marks[(*steps, i)] = (item.start_mark.line + 1, item.start_mark.column + 1)
            items.append(_build(item, (*steps, i), problems, at, marks))
        return items
    if _plain(node) and _reading(node) in _RESOLVED and not _canonical(node):
        problems.append(YamlProblem(steps, _ambiguous(_reading(node)), value=True))
        return node.value
    try:
        return _constructor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError):
        # An unknown tag (`!vault ...`) or a value its tag refuses (`!!float 'abc'`); the
        # constructor's message would quote the line, which may hold a credential.
        problems.append(YamlProblem(steps, "has a YAML tag (`!...`) whose value cannot be read here; remove the tag",
                                    value=True))
        return node.value


def _key(node: ScalarNode, steps: tuple[Step, ...], problems: list[YamlProblem]) -> Any:
    """Mapping keys are names here, so a key is text: a plain number is taken as its digits
    (a numeric user name is a uid), an ambiguous word must be quoted."""
    if _plain(node) and node.tag in _RESOLVED and not (
        node.tag == "tag:yaml.org,2002:int" and _canonical(node)
    ):
        problems.append(YamlProblem((*steps, node.value), f'"{node.value}" as a key is read as '
                                    f"{_RESOLVED[node.tag]} by some YAML readers; quote this key"))
    if node.tag == "tag:yaml.org,2002:null":
        return ""
    return node.value


def _reading(node: ScalarNode) -> str:
    """The tag some YAML reader gives the scalar: YAML 1.1's, or 1.2's where 1.1 reads text."""
    if node.tag == "tag:yaml.org,2002:str" and _YAML12_INT.match(node.value):
        return "tag:yaml.org,2002:int"
    return node.tag


def number_like(text: str) -> bool:
    """Whether `text`, written plain, is a number to some YAML reader but not to every one
    (`0o4`, `0x1f`, `0755`, `1_000`, `12:30`): what a number field given such text was
    probably meant to hold."""
    node = ScalarNode(_constructor.resolve(ScalarNode, text, (True, False)), text)
    return _reading(node) in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and not _canonical(node)


def _plain(node: ScalarNode) -> bool:
    """Unquoted (libyaml's parser says '' where PyYAML's says None)."""
    return not node.style


def _canonical(node: ScalarNode) -> bool:
    pattern = _CANONICAL.get(node.tag)
    return bool(pattern and pattern.match(node.value))


def _ambiguous(tag: str) -> str:
    """Said without the value: the reader cannot know whether it is a secret (a token in a
    job file's env, a client secret), and a problem line ends up in CI logs."""
    head = f"is read as {_RESOLVED[tag]} by some YAML readers and as text by others; quote the value for the text"
    if tag.endswith(":bool"):
        return head + ", or write true or false"
    if tag.endswith((":int", ":float")):
        return head + ", or write the number in plain decimal digits"
    return head
