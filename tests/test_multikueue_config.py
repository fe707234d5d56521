"""config/multikueue.py: the worker kubeconfigs Kueue's MultiKueue refuses (issue 34), each
case of docs/multicluster-notes.md's table, found offline with its place in the file and
never a value from it."""

from __future__ import annotations

import copy

import pytest
import yaml

from config.multikueue import kubeconfig_problems

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu.c2ln"
CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM="
GOOD = {
    "apiVersion": "v1", "kind": "Config",
    "clusters": [{"name": "east", "cluster": {"server": "https://10.0.3.7:6443", "certificate-authority-data": CA}}],
    "users": [{"name": "multikueue", "user": {"token": TOKEN}}],
    "contexts": [{"name": "east", "context": {"cluster": "east", "user": "multikueue"}}],
    "current-context": "east",
}
SECRETS = (TOKEN, CA, "hunter2", "/etc/kns/ca.crt", "/var/run/token", "/home/ops/c.crt", "gke-gcloud-auth-plugin")


def problems_of(change) -> list[str]:
    document = copy.deepcopy(GOOD)
    change(document)
    found = kubeconfig_problems(yaml.safe_dump(document))
    for message in found:
        assert not any(secret in message for secret in SECRETS), message
    return found


def user(**fields):
    return lambda d: d["users"][0]["user"].update(fields)


def cluster(**fields):
    return lambda d: d["clusters"][0]["cluster"].update(fields)


def test_a_self_contained_kubeconfig_passes():
    """Server, CA data and a token inline, as scripts/cluster-up.sh writes it; a DNS name and
    an IPv6 address are trusted hosts too, and embedded client certificates are fine."""
    assert kubeconfig_problems(yaml.safe_dump(GOOD)) == []
    assert problems_of(cluster(server="https://API.east.example.org")) == []
    assert problems_of(cluster(server="https://[fd00::7]:6443")) == []
    assert problems_of(lambda d: d["users"][0].update(
        user={"client-certificate-data": CA, "client-key-data": CA})) == []


@pytest.mark.parametrize("change, expected", [
    (user(exec={"command": "gke-gcloud-auth-plugin", "apiVersion": "client.authentication.k8s.io/v1",
                "interactiveMode": "Never"}),
     "users[0].user.exec: an exec plugin runs a program on the manager: Kueue refuses it"),
    (user(tokenFile="/var/run/token"), "users[0].user.tokenFile: a file on the manager's disk"),
    (user(username="admin", password="hunter2"), "users[0].user: basic auth (username, password)"),
    (user(**{"auth-provider": {"name": "oidc"}}), "users[0].user.auth-provider: Kueue refuses it"),
    (user(**{"client-certificate": "/home/ops/c.crt"}), "users[0].user.client-certificate: a file path"),
    (user(**{"client-key": "/home/ops/c.key"}), "users[0].user.client-key: a file path"),
    (cluster(**{"certificate-authority": "/etc/kns/ca.crt"}),
     "clusters[0].cluster.certificate-authority: a file path: Kueue refuses it"),
    (cluster(**{"insecure-skip-tls-verify": True}), "clusters[0].cluster.insecure-skip-tls-verify: Kueue refuses it"),
    (cluster(server=""), "clusters[0].cluster.server: server URL is required"),
    (cluster(server="https://east_api:6443"), "clusters[0].cluster.server: the server's host is neither an IP address"),
    (lambda d: d.pop("current-context"), "current-context: is required"),
    (lambda d: d.update({"current-context": "west"}), "current-context: names no context of the file"),
], ids=["exec plugin", "token file", "basic auth", "auth provider", "client certificate file", "client key file",
        "CA file", "TLS not verified", "no server", "untrusted host", "no current context", "unknown context"])
def test_what_kueue_refuses_is_one_problem_at_its_place(change, expected):
    found = problems_of(change)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_every_problem_is_reported_at_once_and_kueue_s_scope_is_kept():
    """tokenFile and the cluster rules hold for every entry of the file; exec and basic
    auth only for the user the current context connects with, as in Kueue."""
    def two(d):
        d["users"].append({"name": "ops", "user": {"exec": {"command": "gke-gcloud-auth-plugin"},
                                                     "tokenFile": "/var/run/token"}})
        d["clusters"].append({"name": "west", "cluster": {"certificate-authority": "/etc/kns/ca.crt"}})
        d["users"][0]["user"]["password"] = "hunter2"
    found = problems_of(two)
    assert [message.split(":")[0] for message in found] == [
        "users[1].user.tokenFile", "clusters[1].cluster.certificate-authority", "clusters[1].cluster.server",
        "users[0].user"]


@pytest.mark.parametrize("text", ["[1, 2]", "clusters: [", b"\xff\xfe"], ids=["a list", "broken YAML", "not UTF-8"])
def test_what_is_not_a_kubeconfig_says_so_without_quoting_it(text):
    (found,) = kubeconfig_problems(text)
    assert found.startswith("is not a kubeconfig") and "[1, 2]" not in found and "clusters: [" not in found
