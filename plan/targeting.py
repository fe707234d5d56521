"""Targeted previews (`./kns preview ENTRY...`): the URNs of the named entries' resources,
and the one switch that lets the program register only those entries in a preview.

`kns preview` runs `pulumi preview --target <URN>... --target-dependents` with the URNs of
`entry_urns` (from `plan/inventory.py`, the list of what components/ registers), and sets
`ONLY_ENTRIES` to the entries' names. The program then registers the platform (cluster,
provider, node pools, schedulers, queues: what entries depend on) and the named entries
only, instead of every entry: the engine would skip the others anyway (untargeted
resources are `same` steps, never diffed), but registering them is most of a preview's
time on a large stack.

Why this cannot lose or misreport anything:

- it applies only in a dry run (`pulumi preview`, or the preview half of `pulumi up`), never
  in an update, so it cannot change state: an update always registers every entry;
- it applies only in a run `./kns` started (`config.invocation.started_by_kns`: a token in
  `KNS_TARGETED_RUN` that the pulumi command's `--message` carries). The variable exported
  in a shell would otherwise narrow a later plain `pulumi preview`, which then shows every
  other entry as a delete (issue 20): with it set, any other run, preview or update, is
  refused with a config error that says to unset it;
- under `--target`, Pulumi 3.259 deletes only targeted resources and what depends on them
  (`GenerateDeletes`), which are the named entries' own resources: the program registers
  all of those, so nothing is shown as deleted that a full preview would not delete, and
  an entry it leaves out is neither diffed nor deleted, as if it were registered and
  untargeted;
- the names are checked: an unknown one stops the run rather than previewing nothing.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from config.errors import ConfigError, Problem
from config.invocation import TARGETED_RUN, started_by_kns
from config.loader import PlatformConfig

from .inventory import registrations
from .model import WorkloadPlan

ONLY_ENTRIES = "KNS_PREVIEW_ENTRIES"


def urn(stack: str, project: str, types: Sequence[str], name: str) -> str:
    """`urn:pulumi:STACK::PROJECT::PARENT-TYPES$TYPE::NAME` (a child of the stack itself
    has no parent type)."""
    return f"urn:pulumi:{stack}::{project}::{'$'.join(types)}::{name}"


def entry_urns(cfg: PlatformConfig, plans: Iterable[WorkloadPlan], names: Iterable[str], stack: str,
               project: str) -> list[str]:
    """The URN of every resource the program registers for the named entries: their
    components first, in the program's order."""
    wanted = [plan for plan in plans if plan.entry.name in set(names)]
    owners = {cfg.paths[plan.entry.name] for plan in wanted}
    return [urn(stack, project, item.types, item.name)
            for item in registrations(cfg, wanted) if item.owner in owners]


def only_entries(environ: Mapping[str, str]) -> list[str]:
    """The entry names `ONLY_ENTRIES` holds (comma-separated), none when it is unset."""
    return [name.strip() for name in environ.get(ONLY_ENTRIES, "").split(",") if name.strip()]


def not_started_by_kns(names: Sequence[str]) -> ConfigError:
    """The refusal of a run that has `ONLY_ENTRIES` set but was not started by `./kns`."""
    return ConfigError([Problem(ONLY_ENTRIES, (
        f"is set ({','.join(names)}), but this run was not started by ./kns (no {TARGETED_RUN} token carried by "
        f"its pulumi command's --message), so it is refused: narrowed to some entries, a plain pulumi preview or "
        f"up would show every other entry as a delete. Unset {ONLY_ENTRIES}, or run ./kns preview {' '.join(names)}"))])


def plans_to_register(plans: list[WorkloadPlan], environ: Mapping[str, str], dry_run: bool) -> list[WorkloadPlan]:
    """Every plan; in a dry run with `ONLY_ENTRIES` set by `./kns`, only the named entries'
    plans. Raises ConfigError when `ONLY_ENTRIES` is set in a run (preview or update) that
    `./kns` did not start, or names an entry the stack does not have."""
    names = only_entries(environ)
    if not names:
        return plans
    if not started_by_kns(environ):
        raise not_started_by_kns(names)
    if not dry_run:
        return plans
    known = {plan.entry.name for plan in plans}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError([Problem(ONLY_ENTRIES, f'no entry named "{name}" in this stack') for name in unknown])
    return [plan for plan in plans if plan.entry.name in set(names)]
