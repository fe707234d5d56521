"""Where stack config comes from: the `kns:` values Pulumi delivers, and the stack file.

The engine hands a program each config key as text (structured values as JSON with sorted
keys) and says which keys are secret. `kns_config` turns that into the raw values the
loader validates; `authored_config` reads Pulumi.<stack>.yaml as written, whose key order
`restore_order` puts back (the order of profile rules matters). No Pulumi import: the
composition root reads the engine's values and passes them in, so the offline `kns`
commands share every step here.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Optional, Sequence

from . import yamldoc
from .errors import ConfigError, Problem, parent_cut

NAMESPACE = "kns"
OBJECT_KEYS = ("cluster", "packingScheduler", "knsScheduler", "profiles", "credentials", "queueing", "state",
               "network")
LIST_KEYS = ("nodePools", "jobs", "schedules", "jobFiles", "queues", "priorities", "workers", "reservations",
             "budgets")
STRING_KEYS = ("keycloakClientSecret",)
SECRET_KEYS = ("keycloakClientSecret", "credentials")
KNOWN_KEYS = OBJECT_KEYS + LIST_KEYS + STRING_KEYS
# The sections that are entries (one each, held by the entry stacks, docs/entry-stacks.md).
ENTRY_KEYS = ("jobs", "schedules", "jobFiles")
# Every other section is shared: every entry may depend on it, so `./kns changed` reports it,
# CI applies the whole stack for it and `./kns up ENTRY` refuses after it changed (docs/cli.md,
# "./kns changed"); in the order they are reported. Together with ENTRY_KEYS: KNOWN_KEYS.
SHARED_KEYS = ("cluster", "nodePools", "packingScheduler", "knsScheduler", "queueing", "queues", "priorities",
               "profiles", "credentials", "keycloakClientSecret", "workers", "reservations", "budgets", "network", "state")


def decode_value(key: str, value: Any) -> Any:
    """A `kns:` value as the engine delivers it (text) decoded as the program reads it:
    JSON, except for the string keys and text that is not JSON. An empty value (a key
    left with nothing after it, every entry commented out) is unset."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if key not in STRING_KEYS and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
    return value


def kns_config(values: Mapping[str, Any], secret: Collection[str]) -> tuple[dict[str, Any], frozenset[str]]:
    """The `kns:` keys of `values` (full keys, as the engine delivers them) without the
    prefix and decoded, and those of them that are in `secret`."""
    raw: dict[str, Any] = {}
    secret_keys: set[str] = set()
    for full_key in sorted(values):
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            continue
        raw[key] = decode_value(key, values[full_key])
        if full_key in secret:
            secret_keys.add(key)
    return raw, frozenset(secret_keys)


def restore_order(delivered: Any, authored: Any) -> Any:
    """`delivered` with its mappings in the key order of `authored` where both hold the same
    keys. The engine passes structured config as JSON with sorted keys, but order means
    something here: profile rules apply top to bottom, and env entries may refer to
    earlier ones."""
    if isinstance(delivered, dict) and isinstance(authored, dict):
        keys = list(authored) if set(authored) == set(delivered) else list(delivered)
        return {k: restore_order(delivered[k], authored.get(k)) for k in keys}
    if isinstance(delivered, list) and isinstance(authored, list) and len(delivered) == len(authored):
        return [restore_order(d, a) for d, a in zip(delivered, authored)]
    return delivered


