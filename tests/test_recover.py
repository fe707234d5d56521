"""`./kns recover` (kns_cli/recover.py) without a cluster: which lock it releases, which it
refuses to touch, and how it names Kubernetes types. The whole recovery, after real
interrupted updates, is tested end to end in tests/test_faults_engine.py."""

from __future__ import annotations

import json
import re
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from kns_cli import recover
from kns_testing.program import PROJECT_FILES, ROOT, engine_project
from plan import identity

PASSPHRASE = "kns-dev-local"  # the dev stack's committed encryptionsalt belongs to it


def test_types_and_ids_as_kubectl_and_the_state_name_them():
    assert recover.kubectl_resource("kubernetes:core/v1:ResourceQuota") == "resourcequota"
    assert recover.kubectl_resource("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding") == \
        "rolebinding.rbac.authorization.k8s.io"
    assert recover.kubectl_resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue") == \
        "clusterqueue.kueue.x-k8s.io"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "kns-a"}}
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpu"}}
    assert (identity.type_token(quota), identity.object_id(quota)) == ("kubernetes:core/v1:ResourceQuota", "kns-a/q")
    assert (identity.type_token(queue), identity.object_id(queue)) == ("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
                                                                       "gpu")
    assert recover.identity(quota) == ("", "ResourceQuota", "kns-a/q")
    assert recover.identity("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue", "gpu") == \
        ("kueue.x-k8s.io", "ClusterQueue", "gpu")


def live(api_version: str, kind: str, name: str, namespace: str = "", **meta) -> dict:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {}), **meta}}


def test_the_sweep_matches_state_and_cluster_by_group_kind_and_identity_not_version():
    """A state written while Kueue served v1beta1 holds the queues the server now lists as
    v1beta2: they are the stack's own, never swept. What no state resource holds is."""
    state = [{"type": "kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue", "id": "gpu"},
             {"type": "kubernetes:kueue.x-k8s.io/v1beta1:LocalQueue", "id": "kns-a/gpu"},
             {"type": "kubernetes:core/v1:ResourceQuota", "id": "kns-a/q"},
             {"type": "pulumi:providers:kubernetes", "id": "gpu"}]
    cluster = [live("kueue.x-k8s.io/v1beta2", "ClusterQueue", "gpu"),
               live("kueue.x-k8s.io/v1beta2", "LocalQueue", "gpu", "kns-a"),
               live("v1", "ResourceQuota", "q", "kns-a"),
               live("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cpu"),
               live("kueue.x-k8s.io/v1beta2", "LocalQueue", "gpu", "kns-b"),
               live("v1", "ResourceQuota", "gpu"),
               live("kueue.x-k8s.io/v1beta2", "Workload", "w", "kns-a", ownerReferences=[{"kind": "Job"}]),
               live("kueue.x-k8s.io/v1beta2", "ClusterQueue", "old", deletionTimestamp="2026-11-27T00:00:00Z")]
    swept = [recover.identity(obj) for obj in recover.unowned(cluster, state)]
    assert swept == [("kueue.x-k8s.io", "ClusterQueue", "cpu"), ("kueue.x-k8s.io", "LocalQueue", "kns-b/gpu"),
                     ("", "ResourceQuota", "gpu")]
    # Both versions of one kind in the types are one listing, in the server's preferred version.
    assert {recover.kubectl_resource(t) for t in ("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue",
                                                   "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")} == \
        {"clusterqueue.kueue.x-k8s.io"}


