"""The one place that turns raw stack config into `PlatformConfig` (config/platform.py):
a step per section (`STEPS`) validates it with its model, then steps run the checks across
them (config/checks.py), collecting every problem.

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
from chrono import clock
from chrono.prescale import Primers
from .budgets import Budget, check_budgets, ttl_problems
from .network import check_network
from .platform import PlatformConfig
from .reservations import Reservation, check_entry_references, check_reservations
from .rules import JOB_FILE_KEYS, at_worker
from .source import KNOWN_KEYS, NAMESPACE, SECRET_KEYS, StackFile, item_name, render_path, restore_order


@dataclass
class Checked:
    """The config as read and checked, and every problem found so far."""

    config: PlatformConfig
    problems: Problems
    # The instant the checks computed at (the run's, chrono/clock.py): planning uses it too.
    now: datetime

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


@dataclass
class _Reading:
    """The raw config, the options of one `check_config`, and what its steps have read so
    far: each step reads or checks one section, with what the steps before it found."""

    raw: Mapping[str, Any]
    project_dir: Path
    stack: str
    secret_keys: frozenset[str]
    environ: Mapping[str, str]
    sealed: frozenset[str]
    now: datetime
    problems: Problems = field(default_factory=Problems)
    cluster: Optional[Cluster] = None
    packing: Optional[PackingScheduler] = None
    kns: Optional[KnsScheduler] = None
    profiles: list[tuple[str, Profile]] = field(default_factory=list)
    pools: list[NodePool] = field(default_factory=list)
    # Named but invalid: name -> the path whose problems say why.
    broken_pools: dict[str, str] = field(default_factory=dict)
    manager_pools: list[NodePool] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    pool_worker: dict[str, str] = field(default_factory=dict)
    worker_index: dict[str, int] = field(default_factory=dict)
    worker_servers: dict[str, str] = field(default_factory=dict)
    state: Optional[StateLayout] = None
    queueing: Queueing = field(default_factory=Queueing)
    raw_queues: list[Any] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    broken_queues: set[str] = field(default_factory=set)
    raw_priorities: list[Any] = field(default_factory=list)
    priorities: list[Priority] = field(default_factory=list)
    broken_priorities: set[str] = field(default_factory=set)
    reservations: list[Reservation] = field(default_factory=list)
    broken_reservations: set[str] = field(default_factory=set)
    network: Network = field(default_factory=Network)
    budgets: list[Budget] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)
    # Entries whose model refused them, with their paths: the checks that need only raw keys.
    unchecked: list[tuple[str, dict]] = field(default_factory=list)
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    secret: Any = None
    queue_rules: dict[str, str] = field(default_factory=dict)
    priority_sources: dict[str, str] = field(default_factory=dict)
    primers: dict[str, Primers] = field(default_factory=dict)
    reservation_warnings: list[str] = field(default_factory=list)
    network_warnings: list[str] = field(default_factory=list)
    policy_config: Optional[str] = None

    @property
    def queue_names(self) -> set[str]:
        return {q.name for q in self.queues}

    @property
    def workloads(self) -> list[Workload]:
        return [*self.jobs, *self.schedules]

    def config(self) -> PlatformConfig:
        assert self.cluster is not None and self.packing is not None and self.kns is not None
        return PlatformConfig(
            cluster=self.cluster,
            node_pools=self.pools,
            packing_scheduler=self.packing,
            kns_scheduler=self.kns,
            profiles=self.profiles,
            jobs=self.jobs,
            schedules=self.schedules,
            keycloak_client_secret=self.secret,
            credentials=self.credentials,
            paths=self.paths,
            stack=self.stack,
            primers=self.primers,
            queueing=self.queueing,
            queues=self.queues,
            queue_rules=self.queue_rules,
            priorities=self.priorities,
            priority_sources=self.priority_sources,
            policy_config=self.policy_config,
            workers=self.workers,
            pool_worker=self.pool_worker,
            worker_servers=self.worker_servers,
            state=self.state,
            reservations=self.reservations,
            budgets=self.budgets,
            network=self.network,
            warnings=self.reservation_warnings + self.network_warnings,
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
    check them across sections, a step per section (`STEPS`, in order: the problems keep
    it). Raises `ConfigError` only when there is no config to plan (the cluster or a
    scheduler section is invalid). `sealed`: config paths whose values are encrypted and so
    cannot be read (offline); the checks that need them are left to the program, which has
    them."""
    reading = _Reading({key: value for key, value in raw.items() if value is not None},  # empty is unset
                       project_dir, stack, secret_keys, os.environ if environ is None else environ, sealed,
                       now or clock.now())
    for step in STEPS:
        step(reading)
    return Checked(reading.config(), reading.problems, reading.now)


