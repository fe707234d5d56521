"""Pure builders for what one entry produces (contract section 7), as Kubernetes-shaped
dicts in camelCase. No Pulumi here: components hand these to pulumi-kubernetes, and tests
(and `jsonOverrides`) work on exactly what the API server will receive.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from config import names, pointer, resolve
from config.errors import Problem
from config.loader import PlatformConfig, Primers, load
from config.models import NodePool, Profile, Schedule, Workload

from . import wait

SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
POD_SECURITY_MODES = ("enforce", "audit", "warn")

POD_RUNNER_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
]
EDIT = ["get", "list", "watch", "create", "update", "patch", "delete"]
NAMESPACE_RUNNER_RULES = [
    {"apiGroups": [""], "resources": ["pods", "services", "configmaps"], "verbs": EDIT},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
]


@dataclass
class WorkloadPlan:
    """Everything one entry produces, derived from validated config."""

    entry: Workload
    namespace: str
    labels: dict[str, str]
    pod_security: str
    pool: Optional[NodePool]
    profile: Profile
    resources: dict[str, dict[str, str]]
    limit_range: dict[str, Any]
    quota: dict[str, str]
    role_rules: list[dict[str, Any]]
    scheduler_name: Optional[str]
    primers: Optional[Primers] = None
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    # object name -> manifest: the Job, the CronJob, or one CronJob per primer schedule
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def is_schedule(self) -> bool:
        return isinstance(self.entry, Schedule)

    @property
    def pod_spec(self) -> Optional[dict[str, Any]]:
        """The pod spec the entry runs, as finally built (its Job's, or its first CronJob's:
        primer CronJobs share the template); None for `type: namespace`."""
        if not self.objects:
            return None
        manifest = next(iter(self.objects.values()))
        spec = manifest["spec"]
        return (spec["jobTemplate"]["spec"] if manifest["kind"] == "CronJob" else spec)["template"]["spec"]


CREDENTIALS_VOLUME = "kns-credentials"


def credential_secret_name(set_name: str) -> str:
    return f"kns-cred-{set_name}"


class PlanError(ValueError):
    """Problems found while building an entry's objects: (field, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__("; ".join(f"{f}: {m}" for f, m in problems))
        self.problems = problems


def plan_workload(entry: Workload, cfg: PlatformConfig) -> WorkloadPlan:
    """Everything one entry produces. Raises `PlanError` for what only the built objects
    reveal (an override pointer that does not fit, a bad quantity in a raw pod spec)."""
    profile, _, source = resolve.resolve_profile_sources(cfg.profiles, entry.user, entry.groups)
    pool = resolve.resolve_pool(entry, cfg.node_pools)
    if entry.pod_spec is not None:
        try:
            containers, init_containers = resolve.pod_spec_containers(entry.pod_spec)
        except resolve.PlacementError as exc:
            raise PlanError([(exc.field, str(exc))]) from None
        resources = resolve.pod_spec_limits(containers + init_containers)
    else:
        resources = resolve.container_resources(entry, profile)
    # Provisional for a pod entry: `_account` settles both from the pod as finally built.
    limits = resolve.limit_range(entry, resources)
    scheduler = entry.scheduler_name or (
        cfg.packing_scheduler.name if cfg.packing_scheduler.enabled else None
    )
    plan = WorkloadPlan(
        entry=entry,
        namespace=names.namespace_name(cfg.cluster.namespace_prefix, entry.name),
        labels=resolve.entry_labels(entry, cfg.cluster.name),
        pod_security="privileged" if entry.privileged else "baseline",
        pool=pool,
        profile=profile,
        resources=resources,
        limit_range=limits,
        quota=resolve.quota(entry, resources, limits),
        role_rules=copy.deepcopy(NAMESPACE_RUNNER_RULES if entry.type == "namespace" else POD_RUNNER_RULES),
        scheduler_name=scheduler,
        primers=cfg.primers.get(entry.name),
        credentials={name: cfg.credentials[name] for name in entry.credentials},
    )
    if entry.type == "pod":
        template = pod_template(plan, cfg)
        if not plan.is_schedule:
            plan.objects[entry.name] = job_manifest(plan, template)
        elif plan.primers is None:
            plan.objects[entry.name] = cronjob_manifest(plan, template)
        else:
            for index, primer in enumerate(plan.primers.schedules):
                name = entry.name if index == 0 else f"{entry.name}-{index + 1}"
                plan.objects[name] = primed_cronjob_manifest(plan, template, name, primer)
        rule = source.get("json_overrides")
        overrides = [(f'jsonOverrides (profile rule "{rule}" jsonOverrides[{i}])', o)
                     for i, o in enumerate(profile.json_overrides or [])]
        overrides += [(f"jsonOverrides[{i}]", o) for i, o in enumerate(entry.json_overrides)]
        problems = []
        for manifest in plan.objects.values():
            problems += apply_overrides(manifest, overrides)
        if problems:
            raise PlanError(sorted(set(problems)))
        _account(plan, profile, source, bool(overrides))
    return plan


