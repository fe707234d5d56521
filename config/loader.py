"""The one place that turns raw stack config into `PlatformConfig`: validate each section
with its model, then run the checks across them (config/checks.py), collecting every
problem.

Pure: raw values in (config/source.py reads them), `Checked` out, so every rule is
testable without Pulumi. `check_config` leaves the problems for the planner to add its
own to (plan/planner.py), so one message lists both; `parse_config` raises them.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
import difflib
import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping, NamedTuple, Optional, TypeVar

from pydantic import BaseModel

from . import checks, devices, names, yamldoc
from .errors import ConfigError, Problem, Problems, closest
from .models import (
    Cluster,
    Job,
    JobFile,
    Network,
    KnsScheduler,
    NodePool,
    PackingScheduler,
    Priority,
    Profile,
    Queue,
    Queueing,
    Schedule,
    StateLayout,
    Worker,
    Workload,
)
from chrono.prescale import Primers
from .budgets import Budget, check_budgets, ttl_problems
from .network import check_network
from .reservations import Reservation, check_entry_references, check_reservations
from .rules import JOB_FILE_KEYS, at_worker
from .source import KNOWN_KEYS, NAMESPACE, SECRET_KEYS, StackFile, item_name, render_path, restore_order


@dataclass
class PlatformConfig:
    """Validated stack config; components receive parts of it, never raw dicts."""

    cluster: Cluster
    node_pools: list[NodePool]
    packing_scheduler: PackingScheduler
    kns_scheduler: KnsScheduler
    profiles: list[tuple[str, Profile]]
    jobs: list[Job]
    schedules: list[Schedule]
    keycloak_client_secret: Optional[str] = None
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    stack: str = "dev"
    primers: dict[str, Primers] = field(default_factory=dict)
    queueing: Queueing = field(default_factory=Queueing)
    queues: list[Queue] = field(default_factory=list)
    # Entry name -> the profile rule that gave the entry its queue (the entry names none).
    queue_rules: dict[str, str] = field(default_factory=dict)
    priorities: list[Priority] = field(default_factory=list)
    # Entry name -> where its priority came from (the entry, a profile rule, a default).
    priority_sources: dict[str, str] = field(default_factory=dict)
    # The text of the policy pack's config file (KNS_POLICY_CONFIG), None without one.
    policy_config: Optional[str] = None
    # A MultiKueue site (docs/multicluster.md): the worker clusters; `node_pools` then holds
    # every pool of the site, and `pool_worker` names the worker of each worker's pool.
    workers: list[Worker] = field(default_factory=list)
    pool_worker: dict[str, str] = field(default_factory=dict)
    # Worker name -> the URL the manager's Kueue dials (its apiServer, or its context's server).
    worker_servers: dict[str, str] = field(default_factory=dict)
    # `kns:state` (docs/entry-stacks.md): None, one stack holds everything.
    state: Optional[StateLayout] = None
    # `kns:reservations` (docs/reservations.md).
    reservations: list[Reservation] = field(default_factory=list)
    # `kns:budgets` (docs/budgets.md).
    budgets: list[Budget] = field(default_factory=list)
    # `kns:network` (docs/network.md).
    network: Network = field(default_factory=Network)
    # What is allowed but likely not meant (a one-off window already over); shown by
    # `./kns validate`, `./kns explain` and the program.
    warnings: list[str] = field(default_factory=list)

    @property
    def workloads(self) -> list[Workload]:
        return [*self.jobs, *self.schedules]

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.node_pools if p.name == name)

    def pools_of(self, worker: Optional[str]) -> list[NodePool]:
        """The pools of one cluster of the site: a worker's, or the manager's (None)."""
        return [p for p in self.node_pools if self.pool_worker.get(p.name) == worker]


@dataclass
class Checked:
    """The config as read and checked, and every problem found so far."""

    config: PlatformConfig
    problems: Problems

    def clean(self) -> PlatformConfig:
        """The config without the entries that already have a problem: planning them
        would only repeat it."""

        def dirty(path: str) -> bool:
            return any(p.path == path or p.path.startswith((path + ".", path + "[")) for p in self.problems.items)

        paths = self.config.paths
        return dataclasses.replace(
            self.config,
            jobs=[j for j in self.config.jobs if not dirty(paths[j.name])],
            schedules=[s for s in self.config.schedules if not dirty(paths[s.name])],
            reservations=[r for r in self.config.reservations if not dirty(f"kns:reservations[{r.name}]")],
        )


def check_config(
    raw: Mapping[str, Any],
    *,
    project_dir: Path,
    stack: str = "dev",
    secret_keys: frozenset[str] = frozenset(SECRET_KEYS),
    environ: Mapping[str, str] | None = None,
    sealed: frozenset[str] = frozenset(),
    now: Optional[datetime] = None,
) -> Checked:
    """Validate raw config values (keys without the `kns:` prefix, values decoded) and
    check them across sections. Raises `ConfigError` only when there is no config to
    plan (the cluster or a scheduler section is invalid). `sealed`: config paths whose
    values are encrypted and so cannot be read (offline); the checks that need them are
    left to the program, which has them."""
    problems = Problems()
    environ = os.environ if environ is None else environ
    raw = {key: value for key, value in raw.items() if value is not None}  # empty is unset

    for key in raw:
        if key not in KNOWN_KEYS:
            close = closest(key, KNOWN_KEYS)
            hint = f'did you mean "kns:{close}"?' if close else f"known keys: {', '.join('kns:' + k for k in KNOWN_KEYS)}"
            problems.add(f"{NAMESPACE}:{key}", f"unknown key; {hint}")
    for key in SECRET_KEYS:
        if raw.get(key) is not None and key not in secret_keys:
            problems.add(
                f"{NAMESPACE}:{key}",
                f"must be a secret: set it with `pulumi config set --secret {NAMESPACE}:{key} ...`",
            )

    cluster = (
        problems.validate(Cluster, raw["cluster"], "kns:cluster")
        if "cluster" in raw
        else problems.add("kns:cluster", "is required (at least {name: ...})")
    )
    packing = problems.validate(PackingScheduler, raw.get("packingScheduler") or {}, "kns:packingScheduler")
    kns = problems.validate(KnsScheduler, raw.get("knsScheduler") or {}, "kns:knsScheduler")

    profiles: list[tuple[str, Profile]] = []
    raw_profiles = raw.get("profiles") or {}
    if not isinstance(raw_profiles, dict):
        problems.add("kns:profiles", "must be a mapping of rule (*, @group or user) to settings")
    else:
        for rule, body in raw_profiles.items():
            profile = problems.validate(Profile, body or {}, f"kns:profiles[{rule}]")
            if profile is not None:
                profiles.append((str(rule), profile))

    pools: list[NodePool] = []
    # Named but invalid: name -> the path whose problems say why.
    broken_pools: dict[str, str] = {}
    for i, item in enumerate(_list(raw, "nodePools", problems)):
        pool_path = _entry_path("kns:nodePools", item, i)
        pool = problems.validate(NodePool, item, pool_path)
        if pool is not None:
            pools.append(pool)
        elif isinstance(item_name(item), str):
            broken_pools[item_name(item)] = pool_path

    manager_pools = list(pools)
    workers, pool_worker, worker_index = _workers(raw, pools, broken_pools, problems)

    state = problems.validate(StateLayout, raw["state"], "kns:state") if raw.get("state") is not None else None

    raw_queueing = raw.get("queueing") or {}
    queueing = problems.validate(Queueing, raw_queueing, "kns:queueing")
    if queueing is None:
        # Its problem is reported; `enabled: true`, if written, still holds, so the queued
        # entries are not also told that queueing is off.
        enabled = isinstance(raw_queueing, dict) and raw_queueing.get("enabled") is True
        queueing = Queueing(enabled=enabled)
    raw_queues = _list(raw, "queues", problems)
    queues, broken_queues = _named_items(raw_queues, "queues", Queue, problems)
    queue_names = {q.name for q in queues}
    raw_priorities = _list(raw, "priorities", problems)
    priorities, broken_priorities = _named_items(raw_priorities, "priorities", Priority, problems)

    raw_reservations = _list(raw, "reservations", problems)
    reservations, broken_reservations = _named_items(raw_reservations, "reservations", Reservation, problems,
                                                     quiet=True)
    network = problems.validate(Network, raw["network"], "kns:network") if raw.get("network") is not None else None
    if network is None:  # its problems are reported; `isolation: none`, if written, still holds
        written = raw.get("network")
        network = Network(isolation="none") if isinstance(written, dict) and written.get("isolation") == "none" \
            else Network()
    raw_budgets = _list(raw, "budgets", problems)
    budgets, _ = _named_items(raw_budgets, "budgets", Budget, problems, quiet=True)
    check_budgets(budgets, bool(raw_budgets), queueing, queues, broken_queues, problems)

    paths: dict[str, str] = {}
    entries: list[Entry] = []
    for kind, model in (("jobs", Job), ("schedules", Schedule)):
        for i, item in enumerate(_list(raw, kind, problems)):
            entries.append(Entry(_entry_path(f"kns:{kind}", item, i), item, model))
    entries.extend(_job_file_entries(raw, project_dir, problems))

    jobs: list[Job] = []
    schedules: list[Schedule] = []
    first_use: dict[str, str] = {}
    unchecked: list[tuple[str, dict]] = []
    for path, item, model, lines in entries:
        name = item.get("name") if isinstance(item, dict) else None
        duplicate = isinstance(name, str) and name in first_use
        start = len(problems.items)
        if duplicate:
            problems.add(
                path + ".name",
                f'"{name}" is already used by an earlier entry, {first_use[name]}; '
                "names are unique across jobs and schedules",
            )
        elif isinstance(name, str):
            first_use[name] = path
        entry = problems.validate(model, item, path)
        # An entry's path names the first entry of its name: a later one's problems are
        # located in its own lines now, and only the first's lines are the path's.
        if duplicate:
            problems.locate_since(start, lines)
        else:
            problems.lines.update(lines)
        if entry is None and isinstance(item, dict):
            unchecked.append((path, item))
        if entry is None or duplicate:
            continue
        paths[entry.name] = path
        (schedules if isinstance(entry, Schedule) else jobs).append(entry)

    credentials = raw.get("credentials") or {}
    if not (isinstance(credentials, dict) and all(
        isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
        for files in credentials.values()
    )):
        problems.add("kns:credentials", "must map a set name to {file name: content}")
        credentials = {}

    secret = raw.get("keycloakClientSecret")
    if secret is not None and not isinstance(secret, str):
        problems.add("kns:keycloakClientSecret", "must be a string")

    if kns is not None and kns.enabled and kns.keycloak is not None and secret is None:
        problems.add(
            "kns:keycloakClientSecret",
            "is required when kns:knsScheduler.keycloak is set: "
            "`pulumi config set --secret kns:keycloakClientSecret ...`",
        )
    if cluster is not None:
        checks.check_cluster(cluster, project_dir, environ, problems, sealed)
    site_name = cluster.name if cluster is not None else ""
    taken: dict[str, str] = {}
    declared = ("kns:cluster", cluster.kubernetes_version) if cluster is not None and cluster.kubernetes_version else None
    checks.check_pools(manager_pools, site_name, problems, taken=taken, version=declared)
    for worker in workers:
        checks.check_pools(worker.node_pools, site_name, problems, f"kns:workers[{worker.name}].nodePools", taken,
                           (f"kns:workers[{worker.name}]", worker.kubernetes_version)
                           if worker.kubernetes_version else None)
    worker_servers = checks.check_workers(workers, worker_index, cluster, secret_keys, project_dir, environ, problems,
                                          sealed) if workers else {}
    if queueing.enabled:
        pool_paths = {p.name: f"kns:nodePools[{p.name}]" for p in manager_pools}
        pool_paths.update({p.name: f"kns:workers[{w.name}].nodePools[{p.name}]" for w in workers for p in w.node_pools})
        problems.extend(devices.mapping_problems(pools, pool_paths))
    checks.check_credential_sets(credentials, problems)
    checks.check_queues(queueing, bool(raw_queues), queues, pools, broken_pools, problems)
    checks.check_queue_references(jobs + schedules, profiles, queueing, queue_names, broken_queues, paths, problems)
    checks.check_priorities(queueing, bool(raw_priorities), priorities, problems)
    checks.check_priority_references(jobs + schedules, profiles, {p.name for p in priorities}, broken_priorities,
                                     paths, problems)
    explicit = {e.name for e in jobs + schedules if e.priority is not None}
    own_reservations = {e.name for e in jobs + schedules if e.reservation is not None}
    queue_rules: dict[str, str] = {}
    priority_sources: dict[str, str] = {name: "the entry" for name in explicit}
    jobs = checks.apply_profiles(jobs, profiles, paths, problems, queue_rules, priority_sources)  # type: ignore[assignment]
    schedules = checks.apply_profiles(schedules, profiles, paths, problems, queue_rules,  # type: ignore[assignment]
                                      priority_sources)
    jobs = checks.assign_priorities(jobs, explicit, priorities, paths, problems, priority_sources)  # type: ignore[assignment]
    schedules = checks.assign_priorities(schedules, explicit, priorities, paths, problems,  # type: ignore[assignment]
                                         priority_sources)
    check_entry_references(jobs + schedules, profiles, reservations, paths, problems, broken_reservations,
                           own_reservations)
    pool_names = {p.name for p in pools}
    jobs = _on_reserved_pools(jobs, reservations, pool_names)  # type: ignore[assignment]
    schedules = _on_reserved_pools(schedules, reservations, pool_names)  # type: ignore[assignment]
    prioritized = {e.name for e in jobs + schedules if e.priority is not None}
    priority_sources = {name: why for name, why in priority_sources.items() if name in prioritized}
    checks.check_workloads(jobs + schedules, pools, credentials, paths, problems, broken_pools)
    if workers:
        checks.check_site(cluster, queueing, queues, jobs + schedules, {p.name for p in manager_pools}, paths,
                          problems, {p.name: w.name for w in workers if w.drain for p in w.node_pools})
    checks.check_multikueue_settings(queueing, bool(workers), problems)
    checks.check_raw_references(unchecked, pools, problems, broken_pools, (queueing, queue_names, broken_queues))
    if cluster is not None:
        installs_kueue = queueing.enabled and queueing.install
        checks.check_namespaces(jobs + schedules, cluster, paths, problems,
                                names.KUEUE_INSTALL_NAMESPACES if installs_kueue else frozenset())
        checks.check_dynamic_labels(jobs + schedules, cluster.name, stack, paths, problems)

    serves = (kns is not None and kns.enabled) or (queueing.enabled and queueing.install)
    network_warnings = check_network(network, jobs + schedules, cluster, paths, problems, serves)

    primers = checks.derive_primers(schedules, paths, problems, now)
    broken_entries = {path.rpartition("[")[2][:-1]: path for path, _ in unchecked}
    warnings = check_reservations(reservations, {p.name: p for p in pools}, queueing, queues, jobs + schedules,
                                  [p.name for p in priorities], pool_worker, problems, now,
                                  broken_entries=broken_entries)
    problems.extend(ttl_problems(budgets, [(paths[e.name], e.queue, e.ttl_hours) for e in jobs + schedules]))

    if cluster is None or packing is None or kns is None:
        problems.raise_if_any()
    config = PlatformConfig(
        cluster=cluster,
        node_pools=pools,
        packing_scheduler=packing,
        kns_scheduler=kns,
        profiles=profiles,
        jobs=jobs,
        schedules=schedules,
        keycloak_client_secret=secret,
        credentials=credentials,
        paths=paths,
        stack=stack,
        primers=primers,
        queueing=queueing,
        queues=queues,
        queue_rules=queue_rules,
        priorities=priorities,
        priority_sources=priority_sources,
        policy_config=read_policy_config(environ, project_dir, problems),
        workers=workers,
        pool_worker=pool_worker,
        worker_servers=worker_servers,
        state=state,
        reservations=reservations,
        budgets=budgets,
        network=network,
        warnings=warnings + network_warnings,
    )
    return Checked(config, problems)


def _on_reserved_pools(entries: list[Workload], reservations: list[Reservation],
                       pool_names: set[str]) -> list[Workload]:
    """An entry that uses a reservation and names no pool runs on the reservation's (one
    that exists: the reservation's own problem says so otherwise)."""
    pools = {r.name: r.pool for r in reservations if r.pool in pool_names}
    return [e.model_copy(update={"pool": pools[e.reservation]})
            if e.reservation in pools and e.pool is None and e.pod_spec is None else e for e in entries]


