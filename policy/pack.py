"""The policies of the pack: each guard rail of plan/guardrails.py wrapped as a pulumi-policy
Policy with its config schema. Kept apart from __main__.py (which serves the pack) so tests can call
the exact callbacks the engine calls."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from plan.guardrails import GUARD_RAILS, GuardRail, Resource

PACK_NAME = "kns-platform"


def _report(violations: list, report: ReportViolation) -> None:
    for violation in violations:
        report(violation.message, violation.urn)


def _schema(rail: GuardRail) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties=dict(rail.schema)) if rail.schema else None


def resource_policy(rail: GuardRail) -> ResourceValidationPolicy:
    """A policy checked on each resource as the engine registers it."""

    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        _report(rail.rule([Resource(args.resource_type, args.urn, args.props)], args.get_config()), report)

    return ResourceValidationPolicy(name=rail.name, description=rail.description, validate=validate,
                                    enforcement_level=EnforcementLevel.MANDATORY, config_schema=_schema(rail))


def stack_policy(rail: GuardRail) -> StackValidationPolicy:
    """A policy that needs the other resources of the stack (namespaces, the KNS account)."""

    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [Resource(r.resource_type, r.urn, r.props) for r in args.resources]
        _report(rail.rule(resources, args.get_config()), report)

    return StackValidationPolicy(name=rail.name, description=rail.description, validate=validate,
                                 enforcement_level=EnforcementLevel.MANDATORY, config_schema=_schema(rail))


POLICIES = [stack_policy(rail) if rail.stack else resource_policy(rail) for rail in GUARD_RAILS]
