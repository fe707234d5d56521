"""CI's apply (scripts/ci-up.sh, `./kns applied`): every merge applied, none skipped.

With stand-ins for ./kns and make, in a real git repository: the range a run applies starts
at the stack's record, whatever the push's "before" was, and only a complete apply moves
the record. Then on the real engine with a local backend (the dev stack, which renders to
a directory): a sequence of merges whose middle run never ran (GitHub cancelled it when a
third merge came) applies all of them, an entry added and removed in between is never
asked for, and a re-run of an older run applies nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kns_cli.preview import DEV_PASSPHRASE
from kns_testing.program import PROJECT_FILES, ROOT, built_toolchain, ci_checkout
from tests.test_changed import GIT_ENV, git

CI_UP = ROOT / "scripts" / "ci-up.sh"

# ---- with stand-ins ---------------------------------------------------------------------

STAND_IN = """#!/usr/bin/env bash
echo "$(basename "$0") $* [KNS_STACK=${KNS_STACK:-} KNS_REFRESH=${KNS_REFRESH:-}]" >> "$CALLS"
case "$1" in
  applied)
    if [ "${4:-}" = --record ]; then echo "$5" > "$RECORD"; elif [ -f "$RECORD" ]; then cat "$RECORD"; fi ;;
  changed) [ "$PLAN" = fail ] && { echo "kns changed: cannot compare" >&2; exit 2; }; echo "$PLAN" ;;
  up) [ "$(basename "$0")" = kns ] && exit "${UP_STATUS:-0}" ;;
  restack) exit "${RESTACK_STATUS:-0}" ;;
