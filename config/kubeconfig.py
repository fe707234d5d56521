"""Finding which kubeconfig context a run would target, before any resource exists.

The forbidden-context guard must act on the context the provider would really use: the
explicit `context`, or else the current context of the kubeconfig the provider would load
(inline text, a path, `$KUBECONFIG`, or `~/.kube/config`, in that order).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from . import yamldoc


class KubeconfigError(ValueError):
    """The kubeconfig named in config cannot be read; the message is user-facing."""


def is_inline(kubeconfig: str) -> bool:
    """Inline kubeconfig text (YAML or JSON) rather than a path."""
    text = kubeconfig.lstrip()
    return "\n" in text or text.startswith(("apiVersion", "{", "kind:", "clusters:"))


def resolve_path(kubeconfig: str, project_dir: Path) -> Path:
    path = Path(os.path.expanduser(kubeconfig))
    return path if path.is_absolute() else project_dir / path


@dataclass(frozen=True)
class Target:
    """What the provider would reach: the context's name and its cluster's server."""
    context: str
    server: str


def _named(document: dict, key: str, inner: str) -> dict[str, dict]:
    """`clusters`/`contexts` of one kubeconfig by name (the first of a name wins, as kubectl)."""
    out: dict[str, dict] = {}
    items = document.get(key)
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get(inner), dict):
            out.setdefault(item["name"], item[inner])
    return out


@dataclass(frozen=True)
class Kubeconfig:
    """The kubeconfig documents the provider would load, each parsed once, in its order
    (kubectl's merge of `$KUBECONFIG`: the first file that sets a name or the current
    context wins). A kubeconfig holds keys and tokens: an error names the place, never
    the text."""
    read: tuple[tuple[Any, str], ...]

    @property
    def current(self) -> Optional[str]:
        """The current context the provider would use, or None if no file sets one."""
        for document, where in self.read:
            if not isinstance(document, dict):
                raise KubeconfigError(f"{where} is not a kubeconfig (expected a mapping)")
            if document.get("current-context"):
                return str(document["current-context"])
        return None

    def target(self, context: Optional[str]) -> Target:
        """The context (the named one, else the current one) and its cluster's server.
        Raises KubeconfigError when a document is no kubeconfig, or lacks the context,
        its cluster or the cluster's server: Pulumi could not reach the cluster with it."""
        for document, where in self.read:
            if not isinstance(document, dict) or not ({"clusters", "contexts"} & set(document)):
                raise KubeconfigError(f"{where} is not a kubeconfig: it has no clusters and no contexts")
        where = self.read[0][1] if len(self.read) == 1 else \
            f"the kubeconfig merged from {', '.join(w for _, w in self.read)}"
        contexts: dict[str, dict] = {}
        clusters: dict[str, dict] = {}
        current = None
        for document, _ in self.read:
            for name, body in _named(document, "contexts", "context").items():
                contexts.setdefault(name, body)
            for name, body in _named(document, "clusters", "cluster").items():
                clusters.setdefault(name, body)
            if current is None and isinstance(document.get("current-context"), str) and document["current-context"]:
                current = document["current-context"]
        name = context or current
        if name is None:
            raise KubeconfigError(f"{where} sets no current-context, the context Pulumi would use (its contexts: "
                                  f"{', '.join(sorted(contexts)) or 'none'})")
        if name not in contexts:
            which = f'context "{name}"' if context else f'current-context "{name}"'
            raise KubeconfigError(f"{where} has no {which} (its contexts: {', '.join(sorted(contexts)) or 'none'})")
        cluster = contexts[name].get("cluster")
        if not isinstance(cluster, str) or cluster not in clusters:
            raise KubeconfigError(f'{where}: context "{name}" names cluster "{cluster}", which it does not define')
        server = clusters[cluster].get("server")
        if not isinstance(server, str) or not server:
            raise KubeconfigError(f'{where}: cluster "{cluster}" (of context "{name}") has no server')
        return Target(name, server)


def read(kubeconfig: Optional[str], project_dir: Path, environ: Mapping[str, str]) -> Optional[Kubeconfig]:
    """The kubeconfig the provider would load (inline text, a path, `$KUBECONFIG`, or
    `~/.kube/config`), or None when none exists (nothing to check offline)."""
    documents = []
    for text, where in _documents(kubeconfig, project_dir, environ):
        try:
            document, _ = yamldoc.load(text, secret=True)
        except yamldoc.YamlError as exc:
            raise KubeconfigError(f"{where} {exc}") from None
        documents.append((document, where))
    return Kubeconfig(tuple(documents)) if documents else None


def target(kubeconfig: Optional[str], context: Optional[str], project_dir: Path,
           environ: Mapping[str, str]) -> Optional[Target]:
    """`read(...).target(context)`; None when no kubeconfig exists."""
    found = read(kubeconfig, project_dir, environ)
    return found.target(context) if found is not None else None


def _documents(kubeconfig: Optional[str], project_dir: Path, environ: Mapping[str, str]):
    """(text, where) of each kubeconfig the provider would read, in its order."""
    if kubeconfig:
        if is_inline(kubeconfig):
            yield kubeconfig, "inline kubeconfig"
            return
        path = resolve_path(kubeconfig, project_dir)
        if not path.is_file():
            raise KubeconfigError(f'"{kubeconfig}" is neither kubeconfig text nor an existing file')
        yield _read(path), str(path)
        return
    candidates = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if not candidates:
        home = environ.get("HOME") or os.path.expanduser("~")
        candidates = [os.path.join(home, ".kube", "config")]
    for candidate in candidates:
        path = Path(candidate)
        if path.is_file():
            yield _read(path), str(path)


def read_digests(cluster: Any, workers: Iterable[Any], project_dir: Path,
                 environ: Mapping[str, str]) -> dict[str, str]:
    """Per cluster the program reaches (`cluster`, `worker:<name>`), SHA-256 of every
    kubeconfig document its provider would read, where and what: what the stack's objects
    depend on outside the stack file (the server a worker's MultiKueue Secret names, the
    cluster a file now points at), for the digests that let `make up` skip a stack. A
    render-only cluster reads none, and inline kubeconfig text is in the stack file already
    (as its ciphertext). A digest of files, never their text: they hold credentials."""
    out: dict[str, str] = {}
    reached = [("cluster", cluster.kubeconfig)] if not cluster.render_dir else []
    reached += [(f"worker:{worker.name}", worker.kubeconfig) for worker in workers]
    for name, kubeconfig in reached:
        if kubeconfig and is_inline(kubeconfig):
            continue
        digest = hashlib.sha256()
        try:
            for text, where in _documents(kubeconfig, project_dir, environ):
                digest.update(where.encode() + b"\0" + hashlib.sha256(
                    text.encode() if isinstance(text, str) else text).digest())
        except KubeconfigError as error:  # the checks say so; here it only has to differ
            digest.update(str(error).encode())
        out[name] = digest.hexdigest()
    return out


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"{path} cannot be read ({exc.strerror or 'error'})") from None
