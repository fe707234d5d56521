"""Builders for what one entry produces (docs/namespaces.md, docs/workloads.md), as
Kubernetes-shaped dicts in camelCase. Components hand these to pulumi-kubernetes; tests
(and `jsonOverrides`) work on exactly what the API server will receive.
"""

from __future__ import annotations

import copy
from typing import Any

from config import names, resolve, rules
from config.platform import PlatformConfig
from config.models import Schedule, Workload

from . import devices, network, wait
from .model import CREDENTIALS_VOLUME, Child, WorkloadPlan, child_key, credential_secret_name

SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
# A Job is replaced, the old one deleted before the new one is created under the same name,
# when its entry changes what is in its pod template (components/workload.py). Under
# skipAwait the provider does not wait for a Job to be gone (pulumi-kubernetes issues 1232
# and 3154), and a foreground deletion leaves it in place until its pods are: the new Job
# would meet the old one. Deleted in the background, it is gone at once and the garbage
# collector removes its pods after it (docs/workloads.md).
JOB_DELETION = {"pulumi.com/deletionPropagationPolicy": "background"}
# A CronJob whose entry sets no startingDeadlineSeconds gets this one (docs/prescaling.md,
# docs/testing.md): a run the controller could not start within an hour of its time is
# skipped, not started late, and a controller that was down long cannot hit the "too many
# missed start times" limit (100), which stops a CronJob without a deadline for good.
DEFAULT_STARTING_DEADLINE_SECONDS = 3600
# Each worker's retries with `restartWorkers: individually` unless backoffLimit says (the
# Job's own default backoffLimit).
DEFAULT_BACKOFF_PER_INDEX = 6

# kube-score (tests/test_manifest_lint.py) checks a user workload cannot meet, and why; the
# program sets `kube-score/ignore` on a Job or CronJob only for those its pod really fails.
KUBE_SCORE_IGNORE = rules.KUBE_SCORE_IGNORE
WORKLOAD_LINT_EXCEPTIONS = {
    # The user's image runs as built: its user and its writes are the image's business.
    "container-security-context-user-group-id",
    "container-security-context-readonlyrootfilesystem",
    # imagePullPolicy is the entry's (`imagePullPolicy`); Kubernetes' default otherwise.
    "container-image-pull-policy",
    # local disk is bounded only when the entry sets `storage`.
    "container-ephemeral-storage-request-and-limit",
    # With kns:network.isolation: none the network is the site's (docs/network.md).
    "pod-networkpolicy",
}
HIGH_ID = 10000  # kube-score's "low user ID" threshold
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


def namespace_labels(plan: WorkloadPlan) -> dict[str, str]:
    labels = dict(plan.labels)
    if plan.network_policy is not None:  # what the guard rail holds it to (plan/guardrails.py)
        labels[network.ISOLATED_LABEL] = network.ISOLATED
    for mode in POD_SECURITY_MODES:
        labels[f"pod-security.kubernetes.io/{mode}"] = plan.pod_security
    return labels


# The namespace's guard rails: its defaults, quota and least-privilege runner.
LIMIT_RANGE = "kns-defaults"
QUOTA = "kns-quota"
RUNNER = "kns-runner"


def namespace_children(plan: WorkloadPlan, name: str) -> list[Child]:
    """An entry's namespace and the guard rails around it, `name` their component's: the
    Namespace (owner labels, Pod Security level), LimitRange `kns-defaults`, ResourceQuota
    `kns-quota`, NetworkPolicy `kns-isolation` (docs/network.md), and a least-privilege
    runner (ServiceAccount `kns-runner` with a Role that has no wildcard verbs and no access
    to secrets), and a Secret per credential set."""
    namespace = child_key("Namespace", name)

    def meta(object_name: str) -> dict[str, Any]:
        return {"name": object_name, "namespace": plan.namespace, "labels": dict(plan.labels)}

    def inside(child_name: str, manifest: dict[str, Any]) -> Child:
        return Child(child_name, manifest, after=(namespace,))

    out = [Child(name, {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": plan.namespace, "labels": namespace_labels(plan)}}),
           inside(f"{name}-defaults", {"apiVersion": "v1", "kind": "LimitRange", "metadata": meta(LIMIT_RANGE),
                                       "spec": {"limits": [plan.limit_range]}}),
           inside(f"{name}-quota", {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(QUOTA),
                                    "spec": {"hard": plan.quota}}),
           inside(f"{name}-runner", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(RUNNER),
                                     "automountServiceAccountToken": False})]
    # Its tenancy on the network (plan/network.py): registered before anything runs in it.
    if plan.network_policy is not None:
        out.append(inside(f"{name}-isolation", plan.network_policy))
    out.append(inside(f"{name}-runner", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                         "metadata": meta(RUNNER), "rules": plan.role_rules}))
    out.append(Child(f"{name}-runner", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(RUNNER),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RUNNER},
        "subjects": [{"kind": "ServiceAccount", "name": RUNNER, "namespace": plan.namespace}]},
        after=(child_key("Role", f"{name}-runner"), child_key("ServiceAccount", f"{name}-runner"))))
    # One Secret per credential set (its content is sent only as a Pulumi secret).
    out += [inside(f"{name}-cred-{set_name}", {"apiVersion": "v1", "kind": "Secret",
                                               "metadata": meta(credential_secret_name(set_name)),
                                               "type": "Opaque", "stringData": dict(files)})
            for set_name, files in plan.credentials.items()]
    return out


