"""A MultiKueue site (`kns:workers`, docs/multicluster.md) as stack config, and its checks,
shared by the tests of each feature that must hold on a site too."""

from __future__ import annotations

from typing import Any

import yaml

from config.loader import check_config
from kns_testing.program import ROOT


TOKEN = "s3cr3t-operator-token"


EAST_KUBECONFIG = yaml.safe_dump({
    "apiVersion": "v1", "kind": "Config",
    "clusters": [{"name": "east", "cluster": {"server": "https://10.1.0.1:6443", "certificate-authority-data": "QQ=="}}],
    # An exec plugin: fine for Pulumi's provider, refused by Kueue; the manager gets its own.
    "users": [{"name": "ops", "user": {"token": TOKEN, "exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                                 "command": "cloud-auth"}}}],
    "contexts": [{"name": "east-admin", "context": {"cluster": "east", "user": "ops"}}],
    "current-context": "east-admin",
})


def site(**over: Any) -> dict[str, Any]:
    """A manager and two workers: east (static CPU nodes, a kubeconfig secret), west (an
    autoscaled GPU pool, a context and an apiServer); one queue on both, one on east."""
    config: dict[str, Any] = {
        "cluster": {"name": "site", "context": "kns-manager", "forbiddenContexts": ["jarvice-upstream"]},
        "queueing": {"enabled": True, "install": True},
        "workers": [
            {"name": "east", "kubeconfig": EAST_KUBECONFIG,
             "nodePools": [{"name": "east-cpu", "role": "compute", "nodes": ["node-1", "node-2"]}]},
            {"name": "west", "context": "kns-west", "apiServer": "https://10.2.0.1:6443",
             "nodePools": [{"name": "west-gpu", "role": "gpu", "gpu": {"vendor": "nvidia", "perNode": 4},
                            "autoscale": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                                           "name": "default"}, "limits": {"cpu": "64"}}},
                           # The same node name as east's: another cluster, another node.
                           {"name": "west-cpu", "role": "compute", "nodes": ["node-1"]}]},
        ],
        "queues": [
            {"name": "research", "cohort": "all", "quota": {
                "east-cpu": {"cpu": "8", "memory": "32Gi"},
                "west-gpu": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}},
             "borrowingLimit": {"east-cpu": {"cpu": "2"}, "west-gpu": {"cpu": "4"}}},
            {"name": "batch", "quota": {"east-cpu": {"cpu": "4", "memory": "8Gi"}}},
        ],
        "priorities": [{"name": "urgent", "value": 1000}],
        "jobs": [
            {"name": "train", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi", "queue": "research",
             "credentials": ["data"]},
            {"name": "sweep", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi", "queue": "batch", "workers": 2},
        ],
        "credentials": {"data": {"token.txt": "data-token"}},
        # Each cluster's pod CIDRs (docs/network.md): the site says where its API servers call from.
        "network": {"podNetwork": ["10.244.0.0/16"]},
    }
    config.update(over)
    return config


SECRETS = ("workers", "credentials")


def checked(config: dict[str, Any], secret: tuple[str, ...] = SECRETS, environ: dict[str, str] | None = None):
    return check_config(config, project_dir=ROOT, secret_keys=frozenset(secret), environ=environ or {})


def problems(config: dict[str, Any], **kwargs: Any) -> dict[str, str]:
    return {p.path: p.message for p in checked(config, **kwargs).problems.items}
