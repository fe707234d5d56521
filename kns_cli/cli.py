"""The `kns` command line: validate, explain, queues, timeline, changed (all offline); preview
and up (the real engine, restricted to the named entries; kns_cli/preview.py, kns_cli/up.py)
and recover (after an interrupted `pulumi up`; kns_cli/recover.py).

Exit status: 0 when the config is valid and the command did its job; 1 when the config
is invalid (the program's own problem lines, as its RunError shows them, on stderr), when
`preview` or `up` fails in the engine, or a step of `recover` fails; 2 for a usage error
(unknown option, stack file or entry); 3 when `up` is refused (a shared change: the full
`make up` is needed, which CI then runs, scripts/ci-up.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

from config.errors import ConfigError, closest
from plan import stacks
from plan.inventory import registrations
from plan.targeting import entry_urns

from . import applied as applied_module
from . import changed as changed_module
from . import explain as explain_module
from . import passphrase as passphrase_module
from . import layout as layout_module
from . import preview as preview_module
from . import queues as queues_module
from . import reach as reach_module
from . import summary as summary_module
from . import recover as recover_module
from . import up as up_module
from . import usage as usage_module
from . import versions
from .stack import ROOT, UsageError, check_stack, load_plan, load_stack, stack_path

MAX_HOURS = 24 * 62
# A window shorter than a minute (cron's resolution) has nothing to draw.
MIN_HOURS = 1 / 60
# The times the commands reason about: each next run is searched up to 5 years past the
# previous one (robfig's horizon, chrono/kcron.py), and a few runs are shown, so the last
# supported year stays well inside what a date can hold (9999).
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(9900, 12, 31, 23, 59, tzinfo=timezone.utc)


def _instant(text: str) -> datetime:
    """ISO 8601; without an offset it is UTC; within EARLIEST..LATEST."""
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        within = EARLIEST <= moment.astimezone(timezone.utc) <= LATEST
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'"{text}" is not an ISO 8601 time (for example 2026-03-01T00:00Z or 2026-03-01T09:30+01:00)'
        ) from None
    except OverflowError:
        within = False
    if not within:
        raise argparse.ArgumentTypeError(
            f'"{text}" is outside the times the commands reason about ({EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}, UTC)')
    return moment


def _hours(text: str) -> float:
    try:
        hours = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'"{text}" is not a number of hours') from None
    if not MIN_HOURS <= hours <= MAX_HOURS:
        raise argparse.ArgumentTypeError(f"{text} is outside one minute ({MIN_HOURS:.4f}) to {MAX_HOURS} hours")
    return hours


class _Version(argparse.Action):
    """--version, read when asked (it runs git), not whenever the parser is built."""

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(versions.text(ROOT))
        parser.exit()


class _Command(argparse.ArgumentParser):
    """The parser of every command: each takes the common options (--stack, --project-dir),
    so a command added later cannot lack them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--stack", default="dev", metavar="NAME",
                          help="the stack whose Pulumi.<NAME>.yaml to read (default: dev)")
        self.add_argument("--project-dir", type=Path, default=ROOT, metavar="DIR",
                          help=f"the Pulumi project directory (default: {ROOT})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kns",
        description="Commands over the kns-platform stack config. validate, explain, queues, timeline and "
                    "changed are offline (no Pulumi engine, no cluster, no passphrase: the program's own checks and "
                    "planner); preview, up and recover run the Pulumi engine as `make preview` and `make up` do.",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="this checkout's commit and the Pulumi, provider, Kubernetes, Kueue and Karpenter "
                             "versions it pins")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Command)

    validate = commands.add_parser(
        "validate", help="run every check the program runs before registering resources",
        description="Read Pulumi.<stack>.yaml and its job files and run every check the program runs before "
                    "it registers a resource, planning included. Exit 0 when valid, 1 with the program's "
                    "problem lines when not.")
    validate.set_defaults(run=run_validate)

    explain = commands.add_parser(
        "explain", help="what each entry becomes (namespace, placement, resources, runs)",
        description="For each entry (all, or those named): namespace, pool, scheduler, profile rules, "
                    "requests and limits per container, pod totals, LimitRange, quota, tolerations, node "
                    "selector, Pod Security level, images, and for schedules the cron, time zone, warm-up, "
                    "primer schedules and next runs.")
    explain.add_argument("entries", nargs="*", metavar="ENTRY", help="entry names (default: every entry)")
    explain.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    explain.add_argument("--now", type=_instant, metavar="ISO-8601",
                         help="list the runs after this time (default: now); no offset means UTC")
    explain.add_argument("--live", action="store_true",
                         help="also read the stack's cluster (kubectl) to say whether each entry's budgets admit "
                              "it now")
    explain.set_defaults(run=run_explain)

    queues = commands.add_parser(
        "queues", help="each queue's quota per pool against what its entries ask",
        description="Each Kueue queue's quota per node pool and resource, what borrowing adds, and the sum "
        "of what the entries that use it ask (one Job each): an over-subscribed queue shows before "
        "`pulumi up`. See docs/queueing.md.")
    queues.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    queues.add_argument("--verbose", action="store_true",
                        help="list every entry of a queue (text; by default a long list is cut and counted)")
    queues.set_defaults(run=run_queues)

    usage = commands.add_parser(
        "usage", help="each budget's use of its period, read from the cluster",
        description="Read the stack's cluster (its kubeconfig and context, with kubectl) and count each "
                    "budget's use of its period as its counter does, without writing: used, limit, share, "
                    "projected use at the period's end, state, next reset. See docs/budgets.md.")
    usage.add_argument("--json", action="store_true", help="print the figures as JSON")
    usage.add_argument("--chart", type=Path, metavar="FILE",
                       help="also draw used and projected hours per budget over its period (.svg or .png)")
    usage.set_defaults(run=run_usage)

    timeline = commands.add_parser(
        "timeline", help="a picture (SVG or PNG) of every schedule's runs and warm-up windows",
        description="Write an SVG (or a PNG) with one row per schedule: each run in the window as a marker, "
                    "its warm-up (primer to start) as a shaded bar, on a UTC time axis.")
    timeline.add_argument("--hours", type=_hours, default=24.0, help="window length in hours (default: 24)")
    timeline.add_argument("--start", type=_instant, metavar="ISO-8601",
                          help="window start (default: the current hour, UTC); no offset means UTC")
    timeline.add_argument("--output", type=Path, metavar="FILE",
                          help="where to write it, .svg or .png (default: <project dir>/build/timeline-<stack>.svg)")
    timeline.set_defaults(run=run_timeline)

    preview = commands.add_parser(
        "preview", help="a real `pulumi preview` of the named entries only, summarised per entry",
        description="Check the stack offline, then run `pulumi preview` with the engine set-up of `make preview` "
                    "(toolchain, backend, passphrase, stack, policy pack), restricted to the named entries' "
                    "resources (--target with their URNs, --target-dependents), and print the per-entry summary "
                    "CI prints. The program registers only the named entries (and the platform they depend on). "
                    "Exit 1 when the config is invalid or the preview fails. See docs/cli.md.")
    preview.add_argument("entries", nargs="+", metavar="ENTRY", help="entry names (at least one)")
    preview.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                         help="text: one aligned row per changed object (default); markdown: the per-entry "
                              "summary CI posts; json: the preview JSON both are made from")
    preview.set_defaults(run=run_preview, engine=True)

    up = commands.add_parser(
        "up", help="apply the named entries only (added, changed or removed ones)",
        description="Check the stack offline, read its state, and run `pulumi up` with the engine set-up of "
                    "`make up` (policy pack included) restricted to the named entries: an entry of the config is "
                    "created or updated, an entry only the state still has is destroyed; every other entry and "
                    "the platform stay as they are. Refused, with nothing applied, when anything shared (cluster, "
                    "node pools, schedulers, queueing, queues, priorities, profiles, credentials, the program's "
                    "files) changed since the last full `make up`. On a stack with entry stacks (kns:state), each "
                    "entry is applied in the entry stack that holds it. Exit 1 when the config is invalid or the up "
                    "fails, 2 for a name neither the config nor the state has, 3 when refused. See docs/cli.md.")
    up.add_argument("entries", nargs="+", metavar="ENTRY", help="entry names (at least one)")
    up.add_argument("--verbose", action="store_true", help="show the engine's output on the terminal too (as VERBOSE=1)")
    up.set_defaults(run=run_up, engine=True)

    changed_module.add_parser(commands)
    applied_module.add_parser(commands)

    recover = commands.add_parser(
        "recover", help="after an interrupted `pulumi up`: make state, cluster and config agree",
        description="Check the stack offline, then: release the lock an interrupted run left (refused while that "
                    "run is alive), `pulumi refresh --clear-pending-creates`, `pulumi up` as `make up` runs it, "
                    "delete the platform's objects the stack does not hold (label kns.io/cluster), and check that "
                    "`pulumi preview --expect-no-changes` is clean. Every step can be repeated. Exit 1 when the "
                    "config is invalid or a step fails. See docs/operations.md.")
    recover.add_argument("--force", action="store_true",
                         help="also release a lock taken on another host (a cancelled CI runner) or on a backend "
                              "other than a file backend: only once that run is known to be over")
    recover.set_defaults(run=run_recover, engine=True)

    restack = commands.add_parser(
        "restack", help="move entries to the entry stacks kns:state.entryStacks says (state only)",
        description="Check the stack offline, read the state of the stack and of its entry stacks, and move "
                    "every entry to the Pulumi stack kns:state.entryStacks puts it in (`pulumi state move`): "
                    "the state that records its objects changes stacks, nothing on the cluster changes. Run it "
                    "after setting or changing kns:state.entryStacks, before `make up`, which refuses to run "
                    "while an entry is in another stack. Exit 1 when the config is invalid or a move fails. "
                    "See docs/entry-stacks.md.")
    restack.add_argument("--dry-run", action="store_true", help="say what would move, and move nothing")
    restack.set_defaults(run=run_restack, engine=True)

    outputs = commands.add_parser(
        "outputs", help="the stack outputs of the last `make up`, as JSON",
        description="`pulumi stack output --json` of the stack, with the backend and passphrase `make up` uses "
                    "(scripts/up.sh outputs; PULUMI_BACKEND_URL and PULUMI_CONFIG_PASSPHRASE override them "
                    "as there). Exit 1 when the stack has not been brought up.")
    outputs.set_defaults(run=run_outputs, engine=True)
    return parser


