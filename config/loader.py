"""The one place that reads stack config: parse, validate, cross-check, or fail at once.

`parse_config` is pure (raw values in, `PlatformConfig` or `ConfigError` out) so every
rule is testable without Pulumi; `load` reads the Pulumi config once and turns a
`ConfigError` into a `pulumi.RunError`, which the engine prints without a traceback.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import yaml

from . import kubeconfig
from .errors import ConfigError, Problem, Problems, closest
from .models import (
    Cluster,
    Job,
    JobFile,
    KnsScheduler,
    NodePool,
    PackingScheduler,
    Profile,
    Schedule,
    Workload,
)

NAMESPACE = "kns"
OBJECT_KEYS = ("cluster", "packingScheduler", "knsScheduler", "profiles", "credentials")
LIST_KEYS = ("nodePools", "jobs", "schedules", "jobFiles")
STRING_KEYS = ("keycloakClientSecret",)
SECRET_KEYS = ("keycloakClientSecret", "credentials")
KNOWN_KEYS = OBJECT_KEYS + LIST_KEYS + STRING_KEYS


@dataclass(frozen=True)
class Primers:
    """A prescaled schedule's primer CronJob schedules and their lead in minutes."""

    lead: int
    schedules: tuple[str, ...]


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
    primers: dict[str, "Primers"] = field(default_factory=dict)

    @property
    def workloads(self) -> list[Workload]:
        return [*self.jobs, *self.schedules]

    def pool(self, name: str) -> NodePool:
        return next(p for p in self.node_pools if p.name == name)


def parse_config(
    raw: Mapping[str, Any],
    *,
    project_dir: Path,
    stack: str = "dev",
    secret_keys: frozenset[str] = frozenset(SECRET_KEYS),
    environ: Mapping[str, str] | None = None,
    planner: Optional[Callable[["PlatformConfig"], list[Problem]]] = None,
) -> PlatformConfig:
    """Validate raw config values (keys without the `kns:` prefix, values decoded).

    `planner`, when given, builds every valid entry's objects and returns what only that
    reveals, so those problems are reported together with all the others.
    """
    problems = Problems()
    environ = os.environ if environ is None else environ

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

    pools = [
        p
        for i, item in enumerate(_list(raw, "nodePools", problems))
        if (p := problems.validate(NodePool, item, _entry_path("kns:nodePools", item, i))) is not None
    ]

    paths: dict[str, str] = {}
    entries: list[tuple[str, Any, type[Workload]]] = []
    for kind, model in (("jobs", Job), ("schedules", Schedule)):
        for i, item in enumerate(_list(raw, kind, problems)):
            entries.append((_entry_path(f"kns:{kind}", item, i), f"kns:{kind}[{i}]", item, model))
    entries.extend(_job_file_entries(raw, project_dir, problems))

    jobs: list[Job] = []
    schedules: list[Schedule] = []
    first_use: dict[str, str] = {}
    unchecked: list[tuple[str, dict]] = []
    for path, position, item, model in entries:
        name = item.get("name") if isinstance(item, dict) else None
        duplicate = isinstance(name, str) and name in first_use
        if duplicate:
            problems.add(
                path + ".name",
                f'"{name}" is already used by {first_use[name]}; names are unique across jobs and schedules',
            )
        elif isinstance(name, str):
            first_use[name] = position
        entry = problems.validate(model, item, path)
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
        _check_cluster(cluster, project_dir, environ, problems)
    _check_pools(pools, problems)
    _check_credential_sets(credentials, problems)
    jobs = _apply_profiles(jobs, profiles, paths, problems)  # type: ignore[assignment]
    schedules = _apply_profiles(schedules, profiles, paths, problems)  # type: ignore[assignment]
    _check_workloads(jobs + schedules, pools, credentials, paths, problems)
    _check_raw_references(unchecked, pools, problems)
    if cluster is not None:
        _check_namespaces(jobs + schedules, cluster, paths, problems)
        _check_dynamic_labels(jobs + schedules, cluster.name, stack, paths, problems)

    primers = _derive_primers(schedules, paths, problems)

    if cluster is None or packing is None or kns is None:
        problems.raise_if_any()
    cfg = PlatformConfig(
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
    )
    if planner is not None:
        # Plan only the entries with no problem yet: the others' are already reported.
        def dirty(path: str) -> bool:
            return any(p.path == path or p.path.startswith((path + ".", path + "[")) for p in problems.items)

        clean = dataclasses.replace(
            cfg,
            jobs=[j for j in cfg.jobs if not dirty(paths[j.name])],
            schedules=[s for s in cfg.schedules if not dirty(paths[s.name])],
        )
        problems.items.extend(planner(clean))
    problems.raise_if_any()
    return cfg


