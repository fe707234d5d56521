"""Contract section 18 proved offline: the NetworkPolicies the program registers, fed to a
NetworkPolicy engine the project did not write (cyclonus's matcher, kns_testing/netpol.py),
and a traffic matrix checked against what section 18 promises: every pair of entries' pods
(same entry, other entry, other team), the platform's pods, `allowFrom` sources, pods of
other namespaces, the API server and outside addresses, the cluster's DNS, on the ports
that matter, for each isolation and egress mode.

The expectations below are written from section 18, not from plan/network.py: a policy the
program forgets, or one that lets too much in, shows up as a flow the engine answers
otherwise. The last tests remove or widen one policy and see the check fail.
"""

from __future__ import annotations

import copy
import ipaddress
from typing import Any, Callable, Optional

import pytest

from kns_testing.netpol import Flow, Peer, allowed, as_delivered
from kns_testing.program import Run, run_program

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
POD_NETWORK = "10.244.0.0/16"
API_SERVER = Peer("the API server", "192.0.2.10")
INTERNET = Peer("an outside address", "203.0.113.10")
STORAGE = Peer("the storage array", "198.51.100.7")
DNS = Peer("the cluster's DNS", "10.244.200.2", "kube-system", {}, {"k8s-app": "kube-dns"})
MONITORING = Peer("monitoring", "10.244.200.3", "monitoring", {}, {"app": "prometheus"})
INGRESS = Peer("the ingress controller", "10.244.200.4", "ingress-nginx", {"role": "ingress"}, {"app": "nginx"})
OTHER = Peer("a pod of another namespace", "10.244.200.5", "default", {}, {"app": "web"})
DATABASE = Peer("the team database", "10.244.200.6", "databases", {}, {"app": "postgres"})

CLUSTER = {"name": "kns-net"}
POOLS = [{"name": "a100", "role": "gpu", "nodes": ["gpu-1", "gpu-2"], "gpu": {"vendor": "nvidia", "perNode": 8}},
         {"name": "cpu", "role": "compute", "nodes": ["cpu-1"]}]
KNS = {"enabled": True, "image": "us-docker.pkg.dev/jarvice/images/jarvice-kns-scheduler:jarvice-3.21.9",
       "imagesTag": "jarvice-3.21.9", "jobsDomain": "jobs.example.org", "ingressClass": "nginx", "ingress": True}
ENTRIES = [
    # Team ml: a distributed training job and its notebook.
    {"name": "train", "user": "ann", "groups": ["ml"], "image": "busybox:1.37", "gpus": 2, "cpu": 4, "memory": 4096,
     "pool": "a100", "queue": "physics", "workers": 3, "leaderPort": 29500},
    {"name": "notebook", "user": "ann", "groups": ["ml"], "image": "busybox:1.37", "cpu": 1, "memory": 1024,
     "pool": "cpu", "queue": "bio"},
    # Team bio: a service the ingress controller may reach (its own allowFrom), on 8080 only.
    {"name": "fold", "user": "bob", "groups": ["bio"], "image": "busybox:1.37", "cpu": 4, "memory": 4096,
     "pool": "cpu", "queue": "bio", "allowFrom": [{"namespaceLabels": {"role": "ingress"}, "ports": [8080]}]},
]
PORTS = (80, 8080, 29500)  # a web port, a service port, the leader's rendezvous port
KUEUE_PORTS = {"webhook": 9443, "visibility": 8082, "metrics": 8443}
SECURE_PORT = 10259  # the packing scheduler's metrics


def config(network: Optional[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kns:cluster": CLUSTER, "kns:nodePools": POOLS, "kns:knsScheduler": KNS,
        "kns:queueing": {"enabled": True},
        "kns:queues": [{"name": "physics", "quota": {"a100": {"nvidia.com/gpu": 8, "cpu": 64, "memory": "512Gi"}}},
                       {"name": "bio", "quota": {"cpu": {"cpu": 32, "memory": "128Gi"}}}],
        "kns:profiles": {"@bio": {"allowNetworkFrom": True}},
        "kns:reservations": [{"name": "course", "pool": "a100", "nodes": 1, "schedule": "0 9 * * 1",
                              "duration": "2h", "entries": ["train"]}],
        "kns:budgets": [{"name": "bio-q", "queues": ["bio"], "limits": {"cpu": 100000}, "reset": "0 0 1 */3 *"}],
        "kns:jobs": copy.deepcopy(ENTRIES),
    }
    out["kns:jobs"][0]["reservation"] = "course"
    if (network or {}).get("isolation") == "none":  # an entry's allowFrom would have no effect: refused
        for entry in out["kns:jobs"]:
            entry.pop("allowFrom", None)
    if network is not None:
        out["kns:network"] = network
    return out


def pods(run: Run) -> dict[str, list[Peer]]:
    """Two pods of every namespace the program registers, with the labels the program gives
    the namespace and the pods it runs there (entries' pods carry their entry's labels)."""
    out: dict[str, list[Peer]] = {}
    for index, namespace in enumerate(run.of_type(NAMESPACE), start=1):
        name, labels = namespace.metadata["name"], dict(namespace.metadata.get("labels") or {})
        pod_labels = {"kns.io/job": labels["kns.io/job"]} if "kns.io/job" in labels else {"app": name}
        out[name] = [Peer(f"{name} pod {n}", f"10.244.{index}.{n}", name, labels, pod_labels) for n in (1, 2)]
    return out


def policies(run: Run) -> list[dict[str, Any]]:
    """The NetworkPolicies the program registered, as the provider sends them."""
    return [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": p.metadata,
             "spec": as_delivered(p.inputs["spec"])} for p in run.of_type(POLICY)]


