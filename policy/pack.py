"""The policies of the pack: each rule of kns_rules wrapped as a pulumi-policy Policy with
its config schema. Kept apart from __main__.py (which serves the pack) so tests can call
the exact callbacks the engine calls."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from . import kns_rules
from .kns_rules import Resource

PACK_NAME = "kns-platform"

Rule = Callable[[Iterable[Resource], Mapping], list]


def _report(violations: list, report: ReportViolation) -> None:
    for violation in violations:
        report(violation.message, violation.urn)


def resource_policy(name: str, description: str, rule: Rule, schema: dict) -> ResourceValidationPolicy:
    """A policy checked on each resource as the engine registers it."""

    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        _report(rule([Resource(args.resource_type, args.urn, args.props)], args.get_config()), report)

    return ResourceValidationPolicy(
        name=name, description=description, validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(properties=schema) if schema else None,
    )


def stack_policy(name: str, description: str, rule: Rule, schema: dict) -> StackValidationPolicy:
    """A policy that needs the other resources of the stack (namespaces, the KNS account)."""

    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [Resource(r.resource_type, r.urn, r.props) for r in args.resources]
        _report(rule(resources, args.get_config()), report)

    return StackValidationPolicy(
        name=name, description=description, validate=validate,
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=PolicyConfigSchema(properties=schema) if schema else None,
    )


_STRINGS = {"type": "array", "items": {"type": "string"}}
# Extended resource -> the taint key of its pools: read by both GPU rules.
_GPU_TAINTS = {"type": "object", "additionalProperties": {"type": "string"},
               "default": dict(kns_rules.DEFAULT_GPU_TAINTS)}

POLICIES = [
    resource_policy(
        "containers-have-limits",
        "Every container (init containers included) sets limits for the required resources.",
        kns_rules.containers_have_limits,
        {"requiredLimits": {**_STRINGS, "default": list(kns_rules.DEFAULT_REQUIRED_LIMITS)}},
    ),
    stack_policy(
        "privileged-only-where-allowed",
        "Privileged containers and host namespaces only in entries whose profile allows them.",
        kns_rules.privileged_only_where_allowed,
        {},
    ),
    resource_policy(
        "allowed-registries",
        "Images come only from the allowed registries.",
        kns_rules.allowed_registries,
        {"allowedRegistries": {**_STRINGS, "default": list(kns_rules.DEFAULT_ALLOWED_REGISTRIES)}},
    ),
    resource_policy(
        "gpu-pods-tolerate-gpu-taint",
        "Pods that request a GPU tolerate the GPU pools' taint.",
        kns_rules.gpu_pods_tolerate_gpu_taint,
        {"gpuTaints": _GPU_TAINTS},
    ),
    resource_policy(
        "gpu-pools-are-tainted",
        "GPU node pools, static or autoscaled (Karpenter NodePools), taint their nodes for GPU pods only.",
        kns_rules.gpu_pools_are_tainted,
        {"gpuTaints": _GPU_TAINTS},
    ),
    stack_policy(
        "cluster-admin-only-kns",
        "cluster-admin is bound only to the KNS scheduler's ServiceAccount.",
        kns_rules.cluster_admin_only_kns,
        {"allowedSubjects": {**_STRINGS, "default": []}},
    ),
]
