"""Checks across entries and sections, on models that are each valid alone.

Each check records what it finds in a `Problems` under the config path it is about and
returns; the loader (config/loader.py) runs them in order, so one run reports every
problem. What a single object can check itself is in config/models.py.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional

from chrono import prescale
from . import devices, karpenter, kubeconfig, multikueue, names, podspec, profile_rules, resolve, rules
from .errors import Problems, closest
from .models import Cluster, NodePool, Priority, Profile, Queue, Queueing, Schedule, Worker, Workload
from .rules import CREDENTIAL_FILE

_CREDENTIAL_FILE = re.compile(CREDENTIAL_FILE.pattern)

def check_cluster(
    cluster: Cluster, project_dir: Path, environ: Mapping[str, str], problems: Problems,
    sealed: frozenset[str] = frozenset(),
) -> None:
    """The context the provider would use is not a forbidden one (the JARVICE upstream).
    Names are compared without case and surrounding blanks: the one guard against the
    upstream cluster must not fall to a capital letter or a trailing space. A kubeconfig
    that is `sealed` (encrypted, read offline) is left to the program, which can read it."""
    forbidden = {_context_key(c) for c in cluster.forbidden_contexts}
    if cluster.context and _context_key(cluster.context) in forbidden:
        problems.add(
            "kns:cluster.context",
            f'"{cluster.context}" is listed in forbiddenContexts: the KNS needs cluster-admin and must '
            "own a dedicated cluster, never the JARVICE upstream one",
        )
        return
    if cluster.render_dir or cluster.context or "kns:cluster.kubeconfig" in sealed:
        return
    try:
        found = kubeconfig.read(cluster.kubeconfig, project_dir, environ)
        current = found.current if found is not None else None
    except kubeconfig.KubeconfigError as exc:
        problems.add("kns:cluster.kubeconfig", str(exc))
        return
    if current is not None and _context_key(current) in forbidden:
        problems.add(
            "kns:cluster",
            f'the kubeconfig\'s current context "{current}" is listed in forbiddenContexts: set '
            "kns:cluster.context to the dedicated KNS cluster",
        )
        return
    if cluster.kubeconfig and found is not None:  # one the stack names must be a kubeconfig Pulumi can use
        try:
            found.target(None)
        except kubeconfig.KubeconfigError as exc:
            problems.add("kns:cluster.kubeconfig", str(exc))


def check_workers(
    workers: list[Worker], index: Mapping[str, int], cluster: Optional[Cluster], secret_keys: frozenset[str],
    project_dir: Path, environ: Mapping[str, str], problems: Problems, sealed: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Each worker of a MultiKueue site is a dedicated cluster of its own, reached through
    a context or a secret kubeconfig, whose API server the manager's Kueue can dial: the
    forbidden-context guard of kns:cluster holds for it, no two clusters share a context,
    and the server (`apiServer`, or its context's) is a URL Kueue accepts. Returns the server
    of each worker whose server is known (an encrypted kubeconfig offline is not read).
    A message never shows a kubeconfig's content."""
    servers: dict[str, str] = {}
    if len(workers) > rules.SITE_WORKERS_MAX:
        problems.add("kns:workers", f"{len(workers)} workers: a MultiKueueConfig lists at most {rules.SITE_WORKERS_MAX} "
                     "clusters")
    forbidden = {_context_key(c) for c in (cluster.forbidden_contexts if cluster is not None else [])}
    rendered = cluster is not None and bool(cluster.render_dir)
    contexts: dict[str, str] = {}
    if cluster is not None and cluster.context:
        contexts[_context_key(cluster.context)] = "kns:cluster.context"
    seen: set[str] = set()
    for worker in workers:
        path = f"kns:workers[{worker.name}]"
        if worker.name in seen:
            problems.add(path + ".name", f'"{worker.name}" names another worker too; worker names are unique')
            continue
        seen.add(worker.name)
        where = f"kns:workers[{index[worker.name]}].kubeconfig"
        encrypted = where in sealed
        if worker.kubeconfig and kubeconfig.is_inline(worker.kubeconfig) and not encrypted and (
                "workers" not in secret_keys or sealed):
            problems.add(path + ".kubeconfig", rules.at_worker(
                rules.SITE_KUBECONFIG_SECRET.message, index[worker.name]))
        if worker.context:
            key = _context_key(worker.context)
            if key in forbidden:
                problems.add(path + ".context", f'"{worker.context}" is listed in kns:cluster.forbiddenContexts: '
                             "the KNS needs cluster-admin and must own a dedicated cluster, never the JARVICE "
                             "upstream one")
                continue
            if key in contexts:
                problems.add(path + ".context", f'"{worker.context}" is also {contexts[key]}: each cluster of the '
                             "site is its own")
                continue
            contexts[key] = f"the context of kns:workers[{worker.name}]"
        if rendered and cluster is not None and worker.name == cluster.name:
            problems.add(path + ".name", f'"{worker.name}" is kns:cluster.name too: a rendered site writes each '
                         "cluster into a directory of renderDir named after it")
        if encrypted or rendered:
            # Offline: an encrypted kubeconfig is the program's to read; a rendered site
            # reaches no cluster, and names a worker without apiServer by a reserved name.
            if worker.api_server or rendered:
                servers[worker.name] = worker.api_server or multikueue.RENDERED_SERVER.format(worker=worker.name)
            continue
        # What Pulumi reaches the worker with must be a kubeconfig holding the context, its
        # cluster and a server, whether or not apiServer names another URL for Kueue.
        try:
            found = kubeconfig.read(worker.kubeconfig, project_dir, environ)
            current = None if worker.context or found is None else found.current
            if current is not None and _context_key(current) in forbidden:
                problems.add(path + ".kubeconfig", f'its current context "{current}" is listed in '
                             "kns:cluster.forbiddenContexts: a worker is a dedicated KNS cluster")
                continue
            reached = found.target(worker.context) if found is not None else None
        except kubeconfig.KubeconfigError as exc:
            problems.add(path + (".kubeconfig" if worker.kubeconfig else ".context"), str(exc))
            continue
        if worker.api_server:
            servers[worker.name] = worker.api_server
            continue
        which = f'context "{worker.context}"' if worker.context else "kubeconfig's current context"
        if reached is None:
            problems.add(path, f"no kubeconfig the provider would read is found, so neither is the server of its "
                         f"{which}: set apiServer ({rules.SITE_API_SERVER.message})")
        elif (problem := multikueue.api_server_problem(reached.server)) is not None:
            problem = rules.at_worker(problem, index[worker.name])
            problems.add(path, f"the server of its {which} cannot be the one the manager dials ({problem}): set "
                         f"apiServer ({rules.SITE_API_SERVER.message})")
        else:
            servers[worker.name] = reached.server
    return servers


