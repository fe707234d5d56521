"""What a queue (`kns:queues`, one Kueue ClusterQueue) may say, checked offline.

The rules are those of the v1beta2 ClusterQueue CRD and Kueue's webhooks at the version
pinned in versions.env (a limit needs a cohort, lending stays within the quota, at most 64
pools and resources), written once in config/rules.py. What needs the whole stack (pools
that exist, entries that fit) is in config/checks.py and plan/queues.py.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Mapping, Optional

from . import rules
from .errors import Problem, at
from .quantity import kind_for_resource, parse

_RESOURCE = re.compile(rules.QUEUE_RESOURCE.pattern)


def resource_name_problem(name: str) -> Optional[str]:
    return None if _RESOURCE.match(name) else f'"{name}" is {rules.QUEUE_RESOURCE.message}'


def covered_resources(quota: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Every resource the quota names on any pool, in first-seen order: the ClusterQueue's
    one resource group covers them all (0 on a pool that leaves one out)."""
    out: list[str] = []
    for resources in quota.values():
        out.extend(r for r in resources if r not in out)
    return out


def limit_problems(quota: Mapping[str, Mapping[str, str]], cohort: Optional[str],
                   borrowing: Optional[Mapping[str, Mapping[str, str]]],
                   lending: Optional[Mapping[str, Mapping[str, str]]]) -> list[Problem]:
    """Every problem of a queue's quota and limits, at its place in the queue."""
    found: list[Problem] = []
    covered = covered_resources(quota)
    if not covered:
        found.append(at(("quota",), rules.QUEUE_NEEDS_RESOURCE.message))
    if len(covered) > rules.MAX_QUEUE_RESOURCES:
        found.append(at(("quota",), f"names {len(covered)} resources; Kueue covers at most "
                                  f"{rules.MAX_QUEUE_RESOURCES} in one queue"))
    if len(quota) > rules.MAX_QUEUE_POOLS:
        found.append(at(("quota",), f"names {len(quota)} pools; a queue holds at most {rules.MAX_QUEUE_POOLS}"))
    for key, limits in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
        if limits is None:
            continue
        if cohort is None:
            found.append(at((key,), rules.LIMITS_NEED_COHORT.message))
            continue
        for pool, resources in limits.items():
            if pool not in quota:
                found.append(at((key, pool), f'pool "{pool}" has no quota in this queue '
                                           f"(its pools: {', '.join(quota) or 'none'})"))
                continue
            for resource, amount in resources.items():
                if resource not in covered:
                    found.append(at((key, pool, resource), f"the quota names no {resource}"))
                elif key == "lendingLimit":
                    nominal = quota[pool].get(resource, "0")
                    kind = kind_for_resource(resource)
                    if parse(amount, kind) > parse(nominal, kind):
                        found.append(at((key, pool, resource), f"{amount} is more than the quota {nominal}: "
                                                             f"{rules.LENDING_OVER_QUOTA.message}"))
    return found


def nominal(quota: Mapping[str, Mapping[str, str]], pool: str, resource: str) -> Decimal:
    return parse(quota.get(pool, {}).get(resource, "0"), kind_for_resource(resource))