@dataclass(frozen=True)
class StackFile:
    """Pulumi.<stack>.yaml as written: its `config:` mapping (full keys) and the problems
    in the text itself (a key given twice, a YAML 1.1 surprise), each at its config path.
    `config` is None when there is no such file."""

    config: Optional[dict[str, Any]]
    problems: tuple[Problem, ...] = field(default=())
    # The file's name and the line and column of each `kns:` config path it spells out (an
    # entry both by name and by index), for problems to say where they are.
    name: str = ""
    marks: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def locator(self, delivered: Mapping[str, Any]) -> Callable[[Problem], Problem]:
        """`locate` for the config the program got (`delivered`: keys without `kns:`): only
        a key whose value is the one written here has a place in this file (config given
        another way, a value sealed here, has none)."""
        authored = self.authored or {}
        same = frozenset(f"{NAMESPACE}:{k}" for k, v in delivered.items() if k in authored and authored[k] == v)
        return lambda problem: self.locate(problem, same)

    def locate(self, problem: Problem, keys: Optional[Collection[str]] = None) -> Problem:
        """`problem` at the line and column of the deepest part of its path the file spells
        out; as it is when the path is not the file's (a job file's, a key left out), or
        not under one of `keys` when they are given."""
        if problem.file is not None or problem.line is not None or not self.marks:
            return problem
        path = problem.path
        if keys is not None and not any(path == k or path.startswith((k + ".", k + "[")) for k in keys):
            return problem
        while path:
            mark = self.marks.get(path)
            if mark is not None:
                return replace(problem, file=self.name, line=mark[0], column=mark[1])
            cut = parent_cut(path)
            path = path[:cut] if cut > path.find(":") else ""
        return problem

    @property
    def authored(self) -> Optional[dict[str, Any]]:
        """The `kns:` keys as written, without the prefix (for `restore_order`)."""
        if self.config is None:
            return None
        return {k.partition(":")[2]: v for k, v in self.config.items() if k.startswith(f"{NAMESPACE}:")}


def read_stack_file(project_dir: Path, stack: str) -> StackFile:
    """Pulumi.<stack>.yaml read strictly (config/yamldoc.py); a missing file is an empty
    `StackFile`, an unreadable one a `ConfigError` whose message never quotes it."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return StackFile(None)
    except OSError as exc:
        raise ConfigError([Problem(path.name, f"cannot be read ({exc.strerror or 'error'})")]) from None
    marks: dict[tuple[Any, ...], tuple[int, int]] = {}
    try:
        document, found = yamldoc.load(data, marks=marks)
    except yamldoc.YamlError as exc:
        raise ConfigError([Problem(path.name, str(exc))]) from None
    document = {} if document is None else document
    if not isinstance(document, dict) or not isinstance(document.get("config") or {}, dict):
        raise ConfigError([Problem(path.name, "must be a mapping with a config: mapping")])
    config = document.get("config") or {}
    places: dict[str, tuple[int, int]] = {}
    for steps, mark in marks.items():
        if steps[:1] == ("config",) and len(steps) > 1 and str(steps[1]).startswith(f"{NAMESPACE}:"):
            places.setdefault(render_path("", steps[1:], config), mark)
            places.setdefault(render_path("", steps[1:], None), mark)
    stack_file = StackFile(config, (), path.name, places)
    problems = []
    for problem in found:
        if problem.steps[:1] != ("config",) or len(problem.steps) == 1:
            problems.append(Problem(f"{path.name}:{'.'.join(map(str, problem.steps))}", problem.message))
        elif str(problem.steps[1]).startswith(f"{NAMESPACE}:"):
            found_at = Problem(render_path("", problem.steps[1:], config), problem.message)
            problems.append(replace(found_at, file=path.name, line=problem.mark[0], column=problem.mark[1])
                            if problem.mark else stack_file.locate(found_at))
    return replace(stack_file, problems=tuple(problems))


# How close a key must be to `name` to be taken for it (`image` is not: 0.67).
MISSPELT_NAME = 0.75


def item_name(item: Any) -> Any:
    """An item's `name`; under a misspelt `name` key, that key's text: the item's problems
    and what refers to it still find it by its name."""
    if not isinstance(item, dict):
        return None
    if "name" in item:
        return item["name"]
    spelt = [value for key, value in item.items() if isinstance(key, str) and isinstance(value, str)
             and difflib.SequenceMatcher(None, key.lower(), "name").ratio() >= MISSPELT_NAME]
    return spelt[0] if len(spelt) == 1 else None


def render_path(base: str, steps: Sequence[Any], document: Any) -> str:
    """The config path of `steps` (keys and indices from the top of `document`) in the
    project's spelling: entries by name (`kns:jobs[train]`), profile rules in brackets
    (`kns:profiles[@ml]`), list items below an entry by index, keys after a dot."""
    out, node = base, document
    for depth, step in enumerate(steps):
        child = None
        if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            child = node[step]
        elif isinstance(node, dict):
            child = node.get(step)
        if isinstance(step, int):
            name = item_name(child) if depth == 1 else None
            out += f"[{name}]" if isinstance(name, str) and name else f"[{step}]"
        elif depth == 1 and str(steps[0]).rpartition(":")[2] == "profiles":
            out += f"[{step}]"
        else:
            out += f".{step}" if out and not out.endswith(":") else str(step)
        node = child
    return out
