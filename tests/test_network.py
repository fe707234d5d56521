"""`kns:network` (contract section 18): bad input refused by both doors with its path, the
NetworkPolicies the program registers (on every namespace it makes, on a site's workers
too), what outputs and `./kns explain` say, and the guard rail that holds an isolated
entry namespace to its isolation. What the policies let through is proved by an engine in
tests/test_network_matrix.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from config import rules
from config.loader import check_config
from kns_testing.doors import refused, run as run_cli
from kns_testing.netpol import as_delivered
from kns_testing.program import ROOT, RecordingMocks, run_program
from kns_testing.sites import SECRETS, site
from plan import guardrails
from plan.guardrails import Resource
from plan.planner import plan_checked

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
CLUSTER = {"name": "kns-net", "renderDir": "out"}
POOLS = [{"name": "cpu", "role": "compute", "nodes": ["n1"]}]
WEB = {"name": "web", "user": "ann", "groups": ["bio"], "image": "busybox:1.37", "cpu": 1, "memory": 1024}
CIDR = "is not a CIDR: an address and a prefix length, e.g. 10.0.0.0/8, 192.168.1.10/32, fd00::/8"
OFF = rules.NETWORK_OFF_SETTING.message


def stack(network: Any = None, jobs: Any = None, **more: Any) -> dict[str, Any]:
    config = {"cluster": CLUSTER, "nodePools": POOLS, "jobs": jobs if jobs is not None else [WEB], **more}
    if network is not None:
        config["network"] = network
    return config


def web(**more: Any) -> dict[str, Any]:
    return {**WEB, **more}


# ---- bad input: both doors, every problem with its path ------------------------------------

BAD = {
    "cidrs": (stack({"egress": "none", "allowTo": [{"cidr": "10.0.0.1/8"}, {"cidr": "10.0.0.5"}, {"cidr": "intranet"},
                                                   {"cidr": "10.0.0.0/33"}],
                     "podNetwork": ["10.244.0.0/16", "fd00::1/8"]}),
              ["kns:network.allowTo[0].cidr: has bits set past its prefix length: the network is 10.0.0.0/8",
               f"kns:network.allowTo[1].cidr: {CIDR}", f"kns:network.allowTo[2].cidr: {CIDR}",
               f"kns:network.allowTo[3].cidr: {CIDR}",
               "kns:network.podNetwork[1]: has bits set past its prefix length: the network is fd00::/8"]),
    "ports": (stack({"allowFrom": [{"namespace": "mon", "ports": [0, 70000, "http"]}],
                     "egress": "cluster", "allowTo": [{"namespace": "db", "ports": [-1]}]}),
              [f"kns:network.allowFrom[0].ports[0]: 0 is not a port: {rules.PORTS.message}",
               f"kns:network.allowFrom[0].ports[1]: 70000 is not a port: {rules.PORTS.message}",
               'kns:network.allowFrom[0].ports[2]: "http" is invalid: input should be a valid integer',
               f"kns:network.allowTo[0].ports[0]: -1 is not a port: {rules.PORTS.message}"]),
    "selecting nothing": (stack({"allowFrom": [{}, {"namespace": "a", "namespaceLabels": {"x": "y"}},
                                               {"namespaceLabels": {}}, {"namespace": "mon", "ports": []}],
                                 "egress": "none", "allowTo": [{}, {"cidr": "10.0.0.0/8", "namespace": "x"}]}),
                          [f"kns:network.allowFrom[0]: {rules.NETWORK_SOURCE_ONE.message}",
                           f"kns:network.allowFrom[1]: {rules.NETWORK_SOURCE_ONE.message}",
                           f"kns:network.allowFrom[2].namespaceLabels: {rules.NETWORK_EVERY_NAMESPACE.message}",
                           f"kns:network.allowFrom[3].ports: {rules.NETWORK_NO_PORTS.message}",
                           f"kns:network.allowTo[0]: {rules.NETWORK_DESTINATION_ONE.message}",
                           f"kns:network.allowTo[1]: {rules.NETWORK_DESTINATION_ONE.message}"]),
    "values": (stack({"isolation": "strict", "egress": "internet", "allowFrom": [{"namespace": "Monitoring"}]}),
               ["kns:network.isolation: \"strict\" is invalid: input should be 'namespace' or 'none'",
                'kns:network.allowFrom[0].namespace: "Monitoring" is not a DNS-1123 label (lower-case letters, '
                'digits and "-", starting and ending with a letter or digit)',
                "kns:network.egress: \"internet\" is invalid: input should be 'all', 'cluster' or 'none'"]),
    "settings without isolation": (
        stack({"isolation": "none", "egress": "none", "allowFrom": [{"namespace": "mon"}],
               "podNetwork": ["10.0.0.0/8"]}, [web(allowFrom=[{"namespace": "mon"}])],
              profiles={"@bio": {"allowNetworkFrom": True}}),
        [f"kns:network.allowFrom: {OFF}", f"kns:network.egress: {OFF}", f"kns:network.podNetwork: {OFF}",
         f"kns:jobs[web].allowFrom: {OFF}"]),
    "an entry's allowFrom without its profile rule": (
        stack(jobs=[web(allowFrom=[{"namespace": "mon"}])]),
        [f"kns:jobs[web].allowFrom: {rules.NETWORK_FROM_NEEDS_PROFILE.message} (no profile rule matches)"]),
    "a profile rule that forbids it": (
        stack(jobs=[web(allowFrom=[{"namespace": "mon", "ports": [8080]}])],
              profiles={"ann": {"allowNetworkFrom": False}}),
        [f'kns:jobs[web].allowFrom: {rules.NETWORK_FROM_NEEDS_PROFILE.message} (profile rule "ann" sets it false)']),
    "an entry's namespace as every entry's source": (
        stack({"allowFrom": [{"namespace": "kns-web"}]}),
        [f'kns:network.allowFrom[0].namespace: "kns-web" is the namespace of entry web: '
         f"{rules.NETWORK_ENTRY_SOURCE.message}"]),
    "not a mapping": (stack(["isolation"]), ["kns:network: must be a mapping, not a list"]),
    "a misspelt key": (stack({"isolaton": "none"}), ['kns:network.isolaton: unknown key; did you mean "isolation"?']),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_network_input_is_refused_by_both_doors_with_its_path(tmp_path, capsys, case):
    config, lines = BAD[case]
    refused(tmp_path, capsys, config, lines)


def test_a_port_is_not_a_boolean_and_a_cidr_is_canonical():
    found = {str(p) for p in check_config(stack({"allowFrom": [{"namespace": "mon", "ports": [True]}]}),
                                          project_dir=ROOT, environ={}).problems.items}
    assert found == {"kns:network.allowFrom[0].ports[0]: True is invalid: input should be a valid integer"}
    accepted = check_config(stack({"egress": "none", "allowTo": [{"cidr": "fd00::/8", "ports": [443]},
                                                                 {"cidr": "192.168.1.10/32"}]}),
                            project_dir=ROOT, environ={})
    assert accepted.problems.items == []
    assert [d.cidr for d in accepted.config.network.allow_to] == ["fd00::/8", "192.168.1.10/32"]


# ---- what the program registers -----------------------------------------------------------------


def policies_of(run) -> dict[str, dict[str, Any]]:
    return {p.name: p.inputs for p in run.of_type(POLICY)}


def test_every_namespace_the_program_makes_gets_its_isolation():
    config = stack({"allowFrom": [{"namespace": "monitoring"}], "podNetwork": ["10.244.0.0/16"]},
                   [web(allowFrom=[{"namespaceLabels": {"role": "ingress"}, "ports": [8080]}], workers=2,
                        queue="bio"), {**WEB, "name": "batch", "queue": "bio"}],
                   profiles={"@bio": {"allowNetworkFrom": True}}, queueing={"enabled": True},
                   queues=[{"name": "bio", "quota": {"cpu": {"cpu": 8, "memory": "16Gi"}}}],
                   knsScheduler={"enabled": True, "image": "us-docker.pkg.dev/jarvice/images/x:1",
                                 "imagesTag": "1", "jobsDomain": "jobs.example.org"})
    run = run_program(config)
    found = policies_of(run)
    assert set(found) == {"web-isolation", "batch-isolation", "kns-system-isolation", "kueue-system/kns-isolation"}
    web_policy = found["web-isolation"]
    assert web_policy["metadata"]["namespace"] == "kns-web" and web_policy["metadata"]["name"] == "kns-isolation"
    ingress = web_policy["spec"]["ingress"]
    assert ingress[0] == {"from": [{"podSelector": {}}]}  # its own pods, every port
    assert ingress[1]["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert ingress[2]["from"] == [{"namespaceSelector": {"matchLabels": {"role": "ingress"}}}]
    assert [int(p["port"]) for p in ingress[2]["ports"]] == [8080]
    # The entry's own source is its alone.
    assert len(found["batch-isolation"]["spec"]["ingress"]) == 2
    assert web_policy["spec"]["egress"] == [{}]
    namespace = run.named("kubernetes:core/v1:Namespace", "web")
    assert namespace.metadata["labels"]["kns.io/network"] == "isolated"
    kueue = found["kueue-system/kns-isolation"]["spec"]["ingress"]
    assert [int(p["port"]) for p in kueue[1]["ports"]] == [9443, 8082]
    assert kueue[1]["from"][0] == {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.244.0.0/16"]}}
    assert run.outputs["network"] == {
        "isolation": "namespace", "egress": "all", "podNetwork": ["10.244.0.0/16"],
        "admits": ["its own pods, on every port", "namespace monitoring, on every port"],
        "reaches": ["every address (kns:network.egress: all), but no other entry's pods, which admit none of it"]}


def test_isolation_none_registers_no_policy_and_says_so():
    run = run_program(stack({"isolation": "none"}, queueing={"enabled": True},
                            queues=[{"name": "bio", "quota": {"cpu": {"cpu": 8}}}]))
    assert run.of_type(POLICY) == []
    assert "kns.io/network" not in run.named("kubernetes:core/v1:Namespace", "web").metadata["labels"]
    assert run.outputs["network"] == {"isolation": "none", "policies": "none: the network is the site's"}


def test_a_sites_workers_isolate_their_copies_of_entry_namespaces_too():
    config = site(network={"egress": "cluster", "podNetwork": ["10.244.0.0/16"]})
    mocks = RecordingMocks()
    run = run_program(config, secret_keys=SECRETS, mocks=mocks)
    found = {p.name: p for p in run.of_type(POLICY)}
    # train's queue dispatches to both workers, sweep's to east alone.
    for worker, entry in (("east", "train"), ("west", "train"), ("east", "sweep")):
        copy_of = found[f"{worker}-{entry}-isolation"]
        assert copy_of.inputs["metadata"]["namespace"] == f"kns-{entry}"
        assert worker in (copy_of.provider or ""), copy_of.provider
        assert f"{worker}-kueue-system/kns-isolation" in found
    assert "west-sweep-isolation" not in found
    assert found["train-isolation"].inputs["spec"]["egress"][-1] == {"to": [{"namespaceSelector": {}}]}


def test_a_platform_without_its_pod_network_is_warned_once():
    config = stack(queueing={"enabled": True}, queues=[{"name": "bio", "quota": {"cpu": {"cpu": 8}}}])
    warnings = check_config(config, project_dir=ROOT, environ={}).config.warnings
    assert [w for w in warnings if "podNetwork" in w] == [
        "kns:network.podNetwork is not set: the platform's own pods admit callers outside the cluster by address "
        "(the API server calling Kueue's webhooks), and a network plugin that matches pod addresses by ipBlock "
        "then lets entries' pods reach those ports too; set it to the cluster's pod CIDRs (docs/network.md)"]
    config["network"] = {"podNetwork": ["10.244.0.0/16"]}
    assert not [w for w in check_config(config, project_dir=ROOT, environ={}).config.warnings if "podNetwork" in w]


# ---- ./kns explain ------------------------------------------------------------------------------


def test_explain_says_what_reaches_an_entry_and_what_it_reaches(tmp_path, capsys):
    config = stack({"allowFrom": [{"namespace": "monitoring", "ports": [9090]}], "egress": "none",
                    "allowTo": [{"cidr": "198.51.100.0/24", "ports": [443]}]},
                   [web(allowFrom=[{"namespaceLabels": {"role": "ingress"}}])],
                   profiles={"@bio": {"allowNetworkFrom": True}})
    code, out, _ = run_cli(tmp_path, capsys, config, "explain", "web")
    assert code == 0
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in out.splitlines() if ":" in line}
    assert lines["admits"] == ("its own pods, on every port; namespace monitoring, on TCP 9090; namespaces labelled "
                               "role=ingress, on every port (the entry's own allowFrom) (NetworkPolicy kns-isolation, "
                               "docs/network.md)")
    assert lines["reaches"] == ("its own pods, on every port; the cluster's DNS (UDP and TCP 53); 198.51.100.0/24, "
                                "on TCP 443")
    code, out, _ = run_cli(tmp_path / "none", capsys, stack({"isolation": "none"}), "explain", "web")
    assert "admits:         whatever the site's network allows (kns:network.isolation: none) (no NetworkPolicy" \
        in out, out


# ---- the guard rail ---------------------------------------------------------------------------


def rail_resources(config: dict[str, Any]) -> list[Resource]:
    planned = plan_checked(check_config(config, project_dir=ROOT, environ={}))
    return [resource for _, resource in guardrails._objects(planned)]


def test_the_rail_holds_an_isolated_entry_namespace_to_its_policy():
    resources = rail_resources(stack())
    assert guardrails.entry_namespaces_are_isolated(resources, {}) == []
    without = [r for r in resources if r.kind != "NetworkPolicy"]
    found = guardrails.entry_namespaces_are_isolated(without, {})
    assert [v.message for v in found] == [
        "Namespace kns-web: is labelled kns.io/network: isolated, but no NetworkPolicy selects all its pods for "
        "ingress and egress"]
    widened = copy.deepcopy(resources)
    for resource in widened:
        if resource.kind == "NetworkPolicy":
            resource.props["spec"]["ingress"] += [{"ports": [{"port": 22}]}, {"from": [{"namespaceSelector": {}}]},
                                                  {"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]
    assert [v.message for v in guardrails.entry_namespaces_are_isolated(widened, {})] == [
        "NetworkPolicy kns-web/kns-isolation: ingress[1] admits every source (a rule without from) into isolated "
        "entry namespace kns-web",
        "NetworkPolicy kns-web/kns-isolation: ingress[2] admits every namespace (an empty namespaceSelector) into "
        "isolated entry namespace kns-web",
        "NetworkPolicy kns-web/kns-isolation: ingress[3] admits addresses (0.0.0.0/0) into isolated entry namespace "
        "kns-web"]


def test_the_rail_leaves_a_namespace_the_site_isolates_alone():
    resources = rail_resources(stack({"isolation": "none"}))
    assert not [r for r in resources if r.kind == "NetworkPolicy"]
    assert guardrails.entry_namespaces_are_isolated(resources, {}) == []


# ---- docs/network.md ------------------------------------------------------------------------------


def page_blocks() -> tuple[dict[str, Any], dict[str, Any], str, dict[str, Any]]:
    """docs/network.md's config example, its worked example, the policy it shows and the
    explain lines."""
    import re
    import yaml
    text = (ROOT / "docs" / "network.md").read_text()
    config = yaml.safe_load(text[text.index("## Config"):].split("```yaml\n", 1)[1].split("```", 1)[0])["config"]
    blocks = re.findall(r"```(yaml|text)\n(.*?)```", text[text.index("## Worked example"):], re.S)
    return config, yaml.safe_load(blocks[0][1])["config"], blocks[2][1], yaml.safe_load(blocks[1][1])


def test_the_pages_config_is_accepted():
    config, _, _, _ = page_blocks()
    plain = {k.split(":", 1)[1]: v for k, v in config.items()}
    assert check_config(stack(plain["network"]), project_dir=ROOT, environ={}).problems.items == []


def test_the_pages_worked_example_is_the_programs(tmp_path, capsys):
    _, config, explained, documented = page_blocks()
    config["kns:cluster"], config["kns:nodePools"] = CLUSTER, POOLS
    run = run_program(config)
    policy = run.named(POLICY, "portal-isolation").inputs
    assert {k: policy["metadata"][k] for k in ("name", "namespace")} == documented["metadata"]
    assert as_delivered(policy["spec"]) == documented["spec"]
    train = as_delivered(run.named(POLICY, "train-isolation").inputs["spec"])
    assert train["ingress"] == documented["spec"]["ingress"][:2] and train["egress"] == documented["spec"]["egress"]
    plain = {k.split(":", 1)[1]: v for k, v in config.items()}
    code, out, _ = run_cli(tmp_path, capsys, plain, "explain", "portal")
    assert code == 0
    shown = [line for line in out.splitlines() if line.lstrip().startswith(("admits:", "reaches:"))]
    assert "\n".join(shown) + "\n" == explained
