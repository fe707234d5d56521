"""Where stack config comes from: the `kns:` values Pulumi delivers, and the stack file.

The engine hands a program each config key as text (structured values as JSON with sorted
keys) and says which keys are secret. `kns_config` turns that into the raw values the
loader validates; `authored_config` reads Pulumi.<stack>.yaml as written, whose key order
`restore_order` puts back (the order of profile rules matters). No Pulumi import: the
composition root reads the engine's values and passes them in, so the offline `kns`
commands share every step here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping, Optional, Sequence

from . import yamldoc
from .errors import ConfigError, Problem

NAMESPACE = "kns"
OBJECT_KEYS = ("cluster", "packingScheduler", "knsScheduler", "profiles", "credentials", "queueing", "state")
LIST_KEYS = ("nodePools", "jobs", "schedules", "jobFiles", "queues", "priorities", "workers", "reservations",
             "budgets")
STRING_KEYS = ("keycloakClientSecret",)
SECRET_KEYS = ("keycloakClientSecret", "credentials")
KNOWN_KEYS = OBJECT_KEYS + LIST_KEYS + STRING_KEYS


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
    try:
        document, found = yamldoc.load(data)
    except yamldoc.YamlError as exc:
        raise ConfigError([Problem(path.name, str(exc))]) from None
    document = {} if document is None else document
    if not isinstance(document, dict) or not isinstance(document.get("config") or {}, dict):
        raise ConfigError([Problem(path.name, "must be a mapping with a config: mapping")])
    config = document.get("config") or {}
    problems = []
    for problem in found:
        if problem.steps[:1] != ("config",) or len(problem.steps) == 1:
            problems.append(Problem(f"{path.name}:{'.'.join(map(str, problem.steps))}", problem.message))
        elif str(problem.steps[1]).startswith(f"{NAMESPACE}:"):
            problems.append(Problem(render_path("", problem.steps[1:], config), problem.message))
    return StackFile(config, tuple(problems))


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
            name = child.get("name") if depth == 1 and isinstance(child, dict) else None
            out += f"[{name}]" if isinstance(name, str) and name else f"[{step}]"
        elif depth == 1 and str(steps[0]).rpartition(":")[2] == "profiles":
            out += f"[{step}]"
        else:
            out += f".{step}" if out and not out.endswith(":") else str(step)
        node = child
    return out
