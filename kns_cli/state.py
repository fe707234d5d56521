"""What `./kns` reads of a Pulumi stack's state (`pulumi stack export`): the recorded
platform digest and the entries it holds, each with the URNs of everything under it."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from config import fingerprint
from plan.identity import ENTRY_TYPES

from . import preview as preview_module

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class StackState:
    """What `./kns up` needs from the stack's state."""

    digest: Any  # the recorded `platformDigest` output, None when there is none
    entries: dict[str, list[str]]  # entry name -> URNs of its component and everything under it


def read_state(deployment: Mapping[str, Any]) -> StackState:
    """The recorded digest and each entry's URNs from `pulumi stack export`'s JSON."""
    resources = (deployment.get("deployment") or {}).get("resources") or []
    digest = None
    children: dict[str, list[str]] = {}
    roots: dict[str, str] = {}
    for res in resources:
        urn, parent = res.get("urn", ""), res.get("parent") or ""
        if res.get("type") == ROOT_STACK_TYPE:
            digest = (res.get("outputs") or {}).get(fingerprint.OUTPUT)
            continue
        children.setdefault(parent, []).append(urn)
        if res.get("type") in ENTRY_TYPES and parent.split("::")[-2:-1] == [ROOT_STACK_TYPE]:
            roots[urn.rsplit("::", 1)[-1]] = urn
    entries = {}
    for name, root in roots.items():
        found, todo = [], [root]
        while todo:
            urn = todo.pop()
            if urn not in found:
                found.append(urn)
                todo.extend(children.get(urn, []))
        entries[name] = found
    return StackState(digest, entries)


def export_state(project_dir: Path, stack: str, env: Mapping[str, str]) -> StackState:
    """The state of the stack (which must exist: a targeted `up` of a new stack has nothing
    to target against)."""
    preview_module.select_stack(project_dir, stack, env, create=False)
    return state_of(stack, exported(project_dir, stack, env))


def exported(project_dir: Path, stack: str, env: Mapping[str, str]) -> dict[str, Any]:
    """`pulumi stack export` of a stack the backend has, as JSON."""
    done = subprocess.run(["pulumi", "stack", "export", "--stack", stack, "--non-interactive"], cwd=project_dir,
                          env=dict(env), capture_output=True, text=True)
    if done.returncode != 0:
        raise preview_module.PreviewFailed(f"cannot read the state of stack {stack}: {done.stderr.strip()[-2000:]}")
    try:
        value = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise preview_module.PreviewFailed(f"cannot read the state of stack {stack}: {exc}") from None
    if not isinstance(value, dict):
        raise preview_module.PreviewFailed(f"cannot read the state of stack {stack}: not a state export")
    return value


def state_of(stack: str, export: Mapping[str, Any]) -> StackState:
    try:
        return read_state(export)
    except AttributeError as exc:
        raise preview_module.PreviewFailed(f"cannot read the state of stack {stack}: {exc}") from None
