"""Every limit a workload meets, for the pods of it that must be held at once
(docs/validation.md, "Workloads that can never run"; docs/distributed.md, "Limits a gang
meets").

How many pods a limit must hold together depends on the kind of workload (`kind_of`):

- a distributed entry's N workers start together (a Job with N pods, `backoffLimit: 0`,
  no partial retries): a limit that holds fewer leaves a Job that waits, or holds its
  admission and nodes, for ever;
- a prescaled schedule's primed pods (one run's: its parallelism) are all scheduled during
  the warm-up and held there by their wait (docs/prescaling.md): a limit that holds fewer
  leaves the rest without a node until the first ones end, so they start late every run;
- any other entry's pods (a single pod, a parallel Job's) start as they fit: a limit
  counts one pod, which must fit on its own, or none ever runs.

Kueue places a Job that asks `topology` whole, at admission: that limit counts every pod
of a run, whatever the kind. Its queue is checked by plan/queues.py (every pod of a run,
as Kueue admits a Job whole); here the others, each from the pod as finally built
(plan/accounting.py):

- **the pool**, static: its nodes x GPUs per node (whole GPUs, or a partition's devices),
  and how many pods one node holds (a pod's GPUs are on one node);
- **the topology** the entry requires: at the node level (`kubernetes.io/hostname`) all its
  pods are on one node; coarser domains' sizes are not declared, so not checked; and the
  flavors its queue may admit it on must name a Topology at all (on a MultiKueue site the
  manager's one flavor names none);
- **an autoscaled pool's limits** (Karpenter's NodePool `limits`), as nothing else may run
  there (one pod over them is plan/nodepools.py's);
- **the entry's own quota and LimitRange** after overrides: `pods`, the objects the program
  makes in its namespace (the workers' headless Service, the credential Secrets), every
  `requests.*`/`limits.*`/device key, and each container within the LimitRange's `max`
  and over its `min`.

A message names the limit and its numbers, in one form per limit whatever the kind; the
kind gives only the words for its pods and what becomes of it. `limits` gives each limit
and its headroom for `./kns explain`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

from config import devices as device_rules, queues as queue_rules, rules
from config.errors import Problem
from config.platform import PlatformConfig
from config.quantity import Kind, human_of, kind_for_resource, parse, render

from . import accounting, multikueue, queues
from .model import WorkloadPlan

# The node level of a pool topology (its last level): a domain of one node.
HOSTNAME = rules.TOPOLOGY_LAST_LEVEL


@dataclass(frozen=True)
class Limit:
    """One limit a workload meets: what `pods` of its pods need of one resource at once,
    what the limit holds, and where the entry's problem is reported when it holds too
    little."""

    limit: str  # "queue", "pool", "topology", "autoscale limits", "quota", "limit range"
    resource: str
    needed: Decimal
    held: Decimal
    # How `held` is made up ("4 nodes x 8"), and the path (after the entry's) it is reported at.
    detail: str
    at: str
    # Pods that fit at once, when the limit is counted in whole pods.
    at_once: Optional[int] = None
    # The pods `needed` counts together.
    pods: int = 1
    # What needs it, when that is an object the program makes rather than pods.
    need: Optional[str] = None

    @property
    def headroom(self) -> Decimal:
        return self.held - self.needed

    @property
    def over(self) -> bool:
        return self.needed > self.held


@dataclass(frozen=True)
class WorkloadKind:
    """How a kind of workload meets its limits: the pods each limit holds at once, the
    words its messages name them with, and what becomes of it when a limit holds fewer."""

    together: int
    one: str  # "worker"
    many: str  # "workers"
    # The pods one by one: what one pod needs, what the API server refuses.
    each: str
    gang: bool = False
    prescaled: bool = False

    def outcome(self, limit: Limit) -> str:
        """A prescaled run whose pods fit in part still runs, late; one not a pod of which
        fits, or that Kueue must place whole (topology), never does."""
        if self.gang:
            return rules.GANG_NEVER_WHOLE.message
        if self.prescaled and limit.limit != "topology" and limit.pods > 1 and (limit.at_once or 0) >= 1:
            return rules.WARM_UP_NEVER_WHOLE.message
        return rules.NEVER_RUNS.message


def kind_of(plan: WorkloadPlan) -> WorkloadKind:
    """A distributed entry's workers, a prescaled schedule's primed pods (all of a run), or
    any other entry's pods, each on its own."""
    entry = plan.entry
    run = entry.pods_per_run
    if entry.distributed:
        return WorkloadKind(entry.workers, "worker", "workers", "each worker's pod", gang=True)
    if plan.primers is not None:
        return WorkloadKind(run, "primed pod", "primed pods", "each primed pod" if run > 1 else "its primed pod",
                            prescaled=True)
    return WorkloadKind(1, "pod", "pods", "each of its pods" if run > 1 else "its pod")


