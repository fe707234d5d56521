"""Entry stacks (`kns:state.entryStacks`, docs/entry-stacks.md) for the commands that run
the engine: which Pulumi stacks a stack has, how each is run, where its entries are, and
`./kns restack`, which moves entries to the stacks the config says.

An entry stack is run with the stack's own config (`--config-file Pulumi.<stack>.yaml`):
the same values, secrets provider and passphrase. `pulumi stack init` writes a config file
for a new stack; an entry stack's is removed at once, so the stack's file stays the only
one. Moving entries (`pulumi state move`) never touches the cluster: the objects keep their
UIDs, and the state that records them changes stacks. The platform stack's provider is a
child of the KnsCluster component; `pulumi state move` puts a moved entry's provider at the
root of the stack it moves to, where the program of an entry stack registers it
(components/cluster.py `cluster_provider`). So entries move between entry stacks, and from
the stack into entry stacks, never back.

    python -m kns_cli.layout stacks STACK     the Pulumi stacks `make up` runs, in order
    python -m kns_cli.layout config STACK     the --config-file argument of one of them
    python -m kns_cli.layout check STACK      exit 3 and why, when entries are not where the config says
    python -m kns_cli.layout outputs STACK    the stack's outputs, merged (`make outputs`)
    python -m kns_cli.layout init STACK...    select or create each (scripts/up.sh: the entry stacks, one process)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from config.errors import ConfigError
from config.models import StateLayout
from config.rules import ENTRY_STACK_NAME, ENTRY_STACKS_UNSPLIT
from config.source import NAMESPACE, read_stack_file
from plan import stacks
from plan.outputs import merge_outputs

from . import preview as preview_module
from .stack import UsageError
from .state import StackState, exported, state_of

# The exit status of `check` when entries must move first (as `./kns up`'s refusal).
MISPLACED = 3


def state_section(project_dir: Path, base: str) -> object:
    try:
        return (read_stack_file(project_dir, base).config or {}).get(f"{NAMESPACE}:state")
    except ConfigError:
        return None


def declared_entry_stacks(project_dir: Path, base: str) -> Optional[int]:
    """`kns:state.entryStacks` as the stack file writes it, when it is a valid one; None
    otherwise. `make up` runs the stack itself first, whose program reports a bad value
    with every other problem, and applies nothing."""
    section = state_section(project_dir, base)
    try:
        return StateLayout.model_validate(section).entry_stacks if section is not None else None
    except ValueError:
        return None


def existing_stacks(project_dir: Path, base: str, env: Mapping[str, str]) -> list[str]:
    """The Pulumi stacks of the backend that belong to the stack: itself and any entry stack."""
    done = subprocess.run(["pulumi", "stack", "ls", "--json", "--non-interactive"], cwd=project_dir, env=dict(env),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise preview_module.PreviewFailed(f"cannot list the stacks of {env.get('PULUMI_BACKEND_URL')}: "
                                           f"{done.stderr.strip()[-2000:]}")
    names = [str(item.get("name", "")).rsplit("/", 1)[-1] for item in json.loads(done.stdout or "[]")]
    return [name for name in names if stacks.role(name).base == base]


@dataclass(frozen=True)
class Move:
    entry: str
    source: str
    dest: str
    root: str  # the URN of the entry's component in `source`
    already: bool = False  # `dest` holds the entry too: an interrupted move


def misplaced(states: Mapping[str, StackState], base: str, entry_stacks: Optional[int]) -> list[Move]:
    """Every entry some stack holds that the config puts in another, by destination (in
    `stacks.stacks` order) and name: the same list whatever order the states hold them in."""
    moves = []
    for stack, state in states.items():
        for entry, urns in state.entries.items():
            dest = stacks.holder(base, entry, entry_stacks)
            if dest != stack:
                moves.append(Move(entry, stack, dest, urns[0], entry in getattr(states.get(dest), "entries", {})))
    return sorted(moves, key=lambda m: (-1 if stacks.role(m.dest).index is None else stacks.role(m.dest).index,
                                        m.entry, m.source))


def read_exports(project_dir: Path, base: str, env: Mapping[str, str], entry_stacks: Optional[int],
                 width: int = 1) -> dict[str, dict[str, Any]]:
    """`pulumi stack export` of each of the stack's Pulumi stacks the backend has, `width` at
    once; none when the stack is not split and has no entry stack (nothing can be
    misplaced, and its state may be large)."""
    existing = existing_stacks(project_dir, base, env)
    if entry_stacks is None and all(stacks.role(stack).index is None for stack in existing):
        return {}
    with ThreadPoolExecutor(max_workers=max(1, width)) as pool:
        return dict(zip(existing, pool.map(lambda stack: exported(project_dir, stack, env), existing)))


def read_states(project_dir: Path, base: str, env: Mapping[str, str],
                entry_stacks: Optional[int], width: int = 1) -> dict[str, StackState]:
    """The states of the stack's Pulumi stacks (read_exports)."""
    return {stack: state_of(stack, export)
            for stack, export in read_exports(project_dir, base, env, entry_stacks, width).items()}


