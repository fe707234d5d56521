"""Read a stack file offline and run the program's own checks and planner on it.

The engine hands the program each `kns:` key as text (structured values as JSON with
sorted keys) and tells it which keys are secret; `offline_config` produces the same from
`Pulumi.<stack>.yaml`, then `load_stack` reads, checks and plans it with the very calls
the program makes (`config.loader.check_stack_config`, then `plan.planner.plan_checked`).

Secure values (`{secure: v1:...}`) cannot be decrypted without the passphrase: each one
becomes an opaque placeholder string and its key counts as secret, so the checks that
need only their presence (a secret key is set, as a secret; a credential set and its file
names exist) pass as they would in the program.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from chrono import clock
from config.errors import closest
from config.rules import ENTRY_STACK_NAME
from config.loader import Checked, check_stack_config
from config.platform import PlatformConfig
from config.source import LIST_KEYS, NAMESPACE, OBJECT_KEYS, StackFile, decode_value, read_stack_file
from plan import stacks
from plan.model import WorkloadPlan
from plan.planner import plan_checked
from plan.stackplan import StackPlan

ROOT = Path(__file__).resolve().parent.parent
SECRET_PLACEHOLDER = "[secret]"


class UsageError(Exception):
    """A problem with how `kns` was called (exit status 2), not with the config."""


def stack_files(project_dir: Path) -> list[str]:
    """The stack files of a project: Pulumi.<stack>.yaml, sorted."""
    return sorted(p.name for p in project_dir.glob("Pulumi.*.yaml") if p.is_file())


def stack_path(project_dir: Path, stack: str) -> Path:
    path = project_dir / f"Pulumi.{stack}.yaml"
    if path.is_file():
        return path
    if stacks.role(stack).index is not None:
        raise UsageError(f"--stack {stack} {ENTRY_STACK_NAME.message}")
    files = stack_files(project_dir)
    names = [f[len("Pulumi."):-len(".yaml")] for f in files]
    close = closest(stack, names)
    hint = f'; did you mean --stack {close}?' if close else ""
    listed = ", ".join(files) if files else "none"
    raise UsageError(f"no stack file {path.name} in {project_dir} (stack files there: {listed}){hint}")


def stack_file(project_dir: Path, stack: str) -> StackFile:
    """Pulumi.<stack>.yaml read as the program reads it (`config.source.read_stack_file`):
    a missing file is a usage error (the engine would not start either); an unreadable
    one the program's own `ConfigError`."""
    stack_path(project_dir, stack)
    return read_stack_file(project_dir, stack)


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def _unseal(value: Any, path: str) -> tuple[Any, frozenset[str]]:
    """`value` with every secure value replaced by the placeholder, and the config paths of
    those values (the engine marks a key secret when any value inside it is)."""
    if _is_secure(value):
        return SECRET_PLACEHOLDER, frozenset({path})
    if isinstance(value, dict):
        pairs = {k: _unseal(v, f"{path}.{k}") for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, frozenset().union(*(s for _, s in pairs.values()))
    if isinstance(value, list):
        items = [_unseal(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return [v for v, _ in items], frozenset().union(*(s for _, s in items))
    return value, frozenset()


def _delivered(value: Any) -> Any:
    """A stack file value as the engine hands it to the program: structured values as JSON
    with sorted keys, scalars as their text."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def offline_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str], frozenset[str]]:
    """Every `kns:` key of a stack file's config, decoded as the program decodes what the
    engine delivers (`config.source.kns_config`), the keys that are secret, and the config
    paths of the encrypted values (which only the program can read)."""
    raw: dict[str, Any] = {}
    secret: set[str] = set()
    sealed: set[str] = set()
    for full_key in sorted(config):
        namespace, _, key = str(full_key).partition(":")
        if namespace != NAMESPACE:
            continue
        value = config[full_key]
        if _is_secure(value) and key in OBJECT_KEYS + LIST_KEYS:
            raise UsageError(
                f"{full_key} is one encrypted value, which cannot be read without the passphrase; "
                f"store each of its values as its own secret (`pulumi config set --secret --path "
                f"'{full_key}.<path>' ...`) to check it offline"
            )
        plain, paths = _unseal(value, str(full_key))
        raw[key] = decode_value(key, _delivered(plain))
        if paths:
            secret.add(key)
            sealed.update(paths)
    return raw, frozenset(secret), frozenset(sealed)


def not_checked_offline(sealed: frozenset[str]) -> list[str]:
    """What `validate` leaves to the program because it is encrypted in the stack file."""
    out = ["kns:cluster.kubeconfig: encrypted, so its current context is checked against "
           "forbiddenContexts when the program runs, not offline"] if "kns:cluster.kubeconfig" in sealed else []
    return out + [f"{path}: encrypted, so its current context (against forbiddenContexts) and its server (the URL "
                  "the manager dials, unless apiServer is set) are checked when the program runs, not offline"
                  for path in sorted(sealed) if path.startswith("kns:workers[") and path.endswith("].kubeconfig")]


def load_plan(project_dir: Path, stack: str, environ: Optional[Mapping[str, str]] = None,
              now: Optional[datetime] = None) -> StackPlan:
    """The plan the program would make of this stack at `now` (default: the clock's one
    instant for the whole command), read offline. Raises `ConfigError` with the program's
    problems (its `RunError` text is `str()` of it) or `UsageError`."""
    return check_stack(project_dir, stack, environ, now)[0]


def load_stack(
    project_dir: Path, stack: str, environ: Optional[Mapping[str, str]] = None
) -> tuple[PlatformConfig, list[WorkloadPlan]]:
    """The config and the entries' plans of `load_plan`."""
    planned = load_plan(project_dir, stack, environ)
    return planned.config, planned.entries


def check_stack(
    project_dir: Path, stack: str, environ: Optional[Mapping[str, str]] = None, now: Optional[datetime] = None
) -> tuple[StackPlan, list[str]]:
    """`load_plan`, and what could not be checked offline (`not_checked_offline`)."""
    now = now or clock.now()
    checked, sealed, _ = checked_stack(project_dir, stack, environ, now)
    return plan_checked(checked, now), not_checked_offline(sealed)


class OfflineStack(NamedTuple):
    """A stack read offline and checked as the program checks it."""

    checked: Checked
    sealed: frozenset[str]  # the keys sealed (encrypted) in the stack file
    file: StackFile  # the stack file as read (its `config` as written: what digests hash)


def checked_stack(project_dir: Path, stack: str, environ: Optional[Mapping[str, str]] = None,
                  now: Optional[datetime] = None) -> OfflineStack:
    """The stack's config read offline and checked as the program checks it, at `now`
    (raises `ConfigError` or `UsageError`)."""
    project_dir = Path(project_dir).resolve()
    file = stack_file(project_dir, stack)
    raw, secret, sealed = offline_config(file.config or {})
    # As the program runs as this stack: the engine delivers this file's config, and a
    # name like an entry stack's (`<stack>.entries-<n>`) makes the program read its base's
    # file and refuse an entry stack the config does not have.
    this = stacks.role(stack)
    text = file if this.index is None else read_stack_file(project_dir, this.base)
    checked = check_stack_config(raw, text, project_dir=project_dir, stack=this.base, secret_keys=secret,
                                 environ=environ, sealed=sealed, now=now or clock.now())
    stacks.check_role(this, checked)
    return OfflineStack(checked, sealed, file)
