"""Every limit a gang meets, for all its workers at once (docs/distributed.md, "Limits a
gang meets").

A distributed entry's N workers start together (a Job with N pods, `backoffLimit: 0`, no
partial retries): a limit that holds fewer than N of them at once leaves a Job that waits,
or holds its admission and nodes, for ever. Its queue is checked by plan/queues.py; here
the others, each from the pod as finally built (plan/accounting.py):

- **the pool**, static: its nodes x GPUs per node (whole GPUs, or a partition's devices),
  and how many workers one node holds (a worker's GPUs are on one node);
- **the topology** the entry requires: at the node level (`kubernetes.io/hostname`) all N
  workers are on one node; coarser domains' sizes are not declared, so not checked;
- **an autoscaled pool's limits** (Karpenter's NodePool `limits`): all N workers' requests
  within them, as nothing else may run there;
- **the entry's own quota and LimitRange** after overrides: `pods`, `services` (the one
  headless Service), every `requests.*`/`limits.*`/device key for N pods, and each
  container within the LimitRange's `max` and over its `min`.

A prescaled distributed schedule's warm-up is the gang itself, fired early and held by its
wait (docs/prescaling.md), so the same check covers it. `limits` gives each limit and its
headroom for `./kns explain`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

from config import devices as device_rules, queues as queue_rules, rules
from config.errors import Problem
from config.loader import PlatformConfig
from config.quantity import Kind, kind_for_resource, parse, render

from . import accounting, queues
from .model import WorkloadPlan

# The node level of a pool topology (its last level): a domain of one node.
HOSTNAME = rules.TOPOLOGY_LAST_LEVEL


@dataclass(frozen=True)
class Limit:
    """One limit a gang meets: what its workers need of one resource at once, what the
    limit holds, and where the entry's problem is reported when it holds too little."""

    limit: str  # "pool", "topology", "autoscale limits", "quota", "limit range"
    resource: str
    needed: Decimal
    held: Decimal
    # How `held` is made up ("4 nodes x 8"), and the path (after the entry's) it is reported at.
    detail: str
    at: str
    # Workers that fit at once, when the limit is counted in whole workers.
    workers_at_once: Optional[int] = None

    @property
    def headroom(self) -> Decimal:
        return self.held - self.needed

    @property
    def over(self) -> bool:
        return self.needed > self.held


def _show(resource: str, amount: Decimal) -> str:
    kind = kind_for_resource(resource)
    return render(amount, kind) if kind is not Kind.COUNT else f"{amount.normalize():f}"


def _gpus(plan: WorkloadPlan, account: accounting.PodAccount) -> tuple[Optional[str], int, Optional[int]]:
    """The GPU resource one worker asks of its static or autoscaled pool, how many, and how
    many of them one node of the pool has (None: not declared)."""
    pool = plan.pool
    if pool is None or pool.gpu is None:
        return None, 0, None
    if device_rules.is_dra(pool):
        ask = plan.device_ask
        if ask is None or ask.shared:
            return None, 0, None
        return ask.resource, ask.count, device_rules.per_node(pool, ask.kind)
    resource = pool.gpu_resource
    count = int(parse(account.requests.get(resource, "0"), kind_for_resource(resource))) if resource else 0
    return resource, count, pool.gpu.per_node


