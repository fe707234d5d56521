"""What an entry stack's run depends on, as digests (docs/entry-stacks.md, "What a full
`make up` runs").

A full `make up` runs the platform stack first; its program checks the whole config and
plans every entry. It exports two digests that the run of the entry stacks reads back:

- `checkedDigest`: the config it checked (the stack file as written, every entry as read,
  job files included) and the program. An entry stack whose program computes the same
  digest (`KNS_CHECKED`) knows the whole-config checks passed for exactly this config, and
  plans only the entries it holds;
- `entryStackDigests`: per entry stack, what its program would register (each entry's
  objects as planned, secrets left out) with the sections every entry depends on and the
  program. Each entry stack exports its own (`entryStackDigest`) when it runs; one whose
  last update succeeded with the digest the platform computes now has nothing to do, and
  `make up` does not start the engine for it.

The platform stack records its own, `platformStackDigest`: every section of the stack file
but the entries, the reservations' objects and pool cohorts as planned (they depend on the
entries and on the calendar), and the program. `make up` computes it offline first, as
`./kns validate` checks (kns_cli/fullrun.py), and does not start the platform's engine
either when it is the one recorded by the platform's last successful update.

Both kinds also cover the run's settings that change what is applied without being in the
config (`KNS_RUN_SETTINGS`, which the full run sets: the policy pack's config file).

Secrets never go into a digest: the stack file's encrypted values count as their
ciphertext (config/fingerprint.py), and a plan's credential sets by name only.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Iterable, Mapping, Optional

from config import fingerprint
from config.source import ENTRY_KEYS as SOURCE_ENTRY_KEYS, NAMESPACE

from . import stacks
from .model import WorkloadPlan

CHECKED_OUTPUT = "checkedDigest"
DIGESTS_OUTPUT = "entryStackDigests"
ENTRY_STACK_OUTPUT = "entryStackDigest"
# The environment variable the run of the entry stacks passes the platform's checkedDigest in.
CHECKED_ENV = "KNS_CHECKED"
PLATFORM_OUTPUT = "platformStackDigest"
# The run's settings that change what is applied (the policy pack config's content, as a
# digest), which the full run passes to every stack's program.
SETTINGS_ENV = "KNS_RUN_SETTINGS"
# The stack file's sections that are entries, held by the entry stacks.
ENTRY_KEYS = tuple(f"{NAMESPACE}:{key}" for key in SOURCE_ENTRY_KEYS)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Any) -> Any:
    """A plan's values as JSON: models dumped, dataclasses as dicts."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def plan_view(plan: WorkloadPlan) -> dict[str, Any]:
    """Everything of an entry's plan that decides what it registers; credential sets by
    name (their values are secrets)."""
    view = {f.name: _plain(getattr(plan, f.name)) for f in dataclasses.fields(plan)
            if f.name not in ("credentials", "account")}
    view["credentials"] = sorted(plan.credentials)
    return view


def entry_stack_digest(plans: Iterable[WorkloadPlan], stack_config: Mapping[str, Any], program: str,
                       settings: str = "", reads: Mapping[str, str] = {}) -> str:
    """What the entry stack holding `plans` registers, with what it depends on (`reads`:
    the kubeconfig files its providers read, config/kubeconfig.py read_digests)."""
    shared = fingerprint.shared_digests(stack_config)
    entries = {plan.entry.name: _sha(fingerprint.canonical(plan_view(plan))) for plan in plans}
    return _sha(fingerprint.canonical({"shared": shared, "program": program, "entries": entries,
                                       **({"settings": settings} if settings else {}),
                                       **({"reads": dict(reads)} if reads else {})}))


def entry_stack_digests(plans: Iterable[WorkloadPlan], base: str, entry_stacks: Optional[int],
                        stack_config: Mapping[str, Any], program: str, settings: str = "",
                        reads: Mapping[str, str] = {}) -> dict[str, str]:
    """`entryStackDigests`: every entry stack's digest (an empty one too)."""
    if entry_stacks is None:
        return {}
    held = stacks.group((p.entry.name for p in plans), base, entry_stacks)
    by_name = {p.entry.name: p for p in plans}
    return {stack: entry_stack_digest([by_name[n] for n in held.get(stack, [])], stack_config, program, settings,
                                      reads)
            for stack in stacks.stacks(base, entry_stacks)[1:]}


def platform_stack_digest(stack_config: Mapping[str, Any], program: str, reservation_objects: Any,
                          pool_cohorts: Any, settings: str = "", reads: Mapping[str, str] = {}) -> str:
    """What the platform stack of a stack with entry stacks registers: every section of
    the stack file but the entries, what the reservations and the pools they hold part of
    are planned to be now (plan/reservations.py), the program, the run's settings and the
    kubeconfig files its providers read (`reads`)."""
    sections = {key: value for key, value in stack_config.items() if key not in ENTRY_KEYS}
    return _sha(fingerprint.canonical({"config": sections, "program": program,
                                       "reservations": _plain(reservation_objects), "cohorts": _plain(pool_cohorts),
                                       **({"settings": settings} if settings else {}),
                                       **({"reads": dict(reads)} if reads else {})}))


def checked_digest(stack_config: Mapping[str, Any], entries: Iterable[Any], program: str) -> str:
    """The config the whole-config checks passed for: the stack file as written, every
    entry as read (job files' too, as models) and the program."""
    return _sha(fingerprint.canonical({"config": stack_config, "entries": [_plain(e) for e in entries],
                                       "program": program}))