def _account(plan: WorkloadPlan, profile: Profile, source: dict[str, str], overridden: bool) -> None:
    """LimitRange and quota from the pod as finally built (overrides may add containers or
    change resources), and the profile's image and placement rules checked on it again
    when overrides could have changed them."""
    entry = plan.entry
    final = plan.pod_spec
    try:
        containers, init_containers = resolve.pod_spec_containers(final)
    except resolve.PlacementError as exc:
        raise PlanError([("jsonOverrides", str(exc).replace("containers[", "the final pod's containers[", 1))]) from None
    own = [c for c, raw in zip(init_containers, final.get("initContainers") or []) if raw.get("name") != wait.NAME]
    limits = resolve.limit_range(entry, resolve.pod_spec_limits(containers + own))
    for item in containers + init_containers:
        for resource in ("cpu", "memory"):
            # A request with no limit gets the default limit at admission: make room for it.
            request = item["requests"].get(resource)
            if request and resource not in item["limits"] and resource in limits["default"]:
                kind = resolve.kind_for_resource(resource)
                if resolve.parse(request, kind) > resolve.parse(limits["default"][resource], kind):
                    limits["default"][resource] = request
    plan.limit_range = limits
    plan.quota = resolve.quota(entry, resolve.pod_usage(containers, init_containers, limits), limits)
    if not overridden:
        return
    problems = []
    if profile.allow_unknown_images is False:
        allowed = resolve.allowed_images(profile)
        for raw in (final.get("containers") or []) + (final.get("initContainers") or []):
            if raw.get("name") != wait.NAME and raw.get("image") not in allowed:
                problems.append(("jsonOverrides", f'they set image "{raw.get("image")}", which profile rule '
                                 f'"{source.get("allow_unknown_images")}" does not allow (allowUnknownImages: false)'))
    usage = resolve.pod_usage(containers, own, limits)
    for resource, maximum in (("cpu", profile.max_cpu), ("memory", profile.max_memory)):
        kind = resolve.kind_for_resource(resource)
        got = usage["limits"].get(resource)
        if maximum is not None and got is not None and resolve.parse(got, kind) > resolve.parse(maximum, kind):
            field = "maxCpu" if resource == "cpu" else "maxMemory"
            problems.append(("jsonOverrides", f"they raise the pod's {resource} limit to {got}, over {field} {maximum} "
                             f'of profile rule "{source.get("max_cpu" if resource == "cpu" else "max_memory")}"'))
    if profile.placement_constraints is not None:
        for key, value in (final.get("nodeSelector") or {}).items():
            if key == names.LABEL_POOL:
                continue
            problem = resolve.placement_problem(key, value, profile.placement_constraints,
                                                f'profile rule "{source.get("placement_constraints")}"')
            if problem:
                problems.append(("jsonOverrides", f"they set nodeSelector {problem}"))
    if problems:
        raise PlanError(problems)


