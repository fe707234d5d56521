"""Was this run of the program started by `./kns`? The guard of the targeting variable.

`./kns preview ENTRY...` narrows the program to the named entries with an environment
variable (`plan.targeting.ONLY_ENTRIES`). An environment variable outlives the command
that needed it: exported in a shell, it reaches every later `pulumi preview` or `pulumi
up`, where a program that registers only some entries makes every other entry look
deleted. So the variable is honoured only in a run `./kns` started, which it proves with
two things nobody sets by accident:

- the environment variable `TARGETED_RUN` (`KNS_TARGETED_RUN`) holds a random token, new
  for each run;
- the pulumi command that runs this program was given `--message kns-targeted:<token>`
  (`message_arguments`): the program is a child of the language host, itself a child of
  the `pulumi` CLI, so the program finds that command among its ancestors (`/proc/<pid>/
  stat` gives each process's parent, `/proc/<pid>/cmdline` its arguments).

An exported token does not carry over to a plain `pulumi preview`: its command line has no
such message. Without `/proc` (not Linux) nothing proves the marker, and a targeted run is
refused. No `kns_cli` import: the program (plan/targeting.py) calls `started_by_kns`.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Mapping, Optional, Sequence

TARGETED_RUN = "KNS_TARGETED_RUN"
MESSAGE_PREFIX = "kns-targeted:"
PROC = Path("/proc")
# How far up the process tree the `pulumi` command is looked for: the program is its
# grandchild (or a few levels further through an exec script or a shell).
MAX_DEPTH = 64


def new_token() -> str:
    """A token for one run: 128 random bits, as hex."""
    return secrets.token_hex(16)


def marker(token: str) -> str:
    """The `--message` text that goes with `token`."""
    return f"{MESSAGE_PREFIX}{token}"


def message_arguments(token: str) -> list[str]:
    """What `./kns` adds to the pulumi command it runs with `TARGETED_RUN=token`."""
    return ["--message", marker(token)]


def _parent(proc: Path, pid: int) -> Optional[int]:
    """The parent of `pid` from /proc/<pid>/stat (its fourth field, after the command
    name in parentheses, which may itself hold spaces and parentheses)."""
    try:
        text = (proc / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
        return int(text.rpartition(")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _argv(proc: Path, pid: int) -> list[str]:
    """The arguments of `pid` from /proc/<pid>/cmdline (NUL-separated), none if unreadable."""
    try:
        data = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    parts = data.decode("utf-8", errors="replace").split("\0")
    return parts[:-1] if parts[-1] == "" else parts


def pulumi_command(pid: Optional[int] = None, proc: Path = PROC) -> Optional[list[str]]:
    """The arguments of the nearest ancestor of `pid` (default: this process) whose argv[0]
    is `pulumi` (any directory): the pulumi CLI that runs this program. None if there is no
    such ancestor or /proc cannot tell."""
    current = _parent(proc, os.getpid() if pid is None else pid)
    seen: set[int] = set()
    while current is not None and current > 0 and current not in seen and len(seen) < MAX_DEPTH:
        seen.add(current)
        argv = _argv(proc, current)
        if argv and os.path.basename(argv[0]) == "pulumi":
            return argv
        current = _parent(proc, current)
    return None


def carries_marker(argv: Sequence[str], token: str) -> bool:
    """`argv` passes `--message kns-targeted:<token>` (or `--message=...`, `-m ...`)."""
    wanted = marker(token)
    for i, arg in enumerate(argv[1:], start=1):
        if arg in ("--message", "-m") and i + 1 < len(argv) and argv[i + 1] == wanted:
            return True
        if arg in (f"--message={wanted}", f"-m={wanted}", f"-m{wanted}"):
            return True
    return False


def started_by_kns(environ: Mapping[str, str], pid: Optional[int] = None, proc: Path = PROC) -> bool:
    """True when `environ` holds a token in `TARGETED_RUN` and the pulumi command running
    this program (an ancestor of `pid`, default this process) carries its marker."""
    token = environ.get(TARGETED_RUN, "").strip()
    if not token or any(ch.isspace() for ch in token):
        return False
    argv = pulumi_command(pid, proc)
    return argv is not None and carries_marker(argv, token)
