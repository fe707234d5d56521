"""What a budget becomes (pure; docs/budgets.md, "What the program creates").

Per budget, on the cluster its queues admit on (a site's manager: it admits, so its
Workloads are what is counted):
- a namespace of its own (`<prefix>budget-<name>`) holding its counter and its ledger;
- the counter: a CronJob running plan/budget_counter.py every `countEveryMinutes`, its
  ServiceAccount, and RBAC that names what it writes: the ledger ConfigMap and events in
  its namespace, `stopPolicy` of the budget's ClusterQueues (by name); it lists Workloads
  and nothing else cluster-wide;
- a ConfigMap with its code (plan/pod_code.py).

Nothing of the count is in these objects: the ledger is the counter's (created by its
first run, never by `pulumi up`), and `stopPolicy` is written by the counter's own field
manager on objects the stack applies without it, so an `up`, a refresh or a changed limit
keeps what was counted; a changed limit replaces nothing but the counter's spec, and its
next run (within one interval) reopens or holds the queues.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from chrono import moments
from config import names
from config.budgets import Budget
from config.platform import PlatformConfig

from . import network, pod_code
from .budget_counter import EVENTS_NAMESPACE
from .model import WorkloadPlan
from .reservations import cluster_queue_name as reservation_queue
from .schedulers import RESTRICTED_CONTAINER, RESTRICTED_POD

COUNTER = "counter"
LEDGER = "ledger"


@dataclass
class BudgetPlan:
    budget: Budget
    namespace: str
    # A reservation's ClusterQueue -> the namespaces of the budget's entries that use it:
    # their windows' use is charged to the budget too (as Slurm charges a reservation's).
    reserved: dict[str, list[str]] = field(default_factory=dict)
    objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.budget.name


def namespace_name(cfg: PlatformConfig, name: str) -> str:
    return names.namespace_name(cfg.cluster.namespace_prefix, f"budget-{name}")


def cluster_role_name(name: str) -> str:
    return f"kns-budget-{name}"


def _metadata(cfg: PlatformConfig, budget: Budget, name: str, namespace: Optional[str] = None) -> dict[str, Any]:
    return names.labelled_metadata(cfg.cluster.name, names.LABEL_BUDGET, budget.name, name, namespace)


def plan_budgets(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> list[BudgetPlan]:
    out = []
    for budget in cfg.budgets:
        plan = BudgetPlan(budget, namespace_name(cfg, budget.name))
        for p in plans:
            if p.entry.reservation is not None and p.entry.queue in budget.queues:
                plan.reserved.setdefault(reservation_queue(p.entry.reservation), []).append(p.namespace)
        plan.objects = _objects(cfg, plan)
        out.append(plan)
    return out


def period_spec(budget: Budget) -> dict[str, Any]:
    if budget.reset is not None:
        return {"reset": budget.reset, "zone": budget.time_zone}
    assert budget.start is not None and budget.end is not None
    return {"start": moments.shown(budget.start), "end": moments.shown(budget.end)}


def counter_spec(plan: BudgetPlan) -> dict[str, Any]:
    """What the counter is told (its one environment variable, plan/budget_counter.py)."""
    budget = plan.budget
    return {"name": budget.name, "namespace": plan.namespace, "queues": list(budget.queues),
            "limits": dict(budget.limits), "period": period_spec(budget), "atLimit": budget.at_limit,
            "warnAt": list(budget.warn_at), "reserved": {k: sorted(v) for k, v in sorted(plan.reserved.items())}}


def code_zones(budget: Budget) -> tuple[str, ...]:
    return tuple(sorted({"Etc/UTC", budget.time_zone}))


def _code(budget: Budget):
    return pod_code.code_files("counter.py", "plan/budget_counter.py", code_zones(budget))


def _objects(cfg: PlatformConfig, plan: BudgetPlan) -> list[dict[str, Any]]:
    budget, ns = plan.budget, plan.namespace
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(cfg, budget, ns)}
    namespace["metadata"]["labels"].update({f"pod-security.kubernetes.io/{m}": "restricted"
                                            for m in ("enforce", "audit", "warn")})
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(cfg, budget, COUNTER, ns)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _metadata(cfg, budget, COUNTER, ns),
            "rules": [
                # The ledger is created by a server-side apply, whose create names it: the
                # create is limited by name too.
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch", "create"],
                 "resourceNames": [LEDGER]},
            ]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": _metadata(cfg, budget, COUNTER, ns),
               "subjects": [{"kind": "ServiceAccount", "name": COUNTER, "namespace": ns}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": COUNTER}}
    queues = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": _metadata(cfg, budget, cluster_role_name(budget.name)),
              "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]},
                        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "patch"],
                         "resourceNames": list(budget.queues)}]}
    queues_binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                      "metadata": _metadata(cfg, budget, cluster_role_name(budget.name)),
                      "subjects": [{"kind": "ServiceAccount", "name": COUNTER, "namespace": ns}],
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": cluster_role_name(budget.name)}}
    # The queues' events: a cluster-scoped object's live in `default`; an event's name is its
    # own, so this is limited to creating them there.
    events = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": _metadata(cfg, budget, cluster_role_name(budget.name), EVENTS_NAMESPACE),
              "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]}
    events_binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": _metadata(cfg, budget, cluster_role_name(budget.name), EVENTS_NAMESPACE),
                      "subjects": [{"kind": "ServiceAccount", "name": COUNTER, "namespace": ns}],
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": cluster_role_name(budget.name)}}
    code = pod_code.config_map(_metadata(cfg, budget, COUNTER, ns), _code(budget))
    # The counter serves nothing: its namespace admits no one (plan/network.py).
    isolation = network.platform_policy(cfg.network, ns, _metadata(cfg, budget, ns)["labels"])
    return [namespace, *([isolation] if isolation is not None else []), account, role, binding, queues,
            queues_binding, events, events_binding, code, cronjob_manifest(cfg, plan)]


def cronjob_manifest(cfg: PlatformConfig, plan: BudgetPlan) -> dict[str, Any]:
    budget = plan.budget
    labels = {names.LABEL_CLUSTER: cfg.cluster.name, names.LABEL_BUDGET: budget.name}
    container = {
        "name": COUNTER, "image": pod_code.IMAGE, "command": ["python3", "-B", f"{pod_code.CODE_DIR}/counter.py"],
        "env": [{"name": "KNS_BUDGET", "value": json.dumps(counter_spec(plan), sort_keys=True)},
                pod_code.NO_IMAGE_ZONES],
        "volumeMounts": [pod_code.MOUNT],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi", "ephemeral-storage": "16Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi", "ephemeral-storage": "64Mi"}},
        "securityContext": RESTRICTED_CONTAINER,
    }
    every = budget.count_every_minutes
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _metadata(cfg, budget, COUNTER, plan.namespace),
            "spec": {"schedule": "0 * * * *" if every == 60 else f"*/{every} * * * *", "timeZone": "Etc/UTC",
                     "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
                     "startingDeadlineSeconds": every * 60,
                     "jobTemplate": {"metadata": {"labels": labels}, "spec": {
                         "backoffLimit": 2, "activeDeadlineSeconds": max(60, every * 60 - 10),
                         "ttlSecondsAfterFinished": 3600,
                         "template": {"metadata": {"labels": labels}, "spec": {
                             "serviceAccountName": COUNTER, "restartPolicy": "Never",
                             "securityContext": RESTRICTED_POD, "containers": [container],
                             "volumes": [pod_code.volume(COUNTER, _code(budget))]}}}}}}