def _keys(r: _Reading) -> None:
    """Every `kns:` key is one the program reads; a secret one is set as a secret."""
    for key in r.raw:
        if key not in KNOWN_KEYS:
            close = closest(key, KNOWN_KEYS)
            hint = f'did you mean "kns:{close}"?' if close else f"known keys: {', '.join('kns:' + k for k in KNOWN_KEYS)}"
            r.problems.add(f"{NAMESPACE}:{key}", f"unknown key; {hint}")
    for key in SECRET_KEYS:
        if r.raw.get(key) is not None and key not in r.secret_keys:
            r.problems.add(
                f"{NAMESPACE}:{key}",
                f"must be a secret: set it with `pulumi config set --secret {NAMESPACE}:{key} ...`",
            )


def _cluster(r: _Reading) -> None:
    """`kns:cluster` and the two schedulers' sections."""
    if "cluster" in r.raw:
        r.cluster = r.problems.validate(Cluster, r.raw["cluster"], "kns:cluster")
    else:
        r.problems.add("kns:cluster", "is required (at least {name: ...})")
    r.packing = r.problems.validate(PackingScheduler, r.raw.get("packingScheduler") or {}, "kns:packingScheduler")
    r.kns = r.problems.validate(KnsScheduler, r.raw.get("knsScheduler") or {}, "kns:knsScheduler")


def _profiles(r: _Reading) -> None:
    """`kns:profiles`, each rule's settings in their order."""
    raw_profiles = r.raw.get("profiles") or {}
    if not isinstance(raw_profiles, dict):
        r.problems.add("kns:profiles", "must be a mapping of rule (*, @group or user) to settings")
        return
    for rule, body in raw_profiles.items():
        profile = r.problems.validate(Profile, body or {}, f"kns:profiles[{rule}]")
        if profile is not None:
            r.profiles.append((str(rule), profile))


def _node_pools(r: _Reading) -> None:
    """`kns:nodePools`, then `kns:workers` with their own pools: the site's pools."""
    for i, item in enumerate(_list(r.raw, "nodePools", r.problems)):
        pool_path = _entry_path("kns:nodePools", item, i)
        pool = r.problems.validate(NodePool, item, pool_path)
        if pool is not None:
            r.pools.append(pool)
        elif isinstance(item_name(item), str):
            r.broken_pools[item_name(item)] = pool_path
    r.manager_pools = list(r.pools)
    r.workers, r.pool_worker, r.worker_index = _workers(r.raw, r.pools, r.broken_pools, r.problems)


def _state(r: _Reading) -> None:
    """`kns:state`."""
    if r.raw.get("state") is not None:
        r.state = r.problems.validate(StateLayout, r.raw["state"], "kns:state")


def _queueing(r: _Reading) -> None:
    """`kns:queueing`, `kns:queues` and `kns:priorities`."""
    raw_queueing = r.raw.get("queueing") or {}
    queueing = r.problems.validate(Queueing, raw_queueing, "kns:queueing")
    if queueing is None:
        # Its problem is reported; `enabled: true`, if written, still holds, so the queued
        # entries are not also told that queueing is off.
        enabled = isinstance(raw_queueing, dict) and raw_queueing.get("enabled") is True
        queueing = Queueing(enabled=enabled)
    r.queueing = queueing
    r.raw_queues = _list(r.raw, "queues", r.problems)
    r.queues, r.broken_queues = _named_items(r.raw_queues, "queues", Queue, r.problems)
    r.raw_priorities = _list(r.raw, "priorities", r.problems)
    r.priorities, r.broken_priorities = _named_items(r.raw_priorities, "priorities", Priority, r.problems)


def _reservations(r: _Reading) -> None:
    """`kns:reservations`."""
    r.reservations, r.broken_reservations = _named_items(_list(r.raw, "reservations", r.problems), "reservations",
                                                         Reservation, r.problems, quiet=True)


def _network(r: _Reading) -> None:
    """`kns:network`."""
    written = r.raw.get("network")
    network = r.problems.validate(Network, written, "kns:network") if written is not None else None
    if network is None:  # its problems are reported; `isolation: none`, if written, still holds
        network = Network(isolation="none") if isinstance(written, dict) and written.get("isolation") == "none" \
            else Network()
    r.network = network