def check_site(cluster: Optional[Cluster], queueing: Queueing, queues: list[Queue], workloads: list[Workload],
               manager_pools: Iterable[str], paths: Mapping[str, str], problems: Problems,
               draining: Optional[Mapping[str, str]] = None) -> None:
    """A stack with kns:workers is a MultiKueue site: Kueue on (rendered, each cluster apart), its
    queues hold the workers' pools, and every entry that runs pods is queued (only queued
    Jobs are dispatched to a worker) on a worker's pool. A drain (`draining`: pool -> its
    draining worker) may not leave a queue that is not held without a worker serving it."""
    draining = draining or {}
    for queue in queues:
        if queue.quota and not queue.hold and all(pool in draining for pool in queue.quota):
            workers = list(dict.fromkeys(draining[pool] for pool in queue.quota))
            problems.add(f"kns:workers[{workers[-1]}].drain",
                         f'leaves queue "{queue.name}" with no worker (its pools {", ".join(queue.quota)} are all on '
                         f'draining workers: {", ".join(workers)}); {rules.DRAIN_LEAVES_QUEUE.message}')
    if not queueing.enabled:
        problems.add("kns:workers", rules.SITE_NEEDS_QUEUEING.message)
    managers = set(manager_pools)
    for queue in queues:
        for pool in queue.quota:
            if pool in managers:
                problems.add(f"kns:queues[{queue.name}].quota.{pool}", rules.SITE_POOL_IS_MANAGERS.message)
    for entry in workloads:
        path = paths[entry.name]
        if entry.type == "namespace":
            problems.add(f"{path}.type", rules.SITE_NAMESPACE_ENTRY.message)
            continue
        if entry.type == "pod" and entry.queue is None:
            problems.add(f"{path}.queue", rules.SITE_ENTRY_NEEDS_QUEUE.message)
        if entry.pool in managers:
            problems.add(f"{path}.pool", rules.SITE_POOL_IS_MANAGERS.message)


