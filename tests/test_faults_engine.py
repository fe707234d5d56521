"""Faults in the engine's path, end to end on a local control plane (docs/operations.md):
an `up` killed part-way (SIGINT, as Ctrl-C or a CI cancel; SIGKILL, as a runner timeout),
at points taken from the engine's own event log (after its k-th resource operation), then
`./kns recover`; and the API server restarted while an `up` runs, then a second `up`.

After each, the stack must have converged: the platform's objects in the cluster (every
kind the API server lists, label `kns.io/cluster`, not a controller's child) are exactly
the objects in the stack's state, each entry of the config has its objects and each
removed entry none, a changed entry has its new values, and `pulumi preview
--expect-no-changes` is clean. Each case runs its own stack (its own cluster name, entry
names and nodes) on one shared control plane, so no case can see another's objects.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from kns_cli.engine import engine_settings
from kns_testing.cluster import Cluster, local_cluster, node_manifest, script
from kns_testing.faults import Component, processes_under
from kns_testing.pace import slack
from kns_testing.program import ROOT, ci_checkout, engine_project
from kns_testing.stacks import Stack

PASSPHRASE = "kns-faults"
# Engine operations that change the cluster, as the event log names them.
CHANGES = {"create", "update", "delete", "replace", "create-replacement", "delete-replaced"}
LABEL = "kns.io/cluster"
RESULTS = ROOT / "build" / "faults"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("faults-cluster")) as live:
        yield live


def entries(prefix: str, names: list[str], changed: frozenset[str] = frozenset()) -> tuple[list[dict], list[dict]]:
    """Jobs, namespaces and schedules named `<prefix>-<name>`; a changed one asks for more."""
    jobs, schedules = [], []
    for name in names:
        full, more = f"{prefix}-{name}", name in changed
        kind = name.split("-")[0]
        if kind == "job":
            jobs.append({"name": full, "user": "bob", "image": "busybox:1.37", "cpu": "500m" if more else "250m",
                         "memory": 128, "annotations": {"kwok.x-k8s.io/run-for": "24h"}})
        elif kind == "ns":
            jobs.append({"name": full, "type": "namespace", "user": "eve",
                         "quota": {"pods": 4 if more else 2, "requests.cpu": 1, "limits.cpu": 2}})
        else:
            schedules.append({"name": full, "user": "bob", "image": "busybox:1.37", "schedule": "0 3 * * *",
                              "cpu": "200m" if more else "100m", "memory": 64})
    return jobs, schedules


def stack_config(case: str, kubeconfig: Path, names: list[str], changed: frozenset[str] = frozenset()) -> dict:
    jobs, schedules = entries(case, names, changed)
    return {
        "kns:cluster": {"name": f"kns-{case}", "kubeconfig": str(kubeconfig), "namespacePrefix": "f-"},
        "kns:nodePools": [{"name": "vcluster", "role": "vcluster", "nodes": [f"{case}-vc"]},
                          {"name": "compute", "role": "compute", "nodes": [f"{case}-cpu"]}],
        "kns:packingScheduler": {"enabled": False},
        "kns:jobs": jobs,
        "kns:schedules": schedules,
    }


@dataclass
class Case:
    """One stack of the shared control plane and how it runs the engine."""

    name: str
    stack: Stack
    cluster: Cluster
    engine: dict[str, str]

    def write(self, names: list[str], changed: frozenset[str] = frozenset()) -> None:
        config = stack_config(self.name, self.cluster.kubeconfig, names, changed)
        (self.stack.root / "Pulumi.local.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
        self.names = names

    def env(self) -> dict[str, str]:
        return {**self.stack.env, **self.engine, "PULUMI_DEBUG_COMMANDS": "true"}

    def up(self, *args: str) -> subprocess.CompletedProcess:
        return self.pulumi("up", "--yes", "--skip-preview", *args)

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.stack.root, env=self.env(),
                              capture_output=True, text=True, timeout=900)
        if check and done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        return done

    def planned_changes(self) -> int:
        """How many cluster-changing operations an `up` of the current config will do."""
        preview = json.loads(self.pulumi("preview", "--json").stdout)
        return sum(1 for step in preview.get("steps") or [] if step.get("op") in CHANGES
                   and not str(step.get("urn", "")).rsplit("::", 2)[-2].split("$")[-1].startswith(("kns:", "pulumi:")))

    def up_interrupted(self, sig: int, after: int, timeout: float = 600) -> tuple[int, int, str]:
        """Start `up`, and signal its process group once its event log has reported `after`
        completed cluster-changing operations; (operations seen, exit status, output)."""
        events = self.stack.root / "events.jsonl"
        events.unlink(missing_ok=True)
        output = self.stack.root / "up.log"
        with open(output, "w") as out:
            process = subprocess.Popen(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive",
                                        "--event-log", str(events)], cwd=self.stack.root, env=self.env(),
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        seen, read = 0, 0
        deadline = time.monotonic() + timeout
        try:
            while seen < after:
                assert process.poll() is None, f"up ended after {seen} operations, before the {after}th"
                assert time.monotonic() < deadline, f"up did not reach {after} operations in {timeout}s"
                text = events.read_text() if events.exists() else ""
                complete = text[:text.rfind("\n") + 1]
                for line in complete[read:].splitlines():
                    seen += completed_change(line)
                read = len(complete)
                time.sleep(0.02)
            os.killpg(process.pid, sig)
            status = process.wait(timeout=timeout)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        reap(self.stack.root)
        return seen, status, output.read_text()

    def recover(self) -> subprocess.CompletedProcess:
        return subprocess.run([str(ROOT / "kns"), "recover", "--stack", "local", "--project-dir", str(self.stack.root)],
                              env=self.env(), capture_output=True, text=True, timeout=1200)


def completed_change(line: str) -> int:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return 0
    metadata = (event.get("resOutputsEvent") or {}).get("metadata") or {}
    kind = str(metadata.get("type", ""))
    return int(metadata.get("op") in CHANGES and kind.startswith("kubernetes:"))


def no_crash(output: str) -> bool:
    """Neither the engine, the program nor a plugin crashed: no Go panic, no plugin that
    exited prematurely, no Python traceback."""
    return not any(sign in output for sign in ("panic:", "exited prematurely", "Traceback", "SIGSEGV"))


def reap(root: Path) -> None:
    """Kill what a SIGKILLed engine can leave behind (its plugins run in its process group,
    which is gone, but a program or provider started elsewhere would hold the project)."""
    for pid in processes_under(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def new_case(cluster: Cluster, tmp_path_factory, name: str, engine: dict[str, str]) -> Case:
    root = tmp_path_factory.mktemp(name) / "kns-platform"
    env = engine_project(root, script("toolchain.sh"), PASSPHRASE, base_env=cluster.env)
    cluster.apply(node_manifest(f"{name}-vc", 16, 0), node_manifest(f"{name}-cpu", 16, 0))
    stack = Stack(root, env)
    stack.pulumi("stack", "init", "local")
    return Case(name, stack, cluster, engine)


def listable_types(cluster: Cluster) -> list[str]:
    done = cluster.kubectl("api-resources", "--verbs=list", "-o", "name")
    return sorted(done.stdout.split())


def platform_objects(case: Case) -> set[tuple[str, str]]:
    """(type token, id) of every object labelled for the case's cluster that no controller
    made: asked of every kind the API server lists, not only those the platform registers.
    Nodes are left out: the stack labels them (a node patch), it does not own them."""
    found = set()
    done = case.cluster.kubectl("get", ",".join(listable_types(case.cluster)), "--all-namespaces",
                                "-l", f"{LABEL}=kns-{case.name}", "-o", "json")
    for obj in json.loads(done.stdout)["items"]:
        meta = obj["metadata"]
        if meta.get("ownerReferences") or obj["kind"] == "Node":
            continue
        group, _, version = obj["apiVersion"].rpartition("/")
        oid = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        found.add((f"kubernetes:{group or 'core'}/{version}:{obj['kind']}", oid))
    return found


def state(case: Case) -> list[dict]:
    done = case.pulumi("stack", "export")
    return json.loads(done.stdout)["deployment"].get("resources") or []


def assert_converged(case: Case, removed: list[str] = (), changed: frozenset[str] = frozenset()) -> None:
    resources = state(case)
    urns = [r["urn"] for r in resources]
    assert len(urns) == len(set(urns)), "a resource is in the state twice"
    assert not any(r.get("pendingOperations") for r in resources)
    held = {(r["type"], r["id"]) for r in resources
            if r["type"].startswith("kubernetes:") and not r["type"].endswith("Patch")}
    live = platform_objects(case)
    assert live == held, f"in the cluster, not in the state: {sorted(live - held)}; in the state, not in the cluster: {sorted(held - live)}"
    for node in (f"{case.name}-vc", f"{case.name}-cpu"):
        assert case.cluster.get("node", node)["metadata"]["labels"].get(LABEL) == f"kns-{case.name}"
    names = {r["urn"].rsplit("::", 1)[1] for r in resources}
    for name in case.names:
        full = f"{case.name}-{name}"
        expected = {full, f"{full}-defaults", f"{full}-quota", f"{full}-runner"}
        assert expected <= names, f"entry {full} lacks {sorted(expected - names)}"
    for name in removed:
        full = f"{case.name}-{name}"
        assert not any(n == full or n.startswith(f"{full}-") for n in names), f"removed entry {full} is still in the state"
        assert not case.cluster.kubectl("get", "namespace", f"f-{full}", "--ignore-not-found", "-o", "name").stdout.strip()
    for name in changed:
        full = f"{case.name}-{name}"
        if name.startswith("ns"):
            quotas = case.cluster.get("resourcequotas", "-n", f"f-{full}")["items"]
            assert [quota["spec"]["hard"]["pods"] for quota in quotas] == ["4"]
        elif name.startswith("job"):
            job = case.cluster.get("job", full, "-n", f"f-{full}")
            assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
        else:
            cron = case.cluster.get("cronjob", full, "-n", f"f-{full}")
            assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "200m"
    case.pulumi("preview", "--expect-no-changes")


FIRST = ["job-a", "job-b", "ns-a", "ns-b", "cron-a", "cron-b"]
# The update: two entries removed, two changed, two added.
SECOND = ["job-a", "ns-a", "cron-a", "cron-b", "job-c", "ns-c"]
REMOVED = ["job-b", "ns-b"]
CHANGED = frozenset({"ns-a", "cron-a"})
TUNED = engine_settings()
CHECKPOINTS = {**TUNED, "PULUMI_SKIP_CHECKPOINTS": "false"}

# (case, scenario, signal, fraction of the planned operations before the signal, engine)
KILLS = [
    ("fi1", "fresh", signal.SIGINT, 0.1, TUNED),
    ("fi2", "fresh", signal.SIGINT, 0.6, TUNED),
    ("fk1", "fresh", signal.SIGKILL, 0.1, TUNED),
    ("fk2", "fresh", signal.SIGKILL, 0.6, TUNED),
    ("ui1", "update", signal.SIGINT, 0.3, TUNED),
    ("uk1", "update", signal.SIGKILL, 0.3, TUNED),
    ("uk2", "update", signal.SIGKILL, 0.8, TUNED),
    ("ck1", "fresh", signal.SIGKILL, 0.5, CHECKPOINTS),
    ("ck2", "update", signal.SIGKILL, 0.5, CHECKPOINTS),
    # The update is abandoned: the config goes back before recovery. The state written
    # before the update never held what it created, which only the sweep can find.
    ("rk1", "revert", signal.SIGKILL, 0.9, TUNED),
]


@contextmanager
def recorded(name: str) -> Iterator[dict]:
    """What bench/ and docs/benchmarks.md report (kills tried, converged, time to converge),
    written however the case ends: `converged` stays false, with the error, unless the case
    passed, so a failed case never leaves an older success behind."""
    result: dict = {"converged": False}
    try:
        yield result
    except BaseException as error:
        result["error"] = f"{type(error).__name__}: {str(error)[:2000]}"
        raise
    finally:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))


@pytest.mark.parametrize("name,scenario,sig,fraction,engine", KILLS, ids=[k[0] for k in KILLS])
def test_an_interrupted_up_converges_after_kns_recover(cluster, tmp_path_factory, name, scenario, sig, fraction, engine):
    with recorded(name) as result:
        result.update(scenario=scenario, signal=signal.Signals(sig).name,
                      checkpoints=engine["PULUMI_SKIP_CHECKPOINTS"] != "true")
        case = new_case(cluster, tmp_path_factory, name, engine)
        case.write(FIRST)
        removed, changed = [], frozenset()
        if scenario != "fresh":
            case.up()
            case.write(SECOND, CHANGED)
            removed, changed = REMOVED, CHANGED
        planned = result["planned"] = case.planned_changes()
        after = max(1, round(fraction * planned))
        seen, status, output = case.up_interrupted(sig, after)
        result["killed_after"] = seen
        assert status != 0, f"the interrupted up reported success:\n{output[-2000:]}"
        assert no_crash(output), output[-4000:]
        if scenario == "revert":
            case.write(FIRST)
            removed, changed = sorted(set(SECOND) - set(FIRST)), frozenset()
        started = time.monotonic()
        done = case.recover()
        result["recover_seconds"] = round(time.monotonic() - started, 1)
        assert done.returncode == 0, f"kns recover failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        assert "recovered" in done.stderr
        swept = result["swept"] = int(re.search(r"step 4/5: (\d+) object\(s\) not in the stack deleted",
                                                done.stderr).group(1))
        result["stale_lock"] = "stale lock" in done.stderr
        if scenario == "revert":
            assert swept > 0, "the abandoned update's objects were not found by the sweep"
        assert_converged(case, removed, changed)
        result["converged"] = True


# GitHub's cancel of a step (a cancelled run, or `timeout-minutes` reached): SIGINT, SIGTERM
# 7.5 s later, SIGKILL 2.5 s after that. A lost runner is SIGKILL at once.
GITHUB_CANCEL = ((signal.SIGINT, 7.5), (signal.SIGTERM, 2.5), (signal.SIGKILL, 0))
RUNNER_LOST = ((signal.SIGKILL, 0),)


@pytest.mark.parametrize("name,signals,checkpoints", [("gc1", GITHUB_CANCEL, False), ("gk1", RUNNER_LOST, False),
                                                      ("gc2", GITHUB_CANCEL, True)],
                         ids=["cancel", "runner lost", "cancel with checkpoints"])
def test_ci_s_apply_cancelled_mid_way_is_recovered_by_the_recover_workflow_s_command(cluster, tmp_path_factory, name,
                                                                                     signals, checkpoints):
    """scripts/ci-up.sh in a checkout, with the engine settings CI runs (checkpoints skipped),
    signalled as GitHub stops a step once the first of the case's objects is on the cluster.
    Whatever it left (a lock, now of a runner that is gone: another host), the recover
    workflow's command (scripts/ci-recover.sh) leaves state, cluster and lock consistent and
    records the commit, so the next push's apply has nothing left to do. With checkpoints
    written too (what docs/ci.md weighs against their cost): what each leaves goes to
    build/faults/<case>.json."""
    with recorded(name) as result:
        result.update(scenario="ci", signal="+".join(signal.Signals(sig).name for sig, _ in signals),
                      checkpoints=checkpoints)
        ci_cancelled_and_recovered(cluster, tmp_path_factory, name, signals, checkpoints, result)
        result["converged"] = True


def ci_cancelled_and_recovered(cluster, tmp_path_factory, name, signals, checkpoints, result) -> None:
    case = new_case(cluster, tmp_path_factory, name, TUNED)
    case.write(FIRST)
    commit = ci_checkout(case.stack.root)
    env = {**case.stack.env, "KNS_PARALLEL_STACKS": "1", "PULUMI_SKIP_CHECKPOINTS": "false" if checkpoints else "true"}
    root = case.stack.root
    with open(root / "ci-up.log", "w") as out:
        process = subprocess.Popen(["bash", "scripts/ci-up.sh", "local"], cwd=root, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        cluster.wait(lambda: process.poll() is not None or case.cluster.kubectl(
            "get", "namespaces", "-l", f"{LABEL}=kns-{name}", "-o", "name").stdout.strip(), slack(floor=300), every=0.1,
            message="the apply's first namespace")
        assert process.poll() is None, f"the apply ended before it was cancelled:\n{(root / 'ci-up.log').read_text()[-3000:]}"
        for sig, grace in signals:
            if process.poll() is None:
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=grace or 60)
            except subprocess.TimeoutExpired:
                pass
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        reap(root)
    output = (root / "ci-up.log").read_text()
    assert process.returncode != 0 and no_crash(output), output[-4000:]
    backend = Path(case.stack.env["PULUMI_BACKEND_URL"][len("file://"):])
    locks = sorted((backend / ".pulumi" / "locks").rglob("*.json"))
    if signals is RUNNER_LOST:
        assert locks, "a SIGKILLed engine left no lock"
    result["stale_lock"] = bool(locks)
    exported = case.pulumi("stack", "export", check=False)
    held = json.loads(exported.stdout)["deployment"] if exported.returncode == 0 else {}
    result["left_in_state"] = len(held.get("resources") or [])
    result["pending_operations"] = len(held.get("pending_operations") or [])
    result["left_on_cluster"] = len(platform_objects(case))
    for lock in locks:  # the runner that held it is gone: its host is not this one
        content = json.loads(lock.read_text())
        lock.write_text(json.dumps({**content, "hostname": "runner-gone", "pid": 1}))
    started = time.monotonic()
    done = subprocess.run(["bash", "scripts/ci-recover.sh", "local"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=1200)
    result["recover_seconds"] = round(time.monotonic() - started, 1)
    assert done.returncode == 0, f"ci-recover failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert "recovered" in done.stdout + done.stderr
    assert "recovered" in (root / "build" / "logs" / "recover-local.log").read_text()
    if locks:
        assert "runner-gone" in done.stdout + done.stderr
    assert not list((backend / ".pulumi" / "locks").rglob("*.json"))
    assert_converged(case)
    after = subprocess.run(["bash", "scripts/ci-up.sh", "local"], cwd=root, env=env, capture_output=True, text=True,
                           timeout=600)
    assert after.returncode == 0 and f"has applied {commit} already: nothing to apply" in after.stdout, \
        after.stdout + after.stderr


def test_a_killed_up_is_never_skipped_by_make_up_even_when_the_config_is_back_to_the_last_success(
        cluster, tmp_path_factory):
    """docs/entry-stacks.md: "a failed or interrupted update is never skipped". The platform
    stack of a split stack succeeds, a change of the platform's sections is killed (SIGKILL,
    checkpoints skipped as `make up` runs: neither the state nor the history records it),
    and the config is put back: the last update on record is the success, with the very
    digest the config has now. Only the lock the killed engine left says otherwise, and the
    full run's record must run the stack (whose engine then stops on the lock, and
    `./kns recover` follows)."""
    from kns_cli import fullrun
    from plan import digests
    case = new_case(cluster, tmp_path_factory, "skip", TUNED)
    path = case.stack.root / "Pulumi.local.yaml"

    def write(packing: bool) -> None:
        case.write(FIRST)
        document = yaml.safe_load(path.read_text())
        document["config"].update({"kns:state": {"entryStacks": 1}, "kns:packingScheduler": {"enabled": packing}})
        path.write_text(yaml.safe_dump(document, sort_keys=False))

    write(False)
    case.up()
    write(True)  # the packing scheduler: its account, RBAC, config and Deployment
    seen, status, output = case.up_interrupted(signal.SIGKILL, 1)
    assert status != 0 and seen >= 1, output[-2000:]
    write(False)
    env = case.env()
    known = fullrun.offline_digests(case.stack.root, "local", 1, env, "")
    export = json.loads(case.pulumi("stack", "export").stdout)
    mine = fullrun.record("local", export, env, case.stack.root, digests.PLATFORM_OUTPUT)
    # What the backend says of the stack is the success before the kill, digest and all ...
    assert mine.succeeded and not mine.pending and mine.digest == known.platform, mine
    # ... and the lock is what makes it run.
    assert mine.why_run(known.platform) == "it is locked: an update of it is running or was interrupted"


def test_recover_refuses_while_the_update_still_runs(cluster, tmp_path_factory):
    """A live engine's lock is never taken over: recovery would race the running update."""
    case = new_case(cluster, tmp_path_factory, "live", TUNED)
    case.write(FIRST)
    events = case.stack.root / "events.jsonl"
    process = subprocess.Popen(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--event-log",
                                str(events)], cwd=case.stack.root, env=case.env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        lock_dir = Path(case.stack.env["PULUMI_BACKEND_URL"][len("file://"):]) / ".pulumi" / "locks"
        case.cluster.wait(lambda: any(lock_dir.rglob("*.json")) or process.poll() is not None, slack(),
                          every=0.05, message="the update's lock")
        # Held where it is (stopped, not ended: its process and lock live on) while recover
        # looks, so the update cannot finish first however fast the machine is.
        os.kill(process.pid, signal.SIGSTOP)
        try:
            assert process.poll() is None, "the update ended before it could be observed running"
            done = case.recover()
        finally:
            os.kill(process.pid, signal.SIGCONT)
        assert done.returncode == 1
        assert "is still running" in done.stderr and f"pid {process.pid}" in done.stderr
        assert process.poll() is None or process.returncode == 0, "recover disturbed the running update"
    finally:
        process.wait(timeout=600)
    assert process.returncode == 0
    assert_converged(case)


