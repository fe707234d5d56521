"""A full `make up` / `make preview` of a stack and its entry stacks (scripts/up.sh;
docs/entry-stacks.md, "What a full `make up` runs").

    python -m kns_cli.fullrun up|preview --stack STACK [--verbose] [--log-dir DIR] -- PULUMI_ARGS...

The config is checked first, offline, with the program's own checks (`./kns validate`): a
config that cannot run stops here, before any stack is created or read. Every stack's state
is then read, once (`pulumi stack export`, side by side): entries in
another stack than the config says stop the run before any engine starts (`./kns
restack`), entry stacks the backend does not have are created, and the records below are
read from the same exports. The platform stack runs first (its program checks the whole
config and plans every entry), unless it is **skipped** too: its last update succeeded
and recorded (`platformStackDigest`) the digest this run computes for it offline, where
`./kns validate` checks the whole config and plans every entry (kns_cli/stack.py) with the
program's own code. The entry stacks' digests then come from that offline run, otherwise
from the platform's. Then each entry stack:

- is **skipped**, in one line, when its last update succeeded and recorded
  (`entryStackDigest`) the digest the platform's run computed for it now
  (`entryStackDigests`, plan/digests.py): its entries, the sections they depend on and the
  program are the same, so the engine would have nothing to do. `KNS_FULL=true` and
  `KNS_REFRESH=true` run every stack; so does a stack whose last update failed, was
  interrupted (pending operations, or no record of a success) or was a targeted
  `./kns up` (which records no digest);
- otherwise runs with `KNS_CHECKED` set to the platform's `checkedDigest`, so its program
  plans only the entries it holds (plan/planner.py `plan_own`), side by side with the
  others, at most `KNS_PARALLEL_STACKS` at once (default: the machine's cores), each with
  its own log and its own state lock. Their summaries are printed in stack order.

PULUMI_ARGS are the engine's arguments after `pulumi <action> --stack <stack>` and the
stack's config file (`--yes`, `--diff`, `--refresh`, the policy pack). The exit status is
the first failing stack's, else 0.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from chrono import clock
from config import fingerprint, kubeconfig
from config.errors import ConfigError
from config.rules import ENTRY_STACK_NAME
from plan import digests, stacks
from plan.planner import plan_checked
from plan.stackplan import StackPlan

from . import engine_run, reach
from . import summary as summary_module
from .layout import MISPLACED, check_exports, declared_entry_stacks, read_exports, remove_surplus, state_section
from .preview import PreviewFailed, project_name, select_stack
from .recover import file_backend, stack_locks
from .stack import OfflineStack, UsageError, checked_stack

TRUE = ("1", "true", "yes")


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in TRUE


def parallel_stacks(env: Mapping[str, str]) -> int:
    """`KNS_PARALLEL_STACKS`, or the machine's cores; at least 1."""
    value = env.get("KNS_PARALLEL_STACKS", "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"fullrun: KNS_PARALLEL_STACKS={value!r} is not a whole number of at least 1")
        return int(value)
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Record:
    """What the backend says of an entry stack's last update."""

    digest: Optional[str]
    succeeded: bool
    pending: bool
    # A lock left on the stack: an update running, or one killed before it could record
    # anything (with checkpoints skipped, a killed engine leaves the history and the state
    # of the update before it, which may say "succeeded" with the digest wanted now).
    locked: bool = False

    def why_run(self, wanted: Optional[str]) -> Optional[str]:
        """Why the stack must run (None: it may be skipped)."""
        if wanted is None:
            return "no digest from the platform's run"
        if self.locked:
            return "it is locked: an update of it is running or was interrupted"
        if not self.succeeded:
            return "its last update did not succeed"
        if self.pending:
            return "its last update was interrupted"
        if self.digest != wanted:
            return "its entries or what they depend on changed" if self.digest else "no record of a full update"
        return None


def _pulumi_json(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> Any:
    """What a pulumi command prints as JSON; None when it fails (the stack then runs)."""
    done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=cwd, env=dict(env),
                          capture_output=True, text=True)
    if done.returncode != 0:
        return None
    try:
        return json.loads(done.stdout or "null")
    except json.JSONDecodeError:
        return None


def record(stack: str, export: Mapping[str, Any], env: Mapping[str, str], cwd: Path,
           output: str = digests.ENTRY_STACK_OUTPUT) -> Record:
    """A stack's recorded digest (`output`: an entry stack's, or the platform's) and how its
    last update ended: its history from the backend, `export` (its `pulumi stack export`,
    read once by the layout check)."""
    history = _pulumi_json(["stack", "history", "--stack", stack, "--page-size", "1", "--json"], env, cwd) or []
    last = history[0] if isinstance(history, list) and history else {}
    succeeded = last.get("kind") == "update" and last.get("result") == "succeeded"
    deployment = (export.get("deployment") or {}) if isinstance(export, dict) else {}
    root = next((r for r in deployment.get("resources") or [] if r.get("type") == "pulumi:pulumi:Stack"), {})
    digest = (root.get("outputs") or {}).get(output)
    return Record(digest if isinstance(digest, str) else None, succeeded, bool(deployment.get("pending_operations")),
                  _locked(stack, env, cwd))


def _locked(stack: str, env: Mapping[str, str], cwd: Path) -> bool:
    """A file backend holds a lock of the stack (another backend says so in its history)."""
    backend = file_backend(env)
    if backend is None:
        return False
    try:
        project = project_name(cwd)
    except UsageError:
        project = "*"  # the project's name unread: a lock of the stack in any project counts
    return bool(stack_locks(backend, project, stack))


NEW = Record(None, False, False)  # a stack this run created: no update on record


@dataclass(frozen=True)
class Offline:
    """The digests the platform's program would export, computed without the engine."""

    checked: str
    entries: dict[str, str]
    platform: str


def offline_check(cwd: Path, base: str, env: Mapping[str, str], now: datetime) -> tuple[OfflineStack, StackPlan]:
    """The stack checked and planned as the program does it, read offline as `./kns
    validate` reads it (raises ConfigError or UsageError)."""
    offline = checked_stack(cwd, base, env, now)
    return offline, plan_checked(offline.checked, now)


def offline_digests(cwd: Path, base: str, entry_stacks: int, env: Mapping[str, str], settings: str,
                    checked: Optional[tuple[OfflineStack, StackPlan]] = None) -> Offline:
    """The platform program's digests for this config (plan/digests.py), from the same
    check and plan as the program (`checked`, else made now by `offline_check`)."""
    offline, planned = checked or offline_check(cwd, base, env, clock.now())
    checked_config, file = offline.checked, offline.file
    config = file.config or {}
    program = fingerprint.program_digest(cwd)
    reads = kubeconfig.read_digests(checked_config.config.cluster, checked_config.config.workers, cwd, env)
    return Offline(digests.checked_digest(config, checked_config.config.workloads, program),
                   digests.entry_stack_digests(planned.entries, base, entry_stacks, config, program, settings, reads),
                   digests.platform_stack_digest(config, program, planned.reservations, planned.cohorts, settings,
                                                 reads))


def run_settings(pulumi_args: Sequence[str], cwd: Path) -> str:
    """`KNS_RUN_SETTINGS`: what the engine's arguments change in what is applied beyond the
    config: the policy pack config file's content (its digest); "" without one."""
    for index, arg in enumerate(pulumi_args):
        if arg.startswith("--policy-pack-config"):
            name = arg.split("=", 1)[1] if "=" in arg else (pulumi_args[index + 1] if index + 1 < len(pulumi_args) else "")
            try:
                return hashlib.sha256((cwd / name).read_bytes()).hexdigest()
            except OSError:
                return "unreadable:" + name
    return ""


def skipped(action: str, stack: str) -> None:
    print(f"{'Update' if action == 'up' else 'Preview'} of stack {stack}: skipped, unchanged since "
          "its last update (KNS_FULL=true runs it)", flush=True)


def command(action: str, stack: str, pulumi_args: Sequence[str]) -> list[str]:
    return ["pulumi", action, "--stack", stack, *stacks.config_arguments(stack), *pulumi_args]


def main(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None,
         cwd: Optional[Path] = None) -> int:
    """A SIGINT (Ctrl-C, a CI cancel) reaches the engines too, which stop; it starts no
    further stack and ends in a message, never a traceback."""
    args, pulumi_args = parse(argv)
    with engine_run.interruptible() as interrupted:
        status = _main(args, pulumi_args, env, cwd, interrupted)
    if interrupted:
        print(f"Interrupted: stacks not yet started were not run; `{stacks.kns_command('recover', args.stack)}` "
              "makes state, cluster and config agree (docs/operations.md)", file=sys.stderr)
        status = status or 130
    return status


def parse(argv: Optional[Sequence[str]]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m kns_cli.fullrun", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "preview"))
    parser.add_argument("--stack", required=True)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--log-dir", type=Path, default=Path("build/logs"))
    given = list(sys.argv[1:] if argv is None else argv)
    split = given.index("--") if "--" in given else len(given)
    return parser.parse_args(given[:split]), given[split + 1:]


def _main(args: argparse.Namespace, pulumi_args: list[str], env: Optional[Mapping[str, str]], cwd: Optional[Path],
          interrupted: Sequence[int]) -> int:
    env = dict(os.environ if env is None else env)
    cwd = Path.cwd() if cwd is None else cwd
    base = args.stack
    tty = sys.stderr.isatty()

    env[digests.SETTINGS_ENV] = run_settings(pulumi_args, cwd)
    every = _flag(env, "KNS_FULL") or _flag(env, "KNS_REFRESH")
    width = parallel_stacks(env)
    if stacks.role(base).index is not None:
        print(f"kns: {base} {ENTRY_STACK_NAME.message}", file=sys.stderr)
        return 2
    # The config first, offline as `./kns validate` checks it (the program's own checks):
    # nothing is created in the backend, no state read, for a config that cannot run.
    now = clock.now()  # one instant, as the program's run has
    try:
        checked_now = offline_check(cwd, base, env, now)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"kns: {exc}", file=sys.stderr)
        return 2
    for line in reach.unanswered(checked_now[0].checked.config, cwd, env):
        print(f"kns: warning: {line}", file=sys.stderr)
    entry_stacks = declared_entry_stacks(cwd, base)
    names = stacks.stacks(base, entry_stacks)[1:]

    # Every stack's state, read once (side by side): no entry may be in another stack than
    # the config says, and the records below come from the same reads.
    exports: dict[str, Any] = {}
    try:
        select_stack(cwd, base, env)  # created when new, now that its config is valid
        if entry_stacks is not None or state_section(cwd, base) is None:  # else the program refuses kns:state
            exports = read_exports(cwd, base, env, entry_stacks, width)
            why = check_exports(exports, base, entry_stacks)
            if why:
                print(why, file=sys.stderr)
                return MISPLACED
            # Entry stacks a smaller layout dropped hold nothing now: removed (an up), said (a preview).
            removed = remove_surplus(cwd, base, entry_stacks, env, exports, dry_run=args.action != "up",
                                     out=sys.stderr)
            if args.action == "up":
                exports = {stack: export for stack, export in exports.items() if stack not in removed}
        created = [stack for stack in names if stack not in exports]
        for stack in created:
            select_stack(cwd, stack, env)
        if created:
            select_stack(cwd, base, env)
    except PreviewFailed as exc:
        print(f"kns: {exc}", file=sys.stderr)
        return 1

    # The platform is skipped when its record says it holds what the config plans now.
    known = None
    if entry_stacks is not None and not every:
        mine = record(base, exports.get(base, {}), env, cwd, digests.PLATFORM_OUTPUT)
        if mine.digest and mine.succeeded and not mine.pending:
            known = offline_digests(cwd, base, entry_stacks, env, env[digests.SETTINGS_ENV], checked_now)
            if mine.why_run(known.platform) is not None:
                known = None
    counted: dict[str, int] = {}  # objects per op over every stack that runs
    ran = 0
    if known is not None:
        skipped(args.action, base)
        status = 0
        wanted, checked = known.entries, known.checked
    else:
        outputs: dict[str, Any] = {}
        status = engine_run.run(args.action, base, command(args.action, base, pulumi_args), verbose=args.verbose,
                                log_dir=args.log_dir, out=sys.stdout, err=sys.stderr, tty=tty, env=env, cwd=cwd,
                                outputs=outputs, totals=counted)
        ran = 1
        if status != 0 or entry_stacks is None:
            return status
        wanted = outputs.get(digests.DIGESTS_OUTPUT) if isinstance(outputs.get(digests.DIGESTS_OUTPUT), dict) else {}
        checked = outputs.get(digests.CHECKED_OUTPUT)
    with ThreadPoolExecutor(max_workers=width) as pool:
        records = dict(zip(names, pool.map(lambda s: record(s, exports[s], env, cwd) if s in exports else NEW,
                                           names))) if not every else {}
    run_env = {**env, digests.CHECKED_ENV: checked} if isinstance(checked, str) else env
    to_run = []
    for stack in names:
        why = "KNS_FULL or KNS_REFRESH" if every else records[stack].why_run(wanted.get(stack))
        if why is None:
            skipped(args.action, stack)
        else:
            to_run.append(stack)

    def one(stack: str) -> tuple[int, str, dict[str, int]]:
        if interrupted:
            return 130, f"{stack}: not started (interrupted)\n", {}
        out, own = io.StringIO(), {}
        code = engine_run.run(args.action, stack, command(args.action, stack, pulumi_args),
                              verbose=args.verbose and width == 1, log_dir=args.log_dir, out=out, err=sys.stderr,
                              tty=tty and width == 1, env=run_env, cwd=cwd, totals=own)
        return code, out.getvalue(), own

    with ThreadPoolExecutor(max_workers=width) as pool:
        for stack, (code, text, own) in zip(to_run, pool.map(one, to_run)):
            sys.stdout.write(text)
            sys.stdout.flush()
            for op, count in own.items():
                counted[op] = counted.get(op, 0) + count
            if code != 0 and status == 0:
                status = code
    everyone = 1 + len(names)
    sys.stdout.write(summary_module.render_total(args.action, base, counted, ran + len(to_run), everyone - ran - len(to_run)))
    return status


if __name__ == "__main__":
    sys.exit(main())