def _derive_primers(schedules: list[Schedule], paths: Mapping[str, str], problems: Problems) -> dict[str, Primers]:
    from . import prescale

    out: dict[str, Primers] = {}
    for entry in schedules:
        path = paths[entry.name]
        if entry.warm_up_minutes is not None:
            try:
                derived = prescale.derive(entry.schedule, entry.warm_up_minutes)
            except prescale.PrimerError as exc:
                problems.add(path + ".warmUpMinutes", str(exc))
                continue
            out[entry.name] = Primers(entry.warm_up_minutes, tuple(derived))
        elif entry.primer_schedule is not None:
            lead, problem = prescale.check_primer_schedule(entry.schedule, entry.primer_schedule)
            if problem:
                problems.add(
                    path + ".primerSchedule",
                    f'"{entry.primer_schedule}" is not a constant lead before every run of "{entry.schedule}": {problem}',
                )
                continue
            out[entry.name] = Primers(lead, (entry.primer_schedule,))
    return out


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
    name = item.get("name") if isinstance(item, dict) else None
    return f"{base}[{name}]" if isinstance(name, str) and name else f"{base}[{index}]"


def _job_file_entries(raw: Mapping[str, Any], project_dir: Path, problems: Problems):
    loaded: set[str] = set()
    for i, pattern in enumerate(_list(raw, "jobFiles", problems)):
        if not isinstance(pattern, str):
            problems.add(f"kns:jobFiles[{i}]", "must be a glob string")
            continue
        matches = sorted(glob.glob(str(project_dir / pattern), recursive=True))
        if not matches:
            problems.add(f"kns:jobFiles[{i}]", f'"{pattern}" matches no file (relative to {project_dir})')
        for match in matches:
            if os.path.realpath(match) in loaded:
                continue  # named by two globs: load it once
            loaded.add(os.path.realpath(match))
            rel = os.path.relpath(match, project_dir)
            try:
                with open(match, encoding="utf-8") as handle:
                    content = yaml.safe_load(handle) or {}
            except (OSError, yaml.YAMLError) as exc:
                problems.add(rel, f"cannot be read as YAML: {exc}".replace("\n", " "))
                continue
            if not isinstance(content, dict):
                problems.add(rel, "must be a mapping with jobs: and/or schedules: lists")
                continue
            # Unknown keys are reported without hiding the problems of the file's entries.
            for key in content:
                if key not in JobFile.model_fields:
                    close = closest(str(key), JobFile.model_fields)
                    hint = f'did you mean "{close}"?' if close else "a job file has jobs: and schedules:"
                    problems.add(f"{rel}:{key}", f"unknown key; {hint}")
            for kind, model in (("jobs", Job), ("schedules", Schedule)):
                items = content.get(kind) or []
                if not isinstance(items, list):
                    problems.add(f"{rel}:{kind}", "must be a list")
                    continue
                for j, item in enumerate(items):
                    yield _entry_path(f"{rel}:{kind}", item, j), f"{rel}:{kind}[{j}]", item, model


def _check_cluster(cluster: Cluster, project_dir: Path, environ: Mapping[str, str], problems: Problems) -> None:
    forbidden = set(cluster.forbidden_contexts)
    if cluster.context and cluster.context in forbidden:
        problems.add(
            "kns:cluster.context",
            f'"{cluster.context}" is listed in forbiddenContexts: the KNS needs cluster-admin and must '
            "own a dedicated cluster, never the JARVICE upstream one",
        )
        return
    if cluster.render_dir or cluster.context:
        return
    try:
        current = kubeconfig.current_context(cluster.kubeconfig, project_dir, environ)
    except kubeconfig.KubeconfigError as exc:
        problems.add("kns:cluster.kubeconfig", str(exc))
        return
    if current in forbidden:
        problems.add(
            "kns:cluster",
            f'the kubeconfig\'s current context "{current}" is listed in forbiddenContexts: set '
            "kns:cluster.context to the dedicated KNS cluster",
        )


def _check_raw_references(unchecked: list[tuple[str, dict]], pools: list[NodePool], problems: Problems) -> None:
    """Entries that failed validation still get their pool reference checked, so one
    run reports every problem."""
    known = {p.name for p in pools}
    for path, item in unchecked:
        pool = item.get("pool")
        if isinstance(pool, str) and pool not in known:
            listed = ", ".join(sorted(known)) or "none are defined"
            problems.add(path + ".pool", f'no node pool named "{pool}" (pools: {listed})')