def check_exports(exports: Mapping[str, Mapping[str, Any]], base: str, entry_stacks: Optional[int]) -> Optional[str]:
    """Why the stack cannot be run with the states `exports` holds, or None."""
    states = {stack: state_of(stack, export) for stack, export in exports.items()}
    return problem(misplaced(states, base, entry_stacks), base, entry_stacks)


class Misplaced(Exception):
    """Entries are in another stack than the config says: the message (exit MISPLACED)."""


def check_placement(project_dir: Path, base: str, entry_stacks: Optional[int], env: Mapping[str, str]) -> None:
    """What every door that runs the engine checks first, as `make up` does: no entry is in
    another stack than the config says (raises Misplaced with what to run). An engine run
    that did not look would create the entry again in the stack the layout says, and two
    states would claim the same objects."""
    why = check_exports(read_exports(project_dir, base, env, entry_stacks), base, entry_stacks)
    if why:
        raise Misplaced(why)


def problem(moves: Sequence[Move], base: str, entry_stacks: Optional[int]) -> Optional[str]:
    """Why the stack cannot be run as it is, or None."""
    if not moves:
        return None
    twice = [m for m in moves if m.already]
    if twice:
        shown = ", ".join(f"{m.entry} ({m.source} and {m.dest})" for m in twice)
        return (f"kns: {len(twice)} {'entry is' if len(twice) == 1 else 'entries are'} in the state of two stacks, "
                f"as an interrupted `pulumi state move` leaves them: {shown}. The copy in the second one is where "
                f"the config puts it; `{stacks.kns_command('restack', base)}` removes the first from its stack's "
                f"state (the state only, nothing on the cluster); then run this again. Nothing was run.")
    back = [m for m in moves if stacks.role(m.dest).index is None]
    shown = ", ".join(f"{m.entry} ({m.source} -> {m.dest})" for m in moves[:5]) + (
        f" and {len(moves) - 5} more" if len(moves) > 5 else "")
    if back:
        return (f"kns: {len(back)} {'entry lives' if len(back) == 1 else 'entries live'} in entry stacks of {base} "
                f"({shown}), but its config sets no kns:state.entryStacks: kns:state {ENTRY_STACKS_UNSPLIT.message}. "
                f"Nothing was run.")
    command = stacks.kns_command("restack", base)
    return (f"kns: kns:state.entryStacks is {entry_stacks}, and {len(moves)} "
            f"{'entry is' if len(moves) == 1 else 'entries are'} in another stack: {shown}. Run `{command}` "
            f"(it moves them in the state; nothing on the cluster changes), then this again. Nothing was run.")


def surplus(existing: Sequence[str], base: str, entry_stacks: Optional[int]) -> list[str]:
    """The entry stacks of `existing` the layout no longer has (after `entryStacks: 5` ->
    `3`: `.entries-3`, `.entries-4`), in order."""
    wanted = set(stacks.stacks(base, entry_stacks))
    return sorted((s for s in existing if stacks.role(s).index is not None and s not in wanted),
                  key=lambda s: stacks.role(s).index)


def holds_nothing(export: Mapping[str, Any]) -> bool:
    """A state with no resource but the stack itself and its providers (nothing on a
    cluster), and no operation pending."""
    deployment = export.get("deployment") or {}
    return not deployment.get("pending_operations") and all(
        str(r.get("type", "")) == "pulumi:pulumi:Stack" or str(r.get("type", "")).startswith("pulumi:providers:")
        for r in deployment.get("resources") or [])