@pytest.fixture
def backend(tmp_path, monkeypatch):
    """A file backend and a stub `pulumi` that records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "pulumi"
    stub.write_text('#!/bin/sh\necho "$@" >>"$KNS_STUB_LOG"\n')
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "pulumi.log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
           "KNS_STUB_LOG": str(log)}
    return tmp_path, env, log


def lock(backend_dir: Path, pid: int, hostname: str) -> Path:
    where = backend_dir / "state" / ".pulumi" / "locks" / "organization" / "proj" / "dev"
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{pid}-{hostname}.json"
    path.write_text(json.dumps({"pid": pid, "username": "ci", "hostname": hostname,
                                "timestamp": "2026-11-24T06:00:00Z"}))
    return path


def cancels(log: Path) -> list[str]:
    return [line for line in (log.read_text().splitlines() if log.exists() else []) if line.startswith("cancel")]


def test_no_lock_nothing_to_release(backend):
    root, env, log = backend
    recover.release_lock(root, "proj", "dev", env, force=False)
    assert cancels(log) == []


def test_a_lock_whose_process_is_gone_is_released(backend):
    root, env, log = backend
    gone = subprocess.Popen(["true"])
    gone.wait()
    lock(root, gone.pid, socket.gethostname())
    assert len(recover.stack_locks(root / "state", "proj", "dev")) == 1
    recover.release_lock(root, "proj", "dev", env, force=False)
    assert cancels(log) == ["cancel --yes dev --non-interactive"]


def test_a_live_update_is_never_taken_over_even_with_force(backend):
    root, env, log = backend
    engine = Path(env["PATH"].split(":")[0]).parent / "pulumi-sleeper"
    engine.write_text("#!/bin/sh\nsleep 60\n")
    engine.chmod(engine.stat().st_mode | stat.S_IEXEC)
    running = subprocess.Popen([str(engine)])
    try:
        # /proc/<pid>/comm becomes the script's name once its exec is done, which may be just
        # after Popen returns (a vfork parent resumes before the kernel renames the child);
        # a real engine writes its lock long after that.
        comm = Path(f"/proc/{running.pid}/comm")
        deadline = time.monotonic() + 30
        while comm.read_text().strip() != engine.name:
            assert time.monotonic() < deadline, comm.read_text()
            time.sleep(0.01)
        lock(root, running.pid, socket.gethostname())
        for force in (False, True):
            with pytest.raises(recover.RecoverFailed, match=f"still running .*pid {running.pid}"):
                recover.release_lock(root, "proj", "dev", env, force=force)
    finally:
        running.kill()
        running.wait()
    assert cancels(log) == []


def test_a_lock_from_another_host_needs_force(backend):
    root, env, log = backend
    lock(root, 4242, "ci-runner-7")
    with pytest.raises(recover.RecoverFailed, match="another host .*ci-runner-7.*--force"):
        recover.release_lock(root, "proj", "dev", env, force=False)
    assert cancels(log) == []
    recover.release_lock(root, "proj", "dev", env, force=True)
    assert cancels(log) == ["cancel --yes dev --non-interactive"]


def test_other_backends_are_cancelled_only_with_force(backend):
    root, env, log = backend
    env = {**env, "PULUMI_BACKEND_URL": "s3://bucket/state"}
    recover.release_lock(root, "proj", "dev", env, force=False)
    assert cancels(log) == []
    recover.release_lock(root, "proj", "dev", env, force=True)
    assert cancels(log) == ["cancel --yes dev --non-interactive"]


def test_unreadable_attribute_files_are_removed_and_whole_ones_kept(tmp_path):
    stacks = tmp_path / ".pulumi" / "stacks" / "proj"
    stacks.mkdir(parents=True)
    (stacks / "dev.json.attrs").write_text("")
    (stacks / "dev.json.bak.attrs").write_text('{"user.cache_control":""')
    (stacks / "prod.json.attrs").write_text('{"user.content_type":"application/json"}')
    removed = recover.repair_backend(tmp_path)
    assert [path.name for path in removed] == ["dev.json.attrs", "dev.json.bak.attrs"]
    assert sorted(path.name for path in stacks.iterdir()) == ["prod.json.attrs"]


@pytest.fixture(scope="module")
def killed_backend(tmp_path_factory):
    """A copy of the dev stack, applied once by the real engine, then left as a run killed
    while it wrote a checkpoint leaves it: the stack file's attributes file cut short (the
    storage library writes it in place) and the dead run's lock."""
    toolchain = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], capture_output=True, text=True,
                               timeout=5400)
    assert toolchain.returncode == 0, f"scripts/toolchain.sh failed:\n{toolchain.stderr[-3000:]}"
    root = tmp_path_factory.mktemp("killed") / "kns-platform"
    env = engine_project(root, toolchain.stdout.strip(), PASSPHRASE, files=(*PROJECT_FILES, "Pulumi.dev.yaml"))
    for args in (["stack", "init", "dev"], ["up", "--yes", "--skip-preview"]):
        done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=root, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    backend = root.parent / "kns-platform-state"
    attrs = backend / ".pulumi" / "stacks" / "kns-platform" / "dev.json.attrs"
    assert attrs.is_file()

    def break_it() -> None:
        attrs.write_text("")
        dead = subprocess.Popen(["true"])
        dead.wait()
        where = backend / ".pulumi" / "locks" / "organization" / "kns-platform" / "dev"
        where.mkdir(parents=True, exist_ok=True)
        (where / f"{dead.pid}.json").write_text(json.dumps(
            {"pid": dead.pid, "username": "ci", "hostname": socket.gethostname(), "timestamp": "2026-11-25T06:00:00Z"}))
    return root, env, break_it


