"""The e2e tests' watch (kns_testing/watch.py) against a stand-in kubectl that plays an API
server whose watch streams end: it resumes from the last resourceVersion it saw (bookmarks
included) and loses nothing; a resume the server refuses (410 Gone) fails the next look
at the watch and its stop, never a silent "nothing happened"."""

from __future__ import annotations

import json
import stat
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kns_testing.watch import Watch, WatchFailed

# The stand-in: answers discovery and the list, then serves the watch requests of SCRIPT in
# turn (one per request), logging the query of each.
FAKE = r'''#!PYTHON
import json, os, sys
from pathlib import Path
state = Path(os.environ["FAKE_STATE"])
path = sys.argv[sys.argv.index("--raw") + 1]
with open(state / "requests", "a") as log:
    log.write(path + "\n")
if path == "/apis/batch":
    print(json.dumps({"preferredVersion": {"groupVersion": "batch/v1"}}))
    sys.exit(0)
if "watch=1" not in path:
    lists = json.loads(os.environ.get("FAKE_LISTS", "[]")) or [
        {"resourceVersion": "10", "items": [{"metadata": {"name": "before", "namespace": "a", "uid": "u-before",
                                                          "resourceVersion": "9"}}]}]
    call = len(list(state.glob("list-*")))
    (state / f"list-{call}").touch()
    answer = lists[min(call, len(lists) - 1)]
    print(json.dumps({"kind": "JobList", "apiVersion": "batch/v1", "metadata": {"resourceVersion": answer["resourceVersion"]},
                      "items": answer["items"]}))
    sys.exit(0)
script = json.loads(os.environ["FAKE_SCRIPT"])
turn = len(list(state.glob("turn-*")))
(state / f"turn-{turn}").touch()
step = script[min(turn, len(script) - 1)]
for event in step.get("events", []):
    print(json.dumps(event), flush=True)
if step.get("hold"):
    import time
    time.sleep(600)
if step.get("stderr"):
    print(step["stderr"], file=sys.stderr)
sys.exit(step.get("exit", 0))
'''


def job(name: str, version: str) -> dict:
    return {"kind": "Job", "metadata": {"name": name, "namespace": "a", "uid": f"u-{name}", "resourceVersion": version}}


BEFORE = {"metadata": {"name": "before", "namespace": "a", "uid": "u-before", "resourceVersion": "9"}}
GONE = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                    "message": "too old resource version: 12 (40)"}}


def start(tmp_path: Path, script: list[dict], lists: list[dict] | None = None) -> tuple[Watch, Path]:
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE.replace("PYTHON", sys.executable))
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_STATE": str(state), "FAKE_SCRIPT": json.dumps(script),
           "FAKE_LISTS": json.dumps(lists or [])}
    return Watch(SimpleNamespace(env=env), "jobs.batch", sleep=lambda _: None), state


def wait_for(what, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "the watch never got there"
        time.sleep(0.05)


def watch_queries(state: Path) -> list[str]:
    return [line for line in (state / "requests").read_text().splitlines() if "watch=1" in line]


def test_a_watch_resumes_where_its_stream_ended_and_loses_nothing(tmp_path):
    script = [
        {"events": [{"type": "ADDED", "object": job("one", "11")}, {"type": "MODIFIED", "object": job("one", "12")}]},
        {"events": [{"type": "BOOKMARK", "object": {"kind": "Job", "metadata": {"resourceVersion": "20"}}}],
         "stderr": "http2: client connection lost", "exit": 1},
        {"stderr": "The connection to the server 127.0.0.1:6443 was refused", "exit": 1},
        {"events": [{"type": "DELETED", "object": job("one", "21")}, {"type": "ADDED", "object": job("two", "22")}]},
        {"events": [{"type": "ADDED", "object": job("three", "23")}], "hold": True},
    ]
    watch, state = start(tmp_path, script)
    wait_for(lambda: "three" in watch.names(lambda obj: True))
    watch.stop()
    assert [(kind, obj["metadata"]["name"]) for kind, obj in watch.all()] == [
        ("ADDED", "before"), ("ADDED", "one"), ("MODIFIED", "one"), ("DELETED", "one"), ("ADDED", "two"),
        ("ADDED", "three")]
    assert watch.all()[0][1]["kind"] == "Job"  # listed items carry their kind as watched ones do
    queries = watch_queries(state)
    assert [q.split("resourceVersion=")[1] for q in queries[:5]] == ["10", "12", "20", "20", "22"]
    assert all(q.startswith("/apis/batch/v1/jobs?watch=1&allowWatchBookmarks=true") for q in queries)
    assert "http2: client connection lost" in watch.resumes[1] and "refused" in watch.resumes[2]


def test_a_restarted_server_s_410_is_resumed_from_a_list_that_proves_nothing_changed(tmp_path):
    """A restarted API server's watch cache starts at the cluster's current version, so it
    refuses an older one though nothing of the kind changed: the list proves it."""
    lists = [{"resourceVersion": "10", "items": [BEFORE]},
             {"resourceVersion": "40", "items": [BEFORE, job("one", "12")]}]
    script = [{"events": [{"type": "ADDED", "object": job("one", "12")}], "exit": 0},
              {"events": [GONE]},
              {"events": [{"type": "ADDED", "object": job("two", "41")}], "hold": True}]
    watch, state = start(tmp_path, script, lists)
    wait_for(lambda: "two" in watch.names(lambda obj: True))
    watch.stop()
    assert [q.split("resourceVersion=")[1] for q in watch_queries(state)[:3]] == ["10", "12", "40"]
    assert any("relisted at 40, nothing changed since 12" in reason for reason in watch.resumes)


@pytest.mark.parametrize("relisted,what", [
    ([BEFORE, job("one", "30")], "a/one changed"),   # changed while the watch could not follow
    ([BEFORE], "a/one went"),                        # deleted then
])
def test_a_watch_that_cannot_resume_without_a_gap_fails_the_test(tmp_path, relisted, what):
    lists = [{"resourceVersion": "10", "items": [BEFORE]}, {"resourceVersion": "40", "items": relisted}]
    watch, _ = start(tmp_path, [{"events": [{"type": "ADDED", "object": job("one", "12")}], "exit": 0},
                                {"events": [GONE], "hold": True}], lists)
    wait_for(lambda: watch.failure is not None)
    with pytest.raises(WatchFailed, match="could not resume from resourceVersion 12 .*410 Expired"):
        watch.names(lambda obj: True)
    assert what in watch.failure, watch.failure
    with pytest.raises(WatchFailed):
        watch.of("a", "one")
    assert what in watch.stop()  # stopping reports the gap; looks after it still fail
    with pytest.raises(WatchFailed):
        watch.all()