def check_multikueue_settings(queueing: Queueing, site: bool, problems: Problems) -> None:
    """MultiKueue's settings configure a site's manager: refused on a stack without workers."""
    if queueing.multi_kueue is not None and not site:
        problems.add("kns:queueing.multiKueue", rules.MULTIKUEUE_NEEDS_SITE.message)


def _context_key(name: str) -> str:
    return name.strip().casefold()


def check_pools(pools: list[NodePool], cluster_name: str, problems: Problems, base: str = "kns:nodePools",
                taken: Optional[dict[str, str]] = None, version: Optional[tuple[str, str]] = None) -> None:
    """The pools of one cluster (`base`: where they are in config): pool names are unique
    (across the site's clusters too: `taken` holds where each name was first given), a node
    belongs to one pool, a node's taints are unique by key and effect (Kubernetes and
    Karpenter refuse the same pair twice), and a NodePool template holds at most the labels
    Karpenter allows."""
    taken = {} if taken is None else taken
    node_owner: dict[str, str] = {}
    for pool in pools:
        path = f"{base}[{pool.name}]"
        if pool.name in taken and taken[pool.name] == path:
            problems.add(path + ".name", f'"{pool.name}" names another pool too; pool names are unique')
        elif pool.name in taken:
            problems.add(path + ".name", f'"{pool.name}" names a pool of another cluster too ({taken[pool.name]}); '
                         "pool names are unique across the site")
        taken.setdefault(pool.name, path)
        if devices.is_dra(pool) and version is not None and devices.minor_of(version[1]) < rules.DRA_MIN_MINOR:
            problems.add(path + ".gpu.allocation", f"allocation: dra needs resource.k8s.io/v1 (Kubernetes 1."
                         f"{rules.DRA_MIN_MINOR} or later), and {version[0]} declares kubernetesVersion {version[1]}")
        pairs = [(t["key"], t["effect"]) for t in resolve.pool_taints(pool)]
        for key, effect in sorted({pair for pair in pairs if pairs.count(pair) > 1}):
            problems.add(path + ".taints", f'two taints with key "{key}" and effect {effect} (the role may set one); '
                         "a node holds one taint per key and effect")
        if pool.autoscale is not None:
            labels = resolve.pool_labels(pool, cluster_name)
            if len(labels) > rules.MAX_TEMPLATE_LABELS:
                problems.add(path + ".labels", f"a NodePool template holds at most {rules.MAX_TEMPLATE_LABELS} "
                             "labels, the pool's role and name included")
            for index, requirement in enumerate(pool.autoscale.requirements):
                if requirement.key in labels and not karpenter.satisfies(requirement.operator, requirement.values,
                                                                         labels[requirement.key]):
                    problems.add(f"{path}.autoscale.requirements[{index}]",
                                 f"{karpenter.describe(requirement.operator, requirement.values, requirement.key)} "
                                 f"contradicts the label {requirement.key}={labels[requirement.key]} the pool puts "
                                 "on every node it creates: Karpenter would create none")
        for node in pool.static_nodes:
            if node in node_owner and node_owner[node] != pool.name:
                problems.add(
                    path + ".nodes",
                    f'node "{node}" is already in pool "{node_owner[node]}"; a node belongs to one pool',
                )
            node_owner.setdefault(node, pool.name)


