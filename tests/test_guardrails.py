"""The policy pack's rules on the program's own objects, before anything runs (docs/policy.md):
what the mandatory pack would refuse of the objects the program builds from config, the
program and `./kns validate` refuse first, as config errors under the entry's or pool's path
and with the pack's settings (KNS_POLICY_CONFIG). One source: the rules are the pack's
(plan/guardrails.py), so a config both doors accept is one the pack accepts (checked here
on the registered resources through the pack's own callbacks)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kns_cli import cli
from kns_testing.doors import program_text, refused, validate_text, write_project
from kns_testing.program import run_program
from plan.guardrails import GUARD_RAILS, Resource

LIMITS = {"limits": {"cpu": 1, "memory": "1Gi"}}
KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
CONFIG: dict[str, Any] = {
    "cluster": {"name": "kns-test", "renderDir": "out"},
    "nodePools": [{"name": "cpu", "role": "compute", "nodes": ["n1"]},
                  {"name": "a100", "role": "gpu", "gpu": {"vendor": "nvidia", "perNode": 8}, "nodes": ["g1"]}],
    "jobs": [{"name": "plain", "user": "bob", "image": "busybox:1.37"},
             {"name": "raw", "user": "bob",
              "podSpec": {"containers": [{"name": "c", "image": "busybox:1.37", "resources": LIMITS}]}}],
}
WHY = {rail.name: f"(policy {rail.name}, docs/policy.md)" for rail in GUARD_RAILS}


def with_change(change) -> dict[str, Any]:
    config = copy.deepcopy(CONFIG)
    change(config)
    return config


def pack_violations(config: dict[str, Any]) -> list[str]:
    """What the pack's rules find on the resources the program registers (under mocks)."""
    done = run_program(config)
    resources = [Resource(r.type, f"urn:pulumi:case::kns-platform::{r.type}::{r.name}", r.inputs)
                 for r in done.resources]
    return [v.message for rail in GUARD_RAILS for v in rail.rule(resources, {})]


CASES = {
    "a static compute pool labelled with a GPU": (
        lambda c: c["nodePools"][0].update(labels={"nvidia.com/gpu": "true"}),
        ["kns:nodePools[cpu]: a nvidia.com/gpu pool's nodes must carry the 'nvidia.com/gpu' NoSchedule taint, "
         f"or pods that need no GPU fill them {WHY['gpu-pools-are-tainted']}"]),
    "an autoscaled compute pool whose limits count GPUs": (
        lambda c: c["nodePools"].append({"name": "burst", "role": "compute", "autoscale": {
            "nodeClassRef": KWOK_CLASS, "limits": {"amd.com/gpu": 8}}}),
        ["kns:nodePools[burst]: a amd.com/gpu pool's nodes must carry the 'amd.com/gpu' NoSchedule taint, "
         f"or pods that need no GPU fill them {WHY['gpu-pools-are-tainted']}"]),
    "an image from a registry the pack does not allow": (
        lambda c: c["jobs"][0].update(image="registry.example.com/tools/debug:1"),
        ["kns:jobs[plain]: containers[0] 'plain' image 'registry.example.com/tools/debug:1' "
         "(registry.example.com/tools/debug) is not from an allowed registry (registry.k8s.io, docker.io, ghcr.io, "
         f"quay.io, nvcr.io, us-docker.pkg.dev/jarvice) {WHY['allowed-registries']}"]),
    "a scheduler image from a registry the pack does not allow": (
        lambda c: c.update(knsScheduler={"enabled": True, "image": "registry.example.com/kns:1"}),
        ["kns:knsScheduler: containers[0] 'kns-scheduler' image 'registry.example.com/kns:1' "
         "(registry.example.com/kns) is not from an allowed registry (registry.k8s.io, docker.io, ghcr.io, quay.io, "
         f"nvcr.io, us-docker.pkg.dev/jarvice) {WHY['allowed-registries']}"]),
    "privilege through an override": (
        lambda c: c["jobs"][0].update(jsonOverrides=[
            {"path": "/spec/template/spec/containers/0/securityContext", "value": {"privileged": True}}]),
        ["kns:jobs[plain]: containers[0] 'plain' privileged: true, but entry 'plain' is not privileged through its "
         "profile (its namespace enforces Pod Security 'baseline'); set privileged: true on the entry under a profile "
         f"with allowPrivileged: true {WHY['privileged-only-where-allowed']}"]),
}