def remove_surplus(project_dir: Path, base: str, entry_stacks: Optional[int], env: Mapping[str, str],
                   exports: Mapping[str, Mapping[str, Any]], dry_run: bool = False, out=None) -> list[str]:
    """Remove the entry stacks the layout no longer has, once they hold nothing (their
    entries moved: `restack`); their old outputs would otherwise be merged into the
    stack's. One that still holds something is left, and said."""
    out = out or sys.stdout
    removed = []
    for stack in surplus(list(exports), base, entry_stacks):
        if not holds_nothing(exports[stack]):
            raise preview_module.PreviewFailed(
                f"entry stack {stack} is not in the layout (kns:state.entryStacks: {entry_stacks or 'unset'}) but its "
                f"state still holds resources: run `{stacks.kns_command('restack', base)}`")
        out.write(f"{'would remove' if dry_run else 'removing'} entry stack {stack}: kns:state.entryStacks is "
                  f"{entry_stacks or 'unset'}, and it holds nothing\n")
        out.flush()
        if not dry_run:
            done = subprocess.run(["pulumi", "stack", "rm", "--stack", stack, "--force", "--yes", "--non-interactive"],
                                  cwd=project_dir, env=dict(env), capture_output=True, text=True)
            if done.returncode != 0:
                raise preview_module.PreviewFailed(f"pulumi stack rm {stack} failed: {done.stderr.strip()[-2000:]}")
        removed.append(stack)
    return removed


