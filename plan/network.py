"""The NetworkPolicies of `kns:network` (contract section 18, docs/network.md): what every
entry's namespace, and each namespace of the platform's own, admits and reaches.

One policy per namespace, `kns-isolation`, selecting every pod of it, for ingress and
egress both. NetworkPolicies only ever add what is allowed: a pod selected by one is
isolated, and allowed exactly what some rule of some policy selecting it allows. So:

- an entry's pods admit their own namespace's pods on every port (distributed workers, the
  leader Service), the sources of `kns:network.allowFrom` and of the entry's own
  `allowFrom`, and nothing else: no other entry's pods, nothing from outside;
- they reach everything (`egress: all`), or their own pods, the cluster's DNS and
  `allowTo` (`none`), plus every pod of the cluster (`cluster`);
- the platform's own pods reach everything (the API server, every worker of a site), and
  admit only what they serve: the API server's calls to Kueue's webhooks and aggregated API
  from outside the cluster's pod network, metrics and the KNS scheduler's port from pods
  outside entries' namespaces (a monitoring stack, an ingress controller) too.

Pure: validated config in, Kubernetes-shaped dicts out.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from config import names, rules
from config.models import KnsScheduler, Network, NetworkDestination, NetworkSource, PackingScheduler

from .schedulers import SECURE_PORT

API_VERSION = "networking.k8s.io/v1"
POLICY = "kns-isolation"
# On every entry namespace the program isolates: the guard rail holds it to its policy.
ISOLATED_LABEL, ISOLATED = "kns.io/network", "isolated"
# Every namespace carries its name as this label (Kubernetes sets it, since 1.22).
NAMESPACE_NAME = "kubernetes.io/metadata.name"
# The namespaces that are no entry's: every entry's namespace carries kns.io/job.
NOT_AN_ENTRY = {"matchExpressions": [{"key": names.LABEL_JOB, "operator": "DoesNotExist"}]}
EVERY_ADDRESS = ("0.0.0.0/0", "::/0")


@dataclass(frozen=True)
class Served:
    """Ports a platform pod serves, and to whom: the API server (callers from outside the
    cluster's pod network), and, unless `api_server_only`, pods outside entries' namespaces."""

    ports: tuple[int, ...]
    why: str
    api_server_only: bool = False


def _ports(ports: Optional[Iterable[int]]) -> Optional[list[dict[str, Any]]]:
    return [{"protocol": "TCP", "port": port} for port in ports] if ports else None


def _rule(direction: str, peers: list[dict[str, Any]], ports: Optional[Iterable[int]] = None) -> dict[str, Any]:
    rule: dict[str, Any] = {direction: peers}
    listed = _ports(ports)
    if listed:
        rule["ports"] = listed
    return rule


def source_peer(source: NetworkSource) -> dict[str, Any]:
    """The namespace an `allowFrom` item names, as a NetworkPolicy peer: every pod of it."""
    if source.namespace is not None:
        return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: source.namespace}}}
    return {"namespaceSelector": {"matchLabels": dict(source.namespace_labels or {})}}


def destination_peer(destination: NetworkDestination) -> dict[str, Any]:
    if destination.cidr is not None:
        return {"ipBlock": {"cidr": destination.cidr}}
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: destination.namespace}}}


def dns_rule() -> dict[str, Any]:
    """The cluster's DNS, on UDP and TCP 53: reachable in every egress mode."""
    return {"to": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: rules.DNS_NAMESPACE}},
                    "podSelector": {"matchLabels": dict(rules.DNS_POD_LABELS)}}],
            "ports": [{"protocol": "UDP", "port": rules.DNS_PORT}, {"protocol": "TCP", "port": rules.DNS_PORT}]}


def egress_rules(network: Network) -> list[dict[str, Any]]:
    if network.egress == "all":
        return [{}]
    out = [_rule("to", [{"podSelector": {}}]), dns_rule()]
    if network.egress == "cluster":
        out.append(_rule("to", [{"namespaceSelector": {}}]))
    out += [_rule("to", [destination_peer(d)], d.ports) for d in network.allow_to]
    return out


