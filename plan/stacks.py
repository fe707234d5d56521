"""Entry stacks (`kns:state.entryStacks`, docs/entry-stacks.md): which Pulumi stack holds
which part of a stack's state. Pure: names in, names out.

Unset, the stack holds everything. With `entryStacks: N` the stack (the platform stack)
holds the platform only, and entry stack `<stack>.entries-<i>` holds the entries whose
name hashes to `i`: a one-entry `./kns up` then reads and writes one stack of about 1/N of
the entries, whatever the platform's size (the engine's cost grows with the state a run
carries, not with what it changes: docs/benchmarks.md, section 13). The hash is of the
entry's name, the stable key of everything the entry owns, so an entry stays in its stack
as others come and go; only a change of N moves entries (`./kns restack`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Iterable, Optional

from config.errors import Problem
from config.loader import Checked
from config.rules import ENTRY_STACK_SUFFIX, ENTRY_STACK_UNKNOWN

_SUFFIX = re.compile(ENTRY_STACK_SUFFIX)
# The stack `make` and `./kns` run when none is named: the one with a committed passphrase.
DEV = "dev"


@dataclass(frozen=True)
class Role:
    """What one Pulumi stack of a stack holds: the platform stack (`index` None) or entry stack `index`."""

    base: str
    index: Optional[int] = None

    @property
    def name(self) -> str:
        return self.base if self.index is None else entry_stack(self.base, self.index)


def role(stack: str) -> Role:
    """The role a Pulumi stack's name gives it."""
    found = _SUFFIX.match(stack)
    return Role(found.group(1), int(found.group(2))) if found else Role(stack)


def entry_stack(base: str, index: int) -> str:
    return f"{base}.entries-{index}"


def index_of(name: str, entry_stacks: int) -> int:
    """The entry stack of an entry: a hash of its name (the same on every machine and Python)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % entry_stacks


def holder(base: str, name: str, entry_stacks: Optional[int]) -> str:
    """The Pulumi stack that holds entry `name`."""
    return base if entry_stacks is None else entry_stack(base, index_of(name, entry_stacks))


def stacks(base: str, entry_stacks: Optional[int]) -> list[str]:
    """Every Pulumi stack of the stack, the platform's first (the order of `make up`)."""
    return [base] + ([] if entry_stacks is None else [entry_stack(base, i) for i in range(entry_stacks)])


def holds(this: Role, name: str, entry_stacks: Optional[int]) -> bool:
    """Whether the stack of role `this` holds entry `name`."""
    return holder(this.base, name, entry_stacks) == this.name


def make_command(target: str, stack: str) -> str:
    """`make TARGET` for the stack, as a hint prints it: one copied for a stack other than
    dev must run on that stack, not on the Makefile's default."""
    base = role(stack).base
    return f"make {target}" if base == DEV else f"KNS_STACK={base} make {target}"


def kns_command(command: str, stack: str) -> str:
    """`./kns COMMAND` for the stack, as a hint prints it (`make_command`'s reason)."""
    base = role(stack).base
    return f"./kns {command}" if base == DEV else f"./kns {command} --stack {base}"


def config_arguments(stack: str) -> list[str]:
    """What a pulumi command of this Pulumi stack needs to read the stack's config: an entry
    stack has none of its own (`--config-file Pulumi.<stack>.yaml`)."""
    this = role(stack)
    return [] if this.index is None else ["--config-file", f"Pulumi.{this.base}.yaml"]


def check_role(this: Role, checked: Checked) -> Optional[int]:
    """The config's entry stacks, with `role_problems` added to the checked config's
    problems (raised with every other one by planning)."""
    entry_stacks = checked.config.state.entry_stacks if checked.config.state else None
    checked.problems.items.extend(role_problems(this, entry_stacks))
    return entry_stacks


def role_problems(this: Role, entry_stacks: Optional[int]) -> list[Problem]:
    """Why the program may not run as `this` with the config's `entry_stacks`: a stack named
    like an entry stack (`<stack>.entries-<n>`) the config does not have. The program and
    the offline `kns` commands add these to the config's own problems."""
    if this.index is None:
        return []
    if entry_stacks is None:
        why = "it sets no kns:state.entryStacks"
    elif this.index >= entry_stacks:
        why = f"its entry stacks are {entry_stack(this.base, 0)} to {entry_stack(this.base, entry_stacks - 1)}"
    else:
        return []
    return [Problem("kns:state.entryStacks", f"stack {this.name} {ENTRY_STACK_UNKNOWN.message} ({this.base}): {why}")]


def group(names: Iterable[str], base: str, entry_stacks: Optional[int]) -> dict[str, list[str]]:
    """Names by the Pulumi stack that holds them, in `stacks` order."""
    out: dict[str, list[str]] = {}
    for name in names:
        out.setdefault(holder(base, name, entry_stacks), []).append(name)
    order = stacks(base, entry_stacks)
    return {stack: out[stack] for stack in order if stack in out}