def restack(project_dir: Path, base: str, entry_stacks: Optional[int], env: Mapping[str, str],
            dry_run: bool = False, out=None) -> list[Move]:
    """Move every misplaced entry to the stack the config puts it in (`pulumi state move`,
    one call per source and destination); the moves, made or (dry_run) to make."""
    out = out or sys.stdout
    states = read_states(project_dir, base, env, entry_stacks)
    moves = misplaced(states, base, entry_stacks)
    why = problem(moves, base, entry_stacks)
    if why and any(stacks.role(m.dest).index is None for m in moves):
        raise UsageError(why.removeprefix("kns: "))
    # An entry both states hold (an interrupted move): the copy where the config puts it
    # stays, the other is removed from its state; nothing on the cluster changes.
    for move in (m for m in moves if m.already):
        out.write(f"{'would remove' if dry_run else 'removing'} entry {move.entry} from the state of {move.source}: "
                  f"{move.dest} holds it too, where the config puts it (an interrupted move)\n")
        out.flush()
        if dry_run:
            continue
        done = subprocess.run(["pulumi", "state", "delete", "--stack", move.source, "--yes", "--target-dependents",
                               "--non-interactive", move.root], cwd=project_dir, env=dict(env),
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise preview_module.PreviewFailed(f"pulumi state delete of {move.entry} in {move.source} failed: "
                                               f"{done.stderr.strip()[-2000:]}")
    pairs: dict[tuple[str, str], list[Move]] = {}
    for move in (m for m in moves if not m.already):
        pairs.setdefault((move.source, move.dest), []).append(move)
    for (source, dest), group in pairs.items():
        out.write(f"{'would move' if dry_run else 'moving'} {len(group)} "
                  f"{'entry' if len(group) == 1 else 'entries'} from {source} to {dest}: "
                  f"{', '.join(m.entry for m in group)}\n")
        out.flush()
        if dry_run:
            continue
        preview_module.select_stack(project_dir, dest, env)
        done = subprocess.run(["pulumi", "state", "move", "--source", source, "--dest", dest, "--yes",
                               "--non-interactive", *[m.root for m in group]], cwd=project_dir, env=dict(env),
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise preview_module.PreviewFailed(f"pulumi state move from {source} to {dest} failed: "
                                               f"{done.stderr.strip()[-2000:]}")
    # The entry stacks the layout dropped, empty now (or once moved: a dry run).
    left = surplus(list(states), base, entry_stacks)  # the stacks read: every one, when any is an entry stack
    emptied = {m.source for m in moves}
    exports = {stack: ({} if dry_run and stack in emptied else exported(project_dir, stack, env)) for stack in left}
    remove_surplus(project_dir, base, entry_stacks, env, exports, dry_run, out)
    return moves


def stack_outputs(project_dir: Path, base: str, env: Mapping[str, str]) -> dict:
    """The outputs of the stack and its entry stacks, merged (plan/outputs.py)."""
    parts = []
    last: dict[str, Optional[dict[str, str]]] = {}
    existing = existing_stacks(project_dir, base, env)
    # Only against a layout the stack file says (a bad value is the program's to report).
    declared = declared_entry_stacks(project_dir, base)
    known = (project_dir / f"Pulumi.{base}.yaml").is_file() and (
        state_section(project_dir, base) is None or declared is not None)
    stale = surplus(existing, base, declared) if known else []
    if stale:  # a removed entry would still be listed among them
        print(f"kns: left out the outputs of {', '.join(stale)}: not in the layout of kns:state.entryStacks "
              f"(`{stacks.kns_command('restack', base)}` removes them)", file=sys.stderr)
    for stack in [s for s in existing if s not in stale] or [base]:
        done = subprocess.run(["pulumi", "stack", "output", "--json", "--stack", stack, "--non-interactive"],
                              cwd=project_dir, env=dict(env), capture_output=True, text=True)
        if done.returncode != 0:
            raise preview_module.PreviewFailed(f"cannot read the outputs of stack {stack}: {done.stderr.strip()}")
        parts.append((stacks.role(stack).index is None, json.loads(done.stdout or "{}")))
        last[stack] = last_update(project_dir, stack, env)
    platform = next((values for is_platform, values in parts if is_platform), {})
    merged = merge_outputs(platform, [values for is_platform, values in parts if not is_platform])
    # What the outputs are of: a failed or interrupted update leaves the outputs its program
    # computed, which the cluster may not have.
    merged["lastUpdates"] = {stack: found for stack, found in last.items() if found}
    failed = [stack for stack, found in last.items() if found and found["result"] != "succeeded"]
    if failed:
        print(f"kns: the last update of {', '.join(failed)} did not succeed "
              f"({', '.join(last[s]['result'] for s in failed)}): its outputs are what its program computed, not "
              f"what was applied; run `{stacks.make_command('up', base)}` again (lastUpdates says which)",
              file=sys.stderr)
    return merged


def last_update(project_dir: Path, stack: str, env: Mapping[str, str]) -> Optional[dict[str, str]]:
    """How the stack's last update ended (`pulumi stack history`): its kind, result and end
    time; None when the backend has none (a stack never updated)."""
    done = subprocess.run(["pulumi", "stack", "history", "--stack", stack, "--page-size", "1", "--json",
                           "--non-interactive"], cwd=project_dir, env=dict(env), capture_output=True, text=True)
    try:
        history = json.loads(done.stdout or "null") if done.returncode == 0 else None
    except json.JSONDecodeError:
        history = None
    if not isinstance(history, list) or not history or not isinstance(history[0], dict):
        return None
    entry = history[0]
    return {"kind": str(entry.get("kind", "")), "result": str(entry.get("result", "")),
            "endTime": str(entry.get("endTime", ""))}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kns_cli.layout")
    parser.add_argument("action", choices=("stacks", "config", "check", "outputs", "init"))
    parser.add_argument("stack", nargs="+", help="one stack; `init` takes several")
    args = parser.parse_args(argv)
    if args.action != "init" and len(args.stack) > 1:
        parser.error(f"{args.action} takes one stack")
    project_dir = Path.cwd()
    try:
        if args.action == "init":
            for stack in args.stack:
                preview_module.select_stack(project_dir, stack, os.environ)
            return 0
        args.stack = args.stack[0]
        if args.action == "config":
            print(" ".join(stacks.config_arguments(args.stack)))
            return 0
        if stacks.role(args.stack).index is not None:
            raise UsageError(f"{args.stack} {ENTRY_STACK_NAME.message}")
        entry_stacks = declared_entry_stacks(project_dir, args.stack)
        if args.action == "stacks":
            print("\n".join(stacks.stacks(args.stack, entry_stacks)))
            return 0
        if args.action == "outputs":
            print(json.dumps(stack_outputs(project_dir, args.stack, os.environ), indent=2, sort_keys=True))
            # Which stack these are, where the JSON stays the outputs alone (`| jq`).
            print(f"Outputs of stack {args.stack} (another: --stack NAME, or KNS_STACK=NAME make outputs)",
                  file=sys.stderr)
            return 0
        if entry_stacks is None and state_section(project_dir, args.stack) is not None:
            return 0  # a kns:state the program refuses: its run says so, and applies nothing
        states = read_states(project_dir, args.stack, os.environ, entry_stacks)
        why = problem(misplaced(states, args.stack, entry_stacks), args.stack, entry_stacks)
        if why:
            print(why, file=sys.stderr)
            return MISPLACED
        return 0
    except (UsageError, preview_module.PreviewFailed) as exc:
        print(f"kns: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
