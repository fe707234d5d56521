"""A local control plane for tests and benchmarks: the build and cluster scripts, a
`kubectl` driver, and fake (kwok) node manifests."""

from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import yaml

from . import pace
from .program import ROOT


def script(name: str, *args: str, timeout: int = 5400) -> str:
    """Run scripts/<name>; what it prints (a build's bin directory) or its stderr on failure."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / name), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"scripts/{name} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done.stdout.strip()


class Cluster:
    """`kubectl` against a local control plane (scripts/cluster-up.sh) as its admin."""

    def __init__(self, state: Path, bin_dir: str):
        self.state = state
        self.kubeconfig = state / "kubeconfig"
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(["kubectl", *args], env=self.env, capture_output=True, text=True, input=input, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")
        return done

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, *documents: dict) -> None:
        self.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(d) for d in documents))

    def read_only_kubeconfig(self, path: Path, name: str = "kns-preview") -> Path:
        """A kubeconfig at `path` for a ServiceAccount that may only get, list and watch
        (docs/ci.md's preview identity), with a token of an hour."""
        self.kubectl("create", "serviceaccount", name, "-n", "default")
        self.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
                    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]},
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]})
        token = self.kubectl("create", "token", name, "-n", "default", "--duration=1h").stdout.strip()
        (cluster,) = yaml.safe_load(self.kubeconfig.read_text())["clusters"]
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
            "current-context": name}))
        path.chmod(0o600)
        return path

    def can(self, who: str, verb: str, resource: str, namespace: str | None = None) -> bool:
        """`kubectl auth can-i`; `pods/log` style names are a subresource, `type/name` an object."""
        base, _, sub = resource.partition("/")
        if sub in ("log", "exec", "binding", "attach", "portforward"):
            args = ["auth", "can-i", verb, base, f"--subresource={sub}", f"--as={who}"]
        else:
            args = ["auth", "can-i", verb, resource, f"--as={who}"]
        if namespace:
            args += ["-n", namespace]
        done = self.kubectl(*args, check=False)
        return done.stdout.strip() == "yes"

    def wait(self, what, timeout: float | None = None, every: float = 1.0, message=""):
        """`what()` once it is true; fails after `timeout` seconds (default: the run's slack,
        kns_testing/pace.py). `message` may be a function: what it says at that moment."""
        timeout = pace.slack() if timeout is None else timeout
        deadline = time.time() + timeout
        while True:
            value = what()
            if value:
                return value
            if time.time() > deadline:
                raise AssertionError(f"timed out after {timeout}s: {message() if callable(message) else message}")
            time.sleep(every)


@contextmanager
def local_cluster(state: Path, nodes: Sequence[dict] = ()) -> Iterator[Cluster]:
    """A local control plane in `state` (scripts/cluster-up.sh) with `nodes` (kwok node
    manifests) registered and Ready; stopped again (scripts/cluster-down.sh) after, however
    far it got."""
    bin_dir = script("cluster-build.sh")
    try:
        started = time.monotonic()
        script("cluster-up.sh", str(state), timeout=600)
        pace.measured(time.monotonic() - started)
        live = Cluster(state, bin_dir)
        if nodes:
            live.apply(*nodes)
            live.wait(lambda: ready_nodes(live) == len(nodes), pace.slack(), message="kwok nodes Ready")
        yield live
    finally:
        script("cluster-down.sh", str(state), timeout=300)


def ready_nodes(cluster: Cluster) -> int:
    return sum(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
               for n in cluster.get("nodes")["items"])


def node_manifest(name: str, cpu: int, gpus: int) -> dict:
    # Real kubelets report ephemeral-storage; pods that bound it (the platform's own do) need it.
    capacity = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity, "phase": "Running"},
    }
