"""Collecting config problems and rendering them as one user-facing message.

Every problem carries the config path it is about (`kns:jobs[train-resnet].memory`), so
a user sees all of them at once and knows where to look, without a traceback.
"""

from __future__ import annotations

import difflib
import re
import types
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Callable, Iterable, Mapping, Optional, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from . import yamldoc
from .rules import GIVEN_WITHOUT_VALUE, NUMBER_AS_TEXT

# The error type of a validator that reports several problems below its field, each with
# its own location (config/podspec.py `nested`).
NESTED = "kns_nested"
# How a key that must be given and is not is said, wherever it is found missing.
REQUIRED = "is required"


# The shortest word a part of a name suggests that name from ("dist" for "dist-train").
PART_MIN = 3


def closest(word: str, candidates: Iterable[str]) -> Optional[str]:
    """The candidate `word` is most likely a misspelling of, if any is close enough: the
    "did you mean" of every message that names an unknown key, entry, pool or stack.
    Case is ignored ("DIST" is "dist"), and a word that is part of only one candidate
    ("weekly" of "weekly-finetune") suggests it, however much longer the name is."""
    folded: dict[str, str] = {}
    for candidate in candidates:
        folded.setdefault(candidate.casefold(), candidate)
    key = word.casefold()
    close = difflib.get_close_matches(key, list(folded), n=1, cutoff=0.6)
    if close:
        return folded[close[0]]
    holding = [name for fold, name in folded.items() if key in fold] if len(key) >= PART_MIN else []
    return holding[0] if len(holding) == 1 else None


# Keys and list indexes from a checked value down to a place inside it.
Loc = tuple[Union[str, int], ...]


@dataclass(frozen=True)
class Problem:
    """One problem, the only kind every layer from config/ up reports. A check that looks
    inside a value without knowing where that value is in the config (an entry's fields, a
    pod spec, a built Job) gives `path` relative to the value, or `loc`, steps below it
    (`at`); its caller places it with `under`, so no layer translates another's problems."""

    path: str
    message: str
    # The line of the job file the path is in, shown after the file's name.
    line: Optional[int] = None
    # A stack-file problem's place: the file (Pulumi.<stack>.yaml), with `line` and this
    # column, shown first as editors read it (`Pulumi.dev.yaml:12:7: kns:jobs[x].cpu: ...`).
    file: Optional[str] = None
    column: Optional[int] = None
    loc: Loc = ()

    def under(self, base: str) -> "Problem":
        """The problem at its config path, found below the value at `base`."""
        path = f"{base}.{self.path}" if self.path else base
        return replace(self, path=join_path(path, self.loc), loc=())

    def below(self, steps: Loc) -> "Problem":
        """The problem found in the value at `steps` of what the caller checks."""
        return replace(self, loc=tuple(steps) + self.loc)

    def __str__(self) -> str:
        if self.file is not None:
            return visible(f"{self.file}:{self.line}:{self.column}: {self.path}: {self.message}")
        if self.line is None:
            return visible(f"{self.path}: {self.message}")
        file, _, rest = self.path.partition(":")
        return visible(f"{file}:{self.line}:{rest}: {self.message}")


def at(loc: Iterable[Union[str, int]], message: str) -> Problem:
    """A problem at `loc` below the value checked (placed by `Problem.under`)."""
    return Problem("", message, loc=tuple(loc))


def visible(text: str) -> str:
    """Control, format and separator characters other than the space (a zero-width space
    pasted into a name, a tab, a no-break space) written as `\\uXXXX`: a problem line must
    show what is really in the config, and two names that print alike must not read alike."""
    return "".join(ch if ch == " " or unicodedata.category(ch)[0] not in "CZ" else f"\\u{ord(ch):04x}" for ch in text)