def test_the_api_server_restarted_during_up_fails_cleanly_or_completes_and_a_second_up_converges(cluster, tmp_path_factory):
    with recorded("apiserver") as result:
        result["scenario"] = "apiserver-restart"
        api_server_restarted_during_up(cluster, tmp_path_factory, result)


def api_server_restarted_during_up(cluster, tmp_path_factory, result: dict) -> None:
    case = new_case(cluster, tmp_path_factory, "api", TUNED)
    case.write(FIRST)
    planned = case.planned_changes()
    apiserver = Component(cluster.state, "kube-apiserver")
    events = case.stack.root / "events.jsonl"
    with open(case.stack.root / "up.log", "w") as out:
        process = subprocess.Popen(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--event-log",
                                    str(events)], cwd=case.stack.root, env=case.env(), stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        case.cluster.wait(lambda: sum(completed_change(line) for line in
                                      (events.read_text().splitlines() if events.exists() else [])) >= planned // 3
                          or process.poll() is not None, slack(floor=600), every=0.05,
                          message="a third of the operations")
        assert process.poll() is None, "up ended before the API server could be stopped"
        apiserver.crash(signal.SIGTERM)
        apiserver.start()
        case.cluster.wait(lambda: case.cluster.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                          slack(floor=180),
                          message="the restarted API server ready")
        status = process.wait(timeout=900)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = (case.stack.root / "up.log").read_text()
    result.update(planned=planned, first_up_status=status, provider_crashed=not no_crash(output))
    assert status == 0 or "error:" in output, output[-4000:]
    # The provider patch (docs/operations.md, "The provider patch"): a create whose await the
    # restart cuts off fails as an error, the provider does not crash.
    assert no_crash(output), output[-4000:]
    lock_dir = Path(case.stack.env["PULUMI_BACKEND_URL"][len("file://"):]) / ".pulumi" / "locks"
    assert not any(lock_dir.rglob("*.json")), "the update left its lock"
    started = time.monotonic()
    case.up()
    result["second_up_seconds"] = round(time.monotonic() - started, 1)
    assert_converged(case)
    result["converged"] = True