def _workers(raw: Mapping[str, Any], pools: list[NodePool], broken_pools: dict[str, str],
             problems: Problems) -> tuple[list[Worker], dict[str, str], dict[str, int]]:
    """`kns:workers`: each worker, its pools validated one by one at their named paths and
    added to the site's `pools`; the worker of each of its pools; each worker's index in the
    list (where the stack file's encrypted values are). The pools of a worker that is itself
    invalid (under any key, a misspelt `nodePools` too) are broken at the worker's path: a
    queue naming one follows from the worker's problem."""
    workers: list[Worker] = []
    pool_worker: dict[str, str] = {}
    index: dict[str, int] = {}
    for i, item in enumerate(_list(raw, "workers", problems)):
        path = _entry_path("kns:workers", item, i)
        if not isinstance(item, dict):
            problems.add(path, "must be a mapping: {name, context or kubeconfig, nodePools}")
            continue
        before = len(problems.items)
        worker = problems.validate(Worker, {k: v for k, v in item.items() if k != "nodePools"}, path)
        problems.items[before:] = [dataclasses.replace(p, message=at_worker(p.message, i))
                                   for p in problems.items[before:]]
        raw_pools = item.get("nodePools") or []
        if not isinstance(raw_pools, list):
            problems.add(f"{path}.nodePools", f"must be a list, not {type(raw_pools).__name__}")
            raw_pools = []
        own: list[NodePool] = []
        for j, body in enumerate(raw_pools):
            pool_path = _entry_path(f"{path}.nodePools", body, j)
            pool = problems.validate(NodePool, body, pool_path)
            if pool is not None:
                own.append(pool)
            elif isinstance(item_name(body), str):
                broken_pools[item_name(body)] = pool_path
        if worker is None:
            for name in _listed_names(item):
                broken_pools.setdefault(name, path)
            continue
        index.setdefault(worker.name, i)
        workers.append(worker.model_copy(update={"node_pools": own}))
        pools.extend(own)
        for pool in own:
            pool_worker.setdefault(pool.name, worker.name)
    return workers, pool_worker, index