def test_up_sh_on_a_backend_a_killed_run_left_names_the_cause_and_creates_nothing(killed_backend):
    root, env, break_it = killed_backend
    break_it()
    done = subprocess.run(["bash", str(ROOT / "scripts" / "up.sh"), "up"], env={**env, "KNS_STACK": "dev"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    assert "failed to load checkpoint: EOF" in done.stderr
    assert "make recover" in done.stderr
    assert "creating stack" not in done.stderr and "currently locked" not in done.stderr


def test_recover_repairs_a_backend_a_killed_run_left_and_converges(killed_backend):
    root, env, break_it = killed_backend
    break_it()
    done = subprocess.run([str(ROOT / "kns"), "recover", "--stack", "dev", "--project-dir", str(root)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "removing .pulumi/stacks/kns-platform/dev.json.attrs: cut short by the interrupted run" in done.stderr
    assert re.search(r"removing \d+ stale lock\(s\)", done.stderr)
    assert not list((root.parent / "kns-platform-state" / ".pulumi" / "locks").rglob("*.json"))
    assert "recovered: state, cluster and config agree" in done.stderr
    assert "creating stack" not in done.stderr
    listed = subprocess.run(["pulumi", "stack", "ls", "--json", "--non-interactive"], cwd=root, env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and [s["name"] for s in json.loads(listed.stdout)] == ["dev"], listed.stderr


def test_recover_refuses_a_stack_the_backend_does_not_have(killed_backend):
    root, env, _ = killed_backend
    (root / "Pulumi.other.yaml").write_text((root / "Pulumi.dev.yaml").read_text())
    done = subprocess.run([str(ROOT / "kns"), "recover", "--stack", "other", "--project-dir", str(root)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    assert "no stack named 'other' found" in done.stderr
    assert "creating stack" not in done.stderr


# ---- a site: every cluster swept through its own credentials ------------------------------------

FAKE_KUBECTL = '''#!{python}
"""A stand-in kubectl over one JSON file of objects per kubeconfig: get (list by resource
and label, or one by name), delete; every call recorded."""
import json, os, sys
args = sys.argv[1:]
config = args[args.index("--kubeconfig") + 1]
store = config + ".objects.json"
objects = json.load(open(store))
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps({{"kubeconfig": os.path.basename(config), "args": args}}) + "\\n")
rest = [a for i, a in enumerate(args) if a != "--kubeconfig" and (i == 0 or args[i - 1] != "--kubeconfig")]
verb, resource = rest[0], rest[1]
kind = resource.split(".")[0]
def matches(o):
    return o["kind"].lower() == kind
if verb == "get" and "-l" in rest:
    key, value = rest[rest.index("-l") + 1].split("=")
    items = [o for o in objects if matches(o) and o["metadata"].get("labels", {{}}).get(key) == value]
    print(json.dumps({{"items": items}}))
elif verb == "get":
    name = rest[2]
    ns = rest[rest.index("--namespace") + 1] if "--namespace" in rest else None
    found = [o for o in objects if matches(o) and o["metadata"]["name"] == name and o["metadata"].get("namespace") == ns]
    print(f"{{kind}}/{{name}}" if found else "")
elif verb == "delete":
    name = rest[2]
    ns = rest[rest.index("--namespace") + 1] if "--namespace" in rest else None
    objects = [o for o in objects if not (matches(o) and o["metadata"]["name"] == name
                                          and o["metadata"].get("namespace") == ns)]
    json.dump(objects, open(store, "w"))
'''


def namespace(name: str, cluster: str = "site") -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kns.io/cluster": cluster}}}


def test_a_site_is_swept_on_every_cluster_each_against_its_own_part_of_the_state(tmp_path, monkeypatch):
    """The manager and both workers are each listed and swept through their own kubeconfig;
    a worker's namespace of the same name as one the state holds on the manager is that
    worker's orphan, and one the state holds through the worker's provider stays."""
    from kns_testing.sites import SECRETS, checked, site
    clusters = {"manager": [namespace("kns-train"), namespace("kns-left")],
                "east": [namespace("kns-train"), namespace("kns-left"), namespace("kns-other", "another-site")],
                "west": [namespace("kns-train")]}
    for name, objects in clusters.items():
        (tmp_path / f"{name}.kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
        (tmp_path / f"{name}.kubeconfig.objects.json").write_text(json.dumps(objects))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kubectl"
    fake.write_text(FAKE_KUBECTL.format(python=__import__("sys").executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(tmp_path / "calls.jsonl"))
    config = site(cluster={"name": "site", "kubeconfig": str(tmp_path / "manager.kubeconfig")})
    config["workers"][0]["kubeconfig"] = str(tmp_path / "east.kubeconfig")
    del config["workers"][1]["context"]
    config["workers"][1]["kubeconfig"] = str(tmp_path / "west.kubeconfig")
    cfg = checked(config, secret=("credentials",)).config
    urn = "urn:pulumi:local::kns-platform::pulumi:providers:kubernetes::{}::1234"
    state = [{"type": "kubernetes:core/v1:Namespace", "id": "kns-train", "provider": urn.format("site-kubernetes")},
             {"type": "kubernetes:core/v1:Namespace", "id": "kns-left", "provider": urn.format("site-kubernetes")},
             {"type": "kubernetes:core/v1:Namespace", "id": "kns-train", "provider": urn.format("east-kubernetes")},
             {"type": "kubernetes:core/v1:Namespace", "id": "kns-train", "provider": urn.format("west-kubernetes")}]
    assert [(t.name, t.provider) for t in recover.targets(cfg)] == [
        ("site", "site-kubernetes"), ("east", "east-kubernetes"), ("west", "west-kubernetes")]
    swept = 0
    for target in recover.targets(cfg):
        with recover.kubectl_access(target, tmp_path, "local", {}) as access:
            swept += recover.sweep(access, "site", {"kubernetes:core/v1:Namespace"},
                                   recover.of_cluster(state, target, cfg))
    left = {name: sorted(o["metadata"]["name"] for o in json.loads(
        (tmp_path / f"{name}.kubeconfig.objects.json").read_text())) for name in clusters}
    assert swept == 1
    assert left == {"manager": ["kns-left", "kns-train"], "east": ["kns-other", "kns-train"], "west": ["kns-train"]}
    used = {json.loads(line)["kubeconfig"] for line in (tmp_path / "calls.jsonl").read_text().splitlines()}
    assert used == {"manager.kubeconfig", "east.kubeconfig", "west.kubeconfig"}
