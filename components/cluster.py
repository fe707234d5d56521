"""KnsCluster: the one explicit Kubernetes provider every resource of the stack uses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from config import kubeconfig
from config.models import Cluster
from plan.identity import CLUSTER_TYPE as TYPE, FORCE_ANNOTATION


def own_declared_fields(args: pulumi.ResourceTransformationArgs) -> Optional[pulumi.ResourceTransformationResult]:
    """Every Kubernetes object of the stack carries FORCE_ANNOTATION (plan/identity.py): what
    the stack declares, it owns. A transformation of the cluster's resource options, so that it
    reaches every object the components register, whatever their builders."""
    if not args.type_.startswith("kubernetes:"):
        return None
    metadata = args.props.get("metadata") if isinstance(args.props, dict) else None
    if not isinstance(metadata, dict):
        raise TypeError(f"{args.type_} {args.name}: metadata must be a dict to carry {FORCE_ANNOTATION}")
    annotations = {**(metadata.get("annotations") or {}), FORCE_ANNOTATION: "true"}
    return pulumi.ResourceTransformationResult({**args.props, "metadata": {**metadata, "annotations": annotations}},
                                               args.opts)


@dataclass(kw_only=True)
class KnsClusterArgs:
    cluster: Cluster
    project_dir: Path


def cluster_identifier(cluster: Cluster) -> str:
    """Stable identity of the target cluster: only a change of `name` replaces the provider
    (and so everything); new credentials or a renamed context are plain updates."""
    return f"kns-platform/{cluster.name}"


def cluster_provider(name: str, cluster: Cluster, project_dir: Path,
                     opts: Optional[pulumi.ResourceOptions] = None) -> k8s.Provider:
    """The cluster's provider, `<name>-kubernetes`: a KnsCluster's child, or, in an entry
    stack (docs/entry-stacks.md), a resource of the stack itself, where `pulumi state move`
    puts the provider of the entries it moves."""
    provider_args: dict = {
        "cluster_identifier": cluster_identifier(cluster),
        "enable_server_side_apply": True,
    }
    if cluster.render_dir:
        provider_args["render_yaml_to_directory"] = cluster.render_dir
    else:
        if cluster.context:
            provider_args["context"] = cluster.context
        if cluster.kubeconfig:
            provider_args["kubeconfig"] = (
                pulumi.Output.secret(cluster.kubeconfig)
                if kubeconfig.is_inline(cluster.kubeconfig)
                else str(kubeconfig.resolve_path(cluster.kubeconfig, project_dir))
            )
    return k8s.Provider(f"{name}-kubernetes", **provider_args, opts=opts)


class KnsCluster(pulumi.ComponentResource):
    """The dedicated KNS cluster (never the JARVICE upstream one), or a render directory."""

    provider: k8s.Provider
    cluster_identifier: str
    render_dir: Optional[str]

    def __init__(self, name: str, args: KnsClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE, name, None, opts)
        cluster = args.cluster
        self.cluster_identifier = cluster_identifier(cluster)
        self.render_dir = cluster.render_dir
        self.provider = cluster_provider(name, cluster, args.project_dir, pulumi.ResourceOptions(parent=self))
        self.register_outputs(
            {"clusterIdentifier": self.cluster_identifier, "renderDir": self.render_dir}
        )