def limits(cfg: PlatformConfig, plan: WorkloadPlan) -> list[Limit]:
    """Each limit the entry's gang meets (none for an entry that is not distributed)."""
    account = accounting.of(plan)
    entry = plan.entry
    if account is None or not entry.distributed:
        return []
    workers = entry.workers
    out: list[Limit] = []
    pool = plan.pool
    gpu, per_worker, per_node = _gpus(plan, account)
    # A worker over a node's GPUs, or over the pool's limits, is refused per pod already
    # (config/devices.py, plan/nodepools.py): the gang's limits start from a worker that fits.
    if pool is not None and pool.autoscale is None and gpu and 0 < per_worker <= (per_node or 0):
        assert per_node is not None
        nodes = len(pool.static_nodes)
        on_a_node = per_node // per_worker
        fit = nodes * on_a_node
        out.append(Limit("pool", gpu, Decimal(workers * per_worker), Decimal(fit * per_worker),
                         f'pool "{pool.name}" has {nodes * per_node} ({nodes} nodes x {per_node})'
                         + (f"; a node holds {on_a_node} worker{'s' if on_a_node != 1 else ''}"
                            if per_node % per_worker else ""), "workers", fit))
    topology = entry.topology
    if (topology is not None and topology.mode == "required" and topology.level == HOSTNAME and gpu and per_node
            and 0 < per_worker <= per_node):
        on_a_node = per_node // per_worker if per_worker else workers
        out.append(Limit("topology", gpu, Decimal(workers * per_worker), Decimal(per_node),
                         f"topology {HOSTNAME} puts all on one node, which has {per_node}", "topology", on_a_node))
    if pool is not None and pool.autoscale is not None:
        asked = dict(account.requests)
        for resource, limit in pool.autoscale.limits.items():
            kind = kind_for_resource(resource)
            one = parse(asked.get(resource, "0"), kind)
            held = parse(limit, kind)
            if one <= 0 or one > held:
                continue
            out.append(Limit("autoscale limits", resource, one * workers, held,
                             f'pool "{pool.name}" may grow to {limit} (autoscale.limits.{resource})', "workers",
                             int(held // one)))
    out += _quota_limits(plan, account, workers)
    out += _limit_range_limits(plan, account)
    return _queue_limits(cfg, plan, account) + out


def _queue_limits(cfg: PlatformConfig, plan: WorkloadPlan, account: accounting.PodAccount) -> list[Limit]:
    """The queue, per pool the entry may use: what one Job asks against quota plus what the
    cohort lends (plan/queues.py reports a queue that can never admit it; here, for
    `./kns explain`, its headroom)."""
    queue = queues.queue_of(cfg, plan)
    if queue is None:
        return []
    out = []
    asked = account.job_requests()
    for pool in queues.pools_of(plan, queue):
        if pool not in queue.quota:
            continue
        for resource in queue_rules.covered_resources(queue.quota):
            needed = asked.get(resource)
            if needed is None:
                continue
            nominal = queue_rules.nominal(queue.quota, pool, resource)
            borrow = queues.borrowable(queue, cfg.queues, pool, resource)
            out.append(Limit("queue", resource, needed, nominal + borrow,
                             f'queue "{queue.name}" on pool "{pool}": quota {_show(resource, nominal)} + borrowing '
                             f"{_show(resource, borrow)}", "queue"))
    return out


def _quota_limits(plan: WorkloadPlan, account: accounting.PodAccount, workers: int) -> list[Limit]:
    """The entry's own ResourceQuota (after overrides) against N workers at once."""
    hard = plan.quota
    needs: dict[str, Decimal] = {"pods": Decimal(workers)}
    if plan.service is not None:
        needs["services"] = Decimal(1)
    for side, amounts in (("requests", account.requests), ("limits", account.limits)):
        for resource, amount in amounts.items():
            value = parse(amount, kind_for_resource(resource)) * workers
            needs[f"{side}.{resource}"] = value
            if side == "requests":
                needs.setdefault(resource, value)  # a bare key is the request
    for key, count in accounting.device_quota(account, workers).items():
        needs[key] = Decimal(count)
    out = []
    for key, needed in needs.items():
        if key not in hard or needed <= 0:
            continue
        resource = key.split(".", 1)[1] if key.startswith(("requests.", "limits.")) else key
        held = parse(hard[key], kind_for_resource(resource))
        one = needed / workers if key not in ("services",) else needed
        out.append(Limit("quota", key, needed, held, f"quota {key} is {hard[key]}", f"quota.{key}",
                         int(held // one) if one > 0 and key != "services" else None))
    return out


def _limit_range_limits(plan: WorkloadPlan, account: accounting.PodAccount) -> list[Limit]:
    """Each container of the worker within the LimitRange's max and over its min."""
    spec = plan.limit_range
    pod = plan.pod_spec or {}
    names = [c.get("name", "?") for c in pod.get("containers") or []] + \
        [c.get("name", "?") for c in pod.get("initContainers") or []]
    out = []
    for name, container in zip(names, account.containers + account.init_containers):
        for side, bound in (("limits", "max"), ("requests", "min")):
            for resource, edge in (spec.get(bound) or {}).items():
                kind = kind_for_resource(resource)
                amount = container[side].get(resource) or (container["requests"].get(resource) if side == "limits"
                                                           else None)
                if amount is None:
                    continue
                value, edge_value = parse(amount, kind), parse(edge, kind)
                if bound == "max":
                    out.append(Limit("limit range", resource, value, edge_value,
                                     f'container "{name}" {side} {amount}, LimitRange max {edge}', f"limitRange.max.{resource}"))
                else:
                    out.append(Limit("limit range", resource, edge_value, value,
                                     f'container "{name}" {side} {amount}, LimitRange min {edge}', f"limitRange.min.{resource}"))
    return out


def _message(limit: Limit, workers: int, per_worker: Optional[Decimal]) -> str:
    resource = limit.resource
    if limit.limit == "limit range":
        return f"{limit.detail}: the API server refuses each worker's pod"
    if resource == "pods":
        need = f"{workers} workers need {workers} pods at once"
    elif limit.limit == "quota" and resource == "services":
        need = "the workers' headless Service needs 1 service"
    else:
        each = f"{workers} workers x {_show(resource, per_worker)} {resource}" if per_worker is not None else \
            f"{workers} workers"
        need = f"{each} need {_show(resource, limit.needed)} {resource} at once"
    tail = ""
    if limit.workers_at_once is not None and limit.workers_at_once < workers:
        tail = f"; at most {limit.workers_at_once} of the {workers} workers at once"
    return f"{need}; {limit.detail}{tail}: the gang never starts whole"


def gang_problems(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> list[Problem]:
    """Every limit some gang exceeds, each at its path (`kns:jobs[train].workers`)."""
    problems = []
    for plan in plans:
        if not plan.entry.distributed:
            continue
        path = cfg.paths[plan.entry.name]
        workers = plan.entry.workers
        for limit in limits(cfg, plan):
            if not limit.over or limit.limit == "queue":  # the queue: plan/queues.py fit_problems
                continue
            if limit.limit == "quota" and limit.resource == "services":
                per_worker = None
            elif limit.limit in ("limit range",):
                per_worker = None
            else:
                per_worker = limit.needed / workers
            problems.append(Problem(f"{path}.{limit.at}", _message(limit, workers, per_worker)))
    return problems


def describe(limit: Limit) -> dict[str, Any]:
    """One limit as `./kns explain` shows it: needed, held and headroom."""
    return {"limit": limit.limit, "resource": limit.resource, "needed": _show(limit.resource, limit.needed),
            "held": _show(limit.resource, limit.held), "headroom": _show(limit.resource, limit.headroom),
            "detail": limit.detail}
