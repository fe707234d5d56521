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

from kns_cli.passphrase import DEV_PASSPHRASE
from kns_testing import tokens
from kns_testing.program import PROJECT_FILES, ROOT, built_toolchain, ci_checkout

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
        return {r["urn"].rsplit("::", 1)[1] for r in resources if r["type"] in (tokens.JOB, tokens.SCHEDULE)}

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


# ---- the workflows that call them ---------------------------------------------------------

WORKFLOWS = ROOT / ".github" / "workflows"
# The names of a stack's secrets in an environment (write ones in the stack's, read ones in `preview`).
STACK_SECRETS = {"PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "KUBECONFIG_DATA"}


def load(name: str) -> dict:
    document = yaml.safe_load((WORKFLOWS / name).read_text())
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads `on:` as True
    return document


def step(job: dict, fragment: str) -> dict:
    (found,) = [s for s in job["steps"] if fragment in s.get("run", "")]
    return found


def secret_holders(document: dict) -> dict[str, list[str]]:
    """Where each secret is given: `workflow`, `job <name>` or `step <name>`."""
    where: dict[str, list[str]] = {}

    def note(env: dict, place: str) -> None:
        for key, value in (env or {}).items():
            if "secrets." in str(value):
                where.setdefault(key, []).append(place)
    note(document.get("env"), "workflow")
    for name, job in document["jobs"].items():
        note(job.get("env"), f"job {name}")
        for each in job.get("steps", []):
            note(each.get("env"), f"step {each.get('name', each.get('uses'))}")
    return where


def test_up_applies_main_on_push_converges_only_by_hand_and_holds_write_secrets_in_one_step():
    up = load("up.yml")
    assert set(up["on"]) == {"push", "workflow_dispatch"} and up["on"]["push"] == {"branches": ["main"]}
    assert up["on"]["workflow_dispatch"]["inputs"]["converge"] == {
        "description": up["on"]["workflow_dispatch"]["inputs"]["converge"]["description"],
        "type": "boolean", "default": False}
    job = up["jobs"]["up"]
    assert "github.ref == 'refs/heads/main'" in job["if"]
    assert job["concurrency"] == {"group": "up-${{ matrix.stack }}", "cancel-in-progress": False}
    assert job["environment"] == "${{ matrix.stack }}"
    assert job["steps"][0]["with"] == {"fetch-depth": 0}
    assert secret_holders(up) == {key: ["step Up"] for key in STACK_SECRETS}
    assert job["steps"].index(step(job, "./kns validate")) < job["steps"].index(step(job, "scripts/ci-up.sh"))
    (artifact,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert artifact["if"] == "${{ always() }}" and artifact["with"]["path"] == "build/logs/"
    assert up["permissions"] == {"contents": "read"} and "permissions" not in job


def test_recover_is_a_workflow_entry_in_the_stack_s_group_and_environment():
    recover, up = load("recover.yml"), load("up.yml")
    assert set(recover["on"]) == {"workflow_dispatch"}
    assert recover["on"]["workflow_dispatch"]["inputs"]["stack"]["required"] is True
    (job,) = recover["jobs"].values()
    # The same group string as up's, for the same stack: GitHub runs one of them at a time.
    assert job["concurrency"]["group"].replace("inputs.stack", "matrix.stack") == up["jobs"]["up"]["concurrency"]["group"]
    assert job["concurrency"]["cancel-in-progress"] is False
    assert job["environment"] == "${{ inputs.stack }}" and "github.ref == 'refs/heads/main'" in job["if"]
    assert 'scripts/ci-recover.sh "$STACK"' in step(job, "ci-recover")["run"]
    assert secret_holders(recover) == {key: ["step Recover"] for key in STACK_SECRETS}
    (artifact,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert artifact["if"] == "${{ always() }}"


@pytest.mark.parametrize("stack,ok", [("prod", True), ("nope", False), ("../Pulumi", False), ("-x", False)])
def test_recover_checks_the_stack_name_it_is_given(tmp_path, stack, ok):
    (job,) = load("recover.yml")["jobs"].values()
    (tmp_path / "Pulumi.prod.yaml").write_text("config: {}\n")
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step(job, "Pulumi.$STACK.yaml")["run"]], cwd=tmp_path,
                          env={**os.environ, "STACK": stack}, capture_output=True, text=True, timeout=60)
    assert (done.returncode == 0) is ok, done.stdout + done.stderr
    if not ok:
        assert f"::error::no stack named '{stack}'" in done.stdout


def test_drift_is_a_scheduled_check_of_its_own_that_applies_nothing():
    drift = load("drift.yml")
    assert set(drift["on"]) == {"schedule", "workflow_dispatch"}
    job = drift["jobs"]["drift"]
    assert job["environment"] == "preview" and "concurrency" not in job
    run = step(job, "scripts/ci-drift.sh")["run"]
    assert 'scripts/ci-drift.sh "$STACK" || status=$?' in run and 'exit "$status"' in run
    assert secret_holders(drift) == {key: ["step Drift check"] for key in STACK_SECRETS}
    text = (WORKFLOWS / "drift.yml").read_text()
    assert "ci-up.sh" not in text and "pulumi up" not in text and "--converge" not in text
    assert "drift" not in (WORKFLOWS / "up.yml").read_text().split("\njobs:")[1]


def test_a_workflow_runs_the_tests_as_ci_does():
    test = load("test.yml")
    assert set(test["on"]) == {"pull_request", "push"}
    (job,) = test["jobs"].values()
    assert step(job, ".ci/run")["run"].strip() == "bash .ci/run"


@pytest.mark.parametrize("converge,data", [("false", "apiVersion: v1\nkind: Config\n"), ("true", "")])
def test_the_up_step_hands_the_kubeconfig_over_as_a_private_file_and_converges_only_when_asked(tmp_path, converge, data):
    """The Up step's own script, run with a stand-in scripts/ci-up.sh that reports what it got."""
    job = load("up.yml")["jobs"]["up"]
    (tmp_path / "scripts").mkdir()
    report = tmp_path / "report"
    (tmp_path / "scripts" / "ci-up.sh").write_text(
        '#!/usr/bin/env bash\n{ echo "args: $*"; echo "data: ${KUBECONFIG_DATA:-unset}"; echo "kubeconfig: ${KUBECONFIG:-unset}";'
        ' if [ -n "${KUBECONFIG:-}" ]; then stat -c "mode: %a" "$KUBECONFIG"; cat "$KUBECONFIG"; fi; } > "$REPORT"\n')
    (tmp_path / "scripts" / "ci-up.sh").chmod(0o755)
    env = {**os.environ, "STACK": "prod", "CONVERGE": converge, "PULUMI_BACKEND_URL": "s3://state",
           "PULUMI_CONFIG_PASSPHRASE": "p", "KUBECONFIG_DATA": data, "RUNNER_TEMP": str(tmp_path), "REPORT": str(report)}
    env.pop("KUBECONFIG", None)
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step(job, "scripts/ci-up.sh")["run"]], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = report.read_text().splitlines()
    assert lines[0] == ("args: prod --converge" if converge == "true" else "args: prod")
    assert lines[1] == "data: unset"
    if data:
        assert lines[2:4] == [f"kubeconfig: {tmp_path}/kubeconfig", "mode: 600"] and "kind: Config" in lines
    else:
        assert lines[2] == "kubeconfig: unset"
    env["PULUMI_CONFIG_PASSPHRASE"] = ""
    missing = subprocess.run(["bash", "-eo", "pipefail", "-c", step(job, "scripts/ci-up.sh")["run"]], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "secrets missing in environment prod: PULUMI_CONFIG_PASSPHRASE" in missing.stdout


# ---- what the drift check calls drift (kns_cli/drift.py) ------------------------------------

from kns_cli import drift  # noqa: E402
from kns_testing.repos import GIT_ENV, git

STACK_URN = "urn:pulumi:prod::kns-platform::pulumi:pulumi:Stack::kns-platform-prod"
PROVIDER_URN = "urn:pulumi:prod::kns-platform::pulumi:providers:kubernetes::kns-prod-kubernetes"
QUOTA_URN = (f"urn:pulumi:prod::kns-platform::{tokens.JOB}${tokens.JOB_NAMESPACE}$"
             "kubernetes:core/v1:ResourceQuota::train-quota")


@pytest.mark.parametrize("steps,diagnostics,status,said", [
    ([("update", STACK_URN), ("update", PROVIDER_URN), ("refresh", QUOTA_URN), ("same", QUOTA_URN)], [], 0, []),
    ([("update", QUOTA_URN), ("update", STACK_URN)], [], 1,
     ["drift: prod: update train-quota (kubernetes:core/v1:ResourceQuota)"]),
    ([("create", QUOTA_URN)], [], 1, ["drift: prod: create train-quota (kubernetes:core/v1:ResourceQuota)"]),
    ([("update", QUOTA_URN)], [{"severity": "error", "message": "cannot reach the API server"}], 2,
     ["drift: prod: the preview failed: cannot reach the API server"]),
], ids=["outputs and provider only", "an object updated", "an object deleted by hand", "a failed preview"])
def test_drift_is_a_change_of_an_object(tmp_path, capsys, steps, diagnostics, status, said):
    path = tmp_path / "prod.json"
    path.write_text(json.dumps({"steps": [{"op": op, "urn": urn} for op, urn in steps], "diagnostics": diagnostics}))
    assert drift.main([str(path)]) == status
    assert capsys.readouterr().out.splitlines() == said


def test_a_preview_without_a_result_is_a_failure_not_a_pass(tmp_path, capsys):
    (tmp_path / "prod.json").write_text("")
    (tmp_path / "prod.entries-1.json").write_text(json.dumps({"steps": [{"op": "update", "urn": QUOTA_URN}]}))
    assert drift.main([str(tmp_path / "prod.json"), str(tmp_path / "prod.entries-1.json")]) == 2
    assert "drift: prod: the preview produced no result" in capsys.readouterr().out
