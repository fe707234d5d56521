"""Run one engine command for `make up` / `make preview` (scripts/up.sh) and print what a
reader needs: progress while it runs, then the per-entry summary of kns_cli/summary.py.

    python -m kns_cli.engine_run up --stack dev [--verbose] -- pulumi up --yes ...

The engine's whole output (with `--diff`, every changed field's values) goes to
`build/logs/<stack>-<action>-<UTC time>.log` (the newest KEEP_LOGS are kept), whose path is
printed; `--verbose` (VERBOSE=1, or `scripts/up.sh ... --diff`) also shows it on the
terminal. What the summary and the progress read is the engine's event log (`--event-log`,
which the CLI offers with PULUMI_DEBUG_COMMANDS=true): the preview's steps (planning
events), the update's steps and finished objects, policy violations and diagnostics.

Progress counts the objects the update finished against those its preview planned. On a
terminal it is one line rewritten in place; otherwise (CI) a plain line each time another
quarter is done. The exit status is the engine's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Optional, Sequence

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

    def __init__(self, out: IO[str], tty: bool) -> None:
        self.out, self.tty = out, tty
        self.quarter = 0
        self.shown = ""

    def update(self, done: int, total: int) -> None:
        if total <= 0:
            return
        done = min(done, total)
        if self.tty:
            text = f"applied {done} of {total} objects"
            if text != self.shown:
                self.out.write(f"\r{text}")
                self.out.flush()
                self.shown = text
            return
        quarter = done * 4 // total
        if quarter > self.quarter:
            self.quarter = quarter
            self.out.write(f"applied {done} of {total} objects ({quarter * 25}%)\n")
            self.out.flush()

    def close(self) -> None:
        if self.tty and self.shown:
            self.out.write("\n")
            self.out.flush()


def copy_output(source: IO[bytes], log: IO[bytes], echo: Optional[IO[bytes]]) -> None:
    for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
        log.write(chunk)
        log.flush()
        if echo is not None:
            echo.write(chunk)
            echo.flush()


def run(action: str, stack: str, command: Sequence[str], *, verbose: bool, log_dir: Path,
        out: IO[str], err: IO[str], tty: bool) -> int:
    """Run `command` with an event log; print the progress to `err` and the summary to `out`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_path(log_dir, stack, action)
    env = {**os.environ, "PULUMI_DEBUG_COMMANDS": "true"}
    with tempfile.TemporaryDirectory(prefix="kns-engine-") as tmp, open(path, "wb") as log:
        events_file = Path(tmp) / "events.jsonl"
        events_file.touch()
        proc = subprocess.Popen([*command, "--event-log", str(events_file)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env)
        echo = sys.stdout.buffer if verbose else None
        copier = threading.Thread(target=copy_output, args=(proc.stdout, log, echo), daemon=True)
        copier.start()
        progress = Progress(err, tty and not verbose)
        events = summary_module.Events()
        pending = ""
        with open(events_file, encoding="utf-8", errors="replace") as stream:
            while True:
                finished = proc.poll() is not None
                pending += stream.read()
                lines = pending.split("\n")
                pending = lines.pop()
                for line in lines:
                    parsed = summary_module.read_events(line)
                    for kind in ("planned", "applied", "violations", "diagnostics"):
                        getattr(events, kind).extend(getattr(parsed, kind))
                    events.done += parsed.done
                if action == "up" and events.applied:
                    progress.update(events.done, events.planned_objects())
                if finished:
                    break
                time.sleep(POLL_SECONDS)
            tail = summary_module.read_events(pending + stream.read())
            for kind in ("planned", "applied", "violations", "diagnostics"):
                getattr(events, kind).extend(getattr(tail, kind))
        copier.join()
        progress.close()
    status = proc.returncode
    prune(log_dir)
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    steps = events.applied if action == "up" and events.applied else events.planned
    if verbose:
        out.write("\n")
    out.write(summary_module.render_run(action, stack, steps, events.violations, events.diagnostics, shown))
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