@pytest.mark.parametrize("change, lines", list(CASES.values()), ids=list(CASES))
def test_what_the_pack_would_refuse_of_the_programs_objects_is_a_config_error_through_both_doors(
        tmp_path, capsys, monkeypatch, change, lines):
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)
    refused(tmp_path, capsys, with_change(change), lines)


def test_the_accepted_config_passes_the_packs_own_rules_on_what_the_program_registers(monkeypatch):
    """The control: the rules did run (CASES), and what both doors accept the pack accepts."""
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)
    assert pack_violations(CONFIG) == []


# What the program writes into an image entry's container (the LimitRange defaults, its
# pool's tolerations) it writes into a raw podSpec's and an override's containers too.
PLANNED_LIKE_AN_IMAGE = {
    "a podSpec container without limits": lambda c: c["jobs"][1]["podSpec"]["containers"][0].pop("resources"),
    "a podSpec init container without a memory limit": lambda c: c["jobs"][1]["podSpec"].update(initContainers=[
        {"name": "init", "image": "busybox:1.37", "resources": {"limits": {"cpu": 1}}}]),
    "an override that leaves a request only": lambda c: c["jobs"][0].update(jsonOverrides=[
        {"path": "/spec/template/spec/containers/0/resources", "value": {"requests": {"cpu": 1}}}]),
    "an override that adds a sidecar without resources": lambda c: c["jobs"][0].update(jsonOverrides=[
        {"path": "/spec/template/spec/containers/-", "value": {"name": "side", "image": "busybox:1.37"}}]),
    "a GPU podSpec with a toleration of its own": lambda c: (
        c["jobs"][1]["podSpec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": 1}),
        c["jobs"][1]["podSpec"].update(tolerations=[{"key": "example.com/x", "operator": "Exists"}])),
}


@pytest.mark.parametrize("change", list(PLANNED_LIKE_AN_IMAGE.values()), ids=list(PLANNED_LIKE_AN_IMAGE))
def test_raw_and_overridden_containers_pass_the_pack_as_an_image_entry_does(tmp_path, capsys, monkeypatch, change):
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)
    config = with_change(change)
    root = write_project(tmp_path / "project", config)
    assert cli.main(["validate", "--stack", "case", "--project-dir", str(root)]) == 0
    capsys.readouterr()
    assert pack_violations(config) == []


def test_an_entry_without_resources_gets_the_limitrange_defaults_written_into_its_container(monkeypatch):
    """What admission would fill in, written out: the Job has the limits the pack requires,
    and its pod and quota are what they were (docs/policy.md)."""
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)
    done = run_program(CONFIG)
    job = done.named("kubernetes:batch/v1:Job", "plain").inputs
    limit_range = done.named("kubernetes:core/v1:LimitRange", "plain-defaults").inputs["spec"]["limits"][0]
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": limit_range["default"], "requests": limit_range["defaultRequest"]}
    quota = done.named("kubernetes:core/v1:ResourceQuota", "plain-quota").inputs["spec"]["hard"]
    assert (quota["limits.cpu"], quota["limits.memory"]) == (limit_range["default"]["cpu"],
                                                             limit_range["default"]["memory"])


def _settings(tmp_path, monkeypatch, settings: Any) -> None:
    path = tmp_path / "policy-config.json"
    path.write_text(settings if isinstance(settings, str) else json.dumps(settings))
    monkeypatch.setenv("KNS_POLICY_CONFIG", str(path))


