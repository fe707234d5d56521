"""A budget (`kns:queueing:Budget`, docs/budgets.md): its namespace, and its counter's
CronJob, ConfigMap of code, ServiceAccount and RBAC, as plan/budgets.py makes them. What
the counter counts and writes (the ledger, the queues' `stopPolicy`) is not among them:
`pulumi up` never sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi

from plan.identity import BUDGET_TYPE as TYPE, child_name

from .register import Planned


@dataclass(kw_only=True)
class BudgetArgs:
    objects: list[dict[str, Any]]
    # Kueue (its CRDs) and the queues the counter holds.
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class Budget(pulumi.ComponentResource):
    def __init__(self, name: str, args: BudgetArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        namespace, *rest = args.objects
        self.namespace = Planned(child_name(name, namespace), namespace, pulumi.ResourceOptions(parent=self))
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace, *args.depends_on])
        self.children = [Planned(child_name(name, manifest), manifest, after) for manifest in rest]
        self.register_outputs({"namespace": namespace["metadata"]["name"]})
