"""`./kns changed BASE [HEAD]`: the entries a change between two commits adds, changes or
removes, and the shared sections it changes, compared as validated config, not as text.

Each revision's tree is exported (`git archive`) to a temporary directory and read with the
offline loader of every `kns` command (`kns_cli.stack.load_stack`: the stack file, the job
files its `kns:jobFiles` globs match, the program's checks and planner), with this
checkout's code. Then, per entry name, what the program would build for the entry is
compared (`entry_fingerprint`): the validated entry as the program holds it (the profile
rules and default priority applied, every quantity in canonical form: `1024Mi` is `1Gi`,
a `memory: 4096` is `4Gi`) and its `WorkloadPlan` (namespace, labels, LimitRange, quota,
role rules, credentials, and the Job or CronJobs as finally built). Neither holds where
the entry is written, so an entry moved between the stack file and a job file, or between
job files, is unchanged; key order and YAML spelling are gone once validated.

Shared sections are everything that is not one entry's (`SHARED`): the cluster, node
pools, schedulers, queueing, queues, priorities, profiles, credentials and the Keycloak
secret, each compared as its validated model. The order of a list counts (profile rules
apply top to bottom). A profile change is shared even though it is one rule: other entries
use it (and the entries whose result it changes are listed as changed too). Encrypted
values (`secure:`) cannot be read offline; their ciphertext is compared as an opaque
string, so a secret set again, even to the same value, is a change of its section (or of
its entry). `program` is shared too: the files the program runs (`PROGRAM_FILES`) differ
between the two commits, as text, since the same config can then build other objects.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from config.errors import ConfigError
from config.fingerprint import PROGRAM, PROGRAM_FILES, SHARED, canonical
from config.loader import POLICY_CONFIG_VARIABLE
from config.platform import PlatformConfig
from config.source import NAMESPACE, read_stack_file
from plan.model import WorkloadPlan

from .stack import UsageError, load_stack

ENTRY_KEYS = ("jobs", "schedules")


@dataclass
class Snapshot:
    """One revision's stack: each entry's and each shared section's canonical JSON."""

    entries: dict[str, str] = field(default_factory=dict)
    shared: dict[str, str] = field(default_factory=dict)


@dataclass
class Revision:
    given: str  # as named on the command line
    commit: str

    @property
    def label(self) -> str:
        return f"{self.given} ({self.commit[:7]})" if self.given != self.commit else self.commit[:7]


def entry_fingerprint(plan: WorkloadPlan, sealed: Mapping[str, str]) -> dict[str, Any]:
    """What the program builds for one entry, and the ciphertexts of its encrypted values."""
    return {
        "entry": plan.entry.model_dump(mode="json"),
        "namespace": plan.namespace,
        "labels": plan.labels,
        "podSecurity": plan.pod_security,
        "resources": plan.resources,
        "limitRange": plan.limit_range,
        "quota": plan.quota,
        "roleRules": plan.role_rules,
        "scheduler": plan.scheduler_name,
        "credentials": plan.credentials,
        "objects": plan.objects,
        "service": plan.service,
        "networkPolicy": plan.network_policy,
        "sealed": dict(sealed),
    }


def shared_sections(cfg: PlatformConfig) -> dict[str, Any]:
    """Each shared section of the validated config."""
    def dump(model: Any) -> Any:
        return model.model_dump(mode="json")

    return {
        "kns:cluster": dump(cfg.cluster),
        "kns:nodePools": [dump(pool) for pool in cfg.node_pools],
        "kns:packingScheduler": dump(cfg.packing_scheduler),
        "kns:knsScheduler": dump(cfg.kns_scheduler),
        "kns:queueing": dump(cfg.queueing),
        "kns:queues": [dump(queue) for queue in cfg.queues],
        "kns:priorities": [dump(priority) for priority in cfg.priorities],
        "kns:profiles": [[rule, dump(profile)] for rule, profile in cfg.profiles],
        "kns:credentials": cfg.credentials,
        "kns:keycloakClientSecret": cfg.keycloak_client_secret,
        "kns:workers": [dump(worker) for worker in cfg.workers],
        "kns:reservations": [dump(reservation) for reservation in cfg.reservations],
        "kns:budgets": [dump(budget) for budget in cfg.budgets],
        "kns:network": dump(cfg.network),
        # The layout: a change moves state between stacks (`./kns restack`), which only a
        # full `make up` does, so CI's apply must not read it as "nothing changed".
        "kns:state": dump(cfg.state) if cfg.state is not None else None,
    }