def _listed_names(item: Mapping[str, Any]) -> list[str]:
    """The names of the mappings listed under any key of `item`."""
    return [name for value in item.values() if isinstance(value, list)
            for name in map(item_name, value) if isinstance(name, str)]


M = TypeVar("M", bound=BaseModel)


def _named_items(items: list[Any], key: str, model: type[M], problems: Problems,
                 quiet: bool = False) -> tuple[list[M], set[str]]:
    """The valid items of a `kns:<key>` list of named objects, and the names of the invalid
    ones (an entry naming one points at its problems rather than calling it unknown).
    `quiet`: an item whose name is no DNS label is named by its index (its name may be a
    value pasted in the wrong place)."""
    valid: list[M] = []
    broken: set[str] = set()
    for i, item in enumerate(items):
        name = item_name(item)
        shown = item if not quiet or (isinstance(name, str) and names.dns1123_label_problem(name) is None) else None
        found = problems.validate(model, item, _entry_path(f"kns:{key}", shown, i))
        if found is not None:
            valid.append(found)
        elif isinstance(name, str):
            broken.add(name)
    return valid, broken


POLICY_CONFIG_VARIABLE = "KNS_POLICY_CONFIG"


def read_policy_config(environ: Mapping[str, str], project_dir: Path, problems: Problems) -> Optional[str]:
    """The text of the `--policy-pack-config` file that `make up`, `./kns preview` and
    `./kns recover` hand the policy pack (KNS_POLICY_CONFIG; a relative path is read from
    the project directory, where they run pulumi), so that the checks judge the program's
    objects with the pack's settings (docs/policy.md)."""
    name = environ.get(POLICY_CONFIG_VARIABLE)
    if not name:
        return None
    path = Path(name) if Path(name).is_absolute() else Path(project_dir) / name
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(POLICY_CONFIG_VARIABLE, f"cannot read the policy pack config {name} "
                                             f"({getattr(exc, 'strerror', None) or type(exc).__name__})")
        return None