def _show(resource: str, amount: Decimal) -> str:
    kind = kind_for_resource(resource)
    return render(amount, kind) if kind is not Kind.COUNT else f"{amount.normalize():f}"


def _gpus(plan: WorkloadPlan, account: accounting.PodAccount) -> tuple[Optional[str], int, Optional[int]]:
    """The GPU resource one pod asks of its static or autoscaled pool, how many, and how
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
    """Each limit the entry's pods meet (none for an entry that runs no pod), for as many
    of them as must be held at once (`kind_of`; all of a run for required topology)."""
    account = accounting.of(plan)
    entry = plan.entry
    if account is None:
        return []
    count = kind_of(plan).together
    # A count over one pod is the entry's workers or its parallelism: the field reported.
    field = "workers" if entry.distributed else "parallelism"
    out: list[Limit] = []
    pool = plan.pool
    gpu, per_pod, per_node = _gpus(plan, account)
    # A pod over a node's GPUs, or over the pool's limits, is refused per pod already
    # (config/checks.py, config/devices.py, plan/nodepools.py): these limits start from a pod that fits.
    if pool is not None and pool.autoscale is None and gpu and 0 < per_pod <= (per_node or 0):
        assert per_node is not None
        nodes = len(pool.static_nodes)
        on_a_node = per_node // per_pod
        fit = nodes * on_a_node
        out.append(Limit("pool", gpu, Decimal(count * per_pod), Decimal(fit * per_pod),
                         f'pool "{pool.name}" has {nodes * per_node} ({nodes} nodes x {per_node})'
                         + (f"; a node holds {on_a_node} {_noun(plan, on_a_node)}" if per_node % per_pod else ""),
                         field, fit, count))
    topology = entry.topology
    if (topology is not None and topology.mode == "required" and topology.level == HOSTNAME and gpu and per_node
            and 0 < per_pod <= per_node):
        run = entry.pods_per_run
        out.append(Limit("topology", gpu, Decimal(run * per_pod), Decimal(per_node),
                         f"topology {HOSTNAME} puts all on one node, which has {per_node}", "topology",
                         per_node // per_pod, run))
    if pool is not None and pool.autoscale is not None:
        asked = dict(account.requests)
        for resource, limit in pool.autoscale.limits.items():
            kind = kind_for_resource(resource)
            one = parse(asked.get(resource, "0"), kind)
            held = parse(limit, kind)
            if one <= 0 or one > held:
                continue
            out.append(Limit("autoscale limits", resource, one * count, held,
                             f'pool "{pool.name}" may grow to {limit} (autoscale.limits.{resource})', field,
                             int(held // one), count))
    out += _quota_limits(plan, account, count)
    out += _limit_range_limits(plan, account)
    return _queue_limits(cfg, plan, account) + out


def _noun(plan: WorkloadPlan, count: int) -> str:
    kind = kind_of(plan)
    return kind.one if count == 1 else kind.many


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
                             f"{_show(resource, borrow)}", "queue", pods=account.pods))
    return out


def _objects(plan: WorkloadPlan) -> dict[str, tuple[int, str, str]]:
    """The objects the program makes in the entry's namespace that its quota counts, by
    quota key: how many, what they are, and the counted noun (one, many)."""
    out: dict[str, tuple[int, str, str]] = {}
    if plan.service is not None:
        for key in ("services", "count/services"):
            out[key] = (1, "the workers' headless Service", "service")
    sets = len(plan.credentials)
    if sets:
        what = "its credential Secret" if sets == 1 else f"its {sets} credential Secrets"
        for key in ("secrets", "count/secrets"):
            out[key] = (sets, what, "secret")
    return out


def _quota_limits(plan: WorkloadPlan, account: accounting.PodAccount, count: int) -> list[Limit]:
    """The entry's own ResourceQuota (after overrides) against `count` pods at once and the
    objects of its namespace."""
    hard = plan.quota
    needs: dict[str, Decimal] = {"pods": Decimal(count), "count/pods": Decimal(count)}
    for side, amounts in (("requests", account.requests), ("limits", account.limits)):
        for resource, amount in amounts.items():
            value = parse(amount, kind_for_resource(resource)) * count
            needs[f"{side}.{resource}"] = value
            if side == "requests":
                needs.setdefault(resource, value)  # a bare key is the request
    for key, devices in accounting.device_quota(account, count).items():
        needs[key] = Decimal(devices)
    out = []
    for key, needed in needs.items():
        if key not in hard or needed <= 0:
            continue
        resource = key.split(".", 1)[1] if key.startswith(("requests.", "limits.")) else key
        held = parse(hard[key], kind_for_resource(resource))
        one = needed / count
        out.append(Limit("quota", key, needed, held, f"quota {key} is {hard[key]}", f"quota.{key}",
                         int(held // one) if one > 0 else None, count))
    for key, (number, what, noun) in _objects(plan).items():
        if key in hard:
            need = f"{what} {'needs' if number == 1 else 'need'} {number} {noun}{'s' if number != 1 else ''}"
            out.append(Limit("quota", key, Decimal(number), parse(hard[key], Kind.COUNT), f"quota {key} is {hard[key]}",
                             f"quota.{key}", need=need))
    return out


def _limit_range_limits(plan: WorkloadPlan, account: accounting.PodAccount) -> list[Limit]:
    """Each container of the pod within the LimitRange's max and over its min."""
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


