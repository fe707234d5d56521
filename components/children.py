"""A component's planned children (plan/model.py `Child`), registered in their order: each
after the siblings it names, or, when it waits, after what the component waits for."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import pulumi

from plan.model import Child

from .register import Planned


def register_children(owner: pulumi.Resource, children: Sequence[Child], waits_for: Sequence[pulumi.Resource] = (),
                      inputs: Optional[Callable[[Child], dict]] = None) -> dict[str, pulumi.CustomResource]:
    """Every child of `owner`, by key (`<Kind>/<name>`). `inputs` may turn a child's
    manifest into what is sent (a Secret's content as a Pulumi secret)."""
    made: dict[str, pulumi.CustomResource] = {}
    for child in children:
        after = [made[key] for key in child.after] if child.after else list(waits_for) if child.waits else []
        opts = pulumi.ResourceOptions(parent=owner, depends_on=after or None)
        made[child.key] = Planned(child.name, inputs(child) if inputs else child.manifest, opts, child.patch)
    return made