def plural(count: int, noun: str, many: Optional[str] = None) -> str:
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def _summary(cfg, plans) -> str:
    primed = sum(1 for plan in plans if plan.primers is not None)
    objects = sum(len(plan.objects) for plan in plans)
    # With queueing on, how many entries wait in a queue and how many queues there are.
    queued = queues = ""
    if cfg.queueing.enabled:
        queued = f", {sum(1 for plan in plans if plan.entry.queued)} queued"
        queues = f", {plural(len(cfg.queues), 'queue')}"
    # The kinds a stack may leave out, counted when it has them.
    others = "".join(f", {plural(len(items), noun)}" for items, noun in (
        (cfg.reservations, "reservation"), (cfg.budgets, "budget"), (cfg.workers, "worker cluster")) if items)
    return (
        f"kns validate: stack {cfg.stack} is valid: {plural(len(plans), 'entry', 'entries')} "
        f"({plural(len(cfg.jobs), 'job')}, {plural(len(cfg.schedules), 'schedule')}, {primed} prescaled{queued}), "
        f"{plural(len(cfg.node_pools), 'node pool')}{queues}{others}, {objects} Jobs and CronJobs planned"
    )


def run_validate(args: argparse.Namespace) -> int:
    planned, unchecked = check_stack(args.project_dir, args.stack)
    cfg = planned.config
    print(_summary(cfg, planned.entries))
    for line in unchecked:
        print(f"  not checked offline: {line}")
    for warning in cfg.warnings:
        print(f"  warning: {warning}")
    return 0


