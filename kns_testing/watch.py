"""A watch of one kind of object on a cluster, for the e2e tests' "this happened" and "this
never happened" checks (issue 44, item 7).

A watch that ended unnoticed (the API server's watch timeout, a restarted or stopped API
server) would make every later "never happened" check pass. So this one lists the kind,
then watches from the list's resourceVersion through the API itself (`kubectl get --raw
...?watch=1`), and when the stream ends it resumes from the last resourceVersion it saw
(bookmarks included), retrying while the server is away. A restarted API server cannot
serve that resourceVersion from its new watch cache (410 Expired, though nothing of the
kind may have changed: the version is the whole cluster's): the watch then lists again and
resumes from the list when the list proves that no object of its kind changed since the
last version it saw (none newer, none gone). If something did change in that gap, or the
server stays away, the watch fails the test at its next look, with the server's messages:
what it recorded is then incomplete (a gap after the last look fails nothing).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Callable, Mapping, Optional, Protocol
from urllib.parse import quote

# How long a watch keeps trying to resume while the API server is away before it fails the
# test: longer than any outage a test makes (the longest is an API server restart).
RESUME_SECONDS = 600


class HasEnv(Protocol):
    env: Mapping[str, str]


class WatchFailed(AssertionError):
    """The watch can no longer say what happened: what it recorded is incomplete."""


def resource_path(env: Mapping[str, str], kind: str) -> str:
    """`pods` -> /api/v1/pods; `jobs.batch` -> /apis/batch/v1/jobs (the group's preferred
    version, the one kubectl would show)."""
    name, _, group = kind.partition(".")
    if not group:
        return f"/api/v1/{name}"
    done = subprocess.run(["kubectl", "get", "--raw", f"/apis/{group}"], env=dict(env), capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        raise WatchFailed(f"cannot watch {kind}: {done.stderr.strip()}")
    return f"/apis/{json.loads(done.stdout)['preferredVersion']['groupVersion']}/{name}"


class Watch:
    """Every change to one kind of object, recorded from before the action under test.

    A watch started before `pulumi up` sees objects that a TTL or a controller removes
    again, however slow the machine is between the action and the assertion; the server's
    own timestamps in the recorded objects (creation, completion, deletion) order them.
    """

    def __init__(self, cluster: HasEnv, kind: str, sleep: Callable[[float], None] = time.sleep):
        self.kind = kind
        self.events: list[tuple[str, dict]] = []
        self.resumes: list[str] = []  # why each stream ended before it was resumed
        self.failure: Optional[str] = None
        self._env = dict(cluster.env)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._process: Optional[subprocess.Popen] = None
        self._path = resource_path(self._env, kind)
        self._known: dict[str, dict] = {}  # uid -> the last version seen of each live object
        listed = self._list()
        for obj in listed.get("items") or []:
            self._append("ADDED", obj)
        self._version = listed["metadata"]["resourceVersion"]
        self._reader = threading.Thread(target=self._follow, daemon=True)
        self._reader.start()

    def _list(self) -> dict:
        done = subprocess.run(["kubectl", "get", "--raw", self._path], env=self._env, capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise WatchFailed(f"cannot list {self.kind}: {done.stderr.strip()}")
        listed = json.loads(done.stdout)
        kind_name, api_version = listed.get("kind", "").removesuffix("List"), listed.get("apiVersion", "")
        for obj in listed.get("items") or []:
            obj.setdefault("kind", kind_name)
            obj.setdefault("apiVersion", api_version)
        return listed

    def _append(self, kind: str, obj: dict) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if uid:
            if kind == "DELETED":
                self._known.pop(uid, None)
            else:
                self._known[uid] = obj
        with self._lock:
            self.events.append((kind, obj))

    def _relist(self, expired: str) -> bool:
        """After a 410: list again; resume from the list if nothing of the kind changed
        since the last version seen (True), else fail the watch (False)."""
        try:
            listed = self._list()
        except WatchFailed as error:
            self.resumes.append(f"relist after {expired}: {error}")
            return True  # the server is away again: the next resume tries again
        seen = int(self._version)
        items = listed.get("items") or []
        changed = [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in items
                   if int(o["metadata"]["resourceVersion"]) > seen]
        live = {o["metadata"].get("uid") for o in items}
        gone = [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for uid, o in self._known.items()
                if uid not in live]
        if changed or gone:
            self._fail(f"the watch of {self.kind} could not resume from resourceVersion {self._version} ({expired}), "
                       f"and in that gap {', '.join(changed)} changed and {', '.join(gone) or 'nothing'} went: "
                       f"what happened to them then is unknown")
            return False
        self.resumes.append(f"{expired}: relisted at {listed['metadata']['resourceVersion']}, nothing changed since "
                            f"{self._version}")
        self._version = listed["metadata"]["resourceVersion"]
        return True

    def _follow(self) -> None:
        away_since: Optional[float] = None
        while not self._stopped.is_set():
            received = self._stream()
            if self._stopped.is_set() or self.failure:
                return
            if received:
                away_since = None
            away_since = away_since or time.monotonic()
            if time.monotonic() - away_since > RESUME_SECONDS:
                self._fail(f"the watch of {self.kind} could not be resumed for {RESUME_SECONDS}s: "
                           f"{self.resumes[-1] if self.resumes else ''}")
                return
            self._sleep(0.5)

    def _stream(self) -> bool:
        """One watch request from the last resourceVersion; True if it delivered anything."""
        query = f"watch=1&allowWatchBookmarks=true&resourceVersion={quote(self._version)}"
        process = subprocess.Popen(["kubectl", "get", "--raw", f"{self._path}?{query}", "--request-timeout=0"],
                                   env=self._env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._process = process
        received = False
        decoder, buffer = json.JSONDecoder(), ""
        assert process.stdout is not None and process.stderr is not None
        for line in process.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break  # an object spread over more lines: read on
                buffer = buffer.lstrip()[end:]
                received = True
                if not self._record(event):
                    process.terminate()
                    break
        process.wait()
        if not self._stopped.is_set() and not self.failure:
            self.resumes.append(f"exit {process.returncode}: {process.stderr.read().strip() or 'stream ended'}")
        return received

    def _record(self, event: dict) -> bool:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            expired = f"{obj.get('code')} {obj.get('reason')}: {obj.get('message')}"
            if obj.get("code") != 410 or not self._relist(expired):
                if not self.failure:
                    self._fail(f"the watch of {self.kind} cannot resume from resourceVersion {self._version}: "
                               f"{expired}")
            return False
        self._version = (obj.get("metadata") or {}).get("resourceVersion") or self._version
        if kind != "BOOKMARK":
            self._append(kind, obj)
        return True

    def _fail(self, message: str) -> None:
        with self._lock:
            self.failure = message

    def _checked(self) -> list[tuple[str, dict]]:
        with self._lock:
            if self.failure:
                raise WatchFailed(self.failure)
            return list(self.events)

    def all(self) -> list[tuple[str, dict]]:
        return self._checked()

    def names(self, where) -> set[str]:
        """The names of objects that matched `where` in any recorded version."""
        return {obj["metadata"]["name"] for _, obj in self._checked() if where(obj)}

    def of(self, namespace: Optional[str], name: str) -> list[tuple[str, dict]]:
        return [(kind, obj) for kind, obj in self._checked()
                if obj["metadata"].get("namespace") == namespace and obj["metadata"]["name"] == name]

    def stop(self) -> Optional[str]:
        """Stop watching. A failure is not raised here: every look (`all`, `names`, `of`)
        raises it, so a gap before a look fails that look, and a gap after the last look
        (a module's teardown, a `destroy` ending the stream) bears on no assertion. The
        failure, if any, is returned for the log."""
        self._stopped.set()
        if self._process and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=30)
        self._reader.join(timeout=30)
        with self._lock:
            if self.failure:
                print(f"watch stopped after a gap no look met: {self.failure}")
            return self.failure