def check_queues(queueing: Queueing, given: bool, queues: list[Queue], pools: list[NodePool],
                 broken_pools: Mapping[str, str], problems: Problems) -> None:
    """Queues are for a stack with queueing on, their names are unique, and each pool of a
    quota exists and can be a Kueue ResourceFlavor (at most 8 taints to tolerate)."""
    if given and not queueing.enabled:
        problems.add("kns:queues", rules.QUEUES_NEED_QUEUEING.message)
    by_name = {p.name: p for p in pools}
    seen: set[str] = set()
    # With Kueue installed by the program, its Configuration is the program's; a Kueue of
    # the site's own (install: false) may have admission fair sharing on without it.
    admission = not queueing.install or (queueing.fair_sharing is not None and queueing.fair_sharing.admission is not None)
    drivers = {p.gpu.driver for p in pools if devices.is_dra(p) and p.gpu is not None and p.gpu.driver is not None}
    for queue in queues:
        path = f"kns:queues[{queue.name}]"
        queue_offers = [r for pool in queue.quota if pool in by_name for r in devices.offered(by_name[pool])]
        if queue.admission_mode is not None and not admission:
            problems.add(path + ".admissionMode", rules.USAGE_BASED_NEEDS_ADMISSION.message)
        if queue.name in seen:
            problems.add(path + ".name", f'"{queue.name}" names another queue too; queue names are unique')
        seen.add(queue.name)
        for pool in queue.quota:
            if pool in broken_pools:
                problems.add(f"{path}.quota.{pool}", _broken(pool, broken_pools))
            elif pool not in by_name:
                problems.add(f"{path}.quota.{pool}", no_pool(pool, by_name))
            elif (taints := len(resolve.pool_taints(by_name[pool]))) > rules.MAX_FLAVOR_TOLERATIONS:
                problems.add(f"{path}.quota.{pool}", f'pool "{pool}" has {taints} '
                             f"taints (its role's included); a Kueue ResourceFlavor tolerates at most "
                             f"{rules.MAX_FLAVOR_TOLERATIONS}")
            if pool in by_name:
                for resource in queue.quota[pool]:
                    problem = devices.quota_problem(resource, by_name[pool], drivers, queue_offers)
                    if problem:
                        problems.add(f"{path}.quota.{pool}.{resource}", problem)


def check_queue_references(workloads: list[Workload], profiles: list[tuple[str, Profile]], queueing: Queueing,
                           queue_names: set[str], broken_queues: set[str], paths: Mapping[str, str],
                           problems: Problems) -> None:
    """Each queue an entry or a profile rule names exists (and queueing is on). Run on the
    entries before profiles fill in their queue, so a profile's bad queue is reported once,
    at the rule."""
    named = [(f"kns:profiles[{rule}].queue", p.queue) for rule, p in profiles if p.queue is not None]
    named += [(f"{paths[e.name]}.queue", e.queue) for e in workloads if e.queue is not None]
    for path, queue in named:
        problem = _queue_problem(queue, queueing, queue_names, broken_queues)
        if problem:
            problems.add(path, problem)


def _queue_problem(queue: str, queueing: Queueing, queue_names: set[str], broken_queues: set[str]) -> str | None:
    if not queueing.enabled:
        return f'names queue "{queue}" but {rules.QUEUES_NEED_QUEUEING.message}'
    if queue in broken_queues:
        return f'queue "{queue}" is invalid (its problems are listed under kns:queues[{queue}])'
    if queue not in queue_names:
        close = closest(queue, queue_names)
        hint = f'; did you mean "{close}"?' if close else ""
        return f'no queue named "{queue}"{hint} (queues: {", ".join(sorted(queue_names)) or "none are defined"})'
    return None


def check_priorities(queueing: Queueing, given: bool, priorities: list[Priority], problems: Problems) -> None:
    """Priorities are for a stack with queueing on; names are unique; one default at most."""
    if given and not queueing.enabled:
        problems.add("kns:priorities", rules.PRIORITIES_NEED_QUEUEING.message)
    seen: set[str] = set()
    default: Optional[str] = None
    for priority in priorities:
        path = f"kns:priorities[{priority.name}]"
        if priority.name in seen:
            problems.add(path + ".name", f'"{priority.name}" names another priority too; priority names are unique')
        seen.add(priority.name)
        if priority.default:
            if default is not None:
                problems.add(path + ".default", f'{rules.ONE_DEFAULT_PRIORITY.message} ("{default}" is already)')
            default = default or priority.name


