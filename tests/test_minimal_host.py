"""The minimal Python language host (scripts/minimal-host/), which scripts/toolchain.sh
builds when the module proxy refuses the upstream one: gofmt-clean, `go vet`-clean, built
against the Pulumi SDK version of versions.env, and it ends when the engine stops it
(docs/operations.md, "The Python language host")."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from kns_testing.faults import processes_under
from kns_testing.program import ROOT, built_toolchain, pinned_versions

HOST = ROOT / "scripts" / "minimal-host"
# Pure module mode, as scripts/lib/gomod.sh builds: no workspace, no toolchain download,
# and go.mod and go.sum used as committed.
GO_ENV = {**os.environ, "GOWORK": "off", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}


def go(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    assert shutil.which("go"), "go is not on PATH (Go 1.25 or newer builds the toolchain)"
    return subprocess.run(["go", *args], cwd=HOST, env=GO_ENV, capture_output=True, text=True, timeout=timeout)


def test_gofmt_has_nothing_to_change():
    done = subprocess.run(["gofmt", "-l", "."], cwd=HOST, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", f"gofmt would reformat: {done.stdout}"


def test_go_vet_passes():
    done = go("vet", "./...")
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_is_built_against_the_pinned_sdk():
    required = re.search(r"^require github\.com/pulumi/pulumi/sdk/v3 v(\S+)$|^\tgithub\.com/pulumi/pulumi/sdk/v3 v(\S+)$",
                         (HOST / "go.mod").read_text(), re.MULTILINE)
    assert required, "scripts/minimal-host/go.mod does not require github.com/pulumi/pulumi/sdk/v3"
    assert (required[1] or required[2]) == pinned_versions()["PULUMI_VERSION"]


def test_the_host_ends_at_once_when_the_engine_stops_it(tmp_path):
    """The engine stops a plugin with SIGINT and kills it only 5 s later: a host that
    ignored SIGINT cost those 5 s twice per engine run. It must end by itself, cleanly."""
    binary = tmp_path / "pulumi-language-python"
    built = go("build", "-o", str(binary), ".")
    assert built.returncode == 0, built.stdout + built.stderr
    (tmp_path / "pulumi-language-python-exec").write_text("")  # the host checks it is there
    host = subprocess.Popen([str(binary), "127.0.0.1:1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        port = host.stdout.readline().strip()
        assert port.isdigit(), host.stderr.read()
        os.killpg(host.pid, signal.SIGINT)  # as the engine's plugin kill sends it
        assert host.wait(timeout=600) == 0, host.stderr.read()
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


def test_about_asks_python_once_and_never_runs_pip(tmp_path):
    """The CLI asks the host About on every preview and update and records only the
    runtime's executable and version; the toolchain's About also ran `python -m pip
    --version` (about a CPU second). The host answers from one Python process: the
    virtualenv's python here logs every start."""
    import grpc
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import language_pb2, language_pb2_grpc

    binary = tmp_path / "pulumi-language-python"
    built = go("build", "-o", str(binary), ".")
    assert built.returncode == 0, built.stdout + built.stderr
    (tmp_path / "pulumi-language-python-exec").write_text("")
    venv, starts = tmp_path / "venv", tmp_path / "starts.log"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {starts}\nexec {ROOT / ".venv" / "bin" / "python"} "$@"\n')
    python.chmod(0o755)
    (venv / "bin" / "python3").symlink_to("python")
    host = subprocess.Popen([str(binary), "127.0.0.1:1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        port = host.stdout.readline().strip()
        assert port.isdigit(), host.stderr.read()
        options = struct_pb2.Struct()
        options.update({"virtualenv": str(venv)})
        info = language_pb2.ProgramInfo(root_directory=str(tmp_path), program_directory=str(tmp_path),
                                        entry_point=".", options=options)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            about = language_pb2_grpc.LanguageRuntimeStub(channel).About(language_pb2.AboutRequest(info=info),
                                                                         timeout=600)
    finally:
        os.killpg(host.pid, signal.SIGINT)
        host.wait(timeout=600)
    real = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c",
                           "import sys; print(sys.executable); print(sys.version.split()[0])"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert (about.executable, about.version) == (real[0], real[1])
    assert dict(about.metadata) == {"host": "kns-minimal"}
    started = starts.read_text().splitlines()
    assert len(started) == 1 and "pip" not in started[0], started


def programs_in(root: Path) -> list[int]:
    """Python programs (run with `--monitor` by the exec script) working in `root`."""
    return processes_under(root, b"--monitor")


def test_a_stopped_up_ends_its_program_without_a_traceback(tmp_path):
    """Ctrl-C on an `up` whose program is still running: the engine stops the host, the
    host ends the program (which ignores SIGINT, so Python prints no traceback), and
    nothing of the program is left behind."""
    root = tmp_path / "sleepy"
    root.mkdir()
    (root / "Pulumi.yaml").write_text(f"name: sleepy\nruntime:\n  name: python\n  options:\n"
                                      f"    virtualenv: {ROOT / '.venv'}\n")
    (root / "__main__.py").write_text("import time\nimport pulumi\npulumi.export('started', True)\ntime.sleep(3600)\n")
    (tmp_path / "state").mkdir()
    env = {**os.environ, "PATH": f"{built_toolchain()}:{os.environ['PATH']}",
           "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}", "PULUMI_CONFIG_PASSPHRASE": "sleepy",
           "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
           "PULUMI_AUTOMATIC_LOGGING": "false"}
    subprocess.run(["pulumi", "stack", "init", "s", "--non-interactive"], cwd=root, env=env, check=True,
                   capture_output=True)
    up = subprocess.Popen(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive"], cwd=root, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 600  # a hang guard, not a speed bound
        while not programs_in(root):
            assert up.poll() is None, up.stdout.read()
            assert time.monotonic() < deadline, "the program never started"
            time.sleep(0.1)
        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C
        output, _ = up.communicate(timeout=600)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
    left = programs_in(root)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert "update canceled" in output, output
    assert "Traceback" not in output, output
    assert not left, "the stopped up left its program running"
