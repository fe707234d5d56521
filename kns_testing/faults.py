"""Faults on the local control plane (scripts/cluster-up.sh): stop one of its processes the
way a crash or an upgrade does, and start it again exactly as it ran (docs/operations.md)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


def processes_under(root: Path, command_has: bytes = b"") -> list[int]:
    """The processes (this one left out) working in `root` or below it, whose command line
    holds `command_has`: what a stopped or killed engine run may have left behind."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int(proc.name) != os.getpid() and \
                    os.readlink(proc / "cwd").startswith(str(root)) and command_has in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            pass
    return found


class Component:
    """One process of a local cluster's state dir, by the name its pids file records
    (`kube-apiserver`, `kube-scheduler-<name>`, `karpenter`, `kueue`, ...).

    `crash` kills its process group; `start` runs the same command line again, with the same
    environment and working directory, logging to the same file and recorded in the pids
    file, so scripts/cluster-down.sh still stops it."""

    def __init__(self, state: Path, name: str):
        self.state, self.name = Path(state), name
        self.pid = self._recorded_pid()
        proc = Path("/proc") / str(self.pid)
        self.argv = [arg for arg in (proc / "cmdline").read_bytes().decode().split("\0") if arg]
        self.environ = dict(item.split("=", 1) for item in (proc / "environ").read_bytes().decode().split("\0") if "=" in item)
        self.cwd = os.readlink(proc / "cwd")
        # A process started in a mount namespace of its own (scripts/kueue-process.sh runs
        # Kueue where its metrics certificate is bind-mounted) is started again in that same
        # namespace: a descriptor of it, held from now on, keeps it (and its mounts) alive
        # after the process is gone.
        self._mount_ns = None
        if os.stat(proc / "ns" / "mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino:
            self._mount_ns = os.open(proc / "ns" / "mnt", os.O_RDONLY)

    def _recorded_pid(self) -> int:
        pids = [int(pid) for line in (self.state / "pids").read_text().splitlines()
                for name, _, pid in [line.partition(" ")] if name == self.name and pid.strip().isdigit()]
        live = [pid for pid in pids if _alive(pid)]
        if not live:
            raise AssertionError(f"{self.name} is not running in {self.state}")
        return live[-1]

    def crash(self, sig: int = signal.SIGKILL, grace: float = 30, timeout: float = 60) -> None:
        """Signal the process group and wait until the process is gone. A SIGTERM is a
        graceful stop: after `grace` seconds the group is killed, as a kubelet or systemd
        does once a stop's grace period is over."""
        self._signal(sig)
        deadline = time.monotonic() + (grace if sig != signal.SIGKILL else timeout)
        while _alive(self.pid):
            if time.monotonic() > deadline:
                if sig == signal.SIGKILL:
                    raise AssertionError(f"{self.name} (pid {self.pid}) still runs {timeout}s after SIGKILL")
                self.crash(signal.SIGKILL, timeout=timeout)
                return
            time.sleep(0.1)

    def pause(self) -> None:
        """Stop the process without ending it (SIGSTOP), as a hung component: it keeps its
        connections and does no work until `resume`."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def start(self) -> int:
        """Run the recorded command again as its own session (in the process's mount namespace
        when it had one of its own); its new pid."""
        argv, fds = self.argv, ()
        if self._mount_ns is not None:
            # nsenter enters the namespace and execs the command: the pid stays the command's.
            argv = [shutil.which("nsenter") or "nsenter", f"--mount=/proc/self/fd/{self._mount_ns}",
                    f"--wd={self.cwd}", "--", *self.argv]
            fds = (self._mount_ns,)
        log = open(self.state / "logs" / f"{self.name}.log", "ab")
        try:
            process = subprocess.Popen(argv, env=self.environ, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True, pass_fds=fds)
        finally:
            log.close()
        self.pid = process.pid
        with open(self.state / "pids", "a") as pids:
            pids.write(f"{self.name} {self.pid}\n")
        return self.pid


def _alive(pid: int) -> bool:
    """Running, not a zombie (a killed child of this process stays in the table until reaped)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
