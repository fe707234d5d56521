"""Targeted runs (`./kns preview ENTRY...`, `./kns up ENTRY...`): the URNs of the named
entries' resources, and the one switch that lets the program register only those entries.

`./kns` runs `pulumi preview` or `pulumi up` with `--target <URN>... --target-dependents`,
the URNs of `entry_urns` (from `plan/inventory.py`, the list of what components/ registers)
and, for `up`, those the stack's state holds for each named entry the config no longer has;
and it sets `ONLY_ENTRIES` to the names the config has. The program then registers the
platform (cluster, provider, node pools, schedulers, queues: what entries depend on) and the
named entries only, instead of every entry: the engine would leave the others alone anyway
(untargeted resources are `same` steps, never diffed), but registering them is most of a
run's time on a large stack.

Why this cannot lose or misreport anything (Pulumi 3.259, `resource/deploy/step_generator.go`):

- it applies only in a run `./kns` started (`config.invocation.started_by_kns`: a token in
  `KNS_TARGETED_RUN` that the pulumi command's `--message` carries). The variable exported
  in a shell would otherwise narrow a later plain `pulumi preview` or `pulumi up`, which
  has no targets and would then delete every other entry (issue 20): with it set, any other
  run, preview or update, is refused with a config error that says to unset it;
- under `--target`, the engine deletes only what is targeted, with its children and
  dependents (`GenerateDeletes`, `getTargetDependents`). A resource in state that is not
  targeted and that the program did not register gets an untargeted `same` step: it stays
  in state as it was, and on the cluster (tests/test_drift.py proves it on a control plane:
  other entries' objects keep their UIDs and resourceVersions). The named entries' own
  resources are all registered, so nothing of theirs is deleted that a full run would not
  delete; a removed entry's resources are targeted on purpose, and deleted;
- the platform is registered and untargeted: never diffed nor changed. `./kns up` refuses
  to run when anything shared changed since the last full `up` (config/fingerprint.py), so
  the entries it applies meet the platform the config describes;
- the names are checked: an unknown one stops the run rather than applying nothing.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from config.errors import ConfigError, Problem
from config.invocation import TARGETED_RUN, started_by_kns
from config.platform import PlatformConfig

from .inventory import registrations
from .model import WorkloadPlan
from .stackplan import StackPlan

ONLY_ENTRIES = "KNS_PREVIEW_ENTRIES"


def urn(stack: str, project: str, types: Sequence[str], name: str) -> str:
    """`urn:pulumi:STACK::PROJECT::PARENT-TYPES$TYPE::NAME` (a child of the stack itself
    has no parent type)."""
    return f"urn:pulumi:{stack}::{project}::{'$'.join(types)}::{name}"


def entry_urns(planned: StackPlan, names: Iterable[str], stack: str, project: str) -> list[str]:
    """The URN of every resource the program registers for the named entries: their
    components first, in the program's order."""
    owners = {planned.config.paths[plan.entry.name] for plan in planned.entries if plan.entry.name in set(names)}
    return [urn(stack, project, item.types, item.name) for item in registrations(planned) if item.owner in owners]


def only_entries(environ: Mapping[str, str]) -> list[str]:
    """The entry names `ONLY_ENTRIES` holds (comma-separated)."""
    return [name.strip() for name in environ.get(ONLY_ENTRIES, "").split(",") if name.strip()]


def not_started_by_kns(names: Sequence[str]) -> ConfigError:
    """The refusal of a run that has `ONLY_ENTRIES` set but was not started by `./kns`."""
    return ConfigError([Problem(ONLY_ENTRIES, (
        f"is set ({','.join(names)}), but this run was not started by ./kns (no {TARGETED_RUN} token carried by "
        f"its pulumi command's --message), so it is refused: narrowed to some entries, a plain pulumi preview or "
        f"up would show every other entry as a delete. Unset {ONLY_ENTRIES}, or run ./kns preview "
        f"{' '.join(names) or 'ENTRY...'}"))])


def plans_to_register(plans: list[WorkloadPlan], environ: Mapping[str, str]) -> list[WorkloadPlan]:
    """Every plan; with `ONLY_ENTRIES` set by `./kns` (even to no name: `./kns up` of removed
    entries only), only the named entries' plans. Raises ConfigError when `ONLY_ENTRIES` is
    set in a run that `./kns` did not start, or names an entry the stack does not have."""
    if ONLY_ENTRIES not in environ:
        return plans
    names = only_entries(environ)
    if not started_by_kns(environ):
        raise not_started_by_kns(names)
    known = {plan.entry.name for plan in plans}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError([Problem(ONLY_ENTRIES, f'no entry named "{name}" in this stack') for name in unknown])
    return [plan for plan in plans if plan.entry.name in set(names)]
