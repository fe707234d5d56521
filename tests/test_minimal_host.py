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