def parse_config(raw: Mapping[str, Any], **options: Any) -> PlatformConfig:
    """`check_config`, raising every problem it finds as one `ConfigError`."""
    checked = check_config(raw, **options)
    checked.problems.raise_if_any()
    return checked.config


def check_stack_config(
    raw: Mapping[str, Any],
    stack_file: StackFile,
    *,
    project_dir: Path,
    stack: str,
    secret_keys: frozenset[str],
    environ: Mapping[str, str] | None = None,
    sealed: frozenset[str] = frozenset(),
    now: Optional[datetime] = None,
) -> Checked:
    """`check_config` of the config as delivered (`raw`, keys without `kns:`, values
    decoded) in the key order authored in Pulumi.<stack>.yaml, with the problems of that
    file's text. Shared by the program (`__main__.py`) and the offline `kns` commands."""
    authored = stack_file.authored
    if authored is not None:
        raw = {key: restore_order(value, authored.get(key)) for key, value in raw.items()}
    profiles = raw.get("profiles")
    if isinstance(profiles, dict) and len(profiles) > 1 and list(profiles) != list((authored or {}).get("profiles") or {}):
        raise ConfigError([*stack_file.problems, stack_file.locator(raw)(Problem(
            "kns:profiles",
            f"the order of its rules cannot be read from Pulumi.{stack}.yaml "
            "(the engine passes mappings with sorted keys); keep kns:profiles in that file",
        ))])
    try:
        checked = check_config(raw, project_dir=project_dir, stack=stack, secret_keys=secret_keys, environ=environ,
                               sealed=sealed, now=now)
    except ConfigError as exc:  # a section nothing can be planned without
        raise ConfigError(_with_text_problems(stack_file, raw, exc.problems)) from None
    checked.problems.items[:] = _with_text_problems(stack_file, raw, checked.problems.items)
    checked.problems.place = stack_file.locator(raw)
    return checked


