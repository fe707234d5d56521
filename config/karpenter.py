"""What a Karpenter v1 NodePool accepts, for the `autoscale` of a pool (docs/autoscaling.md).

The rules are those of the NodePool CRD's schema and CEL validation rules and of
Karpenter's runtime validation at the version pinned in versions.env (v1 API), written
once in config/rules.py. A pool that breaks one is a config error before anything is
registered, instead of an object the API server refuses mid-`up` or a NodePool Karpenter
marks invalid and never provisions for. tests/test_autoscale.py validates every emitted
NodePool against the CRD itself.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from . import names, rules
from .errors import Problem, at, closest
from .quantity import kind_for_resource, parse

_DURATION_OR_NEVER = re.compile(rules.DURATION_OR_NEVER.pattern)
_WHOLE = re.compile(r"^[0-9]+$")
_LIMIT = re.compile(rules.NODEPOOL_LIMIT.pattern)


_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}
# Karpenter reads durations with Go's time.ParseDuration: an int64 of nanoseconds.
_MAX_DURATION_SECONDS = (2**63 - 1) // 10**9


def duration_or_never_problem(value: str) -> Optional[str]:
    if not _DURATION_OR_NEVER.match(value):
        return f'"{value}" is {rules.DURATION_OR_NEVER.message}'
    seconds = duration_seconds(value)
    if seconds > _MAX_DURATION_SECONDS:
        return f'"{value}" is longer than Karpenter can read (a Go duration: at most {_MAX_DURATION_SECONDS // 3600}h)'
    return None


def duration_seconds(value: str) -> int:
    """The seconds of a duration of whole units (`1h30m`), as Go reads it."""
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in re.findall(r"([0-9]+)([hms])", value))


def wait_for_pods_ready_problem(value: str) -> Optional[str]:
    """Why `value` is not a waitForPodsReady timeout Kueue reads, or None."""
    return positive_duration_problem(value, rules.WAIT_FOR_PODS_READY)


def positive_duration_problem(value: str, rule: rules.Rule) -> Optional[str]:
    """Why `value` is not a duration of whole units more than 0 that Kueue reads, per `rule`."""
    if re.match(rule.pattern or "", value) and 0 < duration_seconds(value) <= _MAX_DURATION_SECONDS:
        return None
    return f'"{value}" is not {rule.message}'


def worker_lost_timeout_problem(value: str) -> Optional[str]:
    """Why `value` is not a MultiKueue workerLostTimeout (more than 0), or None."""
    return positive_duration_problem(value, rules.WORKER_LOST_TIMEOUT)


def gc_interval_problem(value: str) -> Optional[str]:
    """Why `value` is not a MultiKueue gcInterval (0 allowed: no garbage collection), or None."""
    if re.match(rules.GC_INTERVAL.pattern or "", value) and duration_seconds(value) <= _MAX_DURATION_SECONDS:
        return None
    return f'"{value}" is not {rules.GC_INTERVAL.message}'


def group_problem(group: str) -> Optional[str]:
    """Why `group` is not an API group as a nodeClassRef names it (the CRD refuses "/")."""
    if "/" in group:
        return f'"{group}" is not an API group: the group alone, without "/" or a version (karpenter.k8s.aws)'
    return None


def _domain(key: str) -> str:
    """The part of a label key before its first "/" (the whole key when it has none), as
    the CRD's rules read it."""
    return key.split("/", 1)[0]


def restricted_key_problem(key: str, node_class_group: Optional[str] = None) -> Optional[str]:
    """Why Karpenter keeps label key `key` for itself, or None: the karpenter.sh domain
    (but for the keys a pool may select on), the node pool label, the hostname, and, for
    template labels, the node class's own domain (each provider reserves its group)."""
    if key == rules.KARPENTER_NODEPOOL_LABEL:
        return f'"{key}" is set by Karpenter on every node it creates'
    if _domain(key).endswith(rules.KARPENTER_DOMAIN) and key not in rules.KARPENTER_SELECTABLE:
        return f'"{key}" is in the domain {rules.KARPENTER_DOMAIN}, which Karpenter keeps for itself'
    if key == rules.HOSTNAME_LABEL:
        return f'"{key}" is each node\'s own; a pool cannot set or select it'
    return provider_key_problem(key, node_class_group, unknown_provider_refused=True) if node_class_group else None


