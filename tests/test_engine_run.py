"""What `make up` and `make preview` print (kns_cli/engine_run.py, kns_cli/summary.py):
the per-entry summary, not the engine's output, which goes to a log file; progress while
an update runs. Driven here by a stand-in engine that writes the event log the real one
writes (the steps of tests/fixtures/preview-dev.json, a real preview); the real engine on
the dev stack is tests/test_make_output.py."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kns_cli import engine_run, summary
from kns_testing.program import ROOT, site_steps

FIXTURE = ROOT / "tests" / "fixtures" / "preview-dev.json"
STEPS = json.loads(FIXTURE.read_text())["steps"]
ENGINE_LINE = "    ~ kubernetes:core/v1:ConfigMap kns-packing-config updating [diff: ~data]; the engine's own line"


def metadata(step: dict) -> dict:
    """The StepEventMetadata the engine logs for a step of its preview JSON."""
    old, new = step.get("oldState") or {}, step.get("newState") or {}
    return {"op": step["op"], "urn": step["urn"], "type": (new or old).get("type"),
            "old": old or None, "new": new or None, "diffs": step.get("diffReasons") or [],
            "detailedDiff": {k: {"diffKind": v.get("kind"), "inputDiff": True}
                             for k, v in (step.get("detailedDiff") or {}).items()}}


def event_log(action: str, steps: list[dict], extra: list[dict] = ()) -> str:
    events = [{"sequence": 0, "timestamp": 0, "preludeEvent": {"config": {}}}]
    if action == "preview":
        events += [{"resourcePreEvent": {"metadata": metadata(s), "planning": True}} for s in steps]
    else:  # an update's log has no planning events: only what it did
        for s in steps:
            events.append({"resourcePreEvent": {"metadata": metadata(s)}})
            events.append({"resOutputsEvent": {"metadata": metadata(s)}})
    events += list(extra)
    return "".join(json.dumps(e) + "\n" for e in events)


@pytest.fixture
def engine(tmp_path):
    """A stand-in `pulumi`: prints engine-like lines, writes the event log it is given, and
    exits with KNS_STUB_STATUS. The log it writes is in $KNS_STUB_EVENTS."""
    stub = tmp_path / "pulumi"
    stub.write_text(f"#!{sys.executable}\n" + '''
import os, shutil, sys
args = sys.argv[1:]
log = args[args.index("--event-log") + 1]
for i in range(int(os.environ.get("KNS_STUB_LINES", "3"))):
    print(os.environ["KNS_STUB_LINE"], i, flush=True)
if os.environ.get("KNS_STUB_PLANNED"):  # what `pulumi up` prints after its preview
    print("Resources:", "    + 20 to create", "    ~ 4 to update",
          "    %s unchanged" % (int(os.environ["KNS_STUB_PLANNED"]) - 24), "", sep=chr(10), flush=True)
if os.environ.get("KNS_STUB_CHUNKS"):  # written in three parts, cut inside lines, no last newline
    import time
    data = open(os.environ["KNS_STUB_EVENTS"]).read().rstrip(chr(10))
    third = len(data) // 3
    with open(log, "w") as stream:
        for part in (data[:third], data[third:2 * third], data[2 * third:]):
            stream.write(part)
            stream.flush()
            time.sleep(0.7)
else:
    shutil.copy(os.environ["KNS_STUB_EVENTS"], log)
print("stderr line", file=sys.stderr)
sys.exit(int(os.environ.get("KNS_STUB_STATUS", "0")))
''')
    stub.chmod(0o755)
    return stub


def run(engine, tmp_path, monkeypatch, action="preview", steps=STEPS, extra=(), status=0, verbose=False,
        tty=False, lines=3, args=()):
    events = tmp_path / "events.jsonl"
    events.write_text(event_log(action, steps, extra))
    monkeypatch.setenv("KNS_STUB_EVENTS", str(events))
    monkeypatch.setenv("KNS_STUB_STATUS", str(status))
    monkeypatch.setenv("KNS_STUB_LINES", str(lines))
    monkeypatch.setenv("KNS_STUB_LINE", ENGINE_LINE)
    monkeypatch.setenv("KNS_STUB_PLANNED", str(len(steps)) if action == "up" else "")
    out, err = io.StringIO(), io.StringIO()
    code = engine_run.run(action, "dev", [str(engine), action, *args], verbose=verbose, log_dir=tmp_path / "logs",
                          out=out, err=err, tty=tty)
    return code, out.getvalue(), err.getvalue()


def test_the_summary_is_printed_and_the_engine_output_goes_to_the_log(engine, tmp_path, monkeypatch):
    code, out, err = run(engine, tmp_path, monkeypatch)
    assert code == 0
    assert out.startswith("Preview of stack dev: 7 to create, 6 to update, 2 to replace, 7 to delete, 57 unchanged")
    assert "  +  job added-smoke " in out and "  -  schedule nightly-report " in out
    assert "Job kns-train-resnet/train-resnet (spec.template.spec.containers[0].resources.{limits.cpu, requests.cpu})" in out
    assert "=  5 entries unchanged (35 objects): etl-nightly-backfill, genomics-align, hourly-sync" in out
    assert ENGINE_LINE not in out + err
    logs = list((tmp_path / "logs").glob("dev-preview-*.log"))
    assert len(logs) == 1 and logs[0].read_text().count(ENGINE_LINE) == 3 and "stderr line" in logs[0].read_text()
    assert f"Engine output: {logs[0]} (VERBOSE=1 shows it here)" in out


def test_verbose_shows_the_engine_output_too(engine, tmp_path, monkeypatch, capfdbinary):
    code, out, _ = run(engine, tmp_path, monkeypatch, verbose=True)
    assert code == 0 and out.startswith("\nPreview of stack dev")
    assert capfdbinary.readouterr().out.decode().count(ENGINE_LINE) == 3


def test_the_output_is_one_line_per_changed_entry_or_part_and_bounded(engine, tmp_path, monkeypatch):
    """The bound docs/cli.md states: 16 lines, plus one per changed entry or platform part."""
    many = []
    for i in range(300):  # 300 new entries, each with the objects of added-smoke
        for step in STEPS:
            if "added-smoke" in step["urn"]:
                copy = json.loads(json.dumps(step).replace("added-smoke", f"added-{i:03}"))
                many.append(copy)
    steps = [s for s in STEPS if "added-smoke" not in s["urn"]] + many
    code, out, _ = run(engine, tmp_path, monkeypatch, steps=steps)
    lines = out.splitlines()
    entries, parts = summary.group_steps(steps)
    changed = sum(1 for g in [*entries, *parts] if g.changes)
    assert changed == 300 + 2 + 2
    assert len(lines) <= 16 + changed
    assert max(len(line) for line in lines) <= summary.WIDTH + len("  and 99 more objects")
    assert sum(1 for line in lines if line.startswith("  +  job added-")) == 300


def test_progress_in_ci_is_a_line_per_quarter(engine, tmp_path, monkeypatch):
    code, out, err = run(engine, tmp_path, monkeypatch, action="up")
    assert code == 0 and out.startswith("Update of stack dev:")
    planned = len(STEPS)
    lines = err.splitlines()
    assert lines, err
    assert all(line.startswith("applied ") and line.endswith("%)") for line in lines)
    assert lines[-1].endswith("(100%)") and len(lines) <= 4
    done = [int(line.split()[1]) for line in lines]
    assert done == sorted(done) and done[-1] == planned


def test_progress_on_a_terminal_is_one_line_rewritten(engine, tmp_path, monkeypatch):
    _, _, err = run(engine, tmp_path, monkeypatch, action="up", tty=True)
    planned = len(STEPS)
    assert err.startswith("\rapplied ") and err.endswith(f"applied {planned} of {planned} resources in dev\n")
    assert "\n" not in err[:-1]


def test_a_failed_run_shows_its_errors_and_status(engine, tmp_path, monkeypatch):
    error = {"diagnosticEvent": {"severity": "error", "prefix": "<{%fg 1%}>error: <{%reset%}>",
                           "message": "kns config has 2 problems:\n  kns:jobs[0].cpu: bad\n  kns:jobs[1].pool: unknown\n"}}
    code, out, _ = run(engine, tmp_path, monkeypatch, extra=[error], status=255)
    assert code == 255
    assert "Errors (1):\n  error: kns config has 2 problems:\n    kns:jobs[0].cpu: bad\n" in out
    assert "<{%" not in out


def test_a_run_that_fails_without_an_error_event_shows_the_end_of_its_log(engine, tmp_path, monkeypatch):
    code, out, _ = run(engine, tmp_path, monkeypatch, steps=[], status=1, lines=40)
    assert code == 1
    assert "The engine failed (exit 1); the end of its output:" in out
    assert out.count(ENGINE_LINE) == engine_run.TAIL_LINES - 1  # and pulumi's own last line


def test_policy_violations_are_listed_under_their_entry(engine, tmp_path, monkeypatch):
    urn = next(s["urn"] for s in STEPS if s["urn"].endswith("batch/v1:Job::added-smoke"))
    violation = {"policyEvent": {"resourceUrn": urn, "message": "Jobs need a deadline.\nJob added-smoke has none.",
                                 "color": "never", "policyName": "job-deadline", "policyPackName": "kns-guardrails",
                                 "policyPackVersion": "1", "enforcementLevel": "advisory"}}
    _, out, _ = run(engine, tmp_path, monkeypatch, extra=[violation])
    assert "Policy violations (1):\n  advisory job-deadline (added-smoke, added-smoke): Job added-smoke has none." in out


@pytest.mark.parametrize("action, args", [("up", ("--skip-preview",)), ("preview", ())])
def test_a_log_the_engine_writes_once_is_read_as_it_grows(engine, tmp_path, monkeypatch, action, args):
    """An update without a preview, or a preview, writes its log once: read while it is
    written, parts cut inside lines and a last line without its newline, it gives the
    summary the whole log gives."""
    (tmp_path / "whole").mkdir()
    (tmp_path / "grown").mkdir()
    last = [{"diagnosticEvent": {"severity": "warning", "message": "the log's last line\n"}}]
    whole = run(engine, tmp_path / "whole", monkeypatch, action=action, args=args, extra=last)
    monkeypatch.setenv("KNS_STUB_CHUNKS", "1")
    grown = run(engine, tmp_path / "grown", monkeypatch, action=action, args=args, extra=last)
    assert "the log's last line" in whole[1]
    assert grown[0] == whole[0] == 0

    def summary(out: str) -> list[str]:
        return [line for line in out.splitlines() if "build/logs" not in line and "/logs/" not in line]
    assert summary(grown[1]) == summary(whole[1]) and len(summary(whole[1])) > 3, (whole[1], grown[1])


def test_old_logs_are_pruned(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(engine_run.KEEP_LOGS + 5):
        path = logs / f"dev-up-{i:03}.log"
        path.write_text("x")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    engine_run.prune(logs)
    kept = sorted(p.name for p in logs.iterdir())
    assert len(kept) == engine_run.KEEP_LOGS and kept[0] == "dev-up-005.log"


def test_the_command_line_splits_at_the_double_dash(engine, tmp_path, monkeypatch):
    events = tmp_path / "events.jsonl"
    events.write_text(event_log("preview", STEPS))
    env = {**os.environ, "KNS_STUB_EVENTS": str(events), "KNS_STUB_LINE": ENGINE_LINE, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "kns_cli.engine_run", "preview", "--stack", "dev", "--log-dir",
                           str(tmp_path / "logs"), "--", str(engine), "preview", "--stack", "dev"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Preview of stack dev:") and ENGINE_LINE not in done.stdout


def test_compact_fields():
    assert summary.compact_fields(["spec.a.x", "spec.a.y"]) == "spec.a.{x, y}"
    assert summary.compact_fields(["data", "spec.x"]) == "data, spec.x"
    assert summary.compact_fields(["spec.hard.cpu"]) == "spec.hard.cpu"
    assert summary.compact_fields(["spec.ab", "spec.ac"]) == "spec.{ab, ac}"


FAKE_ENGINE = """
import signal, sys, time
from pathlib import Path
log = Path(sys.argv[sys.argv.index("--event-log") + 1])
log.write_text("")
def cancelled(signum, frame):
    print("engine: cancelled, finishing what is in flight", flush=True)
    sys.exit(255)
