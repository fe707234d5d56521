"""Asking a NetworkPolicy engine the project did not write whether flows are allowed.

tools/netpol-check is cyclonus's matcher (github.com/mattfenwick/cyclonus, pkg/matcher)
behind a JSON door, built by scripts/linters.sh from the Go module proxy. It answers what a
cluster's network plugin would for the policies it is given: here, the ones the program
registers (tests/test_network_matrix.py).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def netpol_check() -> Path:
    """The netpol-check binary (built once by scripts/linters.sh, then cached)."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "linters.sh")], capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"scripts/linters.sh failed:\n{done.stderr[-3000:]}"
    binary = Path(done.stdout.splitlines()[2]) / "netpol-check"
    assert binary.is_file(), binary
    return binary


def as_delivered(value: Any) -> Any:
    """A registered object's inputs as the engine delivers them to the provider: the mocks
    hand numbers back as floats, a whole one is an integer."""
    if isinstance(value, dict):
        return {k: as_delivered(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_delivered(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


@dataclass(frozen=True)
class Peer:
    """A pod (namespace, its namespace's labels, its own labels) or, without a namespace,
    an address outside the cluster."""

    name: str
    ip: str
    namespace: str = ""
    namespace_labels: dict[str, str] = field(default_factory=dict, hash=False)
    pod_labels: dict[str, str] = field(default_factory=dict, hash=False)

    def wire(self) -> dict[str, Any]:
        labels = dict(self.namespace_labels)
        if self.namespace:  # what the API server puts on every namespace
            labels["kubernetes.io/metadata.name"] = self.namespace
        return {"namespace": self.namespace, "namespaceLabels": labels, "podLabels": dict(self.pod_labels),
                "ip": self.ip}


@dataclass(frozen=True)
class Flow:
    source: Peer
    destination: Peer
    port: int
    protocol: str = "TCP"

    def __str__(self) -> str:
        return f"{self.source.name} -> {self.destination.name}:{self.port}/{self.protocol}"


def allowed(policies: list[dict[str, Any]], flows: list[Flow], binary: Optional[Path] = None) -> list[bool]:
    """Whether the engine allows each flow under `policies` (NetworkPolicy manifests)."""
    request = {"policies": policies,
               "flows": [{"from": f.source.wire(), "to": f.destination.wire(), "port": f.port,
                          "protocol": f.protocol} for f in flows]}
    done = subprocess.run([str(binary or netpol_check())], input=json.dumps(request), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"netpol-check failed: {done.stderr[-3000:]}"
    answers = json.loads(done.stdout)["flows"]
    assert len(answers) == len(flows)
    return [answer["allowed"] for answer in answers]