def _check_namespaces(workloads: list[Workload], cluster: Cluster, paths: Mapping[str, str], problems: Problems) -> None:
    from . import names

    for entry in workloads:
        namespace = names.namespace_name(cluster.namespace_prefix, entry.name)
        if namespace == cluster.system_namespace:
            problems.add(f"{paths[entry.name]}.name", f'its namespace "{namespace}" is kns:cluster.systemNamespace')
        elif namespace in names.RESERVED_NAMESPACES:
            problems.add(f"{paths[entry.name]}.name", f'its namespace "{namespace}" is reserved by Kubernetes')


def _check_credential_sets(credentials: Mapping[str, Any], problems: Problems) -> None:
    from . import names

    for name, files in credentials.items():
        problem = names.dns1123_label_problem(name, 50)
        if problem:
            problems.add(f"kns:credentials.{name}", problem)
        for file_name in files:
            if not CREDENTIAL_FILE.match(file_name) or file_name in (".", ".."):
                problems.add(
                    f"kns:credentials.{name}",
                    f'"{file_name}" is not a valid file name (letters, digits, "-", "_" and ".")',
                )


def _check_pools(pools: list[NodePool], problems: Problems) -> None:
    seen_pool: set[str] = set()
    node_owner: dict[str, str] = {}
    for pool in pools:
        path = f"kns:nodePools[{pool.name}]"
        if pool.name in seen_pool:
            problems.add(path + ".name", f'"{pool.name}" names another pool too; pool names are unique')
        seen_pool.add(pool.name)
        for node in pool.nodes:
            if node in node_owner and node_owner[node] != pool.name:
                problems.add(
                    path + ".nodes",
                    f'node "{node}" is already in pool "{node_owner[node]}"; a node belongs to one pool',
                )
            node_owner.setdefault(node, pool.name)


def _apply_profiles(
    workloads: list[Workload], profiles: list[tuple[str, Profile]], paths: Mapping[str, str], problems: Problems
) -> list[Workload]:
    """Every entry with its profile defaults in place; profile rejections recorded."""
    from .resolve import apply_profile, resolve_profile_sources

    out = []
    for entry in workloads:
        profile, rules, source = resolve_profile_sources(profiles, entry.user, entry.groups)
        effective, found = apply_profile(entry, profile, source, rules)
        for key, message in found:
            problems.add(f"{paths[entry.name]}.{key}", message)
        out.append(effective)
    return out


def _check_workloads(
    workloads: list[Workload],
    pools: list[NodePool],
    credentials: Mapping[str, Any],
    paths: Mapping[str, str],
    problems: Problems,
) -> None:
    from .resolve import PlacementError, resolve_pool

    by_name = {p.name: p for p in pools}
    for entry in workloads:
        path = paths[entry.name]
        if entry.pool is not None and entry.pool not in by_name:
            known = ", ".join(sorted(by_name)) or "none are defined"
            problems.add(path + ".pool", f'no node pool named "{entry.pool}" (pools: {known})')
            continue
        try:
            pool = resolve_pool(entry, pools)
        except PlacementError as exc:
            problems.add(f"{path}.{exc.field}", str(exc))
            pool = None
        if pool is not None and pool.gpu is not None and entry.gpus > pool.gpu.per_node:
            problems.add(
                path + ".gpus",
                f"{entry.gpus} GPUs do not fit on one node of pool \"{pool.name}\" (perNode: {pool.gpu.per_node})",
            )
        _check_credentials(entry, credentials, path, problems)


CREDENTIAL_FILE = re.compile(r"^[-._a-zA-Z0-9]+$")


def _check_credentials(entry: Workload, credentials: Mapping[str, Any], path: str, problems: Problems) -> None:
    """Each set exists; file names are valid Secret keys and unique across the entry's
    sets (they share one read-only directory)."""
    if entry.credentials and not entry.credentials_mount_path.startswith("/"):
        problems.add(path + ".credentialsMountPath", f'"{entry.credentials_mount_path}" is not an absolute path')
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