signal.signal(signal.SIGINT, cancelled)
Path(sys.argv[1]).write_text("started")
time.sleep(600)
"""


def test_a_sigint_to_the_run_s_process_group_ends_in_a_message_not_a_traceback(tmp_path):
    """Ctrl-C, or CI cancelling the step: the engine and this process both get SIGINT; the
    engine stops, this process reports it with what to run next and exits non-zero."""
    engine = tmp_path / "engine.py"
    engine.write_text(FAKE_ENGINE)
    started = tmp_path / "started"
    process = subprocess.Popen([sys.executable, "-m", "kns_cli.engine_run", "up", "--stack", "prod.entries-1",
                                "--log-dir", str(tmp_path / "logs"), "--", sys.executable, str(engine), str(started)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 255, (out, err)
    assert "Traceback" not in err + out and "KeyboardInterrupt" not in err + out, err
    assert "Interrupted: the engine stopped (exit 255); `./kns recover --stack prod`" in err
    assert "cancelled, finishing what is in flight" in next((tmp_path / "logs").iterdir()).read_text()


def test_a_run_adds_its_objects_per_op_to_a_total_over_stacks(engine, tmp_path, monkeypatch):
    """What a full run of several stacks sums into its one total line (kns_cli/fullrun.py)."""
    events = tmp_path / "events.jsonl"
    events.write_text(event_log("preview", STEPS))
    monkeypatch.setenv("KNS_STUB_EVENTS", str(events))
    monkeypatch.setenv("KNS_STUB_LINE", ENGINE_LINE)
    counted: dict[str, int] = {}
    headers = []
    for stack in ("dev", "dev.entries-0"):
        out = io.StringIO()
        assert engine_run.run("preview", stack, [str(engine), "preview"], verbose=False, log_dir=tmp_path / "logs",
                              out=out, err=io.StringIO(), tty=False, totals=counted) == 0
        headers.append(out.getvalue().splitlines()[0])
    one = summary.totals(STEPS)
    assert one and counted == {op: 2 * n for op, n in one.items()}
    assert all(header.endswith(f"({sum(one.values())} objects)") for header in headers)
    line = summary.render_total("preview", "dev", counted, 2, 3)
    assert line == (f"Preview of stack dev and its entry stacks, in all: {summary.counts_text(counted)} "
                    f"({2 * sum(one.values())} objects; 2 stacks ran, 3 skipped as unchanged)\n")


def test_on_a_site_each_changed_object_names_its_cluster():
    """The same LimitRange in an entry's namespace on the manager and on each worker: the
    summary says which cluster each is on (the provider it is applied through)."""
    steps = site_steps()
    text = summary.render_run("preview", "site", steps)
    assert all(f"LimitRange kns-train/kns-defaults on {cluster}" in text for cluster in ("site", "east", "west"))
    one_cluster = summary.render_run("preview", "site", steps[:2])
    assert "LimitRange kns-train/kns-defaults" in one_cluster and " on site" not in one_cluster