def _budgets(r: _Reading) -> None:
    """`kns:budgets`, and the queues they count."""
    raw_budgets = _list(r.raw, "budgets", r.problems)
    r.budgets, _ = _named_items(raw_budgets, "budgets", Budget, r.problems, quiet=True)
    check_budgets(r.budgets, bool(raw_budgets), r.queueing, r.queues, r.broken_queues, r.problems)


def _entries(r: _Reading) -> None:
    """`kns:jobs`, `kns:schedules` and the job files' entries: one name each, across all."""
    problems = r.problems
    entries: list[Entry] = []
    for kind, model in (("jobs", Job), ("schedules", Schedule)):
        for i, item in enumerate(_list(r.raw, kind, problems)):
            entries.append(Entry(_entry_path(f"kns:{kind}", item, i), item, model))
    entries.extend(_job_file_entries(r.raw, r.project_dir, problems))
    first_use: dict[str, str] = {}
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
            r.unchecked.append((path, item))
        if entry is None or duplicate:
            continue
        r.paths[entry.name] = path
        (r.schedules if isinstance(entry, Schedule) else r.jobs).append(entry)


def _credentials(r: _Reading) -> None:
    """`kns:credentials` and `kns:keycloakClientSecret`."""
    credentials = r.raw.get("credentials") or {}
    if not (isinstance(credentials, dict) and all(
        isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
        for files in credentials.values()
    )):
        r.problems.add("kns:credentials", "must map a set name to {file name: content}")
        credentials = {}
    r.credentials = credentials
    r.secret = r.raw.get("keycloakClientSecret")
    if r.secret is not None and not isinstance(r.secret, str):
        r.problems.add("kns:keycloakClientSecret", "must be a string")
    if r.kns is not None and r.kns.enabled and r.kns.keycloak is not None and r.secret is None:
        r.problems.add(
            "kns:keycloakClientSecret",
            "is required when kns:knsScheduler.keycloak is set: "
            "`pulumi config set --secret kns:keycloakClientSecret ...`",
        )


def _check_site(r: _Reading) -> None:
    """The cluster, every cluster's pools (one name each across the site), the workers."""
    problems, cluster = r.problems, r.cluster
    if cluster is not None:
        checks.check_cluster(cluster, r.project_dir, r.environ, problems, r.sealed)
    site_name = cluster.name if cluster is not None else ""
    taken: dict[str, str] = {}
    declared = ("kns:cluster", cluster.kubernetes_version) if cluster is not None and cluster.kubernetes_version else None
    checks.check_pools(r.manager_pools, site_name, problems, taken=taken, version=declared)
    for worker in r.workers:
        checks.check_pools(worker.node_pools, site_name, problems, f"kns:workers[{worker.name}].nodePools", taken,
                           (f"kns:workers[{worker.name}]", worker.kubernetes_version)
                           if worker.kubernetes_version else None)
    if r.workers:
        r.worker_servers = checks.check_workers(r.workers, r.worker_index, cluster, r.secret_keys, r.project_dir,
                                                r.environ, problems, r.sealed)


def _check_devices(r: _Reading) -> None:
    """The DRA pools' device class mappings fit Kueue's Configuration."""
    if r.queueing.enabled:
        pool_paths = {p.name: f"kns:nodePools[{p.name}]" for p in r.manager_pools}
        pool_paths.update({p.name: f"kns:workers[{w.name}].nodePools[{p.name}]"
                           for w in r.workers for p in w.node_pools})
        r.problems.extend(devices.mapping_problems(r.pools, pool_paths))


def _check_credentials(r: _Reading) -> None:
    checks.check_credential_sets(r.credentials, r.problems)


def _check_queues(r: _Reading) -> None:
    """The queues and priorities, and the entries' and profiles' references to them."""
    problems = r.problems
    checks.check_queues(r.queueing, bool(r.raw_queues), r.queues, r.pools, r.broken_pools, problems)
    checks.check_queue_references(r.workloads, r.profiles, r.queueing, r.queue_names, r.broken_queues, r.paths,
                                  problems)
    checks.check_priorities(r.queueing, bool(r.raw_priorities), r.priorities, problems)
    checks.check_priority_references(r.workloads, r.profiles, {p.name for p in r.priorities}, r.broken_priorities,
                                     r.paths, problems)