def expected_matrix(run: Run, network: dict[str, Any]) -> list[tuple[Flow, bool]]:
    """Every flow of the matrix and whether section 18 allows it under `network`."""
    isolated = network.get("isolation", "namespace") == "namespace"
    egress = network.get("egress", "all")
    allow_to = network.get("allowTo") or []
    pod_network = network.get("podNetwork") or []
    site_sources = network.get("allowFrom") or []
    found = pods(run)
    entries = {ns: peers for ns, peers in found.items() if "kns.io/job" in peers[0].namespace_labels}
    platform = {ns: peers for ns, peers in found.items() if ns not in entries}
    own_sources = {f"kns-{e['name']}": e.get("allowFrom") or [] for e in ENTRIES}
    outsiders = [MONITORING, INGRESS, OTHER, DATABASE]

    def admitted_by(sources: list[dict[str, Any]], peer: Peer, port: int) -> bool:
        for source in sources:
            if source.get("ports") and port not in source["ports"]:
                continue
            if "namespace" in source and source["namespace"] == peer.namespace:
                return True
            if "namespaceLabels" in source and peer.namespace and all(
                    peer.namespace_labels.get(k) == v for k, v in source["namespaceLabels"].items()):
                return True
        return False

    def reaches(peer: Peer, port: int, protocol: str = "TCP") -> bool:
        """Whether an entry's pod may open this connection as far as its own egress goes."""
        if egress == "all":
            return True
        if peer.namespace == "kube-system" and peer.pod_labels.get("k8s-app") == "kube-dns" and port == 53:
            return True
        if egress == "cluster" and peer.namespace:
            return True
        for destination in allow_to:
            if destination.get("ports") and port not in destination["ports"]:
                continue
            if "cidr" in destination and ipaddress.ip_address(peer.ip) in ipaddress.ip_network(destination["cidr"]):
                return True
            if "namespace" in destination and destination["namespace"] == peer.namespace:
                return True
        return False

    def platform_admits(namespace: str, peer: Peer, port: int) -> bool:
        """What a namespace of the platform's own admits: what it serves, to the API server
        (any address outside the pod network: with none given, every address) and, but
        for the API server's ports, to pods outside entries' namespaces."""
        if port not in served(namespace):
            return False
        by_address = not any(ipaddress.ip_address(peer.ip) in ipaddress.ip_network(c) for c in pod_network)
        api_only = namespace == "kueue-system" and port in (KUEUE_PORTS["webhook"], KUEUE_PORTS["visibility"])
        return by_address or (not api_only and bool(peer.namespace) and peer.namespace not in entries)

    matrix: list[tuple[Flow, bool]] = []
    for namespace, (pod, sibling) in entries.items():
        for port in PORTS:
            # Its own pods reach each other on every port (distributed workers, the leader).
            matrix.append((Flow(pod, sibling, port), True))
            for other, (other_pod, _) in entries.items():
                if other != namespace:
                    may = not isolated or (admitted_by(own_sources[namespace], other_pod, port)
                                           and reaches(pod, port))
                    matrix.append((Flow(other_pod, pod, port), may))
            for source in outsiders:
                may = not isolated or admitted_by(site_sources + own_sources[namespace], source, port)
                matrix.append((Flow(source, pod, port), may))
            for outside in (API_SERVER, INTERNET):
                matrix.append((Flow(outside, pod, port), not isolated))
            # Where it may go.
            for destination in (INTERNET, STORAGE):
                matrix.append((Flow(pod, destination, port), not isolated or reaches(destination, port)))
            for destination in (OTHER, DATABASE):
                matrix.append((Flow(pod, destination, port), not isolated or reaches(destination, port)))
        for protocol in ("UDP", "TCP"):
            matrix.append((Flow(pod, DNS, 53, protocol), True))
        # The platform's pods admit nothing from entries (but by address, without podNetwork).
        for platform_namespace, (platform_pod, _) in platform.items():
            for port in (*KUEUE_PORTS.values(), SECURE_PORT, KNS_PORT, 80):
                may = not isolated or (platform_admits(platform_namespace, pod, port) and reaches(platform_pod, port))
                matrix.append((Flow(pod, platform_pod, port), may))
        for port in (443, 6443):  # the API server, for entries whose account uses it
            matrix.append((Flow(pod, API_SERVER, port), not isolated or reaches(API_SERVER, port)))
    for platform_namespace, (platform_pod, sibling) in platform.items():
        # The platform's own pods reach the API server, and each other inside a namespace.
        matrix.append((Flow(platform_pod, API_SERVER, 443), True))
        matrix.append((Flow(platform_pod, API_SERVER, 6443), True))
        matrix.append((Flow(platform_pod, sibling, 8080), True))
        for port in (*KUEUE_PORTS.values(), SECURE_PORT, KNS_PORT, 80):
            for source in (API_SERVER, MONITORING, INGRESS):
                matrix.append((Flow(source, platform_pod, port),
                               not isolated or platform_admits(platform_namespace, source, port)))
    return matrix