def pod_tolerations(plan: WorkloadPlan, own: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod's tolerations: `own` (a raw pod spec's), then its pool's, which the pod
    needs wherever the program places it (a GPU pool's taint included), then the entry's
    `tolerations`, each once."""
    tolerations = [copy.deepcopy(item) for item in own]
    program = resolve.tolerations_for(plan.pool) if plan.pool is not None else []
    for item in program + [toleration.manifest() for toleration in plan.entry.tolerations]:
        if item not in tolerations:
            tolerations.append(item)
    return tolerations


def pod_template(plan: WorkloadPlan, cfg: PlatformConfig) -> dict[str, Any]:
    """The pod template shared by a Job and a CronJob's job template."""
    entry = plan.entry
    node_selector: dict[str, str] = {}
    if plan.pool is not None:
        node_selector[names.LABEL_POOL] = plan.pool.name
    node_selector.update(entry.placement)
    node_selector.update(entry.node_selector)
    tolerations = pod_tolerations(plan, (entry.pod_spec or {}).get("tolerations") or [])

    labels = {**entry.labels, **resolve.dynamic_labels(entry, cfg.cluster.name, cfg.stack), **_pod_labels(plan)}
    metadata: dict[str, Any] = {"labels": labels}
    annotations = dict(entry.annotations)
    if plan.on_autoscaled_pool or (plan.pool is None and any(p.autoscale is not None for p in cfg.node_pools)):
        # Karpenter must not move a pod it provisioned for: a primed pod holds its warm node
        # until the start, a batch pod until it ends (docs/autoscaling.md). A pod without a
        # pool may land on an autoscaled one too (an untainted pool, a queue's flavor, its
        # own nodeSelector); on a node Karpenter does not manage the annotation does nothing.
        annotations.update(names.DO_NOT_DISRUPT)
    if entry.topology is not None:
        # Kueue admits the pod set within one domain of the level (docs/distributed.md).
        annotations[rules.TOPOLOGY_ANNOTATIONS[entry.topology.mode]] = entry.topology.level
    if annotations:
        metadata["annotations"] = annotations
    if entry.pod_spec is not None:
        # Used verbatim; our placement and scheduler apply where the spec is silent, and the
        # pool's and the entry's tolerations join its own. The planner writes admission's
        # defaults into its containers once overrides are applied.
        raw = copy.deepcopy(entry.pod_spec)
        raw.setdefault("restartPolicy", "Never")
        raw.setdefault("automountServiceAccountToken", False)
        if plan.scheduler_name:
            raw.setdefault("schedulerName", plan.scheduler_name)
        if node_selector:
            raw.setdefault("nodeSelector", node_selector)
        if tolerations:
            raw["tolerations"] = tolerations
        if plan.credentials:
            raw.setdefault("volumes", []).append(_credentials_volume(plan))
            for container in raw["containers"]:
                container.setdefault("volumeMounts", []).append(_credentials_mount(entry))
        devices.claim_pod(raw, plan.device_ask)
        return {"metadata": metadata, "spec": _as_worker(plan, raw)}

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
    devices.claim_pod(spec, plan.device_ask)
    return {"metadata": metadata, "spec": _as_worker(plan, spec)}


# The labels and annotations the Job controller gives each pod of an Indexed Job.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
WORKER_SERVICE_RULES = [
    {"apiGroups": [""], "resources": ["services", "endpoints"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
]


def leader_address(plan: WorkloadPlan, job: str = "$(KNS_JOB_NAME)") -> str:
    """Worker 0's name under the entry's Service in Job `job`; by default the Job's name is
    left to the pod (`$(KNS_JOB_NAME)`: a schedule's Jobs are named per run)."""
    return f"{job}-0.{plan.entry.name}.{plan.namespace}.svc"


def worker_env(plan: WorkloadPlan) -> list[dict[str, Any]]:
    """What every worker's containers are told (docs/distributed.md): how many workers,
    which one it is, where the leader is; also under the names PyTorch's launcher reads."""
    entry = plan.entry
    index = {"valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
    port = entry.leader_port or rules.LEADER_PORT_DEFAULT
    return [
        {"name": "KNS_JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_NAME_LABEL}']"}}},
        {"name": "KNS_WORKERS", "value": str(entry.workers)},
        {"name": "KNS_WORKER_INDEX", **index},
        {"name": "KNS_LEADER", "value": leader_address(plan)},
        {"name": "WORLD_SIZE", "value": str(entry.workers)},
        {"name": "RANK", **index},
        {"name": "MASTER_ADDR", "value": "$(KNS_LEADER)"},
        {"name": "MASTER_PORT", "value": str(port)},
    ]


def _as_worker(plan: WorkloadPlan, spec: dict[str, Any]) -> dict[str, Any]:
    """A distributed entry's pod: named under the entry's Service, its containers told the
    workers (the program's names first, so the entry's own env may refer to them)."""
    if not plan.entry.distributed:
        return spec
    spec["subdomain"] = plan.entry.name
    for container in spec["containers"]:
        container["env"] = worker_env(plan) + list(container.get("env") or [])
    return spec


def service_manifest(plan: WorkloadPlan) -> dict[str, Any]:
    """The headless Service that names a distributed entry's workers: worker i is
    `<job>-<i>.<entry>.<namespace>.svc`, Ready or not (the workers find each other before
    they serve anything)."""
    labels = {**plan.entry.labels, **plan.labels}
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": plan.entry.name, "namespace": plan.namespace, "labels": labels},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": {names.LABEL_JOB: plan.labels[names.LABEL_JOB]}},
    }


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
    if entry.distributed:
        spec.update(completionMode="Indexed", completions=entry.workers, parallelism=entry.workers)
        if entry.restart_workers == "together":
            spec["backoffLimit"] = 0  # one failed worker fails the Job, and its other pods go
        else:
            spec.pop("backoffLimit", None)
            spec["backoffLimitPerIndex"] = (DEFAULT_BACKOFF_PER_INDEX if entry.backoff_limit is None
                                            else entry.backoff_limit)
    if entry.queue is not None or entry.reservation is not None:
        spec["suspend"] = True  # Kueue unsuspends the Job when its queue admits it
    spec["template"] = template
    return spec