def apply_overrides(manifest: dict[str, Any], overrides: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """Apply RFC 6901 overrides to the generated Job, or to a CronJob's job template (the
    same pointers serve a job and a schedule). Profile overrides come first."""
    if manifest["kind"] == "CronJob":
        template = manifest["spec"]["jobTemplate"]
        target = {"apiVersion": "batch/v1", "kind": "Job", "metadata": template.setdefault("metadata", {}),
                  "spec": template["spec"]}
    else:
        target = manifest
    problems = []
    for where, override in overrides:
        try:
            pointer.set_pointer(target, override.path, override.value)
        except pointer.PointerError as exc:
            problems.append((where, str(exc)))
    if manifest["kind"] == "CronJob":
        manifest["spec"]["jobTemplate"] = {"metadata": target["metadata"], "spec": target["spec"]}
    return problems


def namespace_labels(plan: WorkloadPlan) -> dict[str, str]:
    labels = dict(plan.labels)
    for mode in POD_SECURITY_MODES:
        labels[f"pod-security.kubernetes.io/{mode}"] = plan.pod_security
    return labels


def pod_template(plan: WorkloadPlan, cfg: PlatformConfig) -> dict[str, Any]:
    """The pod template shared by a Job and a CronJob's job template."""
    entry = plan.entry
    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    if plan.pool is not None:
        node_selector[names.LABEL_POOL] = plan.pool.name
        tolerations.extend(resolve.tolerations_for(plan.pool))
    node_selector.update(entry.placement)
    node_selector.update(entry.node_selector)
    for toleration in entry.tolerations:
        item = toleration.manifest()
        if item not in tolerations:
            tolerations.append(item)

    labels = {**entry.labels, **resolve.dynamic_labels(entry, cfg.cluster.name, cfg.stack), **_pod_labels(plan)}
    metadata: dict[str, Any] = {"labels": labels}
    if entry.annotations:
        metadata["annotations"] = dict(entry.annotations)
    if entry.pod_spec is not None:
        # Used verbatim; our placement and scheduler apply where the spec is silent.
        raw = copy.deepcopy(entry.pod_spec)
        raw.setdefault("restartPolicy", "Never")
        raw.setdefault("automountServiceAccountToken", False)
        if plan.scheduler_name:
            raw.setdefault("schedulerName", plan.scheduler_name)
        if node_selector:
            raw.setdefault("nodeSelector", node_selector)
        if tolerations:
            raw.setdefault("tolerations", tolerations)
        if plan.credentials:
            raw.setdefault("volumes", []).append(_credentials_volume(plan))
            for container in raw["containers"]:
                container.setdefault("volumeMounts", []).append(_credentials_mount(entry))
        return {"metadata": metadata, "spec": raw}

    container: dict[str, Any] = {"name": entry.name, "image": entry.image}
    if entry.image_pull_policy:
        container["imagePullPolicy"] = entry.image_pull_policy
    if entry.command is not None:
        container["command"] = list(entry.command)
    if entry.args is not None:
        container["args"] = list(entry.args)
    if entry.env:
        container["env"] = [_env(name, value) for name, value in entry.env.items()]
    container["resources"] = copy.deepcopy(plan.resources)
    if entry.privileged:
        container["securityContext"] = {"privileged": True}
    if entry.volume_mounts:
        container["volumeMounts"] = copy.deepcopy(entry.volume_mounts)
    if plan.credentials:
        container.setdefault("volumeMounts", []).append(_credentials_mount(entry))

    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "containers": [container],
    }
    if plan.scheduler_name:
        spec["schedulerName"] = plan.scheduler_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if entry.volumes:
        spec["volumes"] = copy.deepcopy(entry.volumes)
    if plan.credentials:
        spec.setdefault("volumes", []).append(_credentials_volume(plan))
    return {"metadata": metadata, "spec": spec}


def _credentials_volume(plan: WorkloadPlan) -> dict[str, Any]:
    """One read-only directory holding every set's files (names are unique across sets)."""
    return {
        "name": CREDENTIALS_VOLUME,
        "projected": {
            "defaultMode": 0o440,
            "sources": [{"secret": {"name": credential_secret_name(name)}} for name in plan.credentials],
        },
    }


def _credentials_mount(entry: Workload) -> dict[str, Any]:
    return {"name": CREDENTIALS_VOLUME, "mountPath": entry.credentials_mount_path, "readOnly": True}


def _pod_labels(plan: WorkloadPlan) -> dict[str, str]:
    return {names.LABEL_JOB: plan.labels[names.LABEL_JOB], names.LABEL_OWNER: plan.labels[names.LABEL_OWNER]}


