"""Kueue's manager as a process against a local control plane (scripts/kueue-process.sh),
for tests and benchmarks.

There is nothing to stop: kueue-process.sh records the manager in the state dir's pids
file, so scripts/cluster-down.sh stops it with the rest of the cluster.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Optional

from .cluster import Cluster, script


def build_kueue() -> str:
    """The bin dir with `kueue` in it: scripts/cluster-build.sh with KNS_BUILD_KUEUE=1 (cached
    after the first build; the same bin dir as the other control-plane binaries)."""
    previous = os.environ.get("KNS_BUILD_KUEUE")
    os.environ["KNS_BUILD_KUEUE"] = "1"
    try:
        return script("cluster-build.sh")
    finally:
        if previous is None:
            del os.environ["KNS_BUILD_KUEUE"]
        else:
            os.environ["KNS_BUILD_KUEUE"] = previous


def start_kueue(cluster: Cluster, frameworks: Sequence[str] = ("batch/job",),
                wait_for_pods_ready: Optional[str] = None) -> None:
    """Build Kueue if it is missing, then run it against `cluster` and return once its
    webhooks answer (Jobs with the `kueue.x-k8s.io/queue-name` label come back suspended).
    `wait_for_pods_ready`: Kueue's waitForPodsReady timeout (docs/distributed.md)."""
    build_kueue()
    extra = ["--wait-for-pods-ready", wait_for_pods_ready] if wait_for_pods_ready else []
    script("kueue-process.sh", str(cluster.state), "--frameworks", ",".join(frameworks), *extra, timeout=600)