def check_priority_references(workloads: list[Workload], profiles: list[tuple[str, Profile]],
                              known: set[str], broken: set[str], paths: Mapping[str, str],
                              problems: Problems) -> None:
    """Each priority an entry or a profile rule names exists. Run before profiles fill in
    priorities, so a profile's bad one is reported once, at the rule."""
    named = [(f"kns:profiles[{rule}].priority", p.priority) for rule, p in profiles if p.priority is not None]
    named += [(f"{paths[e.name]}.priority", e.priority) for e in workloads if e.priority is not None]
    for path, name in named:
        if name in broken:
            problems.add(path, f'priority "{name}" is invalid (its problems are listed under kns:priorities[{name}])')
        elif name not in known:
            close = closest(name, known)
            hint = f'did you mean "{close}"?' if close else f"priorities: {', '.join(sorted(known)) or 'none are defined'}"
            problems.add(path, f'no priority named "{name}"; {hint}')


def assign_priorities(workloads: list[Workload], explicit: set[str], priorities: list[Priority],
                      paths: Mapping[str, str], problems: Problems, sources: dict[str, str]) -> list[Workload]:
    """Each queued entry's priority (docs/queueing.md, "Start times on a busy queue"): its
    own, else its profile rule's, else, for a prescaled schedule, the stack's highest (its
    warm-up must get room on time), else the default one. `explicit`: the entries that set
    `priority` themselves; one without a queue is told it has no effect. `sources` gets, for
    each entry given a priority here, why."""
    highest = max(priorities, key=lambda p: p.value, default=None)
    default = next((p for p in priorities if p.default), None)
    out: list[Workload] = []
    for entry in workloads:
        if entry.queue is None:
            if entry.name in explicit:
                problems.add(f"{paths[entry.name]}.priority", rules.PRIORITY_NEEDS_QUEUE.message)
            out.append(entry.model_copy(update={"priority": None}) if entry.priority is not None else entry)
            continue
        if entry.priority is None:
            if isinstance(entry, Schedule) and entry.prescaled and highest is not None:
                entry = entry.model_copy(update={"priority": highest.name})
                sources[entry.name] = "the highest priority: a prescaled schedule on a queue"
            elif default is not None:
                entry = entry.model_copy(update={"priority": default.name})
                sources[entry.name] = "the default priority"
        out.append(entry)
    return out


def check_credential_sets(credentials: Mapping[str, Any], problems: Problems) -> None:
    """Set names make Secret names; file names are Secret keys."""
    for name, files in credentials.items():
        problem = names.dns1123_label_problem(name, 50)
        if problem:
            problems.add(f"kns:credentials.{name}", problem)
        for file in files:
            if not _CREDENTIAL_FILE.match(file):
                problems.add(f"kns:credentials.{name}", f'"{file}" is {CREDENTIAL_FILE.message}')


def apply_profiles(
    workloads: list[Workload], profiles: list[tuple[str, Profile]], paths: Mapping[str, str], problems: Problems,
    queue_rules: Optional[dict[str, str]] = None, priority_sources: Optional[dict[str, str]] = None,
) -> list[Workload]:
    """Every entry with its profile's defaults in place, held to its profile's rules
    (config/profile_rules.py, before overrides). `queue_rules` collects, for each entry
    whose queue a profile rule gave, that rule (to name it where the queue is judged);
    `priority_sources`, for each entry whose priority one gave, which."""
    out = []
    for entry in workloads:
        profile, rules, source = resolve.resolve_profile_sources(profiles, entry.user, entry.groups)
        effective, found = resolve.apply_profile(entry, profile)
        if queue_rules is not None and entry.queue is None and effective.queue is not None:
            queue_rules[entry.name] = source["queue"]
        if priority_sources is not None and entry.priority is None and effective.priority is not None:
            priority_sources[entry.name] = f"profile rule {source['priority']}"
        found += profile_rules.check(profile_rules.entry_facts(effective), profile, source, rules)
        problems.extend(found, paths[entry.name])
        out.append(effective)
    return out