def check_explained(planned, names: Sequence[str]) -> None:
    """A usage error naming each name no kind of the stack has (entry, reservation, pool,
    queue, priority, budget, worker), with the closest name of any kind."""
    unknown = explain_module.unknown_names(planned, names)
    if unknown:
        known = explain_module.names_by_kind(planned)
        every = [name for found in known.values() for name in found]
        lines = []
        for name in unknown:
            close = closest(name, every)
            lines.append(f'nothing named "{name}"' + (f'; did you mean "{close}"?' if close else ""))
        listed = "; ".join(f"{explain_module.KEYS[kind]}: {', '.join(found)}" for kind, found in known.items() if found)
        raise UsageError("; ".join(lines) + f" (names of stack {planned.config.stack}: {listed or 'none'})")


def check_names(cfg, plans, names: Sequence[str]) -> None:
    """A usage error naming each unknown entry, with the closest known name."""
    known_names = {plan.entry.name for plan in plans}
    unknown = [name for name in names if name not in known_names]
    if unknown:
        known = [plan.entry.name for plan in plans]
        lines = []
        for name in unknown:
            close = closest(name, known)
            lines.append(f'no entry named "{name}"' + (f'; did you mean "{close}"?' if close else ""))
        raise UsageError("; ".join(lines) + f" (entries of stack {cfg.stack}: {', '.join(known) or 'none'})")