def _env(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {"name": name, **copy.deepcopy(value)}
    if isinstance(value, bool):
        value = "true" if value else "false"
    return {"name": name, "value": str(value)}


def _job_spec(entry: Workload, template: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for key, value in (
        ("backoffLimit", entry.backoff_limit),
        ("activeDeadlineSeconds", entry.active_deadline_seconds),
        ("parallelism", entry.parallelism),
        ("completions", entry.completions),
    ):
        if value is not None:
            spec[key] = value
    spec["template"] = template
    return spec


def _metadata(plan: WorkloadPlan, annotations: dict[str, str]) -> dict[str, Any]:
    labels = {**plan.entry.labels, **plan.labels}
    metadata: dict[str, Any] = {"name": plan.entry.name, "namespace": plan.namespace, "labels": labels}
    merged = {**plan.entry.annotations, **annotations}
    if merged:
        metadata["annotations"] = merged
    return metadata


def _ttl_seconds(entry: Workload) -> int:
    return int(round(entry.ttl_hours * 3600))


def job_manifest(plan: WorkloadPlan, template: dict[str, Any]) -> dict[str, Any]:
    """A Job that `pulumi up` does not wait on, expiring `ttlHours` after it finishes."""
    spec = _job_spec(plan.entry, template)
    spec["ttlSecondsAfterFinished"] = _ttl_seconds(plan.entry)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(plan, SKIP_AWAIT),
        "spec": spec,
    }


def cronjob_manifest(plan: WorkloadPlan, template: dict[str, Any]) -> dict[str, Any]:
    """A plain CronJob with the same pod template; its history limits bound old Jobs."""
    entry = plan.entry
    assert isinstance(entry, Schedule)
    spec: dict[str, Any] = {
        "schedule": entry.schedule,
        "timeZone": entry.time_zone,
        "concurrencyPolicy": entry.concurrency_policy,
        "suspend": entry.suspend,
        "successfulJobsHistoryLimit": entry.successful_jobs_history_limit,
        "failedJobsHistoryLimit": entry.failed_jobs_history_limit,
        "jobTemplate": {
            "metadata": {"labels": _pod_labels(plan)},
            "spec": _job_spec(entry, template),
        },
    }
    if entry.starting_deadline_seconds is not None:
        spec["startingDeadlineSeconds"] = entry.starting_deadline_seconds
    if "ttl_hours" in entry.model_fields_set:
        # Only when asked: by default the history limits decide how long runs are kept.
        spec["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = _ttl_seconds(entry)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _metadata(plan, {}),
        "spec": spec,
    }


def primed_cronjob_manifest(plan: WorkloadPlan, template: dict[str, Any], name: str, primer: str) -> dict[str, Any]:
    """A CronJob firing `lead` minutes early whose pod is the workload, held by the wait.

    The pod template is the plain one plus the wait as first init container, so the pod
    holds the workload's full requests from the moment it is scheduled.
    """
    entry = plan.entry
    assert isinstance(entry, Schedule) and plan.primers is not None
    primed = copy.deepcopy(template)
    spec = primed["spec"]
    wait_container = wait.wait_container(
        plan.primers.lead, entry.time_zone, entry.wait_image, plan.limit_range.get("max")
    )
    spec["initContainers"] = [wait_container] + spec.get(
        "initContainers", []
    )
    manifest = cronjob_manifest(plan, primed)
    manifest["metadata"]["name"] = name
    manifest["metadata"].setdefault("annotations", {}).update(
        {"kns.io/workload-schedule": entry.schedule, "kns.io/warm-up-minutes": str(plan.primers.lead)}
    )
    manifest["spec"]["schedule"] = primer
    return manifest


def plan_all(cfg: PlatformConfig) -> tuple[list[WorkloadPlan], list[Problem]]:
    """Plan every entry before any resource exists (entries keep config order), with the
    problems only planning reveals, each under its entry's config path."""
    plans, problems = [], []
    for entry in cfg.workloads:
        try:
            plans.append(plan_workload(entry, cfg))
        except PlanError as exc:
            problems += [Problem(f"{cfg.paths[entry.name]}.{f}", m) for f, m in exc.problems]
    return plans, problems


def planner_into(planned: list[WorkloadPlan]) -> Callable[[PlatformConfig], list[Problem]]:
    """The planner `parse_config` runs: `plan_all`, keeping the plans in `planned` and
    returning the problems. Shared by the program (`prepare`) and the `kns` commands."""

    def planner(cfg: PlatformConfig) -> list[Problem]:
        plans, problems = plan_all(cfg)
        planned[:] = plans
        return problems

    return planner


def prepare(project_dir) -> tuple[PlatformConfig, list[WorkloadPlan]]:
    """Read the stack config once and plan every entry; one `pulumi.RunError` listing every
    problem of either step, before a single resource is registered."""
    planned: list[WorkloadPlan] = []
    return load(project_dir, planner=planner_into(planned)), planned