def _check_dynamic_labels(workloads, cluster: str, stack: str, paths, problems: Problems) -> None:
    from . import names
    from .resolve import PLACEHOLDERS, dynamic_labels, placeholders_in

    for entry in workloads:
        path = f"{paths[entry.name]}.dynamicLabels"
        bad = False
        for key, template in entry.dynamic_labels.items():
            problem = names.label_key_problem(key)
            if problem:
                problems.add(f"{path}.{key}", problem)
                bad = True
            try:
                unknown = [p for p in placeholders_in(template) if p not in PLACEHOLDERS]
            except ValueError as exc:
                problems.add(f"{path}.{key}", f'"{template}" is not a format string: {exc}')
                bad = True
                continue
            if unknown:
                problems.add(
                    f"{path}.{key}",
                    f"unknown placeholder {', '.join('{' + u + '}' for u in unknown)}; "
                    f"use {' '.join('{' + p + '}' for p in PLACEHOLDERS)}",
                )
                bad = True
        if bad:
            continue
        for key, value in dynamic_labels(entry, cluster, stack).items():
            problem = names.label_value_problem(value)
            if problem:
                problems.add(f"{path}.{key}", f"renders to {problem}")


def decode_value(key: str, value: Any) -> Any:
    """A `kns:` value as the engine delivers it (text) decoded as the program reads it:
    JSON, except for the string keys and text that is not JSON."""
    if key not in STRING_KEYS and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
    return value


def read_pulumi_config() -> tuple[dict[str, Any], frozenset[str]]:
    """Every `kns:` key of the stack (values JSON-decoded) and the set that are secret."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    raw: dict[str, Any] = {}
    secret: set[str] = set()
    for full_key in sorted(keys):
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            continue
        raw[key] = decode_value(key, runtime_config.get_config(full_key))
        if runtime_config.is_config_secret(full_key) or full_key in runtime_config.get_config_secret_keys_env():
            secret.add(key)
    return raw, frozenset(secret)


def restore_order(delivered: Any, authored: Any) -> Any:
    """`delivered` with its mappings in the key order of `authored` where both hold the same
    keys. The engine passes structured config as JSON with sorted keys, but order means
    something here: profile rules apply top to bottom, and env entries may refer to
    earlier ones."""
    if isinstance(delivered, dict) and isinstance(authored, dict):
        keys = list(authored) if set(authored) == set(delivered) else list(delivered)
        return {k: restore_order(delivered[k], authored.get(k)) for k in keys}
    if isinstance(delivered, list) and isinstance(authored, list) and len(delivered) == len(authored):
        return [restore_order(d, a) for d, a in zip(delivered, authored)]
    return delivered


def authored_config(project_dir: Path, stack: str) -> Optional[dict[str, Any]]:
    """The `kns:` keys of Pulumi.<stack>.yaml as written (None when there is no such file)."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    config = document.get("config") or {}
    return {k.partition(":")[2]: v for k, v in config.items() if k.startswith(f"{NAMESPACE}:")}


def parse_stack_config(
    raw: Mapping[str, Any],
    authored: Optional[Mapping[str, Any]],
    *,
    project_dir: Path,
    stack: str,
    secret_keys: frozenset[str],
    environ: Mapping[str, str] | None = None,
    planner: Optional[Callable[[PlatformConfig], list[Problem]]] = None,
) -> PlatformConfig:
    """The config as delivered (`raw`, keys without `kns:`, values decoded) and as authored
    in Pulumi.<stack>.yaml (`authored`, None without that file) to `PlatformConfig`, or a
    `ConfigError`. Shared by the program (`load`) and the offline `kns` commands."""
    if authored is not None:
        raw = {key: restore_order(value, authored.get(key)) for key, value in raw.items()}
    profiles = raw.get("profiles")
    if isinstance(profiles, dict) and len(profiles) > 1 and list(profiles) != list((authored or {}).get("profiles") or {}):
        raise ConfigError([Problem(
            "kns:profiles",
            f"the order of its rules cannot be read from Pulumi.{stack}.yaml "
            "(the engine passes mappings with sorted keys); keep kns:profiles in that file",
        )])
    return parse_config(raw, project_dir=project_dir, stack=stack, secret_keys=secret_keys, environ=environ,
                        planner=planner)


def load(project_dir: Path, planner: Optional[Callable[[PlatformConfig], list[Problem]]] = None) -> PlatformConfig:
    """Read the stack config once; invalid config becomes one `pulumi.RunError`."""
    import pulumi

    raw, secret = read_pulumi_config()
    stack = pulumi.get_stack()
    try:
        return parse_stack_config(raw, authored_config(project_dir, stack), project_dir=project_dir, stack=stack,
                                  secret_keys=secret, planner=planner)
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None