def _ciphertexts(value: Any, path: str) -> dict[str, str]:
    """Config path -> ciphertext of every `{secure: ...}` value inside `value`."""
    if isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str):
        return {path: value["secure"]}
    found: dict[str, str] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found.update(_ciphertexts(item, f"{path}.{key}" if path else str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.update(_ciphertexts(item, f"{path}[{index}]"))
    return found


def sealed_values(config: Mapping[str, Any]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """The ciphertexts of a stack file's `kns:` config: per entry name (paths inside the
    entry, so that its place in the list does not count) and per shared section."""
    entries: dict[str, dict[str, str]] = {}
    sections: dict[str, dict[str, str]] = {}
    for full_key, value in config.items():
        namespace, _, key = str(full_key).partition(":")
        if namespace != NAMESPACE:
            continue
        if key in ENTRY_KEYS and isinstance(value, list):
            for index, item in enumerate(value):
                name = item.get("name") if isinstance(item, dict) else None
                found = _ciphertexts(item, "")
                if found:
                    entries.setdefault(str(name) if name is not None else f"{key}[{index}]", {}).update(found)
        else:
            found = _ciphertexts(value, str(full_key))
            if found:
                sections.setdefault(str(full_key), {}).update(found)
    return entries, sections


def snapshot(cfg: PlatformConfig, plans: list[WorkloadPlan], stack_config: Mapping[str, Any]) -> Snapshot:
    entry_sealed, section_sealed = sealed_values(stack_config)
    sections = shared_sections(cfg)
    for name in section_sealed:
        sections.setdefault(name, None)
    return Snapshot(
        entries={plan.entry.name: canonical(entry_fingerprint(plan, entry_sealed.get(plan.entry.name, {})))
                 for plan in plans},
        shared={name: canonical({"config": value, "sealed": section_sealed.get(name, {})})
                for name, value in sections.items()},
    )


def _git(project_dir: Path, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(project_dir), *args], capture_output=True, **kwargs)
    except OSError as exc:
        raise UsageError(f"cannot run git: {exc.strerror or exc}") from None


def resolve(project_dir: Path, rev: str) -> Revision:
    """The commit `rev` names in the project's repository; a usage error if none."""
    if rev.startswith("-"):
        raise UsageError(f'"{rev}" is not a revision')
    done = _git(project_dir, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", text=True)
    if done.returncode != 0 or not done.stdout.strip():
        inside = _git(project_dir, "rev-parse", "--git-dir", text=True)
        if inside.returncode != 0:
            raise UsageError(f"{project_dir} is not in a git repository, so it has no revisions to compare")
        raise UsageError(f'"{rev}" is not a commit of the repository at {project_dir} (git rev-parse: unknown '
                         "revision)")
    return Revision(rev, done.stdout.strip())


def export(project_dir: Path, revision: Revision, dest: Path) -> bool:
    """The project directory's tree at the revision, written to `dest`; False when the
    revision has no such directory (a project added later)."""
    prefix = _git(project_dir, "rev-parse", "--show-prefix", text=True).stdout.strip().rstrip("/")
    top = _git(project_dir, "rev-parse", "--show-toplevel", text=True).stdout.strip()
    tree = f"{revision.commit}:{prefix}" if prefix else revision.commit
    dest.mkdir(parents=True)
    if _git(project_dir, "cat-file", "-t", tree, text=True).stdout.strip() not in ("tree", "commit"):
        return False
    # From the top: run in a subdirectory, `git archive` would look for it inside `tree`.
    archive = subprocess.Popen(["git", "-C", top, "archive", "--format=tar", tree],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert archive.stdout is not None
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    error = archive.stderr.read().decode(errors="replace").strip() if archive.stderr else ""
    if archive.wait() != 0:
        raise UsageError(f"cannot read the project directory at {revision.label}: {error or 'git archive failed'}")
    if untar.returncode != 0:
        raise UsageError(f"cannot unpack the tree of {revision.label}: {untar.stderr.decode(errors='replace').strip()}")
    return True


def program_changes(project_dir: Path, base: Revision, head: Revision) -> list[str]:
    """The program's files (`PROGRAM_FILES`) that differ between the two commits."""
    done = _git(project_dir, "diff", "--name-only", "--no-renames", base.commit, head.commit, "--",
                *PROGRAM_FILES, text=True)
    if done.returncode != 0:
        raise UsageError(f"git diff {base.label} {head.label} failed: {done.stderr.strip()}")
    return done.stdout.split()


def load_at(project_dir: Path, revision: Revision, stack: str, where: Path,
            environ: Mapping[str, str]) -> Optional[Snapshot]:
    """The revision's snapshot, or None when it has no stack file. Raises `ConfigError`
    (the program's problems) or `UsageError`, both saying which revision."""
    if not export(project_dir, revision, where) or not (where / f"Pulumi.{stack}.yaml").is_file():
        return None
    try:
        cfg, plans = load_stack(where, stack, environ)
        stack_config = read_stack_file(where, stack).config or {}
    except UsageError as exc:
        raise UsageError(f"at {revision.label}: {str(exc).replace(str(where), f'<{revision.given}>')}") from None
    return snapshot(cfg, plans, stack_config)


class InvalidAt(Exception):
    """The config is invalid at one or both revisions: the messages to print (exit 1)."""


def compare(project_dir: Path, stack: str, base_rev: str, head_rev: str,
            environ: Mapping[str, str]) -> dict[str, Any]:
    """The report of `./kns changed`: added, changed and removed entry names (sorted), and
    the shared sections that changed (in `SHARED` order, then `program`)."""
    project_dir = Path(project_dir).resolve()
    base, head = resolve(project_dir, base_rev), resolve(project_dir, head_rev)
    policy = environ.get(POLICY_CONFIG_VARIABLE)
    if policy and not Path(policy).is_absolute():  # the operator's file, read as `validate` reads it
        environ = {**environ, POLICY_CONFIG_VARIABLE: str(project_dir / policy)}
    invalid: list[str] = []
    snapshots: dict[str, Optional[Snapshot]] = {}
    with tempfile.TemporaryDirectory(prefix="kns-changed-") as tmp:
        for side, revision in (("base", base), ("head", head)):
            where = Path(tmp) / side
            try:
                snapshots[side] = load_at(project_dir, revision, stack, where, environ)
            except ConfigError as exc:
                invalid.append(f"kns changed: stack {stack} is invalid at {revision.label}:\n"
                               + str(exc).replace(str(where), f"<{revision.given}>"))
    if invalid:
        raise InvalidAt("\n".join(invalid))
    old, new = snapshots["base"], snapshots["head"]
    if new is None:
        raise UsageError(f"no stack file Pulumi.{stack}.yaml at {head.label}")
    program = program_changes(project_dir, base, head)
    if old is None:  # a new stack: everything is new
        shared = [name for name in SHARED if name in new.shared] + sorted(set(new.shared) - set(SHARED))
        old = Snapshot()
    else:
        names = [*SHARED, *sorted((set(old.shared) | set(new.shared)) - set(SHARED))]
        shared = [name for name in names if old.shared.get(name) != new.shared.get(name)]
    return {
        "stack": stack,
        "base": base.commit,
        "head": head.commit,
        "added": sorted(set(new.entries) - set(old.entries)),
        "changed": sorted(name for name in set(old.entries) & set(new.entries)
                          if old.entries[name] != new.entries[name]),
        "removed": sorted(set(old.entries) - set(new.entries)),
        "shared": [*shared, *([PROGRAM] if program else [])],
        "programFiles": program,
    }


def render_text(report: Mapping[str, Any]) -> str:
    def part(key: str, word: str) -> str:
        names = report[key]
        return f"{len(names)} {word}" + (f" ({', '.join(names)})" if names else "")

    shared = (f"shared sections changed: {', '.join(report['shared'])}" if report["shared"]
              else "shared sections unchanged")
    return (f"stack {report['stack']}: {part('added', 'added')}, {part('changed', 'changed')}, "
            f"{part('removed', 'removed')}; {shared}\n")


def up_plan(report: Mapping[str, Any]) -> str:
    """What CI applies for the change (scripts/ci-up.sh, docs/ci.md), one line: `targeted
    NAME...` when only entries changed (added, changed and removed ones), `full <why>` when
    anything shared did, `none` when the stack did not change."""
    if report["shared"]:
        return f"full shared sections changed: {', '.join(report['shared'])}"
    names = [*report["added"], *report["changed"], *report["removed"]]
    return f"targeted {' '.join(names)}" if names else "none"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "changed", help="the entries a change between two commits adds, changes or removes",
        description="Read the stack at two commits (the stack file and its job files, as validated config, not "
                    "as text) and list the entries HEAD adds, changes or removes against BASE, and the shared "
                    f"sections it changes ({', '.join(SHARED)}, and the program's own files). Offline. "
                    "Exit 1 when the config is invalid at either commit, 2 for a usage error (a revision git does not know, no stack file at HEAD). "
                    "See docs/cli.md.")
    parser.add_argument("base", metavar="BASE", help="the commit before the change (anything `git rev-parse` reads)")
    parser.add_argument("head", metavar="HEAD", nargs="?", default="HEAD",
                        help="the commit after it (default: HEAD, the commit checked out: uncommitted changes "
                             "are not read)")
    parser.add_argument("--format", choices=("text", "json", "up-plan"), default="text",
                        help="output format (default: text); up-plan: the one line CI's apply reads (`targeted "
                             "NAME...`, `full <why>` or `none`; docs/ci.md)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        report = compare(args.project_dir, args.stack, args.base, args.head, os.environ)
    except InvalidAt as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(report, indent=2))
    elif args.format == "up-plan":
        print(up_plan(report))
    else:
        sys.stdout.write(render_text(report))
    return 0
