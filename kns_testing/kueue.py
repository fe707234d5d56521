"""Kueue's manager as a process against a local control plane (scripts/kueue-process.sh),
for tests and benchmarks.

There is nothing to stop: kueue-process.sh records the manager in the state dir's pids
file, so scripts/cluster-down.sh stops it with the rest of the cluster.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import yaml

from plan import kueue_install

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
                configuration: Optional[Mapping[str, Any]] = None) -> None:
    """Build Kueue if it is missing, then run it against `cluster` and return once its
    webhooks answer (Jobs with the `kueue.x-k8s.io/queue-name` label come back suspended).

    `configuration`: Kueue's Configuration as the program renders it (the ConfigMap of its
    Kueue install, `program_configuration`). The process gets every field the program owns
    from it (plan/kueue_install.py OWNED_FIELDS), so a test's Kueue runs what the program
    would install, never a setting the test wrote itself; the process's own fields (ports,
    certificates, leader election, frameworks) are kueue-process.sh's."""
    build_kueue()
    args = [str(cluster.state), "--frameworks", ",".join(frameworks)]
    owned = {key: configuration[key] for key in kueue_install.OWNED_FIELDS if key in (configuration or {})}
    if owned:
        extra = cluster.state / "kueue-program-config.yaml"
        extra.write_text(yaml.safe_dump(owned, sort_keys=False))
        args += ["--config-extra", str(extra)]
    script("kueue-process.sh", *args, timeout=600)


def program_configuration(config: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's Configuration as the program renders it for stack `config` (the stack's
    settings, with `kns:queueing` installing Kueue): the program runs under the recording
    mocks and its Kueue ConfigMap is read back."""
    from .program import run_program

    queueing = {**config.get("kns:queueing", {}), "enabled": True, "install": True}
    run = run_program({**{k.split(":", 1)[1]: v for k, v in config.items()}, "queueing": queueing})
    # On a site, the manager's (its Kueue's objects carry no worker's prefix).
    rendered = kueue_install.configuration([{"kind": r.inputs.get("kind", "ConfigMap"), **r.inputs}
                                            for r in run.resources if r.type == "kubernetes:core/v1:ConfigMap"
                                            and r.name.startswith(f"{r.inputs['metadata'].get('namespace')}/")])
    assert rendered is not None, "the program rendered no Kueue configuration"
    return rendered