def provider_key_problem(key: str, group: str, unknown_provider_refused: bool) -> Optional[str]:
    """Why the node class's provider refuses label key `key` in a NodePool, or None: its own
    domain is reserved but for the labels it sets from the instance type
    (rules.PROVIDER_LABELS). For a provider the program does not know, only template labels
    (`unknown_provider_refused`) are refused in its domain: its requirement keys cannot be told."""
    if not _domain(key).endswith(group):
        return None
    known = rules.PROVIDER_LABELS.get(group)
    if known is None:
        return (f'"{key}" is in the domain of the node class ({group}), which its provider keeps for itself'
                if unknown_provider_refused else None)
    if key in known:
        return None
    close = closest(key, known)
    hint = f'; did you mean "{close}"?' if close else " (docs/autoscaling.md lists them)"
    return (f'"{key}" is in the domain of the node class ({group}), which its provider keeps for the labels '
            f"it sets from the instance type, and it sets no such label{hint}")


def requirement_problems(key: str, operator: str, values: list[str], min_values: Optional[int]) -> list[str]:
    """Every problem of one node selector requirement of a NodePool."""
    found = [p for p in (names.label_key_problem(key), restricted_key_problem(key)) if p]
    found += [p for p in map(names.label_value_problem, values) if p]
    if operator == "In" and not values:
        found.append(rules.IN_NEEDS_VALUES.message)
    if operator in rules.NUMERIC_OPERATORS and (len(values) != 1 or not _WHOLE.match(values[0])):
        found.append(rules.NUMERIC_NEEDS_ONE_INTEGER.message)
    if operator in ("Exists", "DoesNotExist") and values:
        found.append(rules.EXISTS_TAKES_NO_VALUES.message)
    if min_values is not None and operator == "In" and len(values) < min_values:
        found.append(f"{rules.MIN_VALUES_OVER_VALUES.message} ({min_values} > {len(values)})")
    if key == rules.CAPACITY_TYPE_LABEL and operator == "In" and values and not set(values) & set(rules.CAPACITY_TYPES):
        found.append(f"{key} takes {', '.join(rules.CAPACITY_TYPES)}; none of the values is one")
    return found


def limit_name_problem(name: str) -> Optional[str]:
    """Why `name` cannot bound a NodePool (a resource a node offers, or `nodes`), or None."""
    if _LIMIT.match(name) and len(name) <= 316:
        return None
    return f'"{name}" is {rules.NODEPOOL_LIMIT.message}'


def limits_below_one_node(limits: Mapping[str, str], gpus_per_node: int,
                          gpu_resource: Optional[str]) -> list[Problem]:
    """The problem of each of an autoscaled pool's limits that no node fits under: Karpenter
    launches a node only if the pool's nodes, that one included, stay within every limit, so
    a zero `cpu`, `memory`, `pods` or `nodes`, or fewer GPUs than one node has, means the
    pool never gets a node (docs/autoscaling.md)."""
    out = []
    for key, amount in limits.items():
        value = parse(amount, kind_for_resource(key))
        if key in ("cpu", "memory", "pods", "nodes") and value == 0:
            out.append(at((key,), f"0 {rules.LIMIT_BELOW_ONE_NODE.message}"))
        elif key == gpu_resource and value < gpus_per_node:
            out.append(at((key,), f"{amount} is fewer GPUs than one node of the pool has "
                                  f"(gpu.perNode {gpus_per_node}): {rules.LIMIT_BELOW_ONE_NODE.message}"))
    return out


def satisfies(operator: str, values: list[str], value: Optional[str]) -> bool:
    """Whether a node whose label has `value` (None: the node has no such label) meets the
    requirement `operator values`, as Karpenter's (and the scheduler's) node selectors read it."""
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if value is None or not value.lstrip("-").isdigit():
        return False
    bound, number = int(values[0]), int(value)
    return {"Gt": number > bound, "Lt": number < bound, "Gte": number >= bound, "Lte": number <= bound}[operator]


def describe(operator: str, values: list[str], key: str) -> str:
    """`kns.io/pool In [other]`: a requirement as a problem line names it."""
    return f"{key} {operator}" + (f" [{', '.join(values)}]" if values else "")


def gpu_requirement(pool_gpu_per_node: int, group: str, requirements: list[Any]) -> list[dict[str, Any]]:
    """A GPU pool's `perNode` as a requirement on the instance's GPU count, where the node
    class's provider labels it (rules.GPU_COUNT_LABELS) and the pool does not already require
    something of that label; elsewhere none (docs/autoscaling.md: the workload's GPU request
    alone steers Karpenter to instance types that have them)."""
    label = rules.GPU_COUNT_LABELS.get(group)
    if not pool_gpu_per_node or label is None or any(r.key == label for r in requirements):
        return []
    return [{"key": label, "operator": "In", "values": [str(pool_gpu_per_node)]}]