def check_workloads(
    workloads: list[Workload],
    pools: list[NodePool],
    credentials: Mapping[str, Any],
    paths: Mapping[str, str],
    problems: Problems,
    broken_pools: Mapping[str, str] = MappingProxyType({}),
) -> None:
    """Each entry's pool exists and can run it, and its credential sets exist. An entry on a
    pool that is named but invalid (`broken_pools`) points at that pool's problems."""
    by_name = {p.name: p for p in pools}
    for entry in workloads:
        path = paths[entry.name]
        if entry.pool in broken_pools:
            problems.add(path + ".pool", _broken(entry.pool, broken_pools))
            _check_credentials(entry, credentials, path, problems)
            continue
        if entry.pool is not None and entry.pool not in by_name:
            problems.add(path + ".pool", no_pool(entry.pool, by_name))
            continue
        try:
            pool = resolve.resolve_pool(entry, pools)
        except resolve.PlacementError as exc:
            problems.add(f"{path}.{exc.field}", str(exc))
            pool = None
        extended = podspec.gpu_totals(entry.pod_spec, init=True) if entry.pod_spec is not None else {}
        problems.extend(devices.entry_problems(entry, pool, {r: a for r, a in extended.items() if a}), path)
        if pool is not None and pool.gpu is not None and not pool.gpu.dra and entry.gpus > pool.gpu.per_node:
            problems.add(
                path + ".gpus",
                f"{entry.gpus} GPUs do not fit on one node of pool \"{pool.name}\" (perNode: {pool.gpu.per_node})",
            )
        if entry.topology is not None:
            for problem in _topology_problems(entry, pool):
                problems.add(path + ".topology", problem)
        _check_credentials(entry, credentials, path, problems)


def _topology_problems(entry: Workload, pool: Optional[NodePool]) -> list[str]:
    """Why Kueue could not place the entry's workers by its `topology` (docs/distributed.md)."""
    assert entry.topology is not None
    found = [] if entry.queued else [rules.TOPOLOGY_NEEDS_QUEUE.message]
    if pool is None or pool.topology is None:
        where = f' (pool "{pool.name}" declares none)' if pool is not None else ""
        found.append(rules.TOPOLOGY_NEEDS_POOL.message + where)
    elif entry.topology.level not in pool.topology.levels:
        found.append(f'"{entry.topology.level}" is not a level of pool "{pool.name}" '
                     f"(levels: {', '.join(pool.topology.levels)})")
    return found


def _check_credentials(entry: Workload, credentials: Mapping[str, Any], path: str, problems: Problems) -> None:
    """Each set exists; file names are unique across the entry's sets (they share one
    read-only directory)."""
    owner: dict[str, str] = {}
    for name in entry.credentials:
        if name not in credentials:
            known = ", ".join(sorted(credentials)) or "none are defined"
            problems.add(path + ".credentials", f'no credential set "{name}" in kns:credentials (sets: {known})')
            continue
        for file_name in credentials[name]:
            if file_name in owner:
                problems.add(path + ".credentials", f'sets "{owner[file_name]}" and "{name}" both have a file "{file_name}"')
            owner.setdefault(file_name, name)


def no_pool(name: str, known: Iterable[str]) -> str:
    """An unknown pool: the closest name when one is close, and every pool."""
    listed = ", ".join(sorted(known)) or "none are defined"
    close = closest(name, known)
    hint = f'; did you mean "{close}"?' if close else ""
    return f'no node pool named "{name}"{hint} (pools: {listed})'


def _broken(pool: str, broken_pools: Mapping[str, str]) -> str:
    return f'node pool "{pool}" is invalid (its problems are listed under {broken_pools[pool]})'


