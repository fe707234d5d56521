"""Whether the clusters a stack reaches answer, said before an engine runs.

A preview against a cluster that does not answer still plans: the provider cannot read
what the cluster holds, so every object of it shows as to create, and the `up` that
follows fails on the first one. `make preview`, `make up` and `./kns preview` say so first,
naming the cluster and its server (docs/multicluster.md, docs/cli.md). Only a connection
to the server's port is tried: no credential is read or sent.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Mapping, Optional
from urllib.parse import urlsplit

from config import kubeconfig
from config.platform import PlatformConfig

# How long a server may take to accept a connection: what a kubectl call's dial allows
# before it reports the cluster unreachable.
CONNECT_SECONDS = 10.0


def _clusters(cfg: PlatformConfig) -> list[tuple[str, Optional[str], Optional[str]]]:
    """(what, kubeconfig, context) of each cluster the stack's providers reach; none when
    it is rendered (kns:cluster.renderDir)."""
    if cfg.cluster.render_dir:
        return []
    return [(f"cluster {cfg.cluster.name}", cfg.cluster.kubeconfig, cfg.cluster.context),
            *((f"worker {w.name}", w.kubeconfig, w.context) for w in cfg.workers)]


def unanswered(cfg: PlatformConfig, project_dir: Path, environ: Mapping[str, str],
               seconds: float = CONNECT_SECONDS) -> list[str]:
    """A line for each cluster whose server does not accept a connection (one the checks
    could not read is theirs to report)."""
    lines = []
    for what, config, context in _clusters(cfg):
        try:
            found = kubeconfig.target(config, context, project_dir, environ)
        except kubeconfig.KubeconfigError:
            continue
        if found is None:
            continue
        url = urlsplit(found.server)
        host = url.hostname or ""
        try:
            port = url.port or (80 if url.scheme == "http" else 443)
        except ValueError:
            continue  # a server the checks refuse
        shown = f"{url.scheme}://{host}:{port}"  # never a user part a URL may carry
        try:
            socket.create_connection((host, port), timeout=seconds).close()
        except OSError as exc:
            reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or type(exc).__name__)
            lines.append(f"{what} ({shown}) did not answer ({reason}): the engine cannot read what it holds, "
                         "so its objects show as to create, and an update fails on them")
    return lines
