"""`./kns up ENTRY...`: apply the named entries only, so the cost follows the change.

1. The whole stack is checked offline, as `./kns validate` checks it: nothing runs on bad
   input. That check includes the policy pack's rules, with the pack's config
   (KNS_POLICY_CONFIG), on every object the stack plans (plan/guardrails.py
   `config_problems`): it is where a targeted run enforces them (4).
2. The stack's state is read (`pulumi stack export`): what the last `up` recorded of the
   shared sections (`platformDigest`, config/fingerprint.py), and the entries it holds.
   Each name must be an entry of the config (added or changed) or one the state holds and
   the config no longer has (removed).
3. Anything shared that differs from the record (the cluster, node pools, schedulers,
   queueing, queues, priorities, profiles, credentials, the program's own files) or no
   record at all (a stack never fully applied): refused, naming the sections, with the
   full `make up` to run instead. Nothing is applied.
4. `pulumi up --skip-preview --target <URN>... --target-dependents`, through the runner of
   `make up` (kns_cli/engine_run.py: the per-entry summary, the engine's output in
   build/logs/). The targets are the named entries' URNs as the program registers them
   (plan/targeting.py `entry_urns`) and, for a removed entry, every URN the state holds
   under its component: the engine deletes those (`GenerateDeletes`). The program
   registers the platform and the named entries only (`ONLY_ENTRIES` with the run's token,
   config/invocation.py); every other entry stays in state and on the cluster untouched
   (plan/targeting.py says why).

Why neither a preview phase nor the policy pack in the engine: both cost what the state
holds, not what the run changes. Each phase of `pulumi up` carries every resource of the
state (the other entries' as untargeted `same` steps), and with any policy pack loaded the
engine hands all of them to it once the steps are done (AnalyzeStack), even when no stack
policy is left to run: at 1,000 entries the preview doubled a targeted run and the pack
added half again (docs/benchmarks.md, section 13). What they would stop is stopped before
the engine starts. The rules that judge one object (limits, registries, GPU tolerations)
and the privileged-pod rule judge, in step 1, the very Job or CronJob and Namespace the
program registers for each entry (`plan.objects`, `namespace_labels`). The cluster-admin
rule judges bindings: an entry's only binding is its component's, to the entry's own
Role, and anything else the rule reads (the KNS scheduler's account, the program's
files) is shared: a change to it is refused in step 3. `make up` runs the pack in the
engine, as always.

`make up` stays the full apply: it converges everything, records the shared digests
again, and is what CI runs when `./kns changed` reports a shared change (docs/ci.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from config import fingerprint
from config.errors import closest
from config.invocation import message_arguments, new_token
from config.loader import PlatformConfig
from config.source import read_stack_file
from plan.inventory import ENTRY_TYPES
from plan.model import WorkloadPlan
from plan.targeting import entry_urns

from . import engine_run
from . import preview as preview_module
from .stack import UsageError

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
# The exit status of a refusal: what CI reads to run the full `make up` instead.
REFUSED = 3


class UpRefused(Exception):
    """Something shared changed since the last full `up`: the message (exit `REFUSED`)."""


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
    done = subprocess.run(["pulumi", "stack", "export", "--stack", stack, "--non-interactive"], cwd=project_dir,
                          env=dict(env), capture_output=True, text=True)
    if done.returncode != 0:
        raise preview_module.PreviewFailed(f"cannot read the state of stack {stack}: {done.stderr.strip()[-2000:]}")
    try:
        return read_state(json.loads(done.stdout))
    except (json.JSONDecodeError, AttributeError) as exc:
        raise preview_module.PreviewFailed(f"cannot read the state of stack {stack}: {exc}") from None


def split_names(plans: Sequence[WorkloadPlan], state: StackState, names: Sequence[str],
                stack: str) -> tuple[list[str], list[str]]:
    """The names the config has (to apply) and those only the state has (to destroy); a
    usage error naming every other one, with the closest known name."""
    configured = [plan.entry.name for plan in plans]
    present = [name for name in names if name in configured]
    removed = [name for name in names if name not in configured and name in state.entries]
    unknown = [name for name in names if name not in configured and name not in state.entries]
    if unknown:
        known = sorted(set(configured) | set(state.entries))
        lines = []
        for name in unknown:
            close = closest(name, known)
            lines.append(f'no entry named "{name}" in the config or the state of stack {stack}'
                         + (f'; did you mean "{close}"?' if close else ""))
        raise UsageError("; ".join(lines))
    return present, removed


def refusal(stack: str, changed: Sequence[str], recorded: Any) -> str:
    """Why a targeted `up` is refused, and what to run instead."""
    if not isinstance(recorded, Mapping):
        why = ("the stack has no record of a full `up` by this version of the program (no platformDigest output), "
               "so what the entries share cannot be compared")
    else:
        shown = [f"{name} (the program's files)" if name == fingerprint.PROGRAM else name for name in changed]
        why = (f"shared {'section' if len(shown) == 1 else 'sections'} changed since the last full `up`: "
               f"{', '.join(shown)}; every entry depends on {'it' if len(shown) == 1 else 'them'}")
    command = "make up" if stack == preview_module.DEV_STACK else f"KNS_STACK={stack} make up"
    return (f"kns up: refused, nothing was applied: {why}. Apply the whole stack with `{command}` "
            f"(then `./kns up ENTRY...` applies single entries again)")


def up_arguments(stack: str, urns: Sequence[str], token: str) -> list[str]:
    """The pulumi command of the targeted update (engine_run adds `--event-log`); no policy
    pack: step 1 enforced its rules (the module's docstring)."""
    args = ["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--diff", "--stack", stack]
    args += message_arguments(token)
    for urn in urns:
        args += ["--target", urn]
    return args + ["--target-dependents"]


def run_up(project_dir: Path, cfg: PlatformConfig, plans: list[WorkloadPlan], stack: str, names: Sequence[str],
           environ: Mapping[str, str], *, verbose: bool = False, out=None, err=None) -> int:
    """Apply the named entries; returns the exit status (the engine's, or 1 when refused)."""
    out, err = out or sys.stdout, err or sys.stderr
    project_dir = Path(project_dir).resolve()
    token = new_token()
    bin_dir = preview_module.toolchain()
    probe = preview_module.engine_environment(project_dir, stack, (), bin_dir, environ)
    state = export_state(project_dir, stack, probe)
    present, removed = split_names(plans, state, names, stack)
    current = fingerprint.platform_digest(read_stack_file(project_dir, stack).config or {}, project_dir)
    changed = fingerprint.differences(state.digest, current)
    if changed:
        raise UpRefused(refusal(stack, changed, state.digest))
    env = preview_module.engine_environment(project_dir, stack, present, bin_dir, environ, token, narrowed=True)
    urns = entry_urns(cfg, plans, present, stack, preview_module.project_name(project_dir))
    # What the state holds under each named entry: a removed entry's objects, and those a
    # changed one no longer has (its kind changed, a primer CronJob fewer), are deleted.
    planned = set(urns)
    urns += [urn for name in names for urn in state.entries.get(name, []) if urn not in planned]
    what = ", ".join([*present, *(f"{name} (removed)" for name in removed)])
    err.write(f"kns up: stack {stack}, {len(names)} {'entry' if len(names) == 1 else 'entries'} ({what}): "
              f"pulumi up --skip-preview --target ({len(urns)} URNs) --target-dependents\n")
    err.flush()
    command = up_arguments(stack, urns, token)
    others = len({plan.entry.name for plan in plans} | set(state.entries)) - len(set(present) | set(removed))
    status = engine_run.run("up", stack, command, verbose=verbose, log_dir=project_dir / "build" / "logs",
                            out=out, err=err, tty=err.isatty(), env=env, cwd=project_dir)
    out.write(f"Not applied (--target): the platform and the {others} other "
              f"{'entry' if others == 1 else 'entries'} stay as the stack has them; `make up` applies the whole "
              f"stack.\n")
    return status
