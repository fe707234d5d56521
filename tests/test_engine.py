"""The real Pulumi engine and Kubernetes provider (render mode) on a temporary copy of the
dev stack: what users run, not what the mocks record."""

from __future__ import annotations

import base64
import collections
import json
import subprocess

import pytest
import yaml

from kns_testing.engine import PASSPHRASE, Project
from kns_testing.program import PROJECT_FILES, ROOT, dev_stack_config, engine_project, run_program


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    toolchain = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], capture_output=True, text=True, timeout=5400)
    assert toolchain.returncode == 0, f"scripts/toolchain.sh failed:\n{toolchain.stderr[-3000:]}"
    bin_dir = toolchain.stdout.strip()
    root = tmp_path_factory.mktemp("engine") / "kns-platform"
    env = engine_project(root, bin_dir, PASSPHRASE, files=(*PROJECT_FILES, "Pulumi.dev.yaml"))
    project = Project(root, env)
    project.pulumi("stack", "init", "dev")
    return project


def changed(steps: list[dict]) -> dict[str, set[str]]:
    """op -> logical names of the Kubernetes resources that step changes."""
    out: dict[str, set[str]] = collections.defaultdict(set)
    for step in steps:
        # urn:pulumi:<stack>::<project>::<parent types>$<type>::<name>
        _, _, types, name = step["urn"].split("::", 3)
        if step["op"] != "same" and types.rsplit("$", 1)[-1].startswith("kubernetes:"):
            out[step["op"]].add(name)
    return dict(out)


def entry_names(entry: str) -> set[str]:
    return {entry, f"{entry}-defaults", f"{entry}-quota", f"{entry}-runner", f"{entry}-isolation"}


# The tests below run in order, on one stack, as a user would.


def test_preview_then_up_renders_what_the_config_describes(project):
    steps = project.preview()
    assert steps and all(s["op"] in ("create", "same") for s in steps)
    project.pulumi("up", "--yes")
    expected = collections.Counter(
        r.type.rsplit(":", 1)[1].removesuffix("Patch")  # a NodePatch renders as a Node
        for r in run_program(dev_stack_config(), stack="dev").resources
        if r.type.startswith("kubernetes:") and r.custom
    )
    assert project.rendered() == expected
    assert project.rendered()["Job"] == 4 and project.rendered()["CronJob"] == 3


def test_a_second_up_changes_nothing(project):
    done = project.pulumi("up", "--yes", "--expect-no-changes")  # fails on any change
    assert " unchanged" in done.stdout and "created" not in done.stdout
    assert changed(project.preview()) == {}


def test_changing_one_jobs_cpu_touches_only_that_entry(project):
    def more_cpu(config):
        entry = next(j for j in config["kns:jobs"] if j["name"] == "train-resnet")
        entry["cpu"] = 12

    project.edit_config(more_cpu)
    ops = changed(project.preview())
    touched = set().union(*ops.values())
    assert "train-resnet" in touched  # the Job itself
    assert touched <= entry_names("train-resnet"), ops
    project.pulumi("up", "--yes")
    assert changed(project.preview()) == {}


def test_removing_one_entry_deletes_only_its_resources(project):
    project.edit_config(lambda config: config["kns:schedules"].pop(
        next(i for i, s in enumerate(config["kns:schedules"]) if s["name"] == "nightly-report")))
    ops = changed(project.preview())
    assert set(ops) == {"delete"}, ops
    assert ops["delete"] == entry_names("nightly-report")
    project.pulumi("up", "--yes")


def test_adding_one_entry_creates_only_its_resources(project):
    project.edit_config(lambda config: config["kns:jobs"].insert(
        0, {"name": "added-first", "image": "busybox:1.37", "cpu": 1, "memory": 256}))
    ops = changed(project.preview())
    assert set(ops) == {"create"}, ops
    assert ops["create"] == entry_names("added-first")
    project.pulumi("up", "--yes")


def test_a_config_error_stops_preview_with_its_path_and_no_traceback(project):
    before = project.pulumi("stack", "export").stdout
    original = project.stack_file.read_text()

    def break_it(config):
        config["kns:jobs"][0]["memory"] = "12Qi"
        config["kns:jobs"][1]["pool"] = "nowhere"

    project.edit_config(break_it)
    done = project.pulumi("preview", check=False)
    project.stack_file.write_text(original)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "kns-platform: invalid configuration, 2 problems; nothing was applied:" in output
    assert 'kns:jobs[added-first].memory: "12Qi" is not a quantity' in output
    assert 'no node pool named "nowhere"' in output
    assert "Traceback" not in output
    assert project.pulumi("stack", "export").stdout == before


def test_profile_rules_keep_their_file_order_through_the_engine(project):
    """The engine hands mappings over with sorted keys ("*", "@ml", "alice"); file order
    ("*", "alice", "@ml") must win, so the later group rule refuses 4 CPUs."""
    original = project.stack_file.read_text()

    def profiles(config):
        config["kns:profiles"] = {"*": {"maxCpu": 1}, "alice": {"maxCpu": 8}, "@ml": {"maxCpu": 2}}
        config["kns:jobs"].append({"name": "ordered", "user": "alice", "groups": ["ml"], "image": "busybox:1.37", "cpu": 4})

    project.edit_config(profiles)
    done = project.pulumi("preview", check=False)
    project.stack_file.write_text(original)
    assert done.returncode != 0
    assert 'kns:jobs[ordered].cpu: 4 CPU is over maxCpu 2 of profile rule "@ml"' in done.stdout + done.stderr


def test_secrets_never_appear_in_plain_text_in_state(project):
    client_secret = "kc-s3cr3t-7d1e94"
    proxy = "PROXY-s3cr3t-51c0aa"
    project.pulumi("config", "set", "--secret", "kns:keycloakClientSecret", client_secret)
    project.pulumi("config", "set", "--secret", "--path", "kns:credentials.grid-proxy.x509up", proxy)

    def use_them(config):
        config["kns:knsScheduler"]["keycloak"] = {"url": "https://kc.example.org/auth", "realm": "kns", "clientId": "kns"}
        config["kns:jobs"][0]["credentials"] = ["grid-proxy"]

    project.edit_config(use_them)
    project.pulumi("up", "--yes")
    state = project.pulumi("stack", "export").stdout
    assert '"kns-scheduler-keycloak"' in state and '"kns-cred-grid-proxy"' in state
    for value in (client_secret, proxy):
        assert value not in state and base64.b64encode(value.encode()).decode() not in state
    assert client_secret not in project.stack_file.read_text() and proxy not in project.stack_file.read_text()
    # Render mode writes Secret manifests as they would be applied: in plain text, by
    # design (docs/options.md says how to keep them out of version control).
    (rendered,) = (project.root / "build" / "manifests" / "dev").rglob("*secret*kns-cred-grid-proxy*.yaml")
    assert base64.b64decode(yaml.safe_load(rendered.read_text())["data"]["x509up"]).decode() == proxy


def test_destroy_removes_everything(project):
    project.pulumi("destroy", "--yes")
    deployment = json.loads(project.pulumi("stack", "export").stdout)["deployment"]
    assert not deployment.get("resources")