def check_raw_references(unchecked: list[tuple[str, dict]], pools: list[NodePool], problems: Problems,
                         broken_pools: Mapping[str, str] = MappingProxyType({}),
                         queues: tuple[Queueing, set[str], set[str]] | None = None) -> None:
    """Entries that failed validation still get their pool and queue references checked,
    so one run reports every problem. `queues`: queueing, the queue names, the invalid ones."""
    known = {p.name for p in pools}
    invalid = {p.path for p in problems.items}  # a reference that is itself invalid is said once
    for path, item in unchecked:
        queue = item.get("queue")
        if isinstance(queue, str) and queues is not None and path + ".queue" not in invalid:
            problem = _queue_problem(queue, *queues)
            if problem:
                problems.add(path + ".queue", problem)
        pool = item.get("pool")
        if path + ".pool" in invalid:
            continue
        if isinstance(pool, str) and pool in broken_pools:
            problems.add(path + ".pool", _broken(pool, broken_pools))
        elif isinstance(pool, str) and pool not in known:
            problems.add(path + ".pool", no_pool(pool, known))


def check_namespaces(workloads: list[Workload], cluster: Cluster, paths: Mapping[str, str], problems: Problems,
                     installed: frozenset[str] = frozenset()) -> None:
    """No entry's namespace, nor the system namespace, is one Kubernetes reserves or one a
    bundle the program installs creates (`installed`); no entry's is the system namespace."""
    if cluster.system_namespace in installed:
        problems.add("kns:cluster.systemNamespace", _installed(cluster.system_namespace))
    for entry in workloads:
        namespace = names.namespace_name(cluster.namespace_prefix, entry.name)
        if namespace == cluster.system_namespace:
            problems.add(f"{paths[entry.name]}.name", f'its namespace "{namespace}" is kns:cluster.systemNamespace')
        elif namespace in names.RESERVED_NAMESPACES:
            problems.add(f"{paths[entry.name]}.name", f'its namespace "{namespace}" is reserved by Kubernetes')
        elif namespace in installed:
            problems.add(f"{paths[entry.name]}.name", f"its {_installed(namespace)}")


def _installed(namespace: str) -> str:
    return (f'namespace "{namespace}" is Kueue\'s, which the program installs (kns:queueing.install: true); '
            "choose another name")


def check_dynamic_labels(
    workloads: list[Workload], cluster: str, stack: str, paths: Mapping[str, str], problems: Problems
) -> None:
    """Keys are label keys, templates use known placeholders, and what they render to is a
    label value."""
    for entry in workloads:
        path = f"{paths[entry.name]}.dynamicLabels"
        bad = False
        for key, template in entry.dynamic_labels.items():
            problem = names.label_key_problem(key)
            if problem:
                problems.add(f"{path}.{key}", problem)
                bad = True
            try:
                unknown = [p for p in resolve.placeholders_in(template) if p not in resolve.PLACEHOLDERS]
            except ValueError as exc:
                problems.add(f"{path}.{key}", f'"{template}" is not a format string: {exc}')
                bad = True
                continue
            if unknown:
                problems.add(
                    f"{path}.{key}",
                    f"unknown placeholder {', '.join('{' + u + '}' for u in unknown)}; "
                    f"use {' '.join('{' + p + '}' for p in resolve.PLACEHOLDERS)}",
                )
                bad = True
        if bad:
            continue
        for key, value in resolve.dynamic_labels(entry, cluster, stack).items():
            problem = names.label_value_problem(value)
            if problem:
                problems.add(f"{path}.{key}", f"renders to {problem}")


def derive_primers(
    schedules: list[Schedule], paths: Mapping[str, str], problems: Problems, now: Optional[datetime] = None
) -> dict[str, prescale.Primers]:
    """Each prescaled schedule's primer CronJob schedules, or why there are none
    (`prescale.primers_for`: the shift, the period, daylight-saving changes: the next
    crossed night from `now` is the one cited)."""
    out: dict[str, prescale.Primers] = {}
    for entry in schedules:
        try:
            primers = prescale.primers_for(entry.schedule, entry.time_zone, entry.warm_up_minutes, entry.primer_schedule,
                                           now=now)
        except prescale.PrimerError as exc:
            problems.add(f"{paths[entry.name]}.{exc.key}", str(exc))
            continue
        if primers is not None:
            out[entry.name] = primers
    return out
