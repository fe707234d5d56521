"""What Kueue accepts as a MultiKueue worker's kubeconfig, checked offline.

The manager's Kueue reads each worker's kubeconfig from a Secret and refuses anything that
would reach outside that document or weaken TLS: Kueue v0.19.2 (versions.env),
`validateKubeconfig` and `validateRestConfig` in
pkg/controller/admissionchecks/multikueue/multikueuecluster.go; the gate that skipped them,
`MultiKueueAllowInsecureKubeconfigs`, is locked off. Refused, the worker's
MultiKueueCluster stays inactive and no Job reaches it; found here, it is a config error
before anything is applied (docs/multicluster-notes.md has Kueue's own messages for each).

The rules follow Kueue's order and scope: `tokenFile` and the cluster rules on every entry
of the file, the others on the current context's cluster and user, which is what Kueue
connects with. Client certificate and key files Kueue does not check, but the manager
cannot read them from a Secret either. A kubeconfig holds credentials: a message names the
place (`users[0].user`), never a value.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Union
from urllib.parse import urlsplit

from . import names, rules, yamldoc
from .yamldoc import YamlError

KUEUE = "Kueue refuses it in a MultiKueue worker's kubeconfig"


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _entries(document: dict, key: str, inner: str) -> list[tuple[str, Any, dict]]:
    """(place, name, body) of each item of `clusters`, `users` or `contexts`."""
    items = document.get(key)
    return [(f"{key}[{i}].{inner}", _mapping(item).get("name"), _mapping(_mapping(item).get(inner)))
            for i, item in enumerate(items if isinstance(items, list) else [])]


def _server(cluster: dict) -> str:
    server = cluster.get("server")
    return server if isinstance(server, str) else ""


def server_problem(server: str) -> str | None:
    """Kueue's `isValidHostname` on a server URL: its host is an IP address or a DNS name."""
    try:
        host = urlsplit(server).hostname or ""
    except ValueError:
        host = ""
    if not host:
        return f"the server URL has no host: {KUEUE} as an untrusted server endpoint"
    if any(char.isspace() for char in server):
        return "the server URL has a blank in it (before, after or inside): a client cannot dial it"
    try:
        port = urlsplit(server).port
    except ValueError:
        return f"the server URL's port is not a port number ({rules.PORTS.message})"
    if port == 0:
        return f"the server URL's port is 0 ({rules.PORTS.message})"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if not names.dns1123_subdomain_problem(host.lower()):
        return None
    return f"the server's host is neither an IP address nor a DNS name: {KUEUE} as an untrusted server endpoint"


def api_server_problem(url: str) -> str | None:
    """A worker's `apiServer`: an https URL whose host Kueue accepts (`server_problem`),
    without credentials (it reaches the plan and the state in plain text). The URL is
    never repeated: it may be one a credential was pasted into."""
    credentials = names.url_credentials_problem(url)
    if credentials:
        return f"{credentials}; {rules.SITE_API_SERVER_CREDENTIALS.message}"
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme != "https" or parts.path not in ("", "/") or parts.query or parts.fragment:
        return f"is not {rules.SITE_API_SERVER.message}"
    return server_problem(url)


# A rendered site (kns:cluster.renderDir) reaches no cluster: without apiServer, the server
# the manager's kubeconfig names for a worker is this reserved name (RFC 2606).
RENDERED_SERVER = "https://{worker}.invalid"


def kubeconfig_problems(text: Union[str, bytes]) -> list[str]:
    """Every reason Kueue would refuse this kubeconfig, each starting with its place in the
    file; empty when Kueue accepts it."""
    try:
        document, _ = yamldoc.load(text, secret=True)
    except YamlError as exc:
        return [f"is not a kubeconfig: {exc}"]
    if not isinstance(document, dict):
        return ["is not a kubeconfig (expected a mapping with clusters, users and contexts)"]
    problems: list[str] = []
    users = _entries(document, "users", "user")
    clusters = _entries(document, "clusters", "cluster")
    for place, _, user in users:
        if user.get("tokenFile"):
            problems.append(f"{place}.tokenFile: a file on the manager's disk: {KUEUE} (use token)")
    for place, _, cluster in clusters:
        if cluster.get("insecure-skip-tls-verify"):
            problems.append(f"{place}.insecure-skip-tls-verify: {KUEUE} (TLS is verified)")
        if cluster.get("certificate-authority"):
            problems.append(f"{place}.certificate-authority: a file path: {KUEUE} (use certificate-authority-data)")
        if not _server(cluster):
            problems.append(f"{place}.server: server URL is required")
    current = document.get("current-context")
    if not current:
        return problems + ["current-context: is required: Kueue connects with the current context"]
    context = next((body for _, name, body in _entries(document, "contexts", "context") if name == current), None)
    if context is None:
        return problems + ["current-context: names no context of the file"]
    cluster = next(((place, body) for place, name, body in clusters if name == context.get("cluster")), None)
    user = next(((place, body) for place, name, body in users if name == context.get("user")), None)
    if cluster is None:
        problems.append("the current context's cluster is not in clusters")
    elif _server(cluster[1]):
        problem = server_problem(_server(cluster[1]))
        if problem:
            problems.append(f"{cluster[0]}.server: {problem}")
    if user is not None:
        place, body = user
        if body.get("username") or body.get("password"):
            problems.append(f"{place}: basic auth (username, password): {KUEUE}")
        if body.get("exec"):
            problems.append(f"{place}.exec: an exec plugin runs a program on the manager: {KUEUE}")
        if body.get("auth-provider"):
            problems.append(f"{place}.auth-provider: {KUEUE}")
        for key in ("client-certificate", "client-key"):
            if body.get(key):
                problems.append(f"{place}.{key}: a file path the manager cannot read (use {key}-data)")
    return problems