class ConfigError(Exception):
    """Raised with every problem found; `str()` is the message shown to the user."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__(render(self.problems))


def render(problems: list[Problem]) -> str:
    count = len(problems)
    head = f"kns-platform: invalid configuration, {count} problem{'s' if count != 1 else ''}; nothing was applied:"
    return "\n".join([head, *(f"  - {p}" for p in problems)])


@dataclass
class Problems:
    """An accumulator: checks add to it, the loader raises once at the end."""

    items: list[Problem] = field(default_factory=list)
    # Config path in a job file -> its line (the loader's: `jobs/a.yaml:jobs[one].cpu` -> 6).
    lines: dict[str, int] = field(default_factory=dict)
    # Mappings the reading left incomplete: a key they lack ("is required") follows from the
    # problem that says why, so it is not a line of its own.
    partial: list[str] = field(default_factory=list)
    # Paths whose value has been said all of (a job file's ambiguous scalar): nothing more
    # is added at or below them.
    settled: set[str] = field(default_factory=set)
    # Where a stack-file path is in Pulumi.<stack>.yaml (config/source.py's StackFile.locate),
    # for the problems the planning steps add after the checks.
    place: Optional[Callable[[Problem], Problem]] = None

    def add(self, path: str, message: str, line: Optional[int] = None) -> None:
        """`line`: where in a job file the problem is, when its path alone cannot tell (an
        entry named like an earlier one has the same path)."""
        if self.settled and any(path == q or path.startswith((q + ".", q + "[")) for q in self.settled):
            return
        self.items.append(Problem(path, message, line))

    def extend(self, found: Iterable[Problem], under: Optional[str] = None) -> None:
        """Add each of `found`, placed below the config path `under` when given."""
        for problem in found:
            placed = problem if under is None else problem.under(under)
            self.add(placed.path, placed.message, placed.line)

    def settle(self, path: str, message: str, line: Optional[int] = None) -> None:
        """Add the one problem said of the value at `path`."""
        self.add(path, message, line)
        self.settled.add(path)

    def located(self, problem: Problem, lines: Optional[Mapping[str, int]] = None) -> Problem:
        """The problem with the line of the deepest part of its path a job file has (in
        `lines`, default the loader's), shown as `jobs/a.yaml:6:jobs[one].memory`; a stack
        file's `kns:` path at its line and column (`place`); a line already known is kept."""
        if problem.line is not None:
            return problem
        lines = self.lines if lines is None else lines
        path = problem.path
        while path:
            line = lines.get(path)
            if line is not None:
                return Problem(problem.path, problem.message, line)
            cut = parent_cut(path)
            path = path[:cut] if cut > path.find(":") else ""
        return problem if self.place is None else self.place(problem)

    def locate_since(self, start: int, lines: Mapping[str, int]) -> None:
        """The problems added from index `start` on located in `lines` (one entry's, when
        its path is an earlier entry's too)."""
        self.items[start:] = [self.located(p, lines) for p in self.items[start:]]

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigError([self.located(p) for p in self.items if not self._follows(p)])

    def _follows(self, problem: Problem) -> bool:
        return problem.message.startswith(REQUIRED) and any(
            problem.path == path or problem.path.startswith((path + ".", path + "[")) for path in self.partial)

    def validate(self, model: type[BaseModel], raw: Any, path: str) -> Any:
        """Validate `raw` as `model`; on failure record each error under `path`, return None."""
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            start = len(self.items)
            for error in exc.errors(include_url=False):
                if error["type"] == NESTED:
                    # several problems below the field (config/podspec.py), each at its place
                    self.extend(error["ctx"]["problems"], join_path(path, error["loc"]))
                    continue
                self.add(join_path(path, error["loc"]), describe(model, error))
            reported = {(p.path, p.message) for p in self.items}
            for problem in getattr(model, "key_problems", lambda _: [])(raw):
                placed = problem.under(path)
                if (placed.path, placed.message) not in reported:
                    self.add(placed.path, placed.message)
            self.items[start:] = _one_per_misspelling(self.items[start:])
            return None


def parent_cut(path: str) -> int:
    """Where the last step of a config path starts: its last `.` or `[` outside brackets
    (an entry's name may hold dots: `jobs[train.v2].cpu`)."""
    depth, cut = 0, -1
    for i, ch in enumerate(path):
        if ch == "]":
            depth -= 1
        elif ch == "[":
            if depth == 0:
                cut = i
            depth += 1
        elif ch == "." and depth == 0:
            cut = i
    return cut


def join_path(base: str, loc: Iterable[Any]) -> str:
    out = base
    for step in loc:
        if isinstance(step, int):
            out += f"[{step}]"
        elif ("-" in str(step) and str(step).startswith(("function-", "tagged-"))) or step == "[key]":
            continue  # pydantic's validator and dict-key markers, not config keys
        else:
            out += f".{step}"
    return out


class Unrepeated:
    """Field metadata (`Annotated[..., UNREPEATED]`): what the user writes there may be a
    secret (an env value, a command line, an override), and problem lines reach CI logs, so
    a message about the field or anything in it names the place and the shape expected,
    never the value."""


UNREPEATED = Unrepeated()


def describe(model: type[BaseModel], error: dict[str, Any]) -> str:
    return _describe(model, error, quiet=unrepeated(model, error["loc"]))


def unrepeated(model: type[BaseModel], loc: tuple[Any, ...]) -> bool:
    """Whether `loc` inside `model` is a field marked UNREPEATED, or inside one; or the
    whole object (a string where an entry belongs may hold anything)."""
    if not loc:
        return True
    current: type[BaseModel] | None = model
    for step in loc:
        if current is None:
            return False
        if isinstance(step, int):
            continue
        field_info = next((f for name, f in current.model_fields.items() if step in (name, f.alias)), None)
        if field_info is None:
            continue
        if any(isinstance(m, Unrepeated) for m in field_info.metadata):
            return True
        current = _model_in(field_info.annotation)
    return False


def kind_of(value: Any) -> str:
    """What a value is, for a message that must not repeat it ("a mapping", "a number")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


# pydantic's error types for a value that is not the number a field takes.
NUMBER_ERRORS = ("int_type", "int_parsing", "float_type", "float_parsing")


def _describe(model: type[BaseModel], error: dict[str, Any], quiet: bool = False) -> str:
    kind, msg, value = error["type"], error["msg"], error.get("input")
    if value is None and kind not in ("missing", "extra_forbidden"):
        return _without_a_value(kind, msg, error["loc"])
    if kind in NUMBER_ERRORS and isinstance(value, str) and yamldoc.number_like(value.strip()):
        return NUMBER_AS_TEXT.message if quiet else f"{_show(value)} {NUMBER_AS_TEXT.message}"
    if kind == "extra_forbidden":
        known = known_keys(model, error["loc"][:-1])
        unknown = str(error["loc"][-1])
        elsewhere = getattr(model, "key_elsewhere", None)
        where = elsewhere(unknown) if elsewhere is not None and len(error["loc"]) == 1 else None
        if where:
            return where
        close = closest(unknown, known)
        if close:
            return f'unknown key; did you mean "{close}"?'
        return f"unknown key (known keys: {', '.join(sorted(known))})"
    if kind == "missing":
        return REQUIRED
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "model_type" or kind == "dict_type":
        return f"must be a mapping, not {kind_of(value) if quiet else _show(value)}"
    if kind == "list_type":
        return f"must be a list, not {kind_of(value) if quiet else _show(value)}"
    if kind == "string_type" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return "is a number; quote it if you mean the text" if quiet else \
            f'{value} is a number; quote it ("{value}") if you mean the text'
    if kind == "string_type" and quiet:
        return f"must be a string, not {kind_of(value)}"
    return f"{'the value' if quiet else _show(value)} is invalid: {msg[0].lower()}{msg[1:]}"


def _without_a_value(kind: str, msg: str, loc: tuple[Any, ...]) -> str:
    """A key written with nothing after it, or `null`: what the key takes, or to remove it
    (pydantic's own words would say "None")."""
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        expected = "a mapping"
    elif kind == "list_type":
        expected = "a list"
    elif msg.startswith("Input should be "):
        expected = re.sub(r"^a valid ([aeiou]?)", lambda m: ("an " if m.group(1) else "a ") + m.group(1),
                          msg.removeprefix("Input should be ").partition(", got")[0])
    elif kind == "value_error":
        expected = f"a value ({msg.removeprefix('Value error, ')})"
    else:
        expected = "a value"
    return without_a_value(expected, item=not loc or isinstance(loc[-1], int))


def without_a_value(expected: str, item: bool = False) -> str:
    """The message for a key (or list item) written with nothing after it, or `null`,
    where `expected` is needed: every check says it in these words."""
    return f"{GIVEN_WITHOUT_VALUE.message}: write {expected}, or remove the {'item' if item else 'key'}"


def _show(value: Any) -> str:
    text = f'"{value}"' if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The camelCase keys accepted at `loc` inside `model` (for "did you mean")."""
    current: type[BaseModel] | None = model
    for step in loc:
        if current is None:
            return []
        if isinstance(step, int):
            continue
        field_info = next(
            (f for name, f in current.model_fields.items() if step in (name, f.alias)), None
        )
        if field_info is None:
            continue
        current = _model_in(field_info.annotation)
    if current is None:
        return []
    return [f.alias or name for name, f in current.model_fields.items()]


def _model_in(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    origin = get_origin(tp)
    if origin is Annotated:
        return _model_in(get_args(tp)[0])
    if origin in (Union, types.UnionType, list, dict):
        for arg in reversed(get_args(tp)):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


_MISSPELT = re.compile(r'unknown key; did you mean "([^"]+)"\?$')


def _one_per_misspelling(found: list[Problem]) -> list[Problem]:
    """A misspelt key is one mistake: the key it resembles is not also "required"."""
    meant = set()
    for problem in found:
        match = _MISSPELT.match(problem.message)
        if match:
            meant.add(f"{problem.path.rpartition('.')[0]}.{match.group(1)}")
    return [p for p in found if not (p.message == REQUIRED and p.path in meant)]
