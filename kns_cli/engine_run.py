"""Run one engine command for `make up` / `make preview` (scripts/up.sh) and print what a
reader needs: progress while it runs, then the per-entry summary of kns_cli/summary.py.

    python -m kns_cli.engine_run up --stack dev [--verbose] -- pulumi up --yes ...

The engine's whole output (with `--diff`, every changed field's values) goes to
`build/logs/<stack>-<action>-<UTC time>.log` (the newest KEEP_LOGS are kept), whose path is
printed; `--verbose` (VERBOSE=1, or `scripts/up.sh ... --diff`) also shows it on the
terminal. What the summary and the progress read is the engine's event log (`--event-log`,
which the CLI offers with PULUMI_DEBUG_COMMANDS=true): the preview's steps (planning
events), the update's steps and finished objects, policy violations and diagnostics.
`pulumi up` starts that log again (truncates it) when the update follows its preview, so
the progress reader starts again from the top when the file shrinks, and the summary reads
the finished log: the update's own events.

Progress counts the resources the update finished (its events) against the total of the
preview `pulumi up` runs first (the "Resources:" block it prints: the update phase's event
log has no planning events). On a terminal it is one line rewritten in place; otherwise
(CI) a plain line each time another quarter is done. The exit status is the engine's.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterator, Mapping, Optional, Sequence

from plan import stacks

from . import summary as summary_module

KEEP_LOGS = 20
POLL_SECONDS = 0.5
TAIL_LINES = 15  # of the log, when the engine failed without saying why in its events


def log_path(log_dir: Path, stack: str, action: str, now: Optional[datetime] = None) -> Path:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    return log_dir / f"{stack}-{action}-{stamp}.log"


def prune(log_dir: Path, keep: int = KEEP_LOGS) -> None:
    logs = sorted(log_dir.glob("*.log"), key=lambda p: p.stat().st_mtime)
    for old in logs[:-keep] if keep else logs:
        old.unlink(missing_ok=True)


class Progress:
    """Objects done of the total: a line rewritten in place on a terminal, a plain line per
    quarter reached elsewhere (only the last when several are reached at once)."""

    def __init__(self, out: IO[str], tty: bool, stack: str = "") -> None:
        # The stack on every line: entry stacks run side by side interleave their lines.
        self.out, self.tty, self.where = out, tty, f" in {stack}" if stack else ""
        self.quarter = 0
        self.shown = ""

    def update(self, done: int, total: int) -> None:
        if total <= 0:
            return
        done = min(done, total)
        if self.tty:
            text = f"applied {done} of {total} resources{self.where}"
            if text != self.shown:
                self.out.write(f"\r{text}")
                self.out.flush()
                self.shown = text
            return
        quarter = done * 4 // total
        if quarter > self.quarter:
            self.quarter = quarter
            self.out.write(f"applied {done} of {total} resources{self.where} ({quarter * 25}%)\n")
            self.out.flush()

    def close(self) -> None:
        if self.tty and self.shown:
            self.out.write("\n")
            self.out.flush()


# A line of the engine's "Resources:" block: `    + 186 to create`, `    12 unchanged`.
RESOURCE_COUNT = re.compile(rb"^\s+(?:[-+~]+\s*)?(\d+) (?:to create|to update|to replace|to delete|unchanged)\s*$")


class Planned:
    """The total of the first "Resources:" block the engine prints (its preview's)."""

    def __init__(self) -> None:
        self.total: Optional[int] = None
        self._counting: Optional[int] = None

    def line(self, text: bytes) -> None:
        if self.total is not None:
            return
        if text.strip() == b"Resources:":
            self._counting = 0
        elif self._counting is not None:
            match = RESOURCE_COUNT.match(text)
            if match:
                self._counting += int(match[1])
            else:
                self.total, self._counting = self._counting, None


def copy_output(source: IO[bytes], log: IO[bytes], echo: Optional[IO[bytes]], planned: Planned) -> None:
    pending = b""
    for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
        log.write(chunk)
        log.flush()
        if echo is not None:
            echo.write(chunk)
            echo.flush()
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            planned.line(line)


@contextmanager
def interruptible() -> Iterator[list[int]]:
    """While the engine runs, SIGINT (which its process group gets too) is noted instead of
    raised: the engine finishes what is in flight and exits, and this process goes on
    reading its events to the end and reports, never a traceback."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def run(action: str, stack: str, command: Sequence[str], *, verbose: bool, log_dir: Path,
        out: IO[str], err: IO[str], tty: bool, env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Path] = None, outputs: Optional[dict[str, Any]] = None,
        totals: Optional[dict[str, int]] = None) -> int:
    """Run `command` (in `cwd`, with `env`: default this process's) with an event log; print
    the progress to `err` and the summary to `out`. `outputs` gets the program's exports as
    the run computed them, `totals` the summary's objects per op (for a total over stacks)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_path(log_dir, stack, action)
    env = {**(os.environ if env is None else env), "PULUMI_DEBUG_COMMANDS": "true"}
    with interruptible() as interrupted, tempfile.TemporaryDirectory(prefix="kns-engine-") as tmp, \
            open(path, "wb") as log:
        events_file = Path(tmp) / "events.jsonl"
        events_file.touch()
        proc = subprocess.Popen([*command, "--event-log", str(events_file)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, cwd=cwd)
        echo = sys.stdout.buffer if verbose else None
        planned = Planned()
        copier = threading.Thread(target=copy_output, args=(proc.stdout, log, echo, planned), daemon=True)
        copier.start()
        progress = Progress(err, tty and not verbose, stack)
        # A log the engine writes once (a preview, an update without one) is read as it is
        # written, so that reading it overlaps the engine's work: at 1,000 entries it is
        # about 100 MB, seconds of parsing (docs/benchmarks.md, section 13). A log it
        # starts again is read whole at the end, when no start can be missed.
        once = action != "up" or "--skip-preview" in command
        done = 0
        pending = ""
        events = summary_module.Events()
        with open(events_file, encoding="utf-8", errors="replace") as stream:
            while True:
                finished = proc.poll() is not None
                if os.fstat(stream.fileno()).st_size < stream.tell():
                    # The engine starts the log again for the update after its preview.
                    stream.seek(0)
                    pending, done = "", 0
                pending += stream.read()
                lines = pending.split("\n")
                pending = lines.pop()
                if once:
                    summary_module.add_lines(events, lines)
                    done = events.done
                else:
                    done += sum(1 for line in lines if '"resOutputsEvent"' in line and '"planning":true' not in line)
                if action == "up" and planned.total:
                    progress.update(done, planned.total)
                if finished:
                    break
                time.sleep(POLL_SECONDS)
        if once:
            summary_module.add_lines(events, [pending])
        else:
            events = summary_module.read_events(events_file.read_text(encoding="utf-8", errors="replace"))
        copier.join()
        if action == "up" and planned.total:
            progress.update(events.done, planned.total)  # the whole log: its last events included
        progress.close()
    status = proc.returncode
    if interrupted:
        # The engine had the same SIGINT (Ctrl-C, a CI cancel) and stopped; its state may be
        # behind the cluster, and a lock may be left if it was then killed.
        err.write(f"Interrupted: the engine stopped (exit {status}); `./kns recover --stack {stacks.role(stack).base}` "
                  "makes state, cluster and config agree (docs/operations.md)\n")
        status = status or 130
    if outputs is not None:
        outputs.update(events.stack_outputs)
    prune(log_dir)
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    steps = events.applied if action == "up" and events.applied else events.planned
    if verbose:
        out.write("\n")
    out.write(summary_module.render_run(action, stack, steps, events.violations, events.diagnostics, shown))
    if totals is not None:
        for op, count in summary_module.totals(steps).items():
            totals[op] = totals.get(op, 0) + count
    if status != 0 and not any(d["severity"] == "error" for d in events.diagnostics):
        lines = path.read_text(encoding="utf-8", errors="replace").rstrip("\n").splitlines()[-TAIL_LINES:]
        out.write(f"The engine failed (exit {status}); the end of its output:\n")
        out.write("".join(f"  {line}\n" for line in lines))
    out.flush()
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kns_cli.engine_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "preview", "destroy", "refresh"))
    parser.add_argument("--stack", required=True)
    parser.add_argument("--verbose", action="store_true", help="show the engine's output on the terminal too")
    parser.add_argument("--log-dir", type=Path, default=Path("build/logs"))
    given = list(sys.argv[1:] if argv is None else argv)
    split = given.index("--") if "--" in given else len(given)
    args = parser.parse_args(given[:split])
    command = given[split + 1:]
    if not command:
        parser.error("the engine command is missing (after --)")
    return run(args.action, args.stack, command, verbose=args.verbose, log_dir=args.log_dir,
               out=sys.stdout, err=sys.stderr, tty=sys.stderr.isatty())


if __name__ == "__main__":
    sys.exit(main())
