"""The planner: every entry's `WorkloadPlan` from checked config, before any resource.

It builds each entry's objects (plan/manifests.py), applies `jsonOverrides`, holds each
object as finally built to the pod rules and to what the program keeps (plan/final.py),
then settles the LimitRange and quota from the pod as finally built, writes into each of
its containers what admission would fill in (whoever wrote the container), and holds that
pod to the profile's rules again (config/profile_rules.py). Last, the names every resource
is registered under must not collide (plan/inventory.py). What only this reveals (a
pointer that does not fit, an override that drops the TTL, two resources with one name)
is reported under the entry's config path, with every problem the checks found
(`plan_checked`).
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Callable, Optional


from config import devices as config_devices, names, pointer, profile_rules, resolve
from config.errors import Problem
from config.loader import Checked
from config.platform import PlatformConfig
from config.models import Profile, Workload
from config.quantity import kind_for_resource, parse

from . import (accounting, devices, final, fits, guardrails, inventory, multikueue, network, nodepools, queues,
               reservations, wait)
from .manifests import (
    NAMESPACE_RUNNER_RULES,
    POD_RUNNER_RULES,
    WORKER_SERVICE_RULES,
    cronjob_manifest,
    job_manifest,
    pod_template,
    primed_cronjob_manifest,
    service_manifest,
)
from .model import PlanError, WorkloadPlan
from .stackplan import StackPlan, plan_stack


def plan_workload(entry: Workload, cfg: PlatformConfig) -> WorkloadPlan:
    """Everything one entry produces. Raises `PlanError` for what only the built objects
    reveal (an override pointer that does not fit, a bad quantity in a raw pod spec)."""
    profile, matching, source = resolve.resolve_profile_sources(cfg.profiles, entry.user, entry.groups)
    pool = resolve.resolve_pool(entry, cfg.node_pools)
    ask = config_devices.ask_of(entry, pool)
    if entry.pod_spec is not None:
        try:
            containers, init_containers = accounting.pod_spec_containers(entry.pod_spec)
        except accounting.PlacementError as exc:
            raise PlanError([Problem(exc.field, str(exc))]) from None
        resources = accounting.pod_spec_limits(containers + init_containers)
    elif ask is not None:
        # GPUs of a DRA pool are claimed devices, not an extended resource (docs/gpus.md).
        resources = accounting.container_resources(entry.model_copy(update={"gpus": 0}), profile)
    else:
        resources = accounting.container_resources(entry, profile)
    # A namespace runs what its users start: no container outgrows the profile's maxima.
    caps = profile_rules.profile_caps(profile) if entry.type == "namespace" else {}
    # Provisional for a pod entry: `_account` settles both from the pod as finally built.
    limits = accounting.limit_range(entry, {**resources, "limits": {**caps, **resources["limits"]}})
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
        profile_rules=matching,
        resources=resources,
        limit_range=limits,
        quota=accounting.quota(entry, resources, limits),
        role_rules=copy.deepcopy(NAMESPACE_RUNNER_RULES if entry.type == "namespace" else POD_RUNNER_RULES),
        scheduler_name=scheduler,
        primers=cfg.primers.get(entry.name),
        credentials={name: cfg.credentials[name] for name in entry.credentials},
    )
    plan.network_policy = network.entry_policy(cfg.network, plan.namespace, plan.labels, entry.allow_from,
                                               runs_pods=entry.type == "pod")
    if entry.type == "namespace":
        plan.quota = profile_rules.cap_quota(plan.quota, profile, entry.quota or {})
        found = profile_rules.check(profile_rules.quota_facts(plan.quota, "quota"), profile, source)
        if found:
            raise PlanError(found)
    if ask is not None and entry.type == "pod":
        plan.device_ask = ask
        plan.claim = devices.claim_manifest(plan, ask)
    if entry.distributed:
        plan.role_rules += copy.deepcopy(WORKER_SERVICE_RULES)
        plan.service = service_manifest(plan)
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
        problems: list[Problem] = []
        placement = final.describe_placement(entry.pod_spec is not None)
        tolerations = final.describe_tolerations(pool.name if pool else None, entry.pod_spec is not None)
        for manifest in plan.objects.values():
            before = final.snapshot(manifest)
            failed = apply_overrides(manifest, overrides)
            problems += failed or final.check(manifest, before, overrides, placement, tolerations,
                                              plan.primers.lead if plan.primers else None, pool)
        if problems:
            raise PlanError(sorted(set(problems), key=lambda p: (p.path, p.message)))
        _account(plan, profile, source, bool(overrides), devices.resource_of_class(cfg.node_pools))
    return plan


def _account(plan: WorkloadPlan, profile: Profile, source: dict[str, str], overridden: bool,
             device_resources: dict[str, str]) -> None:
    """LimitRange and quota from the pod as finally built (overrides may add containers or
    change resources), what admission fills in written into it, and that pod held to the
    profile's rules again when overrides could have changed it."""
    entry = plan.entry
    pod = plan.pod_spec
    try:
        containers, init_containers = accounting.pod_spec_containers(pod)
    except accounting.PlacementError as exc:
        problem = Problem("jsonOverrides", str(exc).replace("containers[", "the final pod's containers[", 1))
        raise PlanError([problem]) from None
    own = [c for c, raw in zip(init_containers, pod.get("initContainers") or []) if raw.get("name") != wait.NAME]
    limits = accounting.limit_range(entry, accounting.pod_spec_limits(containers + own))
    if plan.primers is not None:
        _fit_waits(plan, accounting.pod_usage(containers, own, limits)["requests"])
        containers, init_containers = accounting.pod_spec_containers(pod)
    for item in containers + init_containers:
        for resource in limits["default"]:
            # A request with no limit gets the default limit at admission: make room for it.
            request = item["requests"].get(resource)
            if request and resource not in item["limits"]:
                kind = kind_for_resource(resource)
                if parse(request, kind) > parse(limits["default"][resource], kind):
                    limits["default"][resource] = request
    plan.limit_range = limits
    # Every container, whoever wrote it, is submitted as admission would leave it.
    for manifest in plan.objects.values():
        accounting.admit_pod(final.pod_of(manifest), limits)
    claims = {plan.claim["metadata"]["name"]: plan.claim} if plan.claim is not None else {}
    plan.account = accounting.count_pod(pod, limits, entry.pods_per_run, claims, device_resources)
    plan.quota = accounting.quota(entry, {"requests": plan.account.requests, "limits": plan.account.limits},
                                  limits, plan.account)
    if not overridden:
        return
    usage = accounting.pod_usage(containers, own, limits)
    facts = profile_rules.final_pod_facts(pod, usage["limits"], wait.NAME)
    problems = profile_rules.check(facts, profile, source)
    if problems:
        raise PlanError(problems)


