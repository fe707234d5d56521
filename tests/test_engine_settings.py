"""How the engine is run against a cluster (scripts/lib/engine.sh, sourced by scripts/up.sh)
and which objects the Kubernetes provider waits for; why each: docs/benchmarks.md, "`pulumi
up` against a real API server" (bench/apply_vs_kubectl.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kns_cli.engine import engine_settings
from kns_testing.engine import TUNED, up_sh
from kns_testing.program import ROOT, built_toolchain, dev_stack_config, run_program

SKIP_AWAIT = "pulumi.com/skipAwait"


def test_the_engine_settings():
    assert engine_settings() == TUNED


def test_the_operator_s_own_values_win():
    own = {"PULUMI_SKIP_CHECKPOINTS": "false", "PULUMI_PARALLEL": "4", "PULUMI_PARALLEL_DIFF": "false",
           "PULUMI_K8S_CLIENT_QPS": "50", "PULUMI_K8S_CLIENT_BURST": "120", "PULUMI_AUTOMATIC_LOGGING": "true"}
    assert engine_settings(own) == own
    assert engine_settings({"PULUMI_PARALLEL": "4"}) == {**TUNED, "PULUMI_PARALLEL": "4"}


@pytest.mark.parametrize("setting", [None, "true", "false"])
def test_the_built_cli_writes_its_automatic_log_unless_told_not_to(tmp_path, setting):
    """The CLI scripts/toolchain.sh builds carries scripts/patches/pulumi-cli.patch: with
    PULUMI_AUTOMATIC_LOGGING=false a command starts no log in $PULUMI_HOME/logs; unset or
    anything else, upstream's automatic log is written (docs/operations.md, "The CLI patch")."""
    bin_dir = built_toolchain()
    home = tmp_path / "pulumi-home"
    env = {key: value for key, value in os.environ.items() if key != "PULUMI_AUTOMATIC_LOGGING"}
    env.update({"PULUMI_HOME": str(home), "PULUMI_SKIP_UPDATE_CHECK": "true"})
    if setting is not None:
        env["PULUMI_AUTOMATIC_LOGGING"] = setting
    done = subprocess.run([f"{bin_dir}/pulumi", "stack", "ls", "--non-interactive"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    logs = sorted(path.name for path in (home / "logs").glob("*.log")) if (home / "logs").is_dir() else []
    assert done.stdout or done.stderr, "the CLI ran and said something"
    if setting == "false":
        assert logs == []
    else:
        assert len(logs) == 1 and "stack_list" in logs[0], logs


def calls(root: Path, *args: str, **given: str) -> dict[str, dict[str, str]]:
    """Run the copy's up.sh; the PULUMI_* environment of each pulumi command it ran."""
    log = root / "pulumi.log"
    env = {key: value for key, value in os.environ.items() if key not in TUNED and not key.startswith("PULUMI_")}
    done = subprocess.run(["bash", str(root / "scripts" / "up.sh"), *args],
                          env={**env, **given, "KNS_STUB_LOG": str(log), "KNS_PYTHON": sys.executable},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = {}
    for line in log.read_text().splitlines():
        command, _, variables = line.partition("PULUMI_")
        out[command] = dict(item.split("=", 1) for item in f"PULUMI_{variables}".split())
    log.unlink()
    return out


def test_up_sh_runs_up_and_preview_with_the_engine_settings(up_sh):
    for action in ("up", "preview"):
        ran = calls(up_sh, action)
        assert set(ran) >= {"stack", action}
        assert {key: ran[action].get(key) for key in TUNED} == TUNED
    ran = calls(up_sh, "up", PULUMI_PARALLEL="4", PULUMI_SKIP_CHECKPOINTS="false")
    assert ran["up"]["PULUMI_PARALLEL"] == "4" and ran["up"]["PULUMI_SKIP_CHECKPOINTS"] == "false"


def test_kns_refresh_makes_up_and_preview_refresh_first(up_sh):
    """KNS_REFRESH=true: `make preview` shows drift and `make up` restores it (docs/operations.md)."""
    args = up_sh / "pulumi.log.args"
    for given, expected in (({}, False), ({"KNS_REFRESH": "true"}, True)):
        for action in ("up", "preview"):
            calls(up_sh, action, **given)
            ran = [line.split() for line in args.read_text().splitlines() if line.split()[0] == action]
            args.unlink()
            assert len(ran) == 1 and ("--refresh" in ran[0]) == expected, ran


@pytest.fixture(scope="module")
def dev_resources():
    return [r for r in run_program(dev_stack_config()).resources if r.custom]


def awaited(resources, type_: str) -> list[bool]:
    """For each registered resource of `type_`: does the provider wait for it to be ready?"""
    found = [(r.metadata.get("annotations") or {}).get(SKIP_AWAIT) != "true" for r in resources if r.type == type_]
    assert found, f"the dev stack has no {type_}"
    return found


def test_jobs_and_the_ingress_are_not_awaited(dev_resources):
    # A Job would hold `up` until it completes (up to 10 minutes, then fail it); an Ingress
    # until a controller publishes an address.
    assert not any(awaited(dev_resources, "kubernetes:batch/v1:Job"))
    assert not any(awaited(dev_resources, "kubernetes:networking.k8s.io/v1:Ingress"))


@pytest.mark.parametrize("type_", [
    # The ResourceQuota admission plugin enforces only what the quota's status holds, which
    # the controller fills in after creation: the entry's Job waits for it (through the
    # provider's quota await) so that no pod of it is admitted past an empty status.
    "kubernetes:core/v1:ResourceQuota",
    # The schedulers must run before `up` reports the platform ready.
    "kubernetes:apps/v1:Deployment",
    # Namespaces have no create await; skipAwait would only stop a delete (or a replacement)
    # from waiting until the namespace is gone.
    "kubernetes:core/v1:Namespace",
])
def test_what_the_platform_needs_ready_is_awaited(dev_resources, type_):
    assert all(awaited(dev_resources, type_))


def test_outputs_reads_the_stack_make_up_wrote_with_its_backend_and_passphrase(up_sh):
    """`make outputs` / `./kns outputs` (issue 32): `pulumi stack output --json` with the
    environment of `make up`, and no stack created when there is none."""
    up = calls(up_sh, "up")
    ran = calls(up_sh, "outputs")
    for key in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE"):
        assert ran["stack"][key] == up["stack"][key]
    args = [line.split() for line in (up_sh / "pulumi.log.args").read_text().splitlines()]
    # Of every Pulumi stack of the stack (one here: no entry stacks), merged (docs/entry-stacks.md).
    assert ["stack", "output", "--json", "--stack", "dev", "--non-interactive"] in args
    assert not any(a[:2] == ["stack", "init"] for a in args)


def test_outputs_of_another_project_read_its_stack_and_backend(up_sh):
    """`./kns outputs --project-dir DIR` (KNS_PROJECT_DIR): up.sh, its toolchain and kns_cli
    are this checkout's, the project and its default backend DIR's."""
    other = up_sh / "elsewhere"
    other.mkdir()
    ran = calls(up_sh, "outputs", KNS_PROJECT_DIR=str(other))
    assert ran["stack"]["PULUMI_BACKEND_URL"] == f"file://{other}/.pulumi-state"
    assert (other / ".pulumi-state").is_dir() and not (up_sh / ".pulumi-state").exists()


def test_kns_outputs_runs_make_outputs_for_its_stack():
    from kns_cli import cli
    command, env = cli.outputs_command("prod")
    assert command[1:] == [str(ROOT / "scripts" / "up.sh"), "outputs"] and env["KNS_STACK"] == "prod"
    hint = next(line for line in (ROOT / "scripts" / "up.sh").read_text().splitlines() if "Outputs:" in line)
    assert "make outputs" in hint