def run_explain(args: argparse.Namespace) -> int:
    planned = load_plan(args.project_dir, args.stack, now=args.now)
    check_explained(planned, args.entries)
    document = explain_module.explain(planned, args.entries, planned.now)
    if args.live and planned.budgets:
        with usage_module.cluster_of(planned.config, args.project_dir) as cluster:
            found = usage_module.read(cluster, planned.budgets)
        usage_module.fill_admits(document, found)
    if args.format == "json":
        print(json.dumps(document, indent=2))
    else:
        sys.stdout.write(explain_module.render_text(document))
    return 0


def run_queues(args: argparse.Namespace) -> int:
    cfg, plans = load_stack(args.project_dir, args.stack)
    document = queues_module.report(cfg, plans)
    if args.format == "json":
        print(json.dumps(document, indent=2))
    else:
        sys.stdout.write(queues_module.render_text(document, verbose=args.verbose))
    return 0


def run_usage(args: argparse.Namespace) -> int:
    planned = load_plan(args.project_dir, args.stack)
    if args.chart is not None and args.chart.suffix not in (".svg", ".png"):
        raise UsageError(f"--chart writes .svg or .png, not {args.chart.suffix or 'a file without a suffix'}")
    with usage_module.cluster_of(planned.config, args.project_dir) as cluster:
        found = usage_module.read(cluster, planned.budgets)
    document = usage_module.report(planned.config, planned.budgets, found, planned.now,
                                   samples=48 if args.chart is not None else 0)
    if args.chart is not None:
        from . import charts
        drawn = usage_module.series(document)
        if not drawn:
            raise UsageError("no budget of the stack is in a period now: nothing to draw")
        charts.usage_chart(drawn, f"kns usage: stack {planned.config.stack}", args.chart)
        for item in document["budgets"]:
            item.pop("usedOverTime", None)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        sys.stdout.write(usage_module.render_text(document))
        if args.chart is not None:
            print(f"chart: {_shown(args.chart)}")
    return 0


def _shown(path: Path) -> str:
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def run_timeline(args: argparse.Namespace) -> int:
    # Imported here: matplotlib takes most of a second to load, which the other commands skip.
    from . import charts
    from . import timeline as timeline_module
    cfg, plans = load_stack(args.project_dir, args.stack)
    start = (args.start or timeline_module.default_start()).astimezone(timezone.utc)
    output = args.output or Path(args.project_dir) / "build" / f"timeline-{args.stack}.svg"
    try:
        charts.suffix_of(output)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    drawing = timeline_module.draw(cfg, plans, start, args.hours)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        drawing.save(output)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None
    schedules = sum(1 for plan in plans if plan.is_schedule)
    print(f"kns timeline: wrote {_shown(output)} (stack {cfg.stack}, {plural(schedules, 'schedule')}, "
          f"{timeline_module.utc_label(start)} + {timeline_module.number(args.hours)} h)")
    return 0


def run_preview(args: argparse.Namespace) -> int:
    planned = load_plan(args.project_dir, args.stack)
    cfg, plans = planned.config, planned.entries
    names = list(dict.fromkeys(args.entries))
    check_names(cfg, plans, names)
    project_dir = Path(args.project_dir).resolve()
    project = preview_module.project_name(project_dir)
    entry_stacks = cfg.state.entry_stacks if cfg.state else None
    try:
        env = preview_module.engine_environment(project_dir, args.stack, (), preview_module.toolchain(), os.environ)
        layout_module.check_placement(project_dir, args.stack, entry_stacks, env)
        for line in reach_module.unanswered(cfg, project_dir, os.environ):
            print(f"kns preview: warning: {line}", file=sys.stderr)
    except layout_module.Misplaced as exc:
        print(str(exc), file=sys.stderr)
        return layout_module.MISPLACED
    except preview_module.PreviewFailed as exc:
        print(f"kns preview: {exc}", file=sys.stderr)
        return 1
    # Each entry in the Pulumi stack that holds it (docs/entry-stacks.md); one preview each.
    parts = []
    for holder, here in stacks.group(names, args.stack, entry_stacks).items():
        urns = entry_urns(planned, here, holder, project)
        print(f"kns preview: stack {holder}, {plural(len(here), 'entry', 'entries')} ({', '.join(here)}): "
              f"pulumi preview --target ({plural(len(urns), 'URN')}) --target-dependents", file=sys.stderr)
        try:
            parts.append(preview_module.run_preview(project_dir, holder, urns, here, os.environ))
        except preview_module.PreviewFailed as exc:
            print(f"kns preview: {exc}", file=sys.stderr)
            return 1
    preview, status = preview_module.combine(parts)
    owners = {(r.type, r.name): r.owner for r in registrations(planned)}
    missing = preview_module.missing_dependency(preview, args.stack, owners)
    if missing:
        print(missing, file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(preview, indent=2))
    elif args.format == "markdown":
        sys.stdout.write(preview_module.render_summary(preview, args.stack, names, len(plans) - len(names)))
    else:
        sys.stdout.write(summary_module.render_text(args.stack, preview.get("steps") or [], names,
                                                    len(plans) - len(names)))
        errors = [d for d in preview.get("diagnostics") or [] if d.get("severity") == "error"]
        for diagnostic in errors:
            print(summary_module.strip_colour(str(diagnostic.get("message", ""))).rstrip(), file=sys.stderr)
    return 0 if status == 0 else 1


