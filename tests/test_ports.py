"""The cluster scripts' ports (scripts/lib/ports.sh, scripts/lib/process.sh): a port taken
between free_ports choosing it and the component binding it makes the script run again
with new ports, not fail.

The component here is Python's http.server, started and waited for by lib/process.sh as
kueue-process.sh and karpenter-process.sh start theirs; the first try is given a port
this test holds (KNS_FIRST_PORTS). The real kube-scheduler case is in tests/test_e2e.py.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

DRIVER = r"""#!/usr/bin/env bash
set -euo pipefail
. "{lib}/ports.sh"
ports_retry "${{BASH_SOURCE[0]}}" "$@"
log() {{ printf 'driver: %s\n' "$*" >&2; }}
die() {{ printf 'driver: error: %s\n' "$*" >&2; exit 1; }}
state=$1 component=web KNS_SCRIPT=driver timeout=60
. "{lib}/process.sh"
read -r port < <(free_ports 1)
process_start -- {python} -m http.server --bind 127.0.0.1 "$port" {extra}
process_ready "http://127.0.0.1:$port/"
echo "$port"
kill -KILL -- "-$pid"
"""


def run(tmp_path: Path, held: int, *, extra: str = "", **env: str) -> subprocess.CompletedProcess:
    driver = tmp_path / "driver.sh"
    driver.write_text(DRIVER.format(lib=ROOT / "scripts" / "lib", python=sys.executable, extra=extra))
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "pids").touch()
    return subprocess.run(["bash", str(driver), str(state)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KNS_FIRST_PORTS": str(held), **env})


@pytest.fixture
def held():
    """A port this test listens on (a bound-only socket would not stop a SO_REUSEADDR bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_taken_port_makes_the_script_start_again_on_another(tmp_path, held):
    done = run(tmp_path, held)
    assert done.returncode == 0, done.stderr
    served = int(done.stdout.strip())
    assert served != held
    assert "a port was taken before its component bound it; trying again with new ports (1/5)" in done.stderr


def test_the_tries_are_bounded_and_end_in_the_clash_status(tmp_path, held):
    done = run(tmp_path, held, KNS_PORT_TRIES="1")
    assert done.returncode == 75, done.stderr
    assert done.stdout == ""


def test_a_component_that_fails_otherwise_is_not_tried_again(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    done = run(tmp_path, free, extra="--no-such-flag")
    assert done.returncode == 1, done.stderr
    assert "web exited" in done.stderr
    assert "trying again" not in done.stderr
