"""`./kns applied`: the commit whose config the stack last applied in full, recorded with the
stack itself (a Pulumi stack tag, `kns:appliedCommit`) so that CI's next apply starts from
it, not from whatever the push event calls "before" (scripts/ci-up.sh, docs/ci.md). A run
that was cancelled, failed or superseded records nothing, so its changes stay in the next
run's range; an entry added and removed between two records is in neither commit and so
is never asked for.

    ./kns applied --stack STACK                 print the recorded commit (nothing when none)
    ./kns applied --stack STACK --record REV    record REV (resolved to its full hash)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Optional

from . import preview as engine

TAG = "kns:appliedCommit"
NO_TAG = "not found for stack"


class AppliedFailed(Exception):
    """The backend could not be read or written: the message says which and why."""


def _env(project_dir: Path, stack: str, environ: Mapping[str, str]) -> dict[str, str]:
    return engine.engine_environment(project_dir, stack, (), engine.toolchain(), environ)


def read(project_dir: Path, stack: str, environ: Mapping[str, str]) -> Optional[str]:
    """The recorded commit, or None for a stack the backend does not have or that has no record."""
    done = engine._pulumi(["stack", "tag", "get", TAG, "--stack", stack], project_dir,
                          _env(project_dir, stack, environ), capture_output=True)
    if done.returncode == 0:
        return done.stdout.strip() or None
    if NO_TAG in done.stderr or engine.NO_SUCH_STACK in done.stderr:
        return None
    raise AppliedFailed(f"cannot read stack {stack}'s record: {done.stderr.strip()}")


def resolve(project_dir: Path, rev: str) -> str:
    done = subprocess.run(["git", "-C", str(project_dir), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AppliedFailed(f"{rev} is not a commit of the repository at {project_dir}")
    return done.stdout.strip()


def record(project_dir: Path, stack: str, rev: str, environ: Mapping[str, str]) -> str:
    commit = resolve(project_dir, rev)
    done = engine._pulumi(["stack", "tag", "set", TAG, commit, "--stack", stack], project_dir,
                          _env(project_dir, stack, environ), capture_output=True)
    if done.returncode != 0:
        raise AppliedFailed(f"cannot record {commit} on stack {stack}: {done.stderr.strip()}")
    return commit


def add_parser(commands: argparse._SubParsersAction) -> None:
    applied = commands.add_parser(
        "applied", help="the commit the stack last applied in full (CI's record)",
        description="Print the commit recorded as the stack's last complete apply (nothing when there is none), "
                    "or record one with --record. scripts/ci-up.sh applies what changed since it and records "
                    "HEAD once everything applied. Exit 1 when the backend cannot be read or written. "
                    "See docs/ci.md.")
    applied.add_argument("--record", metavar="REV", help="record this commit (e.g. HEAD) as applied")
    applied.set_defaults(run=run, engine=True)


def run(args: argparse.Namespace) -> int:
    project_dir = Path(args.project_dir).resolve()
    try:
        if args.record:
            print(f"kns applied: stack {args.stack}: {record(project_dir, args.stack, args.record, os.environ)} "
                  "recorded as applied", file=sys.stderr)
        else:
            print(read(project_dir, args.stack, os.environ) or "")
    except (AppliedFailed, engine.PreviewFailed) as exc:
        print(f"kns applied: {exc}", file=sys.stderr)
        return 1
    return 0