def run_up(args: argparse.Namespace) -> int:
    planned = load_plan(args.project_dir, args.stack)
    names = list(dict.fromkeys(args.entries))
    try:
        return up_module.run_up(Path(args.project_dir), planned, args.stack, names, os.environ,
                                verbose=args.verbose or os.environ.get("VERBOSE") == "1")
    except up_module.UpRefused as exc:
        print(str(exc), file=sys.stderr)
        return up_module.REFUSED
    except layout_module.Misplaced as exc:
        print(str(exc), file=sys.stderr)
        return layout_module.MISPLACED
    except preview_module.PreviewFailed as exc:
        print(f"kns up: {exc}", file=sys.stderr)
        return 1


def run_recover(args: argparse.Namespace) -> int:
    planned = load_plan(args.project_dir, args.stack)
    try:
        return recover_module.run_recover(Path(args.project_dir).resolve(), planned, args.stack, os.environ,
                                          force=args.force)
    except (recover_module.RecoverFailed, preview_module.PreviewFailed) as exc:
        print(f"kns recover: {exc}", file=sys.stderr)
        return 1


def run_restack(args: argparse.Namespace) -> int:
    cfg, _ = load_stack(args.project_dir, args.stack)
    project_dir = Path(args.project_dir).resolve()
    entry_stacks = cfg.state.entry_stacks if cfg.state else None
    try:
        env = preview_module.engine_environment(project_dir, args.stack, (), preview_module.toolchain(), os.environ)
        try:
            preview_module.select_stack(project_dir, args.stack, env, create=False)
        except preview_module.PreviewFailed as exc:
            if preview_module.NO_SUCH_STACK not in str(exc):
                raise
            # A stack's first `make up` (CI's first run) creates it: nothing can be misplaced yet.
            print(f"kns restack: stack {args.stack} is not in the backend yet: nothing to move")
            return 0
        moves = layout_module.restack(project_dir, args.stack, entry_stacks, env, dry_run=args.dry_run)
    except preview_module.PreviewFailed as exc:
        print(f"kns restack: {exc}", file=sys.stderr)
        return 1
    held = "one stack" if entry_stacks is None else plural(entry_stacks, "entry stack")
    done = "would move" if args.dry_run else "moved"
    print(f"kns restack: stack {args.stack} ({held}): {done} {plural(len(moves), 'entry', 'entries')}"
          + ("" if moves or args.dry_run else "; every entry is where the config puts it"))
    return 0


def outputs_command(stack: str, project_dir: Path = ROOT) -> tuple[list[str], dict[str, str]]:
    """What `./kns outputs` runs: `make outputs` for the stack, in the project directory."""
    return (["bash", str(ROOT / "scripts" / "up.sh"), "outputs"],
            {**os.environ, "KNS_STACK": stack, "KNS_PROJECT_DIR": str(Path(project_dir).resolve())})


def run_outputs(args: argparse.Namespace) -> int:
    command, env = outputs_command(args.stack, args.project_dir)
    return 0 if subprocess.run(command, env=env).returncode == 0 else 1


def engine_door(args: argparse.Namespace) -> None:
    """What a command that runs the engine checks before anything else: the stack's file
    (a misspelt name gets its did-you-mean), then its passphrase (kns_cli/passphrase.py)."""
    stack_path(Path(args.project_dir), args.stack)
    passphrase_module.passphrase_environment(Path(args.project_dir).resolve(), args.stack, os.environ)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if getattr(args, "engine", False):
            engine_door(args)
        return args.run(args)
    except UsageError as exc:
        print(f"kns {args.command}: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
