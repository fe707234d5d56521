"""A reservation's switch pods, run for real on a kwok cluster (docs/reservations.md, "The
switch"; docs/testing.md).

kwok runs no container, so a switch pod that the CronJob controller's Job creates would
never do anything. `SwitchKubelet` plays the kubelet for those pods only: as each appears
(a watch started before the stack's `up`), it runs the pod's own command on this host
with the pod's own environment, the files of the pod's ConfigMap volume at its mount
path, and a token of the pod's own service account (a TokenRequest), against the local
API server. The script and its RBAC are the ones the program deployed; nothing of the
test's own stands in for them.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

import yaml

from .watch import Watch


@dataclass
class SwitchRun:
    pod: str
    job: str
    scheduled: Optional[str]  # the Job's scheduled time (the CronJob controller's annotation)
    started: float
    finished: float
    returncode: int
    stdout: str
    stderr: str


def run_pod(cluster, pod: dict, workdir: Path) -> subprocess.CompletedProcess:
    """Run a pod's single container as its kubelet would, with the pod's service account."""
    spec, namespace = pod["spec"], pod["metadata"]["namespace"]
    container = spec["containers"][0]
    code = workdir / "volume"
    for volume in spec.get("volumes") or []:
        source = volume.get("configMap")
        if source is None:
            continue
        mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume["name"])
        config_map = cluster.get("configmap", source["name"], "-n", namespace)
        files = {**{k: v.encode() for k, v in (config_map.get("data") or {}).items()},
                 **{k: base64.b64decode(v) for k, v in (config_map.get("binaryData") or {}).items()}}
        for item in source["items"]:
            target = code / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[item["key"]])
    token = cluster.kubectl("create", "token", spec["serviceAccountName"], "-n", namespace).stdout.strip()
    account = workdir / "serviceaccount"
    account.mkdir(parents=True, exist_ok=True)
    (account / "token").write_text(token)
    kubeconfig = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = kubeconfig["clusters"][0]["cluster"]
    (account / "ca.crt").write_bytes(base64.b64decode(server["certificate-authority-data"]))
    url = urlparse(server["server"])
    env = {item["name"]: item.get("value", "") for item in container.get("env") or []}
    env.update({"KUBERNETES_SERVICE_HOST": url.hostname, "KUBERNETES_SERVICE_PORT": str(url.port or 443),
                "KNS_SERVICE_ACCOUNT_DIR": str(account), "PATH": os.environ["PATH"]})
    command = [part.replace(mount, str(code)) for part in [*container.get("command", []), *container.get("args", [])]]
    return subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=3600)


def run_token(cluster, account: str, namespace: str) -> tuple[str, str, str]:
    """(server, token, CA file) for the switch's Api as the ServiceAccount `account`: a
    token of its own (a TokenRequest), the local API server's address and CA."""
    token = cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()
    kubeconfig = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = kubeconfig["clusters"][0]["cluster"]
    ca = Path(tempfile.mkdtemp(prefix="kns-switch-")) / "ca.crt"
    ca.write_bytes(base64.b64decode(server["certificate-authority-data"]))
    return server["server"], token, str(ca)


def finish(cluster, pod: dict, returncode: int) -> None:
    """Report the pod's end as its kubelet would: its phase and its container's exit code,
    so its Job completes (or fails) and the CronJob fires again."""
    container = pod["spec"]["containers"][0]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {"phase": "Succeeded" if returncode == 0 else "Failed", "containerStatuses": [{
        "name": container["name"], "image": container["image"], "imageID": "", "ready": False, "restartCount": 0,
        "state": {"terminated": {"exitCode": returncode, "reason": "Completed" if returncode == 0 else "Error",
                                 "startedAt": now, "finishedAt": now}}}]}}
    # A pod deleted meanwhile (its CronJob replaced) has nothing left to report.
    cluster.kubectl("patch", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"],
                    "--subresource=status", "--type=merge", "-p", json.dumps(status), check=False)


class SwitchKubelet:
    """Runs every switch pod of namespace `namespace` once, as it appears, in a thread."""

    def __init__(self, cluster, namespace: str, prefix: str = "switch-"):
        self.cluster = cluster
        self.namespace = namespace
        self.prefix = prefix
        self.pods = Watch(cluster, "pods")
        self.runs: list[SwitchRun] = []
        self.errors: list[str] = []
        self.running: Optional[tuple[str, float]] = None
        self._seen: set[str] = set()
        self._stop = threading.Event()
        # Cleared: the pods wait, as on a node whose kubelet is down (a late switch).
        self._running = threading.Event()
        self._running.set()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def pause(self) -> None:
        """From now on no pod runs (one running finishes) until `resume`."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._running.is_set():
                self._stop.wait(1.0)
                continue
            try:
                self._run_new()
            except Exception as error:  # recorded for the test (a dead thread would hide it)
                self.errors.append(f"switch kubelet: {error!r}")
            self._stop.wait(1.0)

    def _run_new(self) -> None:
        """Run each switch pod of the namespace not run yet, in the order they appeared."""
        for _, pod in self.pods.all():
            if not self._running.is_set():
                return
            meta = pod["metadata"]
            job = meta.get("labels", {}).get("batch.kubernetes.io/job-name", "")
            if meta["namespace"] != self.namespace or meta["name"] in self._seen or not job.startswith(self.prefix):
                continue
            self._seen.add(meta["name"])
            scheduled = None
            try:
                owner = self.cluster.get("job", job, "-n", self.namespace)
                scheduled = owner["metadata"].get("annotations", {}).get("batch.kubernetes.io/cronjob-scheduled-timestamp")
            except AssertionError:
                pass
            started = time.time()
            self.running = (meta["name"], started)
            with tempfile.TemporaryDirectory() as workdir:
                try:
                    done = run_pod(self.cluster, pod, Path(workdir))
                except Exception as error:  # recorded: the test reads it
                    self.errors.append(f"{meta['name']}: {error!r}")
                    continue
            self.runs.append(SwitchRun(meta["name"], job, scheduled, started, time.time(), done.returncode,
                                       done.stdout, done.stderr))
            self.running = None
            finish(self.cluster, pod, done.returncode)

    def report(self) -> str:
        """What ran, for a failing test's message."""
        lines = [f"{r.pod} (scheduled {r.scheduled}) {time.strftime('%H:%M:%S', time.gmtime(r.started))}-"
                 f"{time.strftime('%H:%M:%S', time.gmtime(r.finished))} exit {r.returncode}: "
                 f"{r.stdout.strip()[-600:]} {r.stderr.strip()[-600:]}" for r in self.runs]
        if self.running:
            lines.append(f"running {self.running[0]} since {time.strftime('%H:%M:%S', time.gmtime(self.running[1]))}")
        return "\n".join(lines + self.errors)

    def runs_after(self, moment: float) -> list[SwitchRun]:
        return [run for run in self.runs if run.started >= moment]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.pods.stop()