def _fit_waits(plan: WorkloadPlan, pod_requests: dict[str, Any]) -> None:
    """Each primer's wait asks no more than the pod's own containers (wait.requests_within)."""
    for manifest in plan.objects.values():
        pod = manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        for container in pod.get("initContainers") or []:
            if container.get("name") == wait.NAME:
                resources = container["resources"]
                resources["requests"] = wait.requests_within(resources["requests"], pod_requests)


def apply_overrides(manifest: dict[str, Any], overrides: list[tuple[str, Any]]) -> list[Problem]:
    """Apply RFC 6901 overrides to the generated Job, or to a CronJob's job template (the
    same pointers serve a job and a schedule). Profile overrides come first. A pointer that
    does not fit is a problem at its override (a path relative to the entry)."""
    if manifest["kind"] == "CronJob":
        template = manifest["spec"]["jobTemplate"]
        target = {"apiVersion": "batch/v1", "kind": "Job", "metadata": template.setdefault("metadata", {}),
                  "spec": template["spec"]}
    else:
        target = manifest
    problems: list[Problem] = []
    for where, override in overrides:
        try:
            pointer.set_pointer(target, override.path, override.value)
        except pointer.PointerError as exc:
            problems.append(Problem(where, str(exc)))
    if manifest["kind"] == "CronJob":
        manifest["spec"]["jobTemplate"] = {"metadata": target["metadata"], "spec": target["spec"]}
    return problems


def plan_all(cfg: PlatformConfig, only: Optional[Callable[[str], bool]] = None) -> tuple[list[WorkloadPlan], list[Problem]]:
    """Plan every entry (or those `only` names) before any resource exists (entries keep
    config order), with the problems only planning reveals, each under its entry's config
    path."""
    plans, problems = [], []
    for entry in cfg.workloads:
        if only is not None and not only(entry.name):
            continue
        try:
            plans.append(plan_workload(entry, cfg))
        except PlanError as exc:
            problems += [p.under(cfg.paths[entry.name]) for p in exc.problems]
    return plans, problems


def plan_checked(checked: Checked, now: Optional[datetime] = None) -> StackPlan:
    """Plan every entry the checks passed, and the stack around them once, at `now` (the
    run's instant; default: the one the checks computed at); raise one `ConfigError` with the checks'
    problems and planning's, before a single resource is registered."""
    cfg = checked.clean()
    plans, problems = plan_all(cfg)
    planned = plan_stack(cfg, plans, now or checked.now)
    problems += queues.fit_problems(cfg, plans)
    problems += reservations.fit_problems(cfg, plans)
    problems += nodepools.fit_problems(plans, cfg.paths, cfg.cluster.name)
    problems += fits.fit_problems(cfg, plans)
    settings, file_problems = guardrails.pack_settings(cfg.policy_config)
    problems += file_problems
    problems += guardrails.config_problems(planned, settings)
    problems += inventory.collisions(planned, [p.path for p in checked.problems.items + problems])
    checked.problems.items.extend(problems)
    checked.problems.raise_if_any()
    checked.config.warnings.extend(multikueue.drain_warnings(cfg, plans))
    planned.config = checked.config
    return planned


def plan_own(checked: Checked, only: Callable[[str], bool], now: Optional[datetime] = None) -> StackPlan:
    """Plan only the entries `only` names, for an entry stack run after the platform stack's
    program checked this very config whole (plan/digests.py, `KNS_CHECKED`): the checks that
    need every entry (queue fit, reservations, pools, guard rails, name collisions) passed
    there, and are not recomputed per stack (docs/entry-stacks.md)."""
    checked.problems.raise_if_any()
    plans, problems = plan_all(checked.clean(), only)
    checked.problems.items.extend(problems)
    checked.problems.raise_if_any()
    return plan_stack(checked.config, plans, now or checked.now)
