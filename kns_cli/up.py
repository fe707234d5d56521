"""`./kns up ENTRY...`: apply the named entries only, so the cost follows the change.

1. The whole stack is checked offline, as `./kns validate` checks it: nothing runs on bad
   input. That check includes the policy pack's rules, with the pack's config
   (KNS_POLICY_CONFIG), on every object the stack plans (plan/guardrails.py
   `config_problems`): it is where a targeted run enforces them (4).
2. The stack's state is read (`pulumi stack export`): what the last `up` recorded of the
   shared sections (`platformDigest`, config/fingerprint.py), and the entries it holds.
   Each name must be an entry of the config (added or changed) or one the state holds and
   the config no longer has (removed). With entry stacks (plan/stacks.py,
   docs/entry-stacks.md) the record is the stack's, and the entries are read from the
   entry stacks that hold the named ones, no other.
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
   (plan/targeting.py says why). With entry stacks, one such update per entry stack
   holding a named entry: what the engine carries is that stack's state, not the whole
   stack's.

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

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from config import fingerprint
from config.errors import closest
from config.invocation import message_arguments, new_token
from config.source import NAMESPACE, read_stack_file
from plan import stacks
from plan.model import WorkloadPlan
from plan.stackplan import StackPlan
from plan.targeting import entry_urns

from . import engine_run, layout
from . import preview as preview_module
from .stack import UsageError
from .state import StackState, export_state, read_state  # noqa: F401 (read_state: what tests read states with)

# The exit status of a refusal: what CI reads to run the full `make up` instead.
REFUSED = 3


class UpRefused(Exception):
    """Something shared changed since the last full `up`: the message (exit `REFUSED`)."""


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


STATE_SECTION = f"{NAMESPACE}:state"


def refusal(stack: str, changed: Sequence[str], recorded: Any) -> str:
    """Why a targeted `up` is refused, and what to run instead."""
    if not isinstance(recorded, Mapping):
        why = ("the stack has no record of a full `up` by this version of the program (no platformDigest output), "
               "so what the entries share cannot be compared")
    else:
        shown = [f"{name} (the program's files)" if name == fingerprint.PROGRAM else name for name in changed]
        why = (f"shared {'section' if len(shown) == 1 else 'sections'} changed since the last full `up`: "
               f"{', '.join(shown)}; every entry depends on {'it' if len(shown) == 1 else 'them'}")
    # A new layout moves entries' state first: the full `up` refuses until that is done.
    first = (f"`{stacks.kns_command('restack', stack)}` (kns:state moves entries between stacks), then "
             if isinstance(recorded, Mapping) and STATE_SECTION in changed else "")
    return (f"kns up: refused, nothing was applied: {why}. Apply the whole stack with "
            f"{first}`{stacks.make_command('up', stack)}` "
            f"(then `./kns up ENTRY...` applies single entries again)")


def up_arguments(stack: str, urns: Sequence[str], token: str) -> list[str]:
    """The pulumi command of the targeted update (engine_run adds `--event-log`); no policy
    pack: step 1 enforced its rules (the module's docstring)."""
    args = ["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--diff", "--stack", stack,
            *stacks.config_arguments(stack)]
    args += message_arguments(token)
    for urn in urns:
        args += ["--target", urn]
    return args + ["--target-dependents"]


def run_up(project_dir: Path, planned: StackPlan, stack: str, names: Sequence[str],
           environ: Mapping[str, str], *, verbose: bool = False, out=None, err=None) -> int:
    """Apply the named entries; returns the exit status (the engine's, or 1 when refused).
    On a stack with entry stacks (docs/entry-stacks.md) the record of the shared sections is
    the stack's, and each entry is applied in the entry stack that holds it: one small
    state per run, whatever the number of entries."""
    out, err = out or sys.stdout, err or sys.stderr
    cfg, plans = planned.config, planned.entries
    project_dir = Path(project_dir).resolve()
    token = new_token()
    bin_dir = preview_module.toolchain()
    probe = preview_module.engine_environment(project_dir, stack, (), bin_dir, environ)
    entry_stacks = cfg.state.entry_stacks if cfg.state else None
    layout.check_placement(project_dir, stack, entry_stacks, probe)
    platform = export_state(project_dir, stack, probe)
    current = fingerprint.platform_digest(read_stack_file(project_dir, stack).config or {}, project_dir)
    changed = fingerprint.differences(platform.digest, current)
    if changed and entry_stacks is not None:
        # Before reading entry stacks a new kns:state may not have made yet.
        raise UpRefused(refusal(stack, changed, platform.digest))
    holders = stacks.group(names, stack, entry_stacks)
    states = {holder: platform if holder == stack else export_state(project_dir, holder, probe) for holder in holders}
    held = StackState(platform.digest, {name: urns for state in states.values() for name, urns in state.entries.items()})
    present, removed = split_names(plans, held, names, stack)
    if changed:
        raise UpRefused(refusal(stack, changed, platform.digest))
    project = preview_module.project_name(project_dir)
    status = 0
    for holder, here in holders.items():
        applied = [name for name in here if name in present]
        env = preview_module.engine_environment(project_dir, holder, applied, bin_dir, environ, token, narrowed=True)
        urns = entry_urns(planned, applied, holder, project)
        # What the state holds under each named entry: a removed entry's objects, and those a
        # changed one no longer has (its kind changed, a primer CronJob fewer), are deleted.
        registered = set(urns)
        urns += [urn for name in here for urn in states[holder].entries.get(name, []) if urn not in registered]
        what = ", ".join([*applied, *(f"{name} (removed)" for name in here if name in removed)])
        err.write(f"kns up: stack {holder}, {len(here)} {'entry' if len(here) == 1 else 'entries'} ({what}): "
                  f"pulumi up --skip-preview --target ({len(urns)} URNs) --target-dependents\n")
        err.flush()
        status = engine_run.run("up", holder, up_arguments(holder, urns, token), verbose=verbose,
                                log_dir=project_dir / "build" / "logs", out=out, err=err, tty=err.isatty(), env=env,
                                cwd=project_dir)
        if status != 0:
            break
    others = len({plan.entry.name for plan in plans} | set(held.entries)) - len(set(present) | set(removed))
    out.write(f"Not applied (--target): the platform and the {others} other "
              f"{'entry' if others == 1 else 'entries'} stay as the stack has them; "
              f"`{stacks.make_command('up', stack)}` applies the whole stack.\n")
    return status
