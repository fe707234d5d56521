"""The minimal Python language host (scripts/minimal-host/), which scripts/toolchain.sh
builds when the module proxy refuses the upstream one: gofmt-clean, `go vet`-clean, and
built against the Pulumi SDK version of versions.env."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from kns_testing.program import ROOT, pinned_versions

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