esac
[ "$(basename "$0")" = make ] && exit "${MAKE_STATUS:-0}"
exit 0
"""


class Runner:
    """A git repository with three commits (A, B, C on main) and the stand-ins."""

    def __init__(self, root: Path):
        self.repo = root / "repo"
        self.repo.mkdir(parents=True)
        git(self.repo, "init", "-q", "-b", "main")
        self.commits = []
        for name in "ABC":
            (self.repo / "f").write_text(name)
            git(self.repo, "add", "-A")
            git(self.repo, "commit", "-q", "-m", name)
            self.commits.append(git(self.repo, "rev-parse", "HEAD"))
        for name in ("kns", "make"):
            (root / name).write_text(STAND_IN)
            (root / name).chmod(0o755)
        self.root = root
        self.record = root / "record"

    def run(self, *args: str, plan: str = "none", up_status: int = 0, make_status: int = 0,
            restack_status: int = 0, at: str | None = None) -> tuple[int, list[str], str]:
        git(self.repo, "checkout", "-q", at or self.commits[-1])
        calls = self.root / "calls"
        calls.write_text("")
        done = subprocess.run(["bash", str(CI_UP), *args], cwd=self.repo, capture_output=True, text=True, timeout=60,
                              env={**GIT_ENV, "KNS": str(self.root / "kns"), "MAKE": str(self.root / "make"),
                                   "CALLS": str(calls), "PLAN": plan, "UP_STATUS": str(up_status),
                                   "MAKE_STATUS": str(make_status), "RESTACK_STATUS": str(restack_status),
                                   "RECORD": str(self.record)})
        return done.returncode, calls.read_text().splitlines(), done.stdout + done.stderr

    def recorded(self) -> str | None:
        return self.record.read_text().strip() if self.record.exists() else None


@pytest.fixture
def runner(tmp_path) -> Runner:
    return Runner(tmp_path)


def call(*words: str, stack: str = "", refresh: str = "") -> str:
    return f"{' '.join(words)} [KNS_STACK={stack} KNS_REFRESH={refresh}]"


READ = call("kns", "applied", "--stack", "prod")
RESTACK = call("kns", "restack", "--stack", "prod")
FULL = call("make", "up", stack="prod")


def record_of(commit: str) -> str:
    return call("kns", "applied", "--stack", "prod", "--record", commit)


def test_the_range_starts_at_the_record_not_at_the_pushs_before(runner):
    a, b, c = runner.commits
    runner.record.write_text(a)
    code, calls, out = runner.run("prod", plan="targeted added-smoke nightly-report")
    assert code == 0, out
    assert calls == [READ, call("kns", "changed", "--stack", "prod", a, c, "--format", "up-plan"),
                     call("kns", "up", "--stack", "prod", "added-smoke", "nightly-report"), record_of(c)]
    assert f"targeted up of stack prod since {a}: added-smoke nightly-report" in out
    assert runner.recorded() == c


@pytest.mark.parametrize("status", [1, 3], ids=["failed", "refused then full"])
def test_only_a_complete_apply_moves_the_record(runner, status):
    a, b, c = runner.commits
    runner.record.write_text(a)
    code, calls, out = runner.run("prod", plan="targeted x", up_status=status)
    if status == 1:
        assert code == 1 and calls[-1] == call("kns", "up", "--stack", "prod", "x"), out
        assert runner.recorded() == a and "the next run applies these entries again" in out
        # The next push (or a re-run) starts from the same record: x is asked for again.
        code, calls, out = runner.run("prod", plan="targeted x")
        assert code == 0 and calls[1] == call("kns", "changed", "--stack", "prod", a, c, "--format", "up-plan"), out
    else:
        assert code == 0 and calls[-3:] == [RESTACK, FULL, record_of(c)], out
    assert runner.recorded() == c
    runner.record.write_text(a)
    code, calls, out = runner.run("prod", plan="full shared sections changed: kns:queues", make_status=2)
    assert code == 2 and calls[-1] == FULL and runner.recorded() == a, out


@pytest.mark.parametrize("recorded,why", [
    (None, "no complete apply of it is recorded"),
    ("f" * 40, f"its last applied commit {'f' * 40} is not in this clone"),
], ids=["no record", "unknown commit"])
def test_the_full_up_runs_without_a_usable_record(runner, recorded, why):
    if recorded:
        runner.record.write_text(recorded)
    code, calls, out = runner.run("prod", plan="targeted never-asked")
    assert code == 0 and calls == [READ, RESTACK, FULL, record_of(runner.commits[-1])], out
    assert f"ci-up: full up of stack prod: {why}" in out


def test_a_rewritten_history_runs_the_full_up(runner):
    a, b, c = runner.commits
    git(runner.repo, "checkout", "-q", "-b", "other", a)
    (runner.repo / "f").write_text("D")
    git(runner.repo, "commit", "-q", "-am", "D")
    d = git(runner.repo, "rev-parse", "HEAD")
    runner.record.write_text(c)
    code, calls, out = runner.run("prod", at=d)
    assert code == 0 and calls[1:] == [RESTACK, FULL, record_of(d)], out
    assert f"{c} is not an ancestor of {d}" in out


def test_an_older_run_never_rolls_back_and_an_applied_head_does_nothing(runner):
    a, b, c = runner.commits
    runner.record.write_text(c)
    for at in (b, c):
        code, calls, out = runner.run("prod", plan="targeted x", at=at)
        assert code == 0 and calls == [READ] and runner.recorded() == c, out
    assert "an older run never rolls back" in runner.run("prod", at=b)[2]


def test_an_unchanged_stack_moves_the_record_and_a_shared_change_runs_the_full_up(runner):
    a, b, c = runner.commits
    runner.record.write_text(a)
    code, calls, out = runner.run("prod", plan="none")
    assert code == 0 and calls[-1] == record_of(c) and "did not change" in out, out
    for plan, why in (("full shared sections changed: kns:queues, program", "shared sections changed: kns:queues"),
                      ("fail", f"./kns changed could not compare {a} with {c}")):
        runner.record.write_text(a)
        code, calls, out = runner.run("prod", plan=plan)
        assert code == 0 and calls[-3:] == [RESTACK, FULL, record_of(c)], out
        assert f"ci-up: full up of stack prod: {why}" in out


def test_converge_is_a_refreshed_full_up_and_a_refused_restack_stops_everything(runner):
    code, calls, out = runner.run("prod", "--converge")
    assert code == 0 and calls == [RESTACK, call("make", "up", stack="prod", refresh="true"),
                                   record_of(runner.commits[-1])], out
    for args in (("prod", "--converge"), ("prod",)):
        runner.record.unlink(missing_ok=True)
        code, calls, out = runner.run(*args, restack_status=2)
        assert code == 2 and calls[-1] == RESTACK and runner.recorded() is None, out
    code, _, out = runner.run("prod", "--bogus")
    assert code == 2 and "usage" in out


# ---- the real engine ----------------------------------------------------------------------

def job(name: str) -> dict:
    return {"name": name, "user": "bob", "image": "busybox:1.37", "command": ["sh", "-c", "true"],
            "cpu": 1, "memory": 256}


class Site:
    """A git clone of the project whose main branch CI applies with the real ./kns and make."""

    def __init__(self, root: Path, bin_dir: str):
        self.repo = root / "site"
        self.repo.mkdir()
        for name in (*PROJECT_FILES, "Pulumi.dev.yaml"):
            source = ROOT / name
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, self.repo / name)
        ci_checkout(self.repo)
        state = root / "state"
        state.mkdir()
        self.env = {**GIT_ENV, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PULUMI_BACKEND_URL": f"file://{state}",
                    "PULUMI_CONFIG_PASSPHRASE": DEV_PASSPHRASE, "KNS_PARALLEL_STACKS": "1"}
        self.env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)

    def merge(self, message: str, change=None) -> str:
        if change is not None:
            path = self.repo / "Pulumi.dev.yaml"
            document = yaml.safe_load(path.read_text())
            change(document["config"]["kns:jobs"])
            path.write_text(yaml.safe_dump(document, sort_keys=False))
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.repo, "rev-parse", "HEAD")

    def ci_up(self, at: str) -> subprocess.CompletedProcess:
        git(self.repo, "checkout", "-q", at)
        return subprocess.run(["bash", "scripts/ci-up.sh", "dev"], cwd=self.repo, env=self.env, capture_output=True,
                              text=True, timeout=1800)

    def state_entries(self) -> set[str]:
        exported = subprocess.run(["pulumi", "stack", "export", "--stack", "dev", "--non-interactive"], cwd=self.repo,
                                  env=self.env, capture_output=True, text=True, check=True)
        resources = json.loads(exported.stdout)["deployment"].get("resources") or []
        return {r["urn"].rsplit("::", 1)[1] for r in resources if r["type"] in ("kns:workload:Job", "kns:workload:Schedule")}

    def rendered_namespaces(self) -> set[str]:
        return {doc["metadata"]["name"] for path in (self.repo / "build" / "manifests" / "dev").rglob("*.yaml")
                for doc in yaml.safe_load_all(path.read_text()) if doc and doc.get("kind") == "Namespace"}

    def recorded(self) -> str:
        done = subprocess.run(["./kns", "applied", "--stack", "dev"], cwd=self.repo, env=self.env, capture_output=True,
                              text=True, check=True)
        return done.stdout.strip()


def test_a_cancelled_middle_run_is_applied_by_the_next_and_an_entry_added_and_removed_is_never_asked(tmp_path):
    site = Site(tmp_path, built_toolchain())
    a = site.merge("A: the dev stack")
    first = site.ci_up(a)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "full up of stack dev: no complete apply of it is recorded" in first.stdout
    assert site.recorded() == a
    before = site.state_entries()
    assert "added-b" not in before and "train-resnet" in before

    # B's run never runs: GitHub cancels a pending run of the group when C's push comes.
    b = site.merge("B: two jobs added", lambda jobs: jobs.extend([job("added-b"), job("short-lived")]))
    c = site.merge("C: one more, and short-lived removed again",
                   lambda jobs: (jobs.append(job("added-c")), jobs.remove(job("short-lived"))))
    third = site.ci_up(c)
    out = third.stdout + third.stderr
    assert third.returncode == 0, out
    assert f"targeted up of stack dev since {a}: added-b added-c" in out
    assert "short-lived" not in out
    assert site.state_entries() == before | {"added-b", "added-c"}
    assert {"kns-added-b", "kns-added-c"} <= site.rendered_namespaces()
    assert "kns-short-lived" not in site.rendered_namespaces()
    assert site.recorded() == c

    # A re-run of B's run (by hand, later) applies nothing and keeps C's record.
    rerun = site.ci_up(b)
    assert rerun.returncode == 0 and "nothing to apply (an older run never rolls back)" in rerun.stdout, rerun.stderr
    assert site.recorded() == c and site.state_entries() == before | {"added-b", "added-c"}