def _queue_label(entry: Workload) -> dict[str, str]:
    """What sends a queued entry's Jobs to the LocalQueue of its namespace, and gives their
    Workloads the entry's priority (docs/queueing.md)."""
    if entry.reservation is not None:
        # Its reservation's queue, held between windows (docs/reservations.md).
        labels = {names.QUEUE_LABEL: names.RESERVATION_LOCAL_QUEUE}
    elif entry.queue is None:
        return {}
    else:
        labels = {names.QUEUE_LABEL: names.LOCAL_QUEUE}
    if entry.priority is not None:
        labels[names.PRIORITY_LABEL] = entry.priority
    return labels


def lint_exceptions(template: dict[str, Any], isolated: bool = False) -> list[str]:
    """The WORKLOAD_LINT_EXCEPTIONS this pod template really needs; an isolated namespace's
    pods have their NetworkPolicy (plan/network.py)."""
    spec = template.get("spec", {})
    pod_security = spec.get("securityContext") or {}
    containers = list(spec.get("initContainers", [])) + list(spec.get("containers", []))
    found = set() if isolated else {"pod-networkpolicy"}
    for container in containers:
        security = {**pod_security, **(container.get("securityContext") or {})}
        if not all(isinstance(security.get(k), int) and security[k] > HIGH_ID for k in ("runAsUser", "runAsGroup")):
            found.add("container-security-context-user-group-id")
        if security.get("readOnlyRootFilesystem") is not True:
            found.add("container-security-context-readonlyrootfilesystem")
        if container.get("imagePullPolicy") != "Always":
            found.add("container-image-pull-policy")
        resources = container.get("resources") or {}
        if not all("ephemeral-storage" in (resources.get(side) or {}) for side in ("requests", "limits")):
            found.add("container-ephemeral-storage-request-and-limit")
    return sorted(found & WORKLOAD_LINT_EXCEPTIONS)


def _lint_annotation(plan: WorkloadPlan, template: dict[str, Any]) -> dict[str, str]:
    own = [t.strip() for t in plan.entry.annotations.get(KUBE_SCORE_IGNORE, "").split(",") if t.strip()]
    ignored = own + [t for t in lint_exceptions(template, plan.network_policy is not None) if t not in own]
    return {KUBE_SCORE_IGNORE: ",".join(ignored)} if ignored else {}


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
    metadata = _metadata(plan, {**SKIP_AWAIT, **JOB_DELETION, **_lint_annotation(plan, template)})
    metadata["labels"].update(_queue_label(plan.entry))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


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
            "metadata": {"labels": {**_pod_labels(plan), **_queue_label(entry)}},
            "spec": _job_spec(entry, template),
        },
    }
    spec["startingDeadlineSeconds"] = (DEFAULT_STARTING_DEADLINE_SECONDS if entry.starting_deadline_seconds is None
                                       else entry.starting_deadline_seconds)
    if "ttl_hours" in entry.model_fields_set:
        # Only when asked: by default the history limits decide how long runs are kept.
        spec["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = _ttl_seconds(entry)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _metadata(plan, _lint_annotation(plan, template)),
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
        plan.primers.lead, entry.time_zone, entry.wait_image, plan.limit_range.get("max"), entry.image_pull_policy
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