KNS_PORT = 8080  # the KNS scheduler's default port


def served(namespace: str) -> set[int]:
    """What each of the platform's namespaces serves (section 18: what it admits)."""
    if namespace == "kueue-system":
        return set(KUEUE_PORTS.values())
    if namespace == "kns-system":
        return {SECURE_PORT, KNS_PORT}
    return set()


def check(run: Run, network: dict[str, Any],
          change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lambda p: p) -> list[str]:
    """The flows the engine answers otherwise than section 18 says, under the program's
    policies (after `change`)."""
    matrix = expected_matrix(run, network)
    answers = allowed(change(policies(run)), [flow for flow, _ in matrix])
    return [f"{flow}: section 18 says {'allowed' if want else 'denied'}, the engine says "
            f"{'allowed' if got else 'denied'}" for (flow, want), got in zip(matrix, answers) if want != got]


MODES = {
    "default": {},
    "sources and pod network": {"allowFrom": [{"namespace": "monitoring"},
                                              {"namespaceLabels": {"role": "ingress"}, "ports": [80]}],
                                "podNetwork": [POD_NETWORK]},
    "egress cluster": {"egress": "cluster", "podNetwork": [POD_NETWORK],
                       "allowTo": [{"cidr": "198.51.100.0/24", "ports": [80]}]},
    "egress none": {"egress": "none", "podNetwork": [POD_NETWORK],
                    "allowTo": [{"cidr": "198.51.100.7/32"}, {"namespace": "databases", "ports": [8080]}]},
    "isolation none": {"isolation": "none"},
}


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    return {mode: run_program(config(network)) for mode, network in MODES.items()}


@pytest.mark.parametrize("mode", list(MODES))
def test_every_flow_of_the_matrix_is_as_section_18_says(runs, mode):
    run, network = runs[mode], MODES[mode]
    if network.get("isolation") == "none":
        assert not run.of_type(POLICY)  # the network is the site's: no policy at all
    else:
        namespaces = {p.metadata["namespace"] for p in run.of_type(POLICY)}
        assert namespaces == {n.metadata["name"] for n in run.of_type(NAMESPACE)}, "a namespace without its policy"
    assert check(run, network) == []
    assert len(expected_matrix(run, network)) > 250


def test_removing_one_entrys_policy_lets_other_entries_in(runs):
    network = MODES["sources and pod network"]
    wrong = check(runs["sources and pod network"], network,
                  lambda found: [p for p in found if p["metadata"]["namespace"] != "kns-notebook"])
    assert any(line.startswith("kns-train pod 1 -> kns-notebook pod 1:29500/TCP: section 18 says denied")
               for line in wrong), wrong


def added(where: Callable[[dict[str, Any]], bool], section: str, rule: dict[str, Any]):
    """A change of the program's policies: `rule` added to `section` of those `where` picks."""
    def change(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = copy.deepcopy(found)
        for policy in out:
            if where(policy) and section in policy["spec"]:
                policy["spec"][section].append(rule)
        return out
    return change


def test_widening_a_policy_lets_everyone_in(runs):
    widened = added(lambda p: p["metadata"]["namespace"] == "kns-fold", "ingress", {"from": [{"namespaceSelector": {}}]})
    wrong = check(runs["default"], MODES["default"], widened)
    assert any(line.startswith("kns-train pod 1 -> kns-fold pod 1:80/TCP: section 18 says denied") for line in wrong)


def test_a_platform_namespace_without_its_policy_admits_entries(runs):
    network = MODES["sources and pod network"]
    wrong = check(runs["sources and pod network"], network,
                  lambda found: [p for p in found if p["metadata"]["namespace"] != "kueue-system"])
    assert any(line.startswith("kns-train pod 1 -> kueue-system pod 1:9443/TCP: section 18 says denied")
               for line in wrong), wrong


def test_an_egress_that_leaks_is_caught(runs):
    opened = added(lambda p: p["metadata"]["namespace"].startswith("kns-"), "egress",
                   {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]})
    wrong = check(runs["egress none"], MODES["egress none"], opened)
    assert any(line.startswith("kns-train pod 1 -> an outside address:80/TCP: section 18 says denied")
               for line in wrong), wrong
