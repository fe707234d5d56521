"""KueueInstall: Kueue's CRDs and controller, installed by the program
(`kns:queueing.install: true`, docs/queueing.md).

The objects are upstream's install manifests of the pinned version, vendored in the
repository, as plan/kueue_install.py adapts them to the platform's system-namespace rules;
nothing is downloaded when the program runs. Each is registered (components/register.py)
under its `<namespace>/<name>` (plan/identity.py `object_id`, which plan/inventory.py reads
too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi

from plan.identity import KUEUE_TYPE as TYPE, object_id

from .register import Planned


@dataclass(kw_only=True)
class KueueInstallArgs:
    objects: list[dict[str, Any]]
    # Before each child's logical name: a worker's install (`<worker>-`) is apart from the
    # other workers' (components/worker.py).
    prefix: str = ""


class KueueInstall(pulumi.ComponentResource):
    def __init__(self, name: str, args: KueueInstallArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.resources = []
        kinds: dict[str, int] = {}
        for obj in args.objects:
            self.resources.append(Planned(args.prefix + object_id(obj), obj, child))
            kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
        self.register_outputs({"version": _version(args.objects), "objects": kinds})


def _version(objects: list[dict[str, Any]]) -> Optional[str]:
    """The controller image's tag: the Kueue version installed."""
    for obj in objects:
        if obj["kind"] == "Deployment":
            return obj["spec"]["template"]["spec"]["containers"][0]["image"].rpartition(":")[2]
    return None