def _with_text_problems(stack_file: StackFile, raw: Mapping[str, Any], found: list[Problem]) -> list[Problem]:
    """The stack file's own problems, then the checks' except at or below their places: a
    value the text makes ambiguous is reported once, as that (what the checks say of it
    depends on which YAML reader delivered it). Each at its line and column in the file."""
    places, locate = {p.path for p in stack_file.problems}, stack_file.locator(raw)
    return [*stack_file.problems, *(locate(p) for p in found
                                    if not any(p.path == q or p.path.startswith((q + ".", q + "[")) for q in places))]


def parse_stack_config(raw: Mapping[str, Any], stack_file: StackFile, **options: Any) -> PlatformConfig:
    """`check_stack_config`, raising every problem it finds as one `ConfigError`."""
    checked = check_stack_config(raw, stack_file, **options)
    checked.problems.raise_if_any()
    return checked.config


def _list(raw: Mapping[str, Any], key: str, problems: Problems) -> list[Any]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(f"kns:{key}", f"must be a list, not {type(value).__name__}")
        return []
    return value


def _entry_path(base: str, item: Any, index: int) -> str:
    """`kns:jobs[train-resnet]`: entries are named by their stable key when they have one."""
    name = item_name(item)
    return f"{base}[{name}]" if isinstance(name, str) and name else f"{base}[{index}]"