def _apply_profiles(r: _Reading) -> None:
    """Each entry with its profile's defaults and its priority, held to its profile's rules;
    its reservation exists, and gives its pool when it names none."""
    problems, paths = r.problems, r.paths
    explicit = {e.name for e in r.workloads if e.priority is not None}
    own_reservations = {e.name for e in r.workloads if e.reservation is not None}
    r.priority_sources = {name: "the entry" for name in explicit}
    r.jobs = checks.apply_profiles(r.jobs, r.profiles, paths, problems, r.queue_rules,  # type: ignore[assignment]
                                   r.priority_sources)
    r.schedules = checks.apply_profiles(r.schedules, r.profiles, paths, problems,  # type: ignore[assignment]
                                        r.queue_rules, r.priority_sources)
    r.jobs = checks.assign_priorities(r.jobs, explicit, r.priorities, paths, problems,  # type: ignore[assignment]
                                      r.priority_sources)
    r.schedules = checks.assign_priorities(r.schedules, explicit, r.priorities, paths,  # type: ignore[assignment]
                                           problems, r.priority_sources)
    check_entry_references(r.workloads, r.profiles, r.reservations, paths, problems, r.broken_reservations,
                           own_reservations)
    pool_names = {p.name for p in r.pools}
    r.jobs = _on_reserved_pools(r.jobs, r.reservations, pool_names)  # type: ignore[assignment]
    r.schedules = _on_reserved_pools(r.schedules, r.reservations, pool_names)  # type: ignore[assignment]
    prioritized = {e.name for e in r.workloads if e.priority is not None}
    r.priority_sources = {name: why for name, why in r.priority_sources.items() if name in prioritized}


def _check_entries(r: _Reading) -> None:
    """Each entry's pool, credentials, site, namespace and labels; the raw keys of those
    their model refused."""
    problems, workloads, cluster = r.problems, r.workloads, r.cluster
    checks.check_workloads(workloads, r.pools, r.credentials, r.paths, problems, r.broken_pools)
    if r.workers:
        checks.check_site(cluster, r.queueing, r.queues, workloads, {p.name for p in r.manager_pools}, r.paths,
                          problems, {p.name: w.name for w in r.workers if w.drain for p in w.node_pools})
    checks.check_multikueue_settings(r.queueing, bool(r.workers), problems)
    checks.check_raw_references(r.unchecked, r.pools, problems, r.broken_pools,
                                (r.queueing, r.queue_names, r.broken_queues))
    if cluster is not None:
        installs_kueue = r.queueing.enabled and r.queueing.install
        checks.check_namespaces(workloads, cluster, r.paths, problems,
                                names.KUEUE_INSTALL_NAMESPACES if installs_kueue else frozenset())
        checks.check_dynamic_labels(workloads, cluster.name, r.stack, r.paths, problems)


def _check_network(r: _Reading) -> None:
    serves = (r.kns is not None and r.kns.enabled) or (r.queueing.enabled and r.queueing.install)
    r.network_warnings = check_network(r.network, r.workloads, r.cluster, r.paths, r.problems, serves)


def _check_times(r: _Reading) -> None:
    """What runs at a time: schedules' primers, reservations' windows, budgets' counts."""
    r.primers = checks.derive_primers(r.schedules, r.paths, r.problems, r.now)
    broken_entries = {path.rpartition("[")[2][:-1]: path for path, _ in r.unchecked}
    r.reservation_warnings = check_reservations(r.reservations, {p.name: p for p in r.pools}, r.queueing, r.queues,
                                                r.workloads, [p.name for p in r.priorities], r.pool_worker,
                                                r.problems, r.now, broken_entries=broken_entries)
    r.problems.extend(ttl_problems(r.budgets, [(r.paths[e.name], e.queue, e.ttl_hours) for e in r.workloads]))


def _plannable(r: _Reading) -> None:
    """Without the cluster or a scheduler section there is no config to plan: raise."""
    if r.cluster is None or r.packing is None or r.kns is None:
        r.problems.raise_if_any()


def _policy_config(r: _Reading) -> None:
    r.policy_config = read_policy_config(r.environ, r.project_dir, r.problems)


# The steps of `check_config`, in order: each reads or checks a section with what the ones
# before it read.
STEPS = (_keys, _cluster, _profiles, _node_pools, _state, _queueing, _reservations, _network, _budgets, _entries,
         _credentials, _check_site, _check_devices, _check_credentials, _check_queues, _apply_profiles,
         _check_entries, _check_network, _check_times, _plannable, _policy_config)


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
