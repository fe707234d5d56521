"""KnsScheduler: the JARVICE KNS downstream scheduler (docs/schedulers.md).

The KNS needs cluster-admin, which is why this program targets a dedicated cluster; its
ClusterRoleBinding is the only cluster-admin binding the program ever makes. The Keycloak
client secret lives in a Kubernetes Secret and reaches the pod only by `secretKeyRef`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi

from config.models import KnsScheduler as KnsSchedulerModel, NodePool
from plan import schedulers as specs
from plan.model import Child
from plan.identity import KNS_SCHEDULER_TYPE as TYPE

from .children import register_children


@dataclass(kw_only=True)
class KnsSchedulerArgs:
    kns: KnsSchedulerModel
    namespace: str
    pools: list[NodePool]
    cluster_name: str
    keycloak_client_secret: Optional[str]
    depends_on: list[pulumi.Resource]
    # Its namespace has a NetworkPolicy (kns:network, plan/network.py).
    isolated: bool = False


class KnsScheduler(pulumi.ComponentResource):
    def __init__(self, name: str, args: KnsSchedulerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        children = specs.kns_children(name, args.kns, args.namespace, args.pools, args.cluster_name,
                                      args.keycloak_client_secret, args.isolated)
        self.children = register_children(self, children, args.depends_on, inputs=_secret_value)
        self.register_outputs({"serviceName": specs.KNS_ACCOUNT, "namespace": args.namespace})


def _secret_value(child: Child) -> dict:
    """The Keycloak client secret reaches the engine only as a Pulumi secret."""
    manifest = child.manifest
    if manifest["kind"] != "Secret":
        return manifest
    return {**manifest, "stringData": {k: pulumi.Output.secret(v) for k, v in manifest["stringData"].items()}}