def _link_loop(project_dir: Path, pattern: str) -> Optional[str]:
    """The first directory link under the pattern's fixed part that leads back to one of
    its own ancestors (relative to the project), or None. `**` follows directory links, and
    through such a loop the glob grows without end."""
    fixed = []
    for part in Path(pattern).parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    start = project_dir.joinpath(*fixed)
    real_start = Path(os.path.realpath(start))
    pending = [(str(start), tuple(str(d) for d in (real_start, *real_start.parents)))]
    while pending:
        directory, ancestors = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_dir():
                    continue
            except OSError:
                continue
            real = os.path.realpath(entry.path)
            if real in ancestors:
                return os.path.relpath(entry.path, project_dir)
            pending.append((entry.path, (*ancestors, real)))
    return None


class Entry(NamedTuple):
    """An entry as read: its config path, raw value, model, and (in a job file) the line of
    each of its keys and items by config path."""

    path: str
    item: Any
    model: type[Workload]
    lines: Mapping[str, int] = MappingProxyType({})


def _job_file_entries(raw: Mapping[str, Any], project_dir: Path, problems: Problems) -> Iterator[Entry]:
    """Every entry of the job files `kns:jobFiles` names, in each file's order. Job files
    live in the project: a pattern or match outside it is refused, so a stack file cannot
    make the program read (and report on) any other file of the machine."""
    loaded: set[str] = set()
    root = os.path.realpath(project_dir)
    for i, pattern in enumerate(_list(raw, "jobFiles", problems)):
        if not isinstance(pattern, str) or not pattern.strip():
            problems.add(f"kns:jobFiles[{i}]", "must be a glob string")
            continue
        if os.path.isabs(pattern) or pattern.startswith("~") or ".." in Path(pattern).parts:
            problems.add(f"kns:jobFiles[{i}]", f'"{pattern}" leaves the project directory; job files are named '
                         "relative to it, without .. (for example jobs/*.yaml)")
            continue
        loop = _link_loop(project_dir, pattern) if "**" in pattern else None
        if loop:
            problems.add(f"kns:jobFiles[{i}]", f'"{pattern}" would follow the directory link "{loop}" round in a '
                         "loop (it leads back to a directory that contains it); remove the link or name the "
                         "files without **")
            continue
        matches = sorted(glob.glob(str(project_dir / pattern), recursive=True))
        if not matches:
            problems.add(f"kns:jobFiles[{i}]", f'"{pattern}" matches no file (relative to {project_dir})')
        for match in matches:
            real = os.path.realpath(match)
            rel = os.path.relpath(match, project_dir)
            if os.path.commonpath([root, real]) != root:
                problems.add(f"kns:jobFiles[{i}]", f'"{rel}" is a link to a file outside the project directory')
                continue
            if real in loaded or os.path.isdir(real):
                continue  # named by two globs: load it once
            loaded.add(real)
            lines: dict[tuple[Any, ...], int] = {}
            try:
                with open(match, "rb") as handle:
                    content, found = yamldoc.load(handle.read(), lines=lines)
            except OSError as exc:
                problems.add(rel, f"cannot be read ({exc.strerror or 'error'})")
                continue
            except yamldoc.YamlError as exc:
                problems.add(rel, str(exc))
                continue
            content = {} if content is None else content
            if not isinstance(content, dict):
                problems.add(rel, "must be a mapping with jobs: and/or schedules: lists")
                continue
            # Each entry's lines go with it (two entries may have one name); the file's own keys' here.
            by_entry: dict[tuple[Any, ...], dict[str, int]] = {}
            for steps, line in lines.items():
                where = by_entry.setdefault(steps[:2], {}) if len(steps) > 1 else problems.lines
                where[render_path(f"{rel}:", steps, content)] = line
            for problem in found:
                report = problems.settle if problem.value else problems.add
                report(render_path(f"{rel}:", problem.steps, content), problem.message,
                       problem.mark[0] if problem.mark else _line(problem.steps, lines))
                if problem.dropped:
                    problems.partial.append(render_path(f"{rel}:", problem.steps, content))
            # Unknown keys are reported without hiding the problems of the file's entries.
            for key in content:
                if key not in JobFile.model_fields:
                    close = closest(str(key), JobFile.model_fields)
                    hint = f'did you mean "{close}"?' if close else JOB_FILE_KEYS.message
                    problems.add(f"{rel}:{key}", f"unknown key; {hint}")
            # In the file's order: of two entries with one name, the later one is the duplicate.
            for kind in [key for key in content if key in ("jobs", "schedules")]:
                model = Job if kind == "jobs" else Schedule
                items = content.get(kind) or []
                if not isinstance(items, list):
                    problems.add(f"{rel}:{kind}", "must be a list")
                    continue
                for j, item in enumerate(items):
                    yield Entry(_entry_path(f"{rel}:{kind}", item, j), item, model, by_entry.get((kind, j), {}))


def _line(steps: tuple[Any, ...], lines: Mapping[tuple[Any, ...], int]) -> Optional[int]:
    """The line of the deepest of `steps` the file has (None: the file as a whole)."""
    for depth in range(len(steps), 0, -1):
        if steps[:depth] in lines:
            return lines[steps[:depth]]
    return None