@pytest.mark.parametrize("settings", [
    {"allowed-registries": {"allowedRegistries": ["registry.example.com/tools", "docker.io", "registry.k8s.io"]}},
    {"allowed-registries": "disabled"},
    {"allowed-registries": {"enforcementLevel": "disabled"}},
    {"all": "disabled"},
])
def test_the_packs_settings_are_the_checks_settings(tmp_path, capsys, monkeypatch, settings):
    config = with_change(CASES["an image from a registry the pack does not allow"][0])
    _settings(tmp_path, monkeypatch, settings)
    assert run_program(config).named("kubernetes:batch/v1:Job", "plain") is not None
    root = write_project(tmp_path / "project", config)
    assert cli.main(["validate", "--stack", "case", "--project-dir", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "valid" in out and err == ""


def test_a_narrower_setting_refuses_what_the_default_takes(tmp_path, capsys, monkeypatch):
    _settings(tmp_path, monkeypatch, {"containers-have-limits": {"requiredLimits": ["cpu", "memory", "nvidia.com/gpu"]}})
    lines = validate_text(tmp_path, CONFIG, capsys).splitlines()[1:]
    assert [line.split(": ")[0] for line in lines if "has no nvidia.com/gpu limit" in line] == [
        "  - kns:jobs[plain]", "  - kns:jobs[raw]", "  - kns:packingScheduler"]


@pytest.mark.parametrize("settings, line", [
    ('{"allowed-registries": {"allowedRegistries": ["s3cr3t-token-value"]', "is not JSON (line 1)"),
    ('["s3cr3t-token-value"]', "is not a JSON object of policy names"),
    ('{"alowed-registries": "disabled"}', "names no policy of the pack: 'alowed-registries'"),
    ('{"allowed-registries": "off"}', "allowed-registries: an enforcement level"),
])
def test_a_bad_pack_config_is_a_config_error_that_never_shows_its_content(tmp_path, capsys, monkeypatch,
                                                                         settings, line):
    _settings(tmp_path, monkeypatch, settings)
    text = validate_text(tmp_path, CONFIG, capsys)
    assert f"KNS_POLICY_CONFIG: the policy pack config {line}" in text and "s3cr3t" not in text
    assert program_text(CONFIG) == text


def test_an_unreadable_pack_config_is_a_config_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KNS_POLICY_CONFIG", str(tmp_path / "missing.json"))
    text = validate_text(tmp_path, CONFIG, capsys)
    assert "KNS_POLICY_CONFIG: cannot read the policy pack config" in text and "No such file" in text
    assert program_text(CONFIG) == text


# ---- reservations (docs/reservations.md): the switch's RBAC ------------------------------


def test_a_stack_with_reservations_passes_every_rule_of_the_pack(monkeypatch):
    from kns_testing.reserving import CONFIG as RESERVED
    monkeypatch.delenv("KNS_POLICY_CONFIG", raising=False)
    assert pack_violations(RESERVED) == []


@pytest.mark.parametrize("change, message", [
    (lambda rules: rules[0].pop("resourceNames"), "may patch any localqueues; name the objects (resourceNames)"),
    (lambda rules: rules[0].update(verbs=["*"]), "grants a wildcard"),
], ids=["unnamed", "wildcard"])
def test_the_pack_refuses_a_reservation_role_that_is_not_narrow(change, message):
    from kns_testing.reserving import CONFIG as RESERVED
    done = run_program(RESERVED)
    resources = [Resource(r.type, f"urn:pulumi:case::kns-platform::{r.type}::{r.name}", copy.deepcopy(r.inputs))
                 for r in done.resources]
    rail = next(rail for rail in GUARD_RAILS if rail.name == "reservation-rbac-is-narrow")
    assert rail.rule(resources, {}) == []
    role = next(r for r in resources if r.kind == "ClusterRole" and r.props["metadata"]["name"] == "kns-res-course-entries")
    change(role.props["rules"])
    assert [v.message for v in rail.rule(resources, {})] == [f"{role.label}: {message}" if "wildcard" not in message
                                                             else f"{role.label}: grants a wildcard (ClusterRole "
                                                                  "kns-res-course-entries)"]
    binding = Resource("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "urn:x", {
        "metadata": {"name": "x"}, "roleRef": {"kind": "ClusterRole", "name": "kns-res-course-entries"},
        "subjects": [{"kind": "ServiceAccount", "name": "switch", "namespace": "kns-res-course"}]})
    assert any("cluster-wide" in v.message for v in rail.rule([*resources, binding], {}))
    # The read-only role that finds its LocalQueues may be bound cluster-wide.
    assert any(r.kind == "ClusterRoleBinding" and r.props["roleRef"]["name"] == "kns-res-course-find"
               for r in resources)