def message(limit: Limit, kind: WorkloadKind) -> str:
    """The one form of a limit's refusal, in the words of the workload's kind."""
    if limit.limit == "limit range":
        return f"{limit.detail}: the API server refuses {kind.each}"
    count, resource = limit.pods, limit.resource
    if limit.need is not None:
        need = limit.need
    elif resource in ("pods", "count/pods"):
        need = f"{count} {kind.many} need {count} pods at once" if count > 1 else f"{kind.each} needs 1 pod"
    elif count > 1:
        need = (f"{count} {kind.many} x {_show(resource, limit.needed / count)} {resource} need "
                f"{_show(resource, limit.needed)} {resource} at once")
    else:
        need = f"{kind.each} needs {_show(resource, limit.needed)} {resource}"
    tail = ""
    if limit.at_once is not None and count > 1 and limit.at_once < count:
        tail = f"; at most {limit.at_once} of the {count} {kind.many} at once"
    return f"{need}; {limit.detail}{tail}: {kind.outcome(limit)}"


def topology_problem(cfg: PlatformConfig, plan: WorkloadPlan) -> Optional[str]:
    """Why Kueue never admits an entry that asks `topology`: no flavor its queue may admit
    it on names a Topology with that level. On a MultiKueue site the manager admits, on
    its one flavor, which names none (placement is the workers')."""
    entry = plan.entry
    queue = queues.queue_of(cfg, plan)
    if entry.topology is None or queue is None or plan.pod_spec is None:
        return None
    level = entry.topology.level
    if cfg.workers:
        where = (f'queue "{queue.name}" admits on the manager\'s one flavor "{multikueue.FLAVOR}" (a MultiKueue site), '
                 "which names no Topology")
    else:
        pools = {p.name: p for p in cfg.node_pools}
        candidates = [name for name in queues.pools_of(plan, queue) if name in queue.quota and name in pools]
        if not candidates or any(pools[name].topology is not None and level in pools[name].topology.levels
                                 for name in candidates):
            return None  # no pool of the queue: plan/queues.py says so
        where = (f'queue "{queue.name}" may admit it on pool{"s" if len(candidates) > 1 else ""} '
                 f'{", ".join(candidates)}, whose flavor names no Topology with level {level}')
    return f"{where}: {rules.TOPOLOGY_NEEDS_TOPOLOGY_FLAVOR.message}"


def fit_problems(cfg: PlatformConfig, plans: list[WorkloadPlan]) -> list[Problem]:
    """Every limit some entry's pods exceed, each at its path (`kns:jobs[train].workers`,
    `kns:jobs[etl].quota.requests.cpu`), and every entry whose topology Kueue never admits."""
    problems = []
    for plan in plans:
        path = cfg.paths[plan.entry.name]
        kind = kind_of(plan)
        for limit in limits(cfg, plan):
            if limit.over and limit.limit != "queue":  # the queue: plan/queues.py fit_problems
                problems.append(Problem(f"{path}.{limit.at}", message(limit, kind)))
        topology = topology_problem(cfg, plan)
        if topology is not None:
            problems.append(Problem(f"{path}.topology", topology))
    return problems


def describe(limit: Limit) -> dict[str, Any]:
    """One limit as `./kns explain` shows it: needed, held and headroom, as a person writes
    them (`config.quantity.human`)."""
    return {"limit": limit.limit, "resource": limit.resource, "needed": human_of(limit.resource, limit.needed),
            "held": human_of(limit.resource, limit.held), "headroom": human_of(limit.resource, limit.headroom),
            "detail": limit.detail}
