"""`./kns recover` (kns_cli/recover.py) without a cluster: which lock it releases, which it
refuses to touch, and how it names Kubernetes types. The whole recovery, after real
interrupted updates, is tested end to end in tests/test_faults_engine.py."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from kns_cli import recover


def test_types_and_ids_as_kubectl_and_the_state_name_them():
    assert recover.kubectl_resource("kubernetes:core/v1:ResourceQuota") == "resourcequota"
    assert recover.kubectl_resource("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding") == \
        "rolebinding.v1.rbac.authorization.k8s.io"
    assert recover.kubectl_resource("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue") == \
        "clusterqueue.v1beta1.kueue.x-k8s.io"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "kns-a"}}
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu"}}
    assert (recover.type_token(quota), recover.object_id(quota)) == ("kubernetes:core/v1:ResourceQuota", "kns-a/q")
    assert (recover.type_token(queue), recover.object_id(queue)) == ("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue", "gpu")


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
    running = subprocess.Popen([str(engine)])  # /proc/<pid>/comm is the script's name
    try:
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