def _policy(namespace: str, labels: dict[str, str], ingress: list[dict[str, Any]],
            egress: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "NetworkPolicy",
            "metadata": {"name": POLICY, "namespace": namespace, "labels": dict(labels)},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": ingress, "egress": egress}}


def entry_policy(network: Network, namespace: str, labels: dict[str, str],
                 own: Optional[list[NetworkSource]] = None, runs_pods: bool = True) -> Optional[dict[str, Any]]:
    """The policy of an entry's namespace; None with `isolation: none`. A namespace entry
    runs no pod of the program's (its users start theirs): kube-score is told so."""
    if not network.isolated:
        return None
    ingress = [_rule("from", [{"podSelector": {}}])]
    ingress += [_rule("from", [source_peer(s)], s.ports) for s in [*network.allow_from, *(own or [])]]
    policy = _policy(namespace, labels, ingress, egress_rules(network))
    if not runs_pods:
        policy["metadata"]["annotations"] = {rules.KUBE_SCORE_IGNORE: "networkpolicy-targets-pod"}
    return policy


def outside(network: Network) -> list[dict[str, Any]]:
    """Every address outside the cluster's pod network (`podNetwork`), as ipBlock peers:
    where the API server's calls come from. Without podNetwork, every address."""
    peers = []
    for cidr in EVERY_ADDRESS:
        whole = ipaddress.ip_network(cidr)
        inside = [c for c in network.pod_network if ipaddress.ip_network(c).version == whole.version]
        block: dict[str, Any] = {"cidr": cidr}
        if inside:
            block["except"] = inside
        peers.append({"ipBlock": block})
    return peers


def platform_policy(network: Network, namespace: str, labels: dict[str, str],
                    served: Iterable[Served] = ()) -> Optional[dict[str, Any]]:
    """The policy of a namespace of the platform's own (system, Kueue, a reservation's or a
    budget's): its pods admit each other and what they serve, and reach everything. None
    with `isolation: none`."""
    if not network.isolated:
        return None
    ingress = [_rule("from", [{"podSelector": {}}])]
    for item in served:
        peers = outside(network) if item.api_server_only else [{"namespaceSelector": NOT_AN_ENTRY}, *outside(network)]
        ingress.append(_rule("from", peers, item.ports))
    return _policy(namespace, labels, ingress, [{}])


def system_served(packing: PackingScheduler, kns: KnsScheduler) -> list[Served]:
    """What the system namespace's schedulers serve: the packing scheduler its metrics and
    health (kube-scheduler's secure port), the KNS scheduler the JARVICE upstream."""
    served = []
    if packing.enabled:
        served.append(Served((SECURE_PORT,), "the packing scheduler's metrics"))
    if kns.enabled:
        served.append(Served((kns.port,), "the KNS scheduler's API, which the JARVICE upstream calls"))
    return served


def system_policy(network: Network, namespace: str, site: str, packing: PackingScheduler,
                  kns: KnsScheduler) -> Optional[dict[str, Any]]:
    return platform_policy(network, namespace, {names.LABEL_CLUSTER: site, **names.MANAGED_BY},
                           system_served(packing, kns))


# What Kueue's manager serves (its Deployment's ports, vendor/kueue): the API server calls
# its webhooks and its aggregated visibility API; its metrics are for a monitoring stack.
KUEUE_SERVED = (Served((9443, 8082), "the API server's calls to Kueue's webhooks and visibility API",
                       api_server_only=True),
                Served((8443,), "Kueue's metrics"))


def _on(ports: Optional[list[int]]) -> str:
    return f"on TCP {', '.join(str(p) for p in ports)}" if ports else "on every port"


def said_source(source: NetworkSource) -> str:
    if source.namespace is not None:
        return f"namespace {source.namespace}, {_on(source.ports)}"
    labels = ", ".join(f"{k}={v}" for k, v in (source.namespace_labels or {}).items())
    return f"namespaces labelled {labels}, {_on(source.ports)}"


def said_destination(destination: NetworkDestination) -> str:
    where = destination.cidr if destination.cidr is not None else f"namespace {destination.namespace}"
    return f"{where}, {_on(destination.ports)}"


def admits(network: Network, own: Optional[list[NetworkSource]] = None) -> list[str]:
    """What can open a connection to an entry's pods, in words (`./kns explain`, outputs)."""
    if not network.isolated:
        return ["whatever the site's network allows (kns:network.isolation: none)"]
    return ["its own pods, on every port", *(said_source(s) for s in network.allow_from),
            *(f"{said_source(s)} (the entry's own allowFrom)" for s in own or [])]


def reaches(network: Network) -> list[str]:
    """Where an entry's pods can open connections, in words."""
    if not network.isolated:
        return ["whatever the site's network allows (kns:network.isolation: none)"]
    if network.egress == "all":
        return ["every address (kns:network.egress: all), but no other entry's pods, which admit none of it"]
    out = ["its own pods, on every port", f"the cluster's DNS (UDP and TCP {rules.DNS_PORT})"]
    if network.egress == "cluster":
        out.append("every pod of the cluster that admits it (kns:network.egress: cluster)")
    return out + [said_destination(d) for d in network.allow_to]


def output(network: Network) -> dict[str, Any]:
    """`network` of the stack outputs (docs/outputs.md)."""
    if not network.isolated:
        return {"isolation": "none", "policies": "none: the network is the site's"}
    return {"isolation": "namespace", "egress": network.egress, "admits": admits(network),
            "reaches": reaches(network), "podNetwork": list(network.pod_network) or None}