# The ResourceQuota await's own timeout in the pinned provider (pkg/await/awaiters.go,
# untilCoreV1ResourceQuotaInitialized: WatchUntil(..., 1*time.Minute)).
QUOTA_AWAIT_SECONDS = 60
# What a poll cut off by the API server going away fails with (Go's net and client-go).
CONNECTION_ERROR = re.compile(r"connection refused|connection reset by peer|unexpected EOF|http2: client connection lost"
                              r"|dial tcp [^ ]+: connect:|context canceled", re.I)


@dataclass
class CutOff:
    status: int
    output: str
    stopped_at: float                  # wall clock, when the API server was stopped
    awaits: dict[str, float]           # quota URN -> when its create began (the engine's event)
    failures: dict[str, float]         # quota URN -> when its create failed
    messages: dict[str, str]           # quota URN -> the engine's diagnostic for it


def engine_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path.read_text().splitlines() if path.exists() else []) if line.strip()]


def cut_off_creates(case: Case, quotas: list[str], env: dict[str, str]) -> CutOff:
    """An `up` whose ResourceQuota creates are all in their await (the quota controller
    stopped, so no status ever fills) when the API server goes away under them."""
    controllers = Component(case.cluster.state, "kube-controller-manager")
    apiserver = Component(case.cluster.state, "kube-apiserver")
    events = case.stack.root / "events.jsonl"
    controllers.pause()
    try:
        with open(case.stack.root / "up.log", "w") as out:
            # --stack: the selected stack is recorded in the Pulumi home, which the control changes.
            process = subprocess.Popen(["pulumi", "up", "--stack", "local", "--yes", "--skip-preview",
                                        "--non-interactive", "--event-log", str(events)], cwd=case.stack.root, env=env,
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            case.cluster.wait(lambda: len(case.cluster.get("resourcequotas", "--all-namespaces", "-l",
                                                             f"{LABEL}=kns-{case.name}")["items"]) == len(quotas)
                              or process.poll() is not None, slack(floor=600), every=0.2,
                              message="every quota created")
            assert process.poll() is None, "up ended before its quotas' awaits could be cut off"
            stopped_at = time.time()
            apiserver.crash(signal.SIGTERM)
            apiserver.start()
            case.cluster.wait(lambda: case.cluster.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                              slack(floor=180), message="the restarted API server ready")
            status = process.wait(timeout=900)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    finally:
        controllers.resume()
    reap(case.stack.root)
    awaits, failures, messages = {}, {}, {}
    for event in engine_events(events):
        pre = (event.get("resourcePreEvent") or {}).get("metadata") or {}
        if pre.get("type") == "kubernetes:core/v1:ResourceQuota" and pre.get("op") == "create":
            awaits[pre["urn"]] = event["timestamp"]
        failed = (event.get("resOpFailedEvent") or {}).get("metadata") or {}
        if failed.get("type") == "kubernetes:core/v1:ResourceQuota":
            failures[failed["urn"]] = event["timestamp"]
        diagnostic = event.get("diagnosticEvent") or {}
        if diagnostic.get("severity") == "error" and "ResourceQuota" in diagnostic.get("urn", ""):
            messages[diagnostic["urn"]] = messages.get(diagnostic["urn"], "") + diagnostic.get("message", "")
    return CutOff(status, (case.stack.root / "up.log").read_text(), stopped_at, awaits, failures, messages)


def test_a_create_cut_off_while_it_awaits_fails_without_a_provider_crash(cluster, tmp_path_factory):
    """The path of the provider panic, taken on every run (docs/operations.md, "The provider
    patch"): with the quota controller stopped, every ResourceQuota the `up` creates stays in
    the provider's await, which polls the object until its status is filled. The API server
    then goes away under six such awaits, so their next polls fail. Unpatched, a failed poll
    replaced the object with nil and Create crashed on it (the control below, in the soak
    script); patched, each create fails on the connection error itself, long before the
    await's own timeout, as a partial error that records the quota in the state, and
    recovery converges."""
    case = new_case(cluster, tmp_path_factory, "aw", TUNED)
    quotas = [f"ns-{i}" for i in range(6)]
    case.write(quotas)
    cut = cut_off_creates(case, quotas, case.env())
    assert cut.status != 0 and no_crash(cut.output), cut.output[-4000:]
    assert len(cut.awaits) == len(quotas) and set(cut.failures) == set(cut.awaits), (cut.awaits, cut.failures)
    for urn, began in cut.awaits.items():
        message = cut.messages.get(urn, "")
        # The failed poll's own error, not the await timing out.
        assert CONNECTION_ERROR.search(message) and "timed out" not in message.lower(), (urn, message)
        assert "failed to fully initialize" in message, (urn, message)
        # Failed when the server went away (the event clock has whole seconds), before the
        # await's own timeout could have fired.
        assert int(cut.stopped_at) - 1 <= cut.failures[urn] < began + QUOTA_AWAIT_SECONDS, \
            (urn, began, cut.stopped_at, cut.failures[urn])
    # The partial error recorded each created quota in the state: recovery refreshes it
    # rather than finding an object the state never held.
    state = json.loads(case.pulumi("stack", "export").stdout)["deployment"]["resources"]
    held = {r["urn"] for r in state if r["type"] == "kubernetes:core/v1:ResourceQuota"}
    assert held == set(cut.awaits), (held, cut.awaits)
    done = case.recover()
    assert done.returncode == 0, f"kns recover failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert_converged(case)


@pytest.mark.control
def test_control_the_unpatched_provider_panics_on_the_same_fault(cluster, tmp_path_factory):
    """The control of the test above (scripts/soak-faults.sh runs it; `make test` does not
    build the stock provider): the same fault with the provider built without the patch, in
    the Pulumi home KNS_UNPATCHED_PULUMI_HOME, crashes. So the test above passes because of
    the patch, not because the fault missed the path."""
    home = os.environ.get("KNS_UNPATCHED_PULUMI_HOME")
    assert home and Path(home, "plugins").is_dir(), \
        "KNS_UNPATCHED_PULUMI_HOME must name a Pulumi home with the unpatched provider (scripts/soak-faults.sh)"
    case = new_case(cluster, tmp_path_factory, "awc", TUNED)
    quotas = [f"ns-{i}" for i in range(6)]
    case.write(quotas)
    cut = cut_off_creates(case, quotas, {**case.env(), "PULUMI_HOME": home})
    assert cut.status != 0, cut.output[-4000:]
    assert not no_crash(cut.output) and "panic:" in cut.output, cut.output[-4000:]
    assert "pkg/provider.(*kubeProvider).Create" in cut.output, cut.output[-4000:]
