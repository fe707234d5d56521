"""Every input the program reads outside the stack file is in the digest of each stack whose
objects it changes (docs/entry-stacks.md, "What a full `make up` runs"): a full `make up`
skips a stack whose digest is the one on record, so an input missing from it would leave
the stack's objects stale (a worker's kubeconfig file pointing at a new server, and the
manager's MultiKueue Secret still naming the old one).

Each case changes one input of a site split into entry stacks, runs every stack's program
(under mocks) before and after, and compares what each registers with whether the digest
`make up` computes offline (and the program exports) changed. The inputs are changed as a
user would; the product's own lists of what it digests are never read here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from config import fingerprint
from kns_cli import fullrun
from kns_testing.program import ROOT, run_program
from kns_testing.sites import EAST_KUBECONFIG, site
from plan import digests, stacks

SPLIT = 2
MANAGER_KUBECONFIG = yaml.safe_dump({
    "apiVersion": "v1", "kind": "Config",
    "clusters": [{"name": "manager", "cluster": {"server": "https://10.0.0.1:6443"}},
                 {"name": "west", "cluster": {"server": "https://10.2.0.1:6443"}}],
    "users": [{"name": "ops", "user": {"token": "manager-token"}}],
    "contexts": [{"name": "kns-manager", "context": {"cluster": "manager", "user": "ops"}},
                 {"name": "kns-west", "context": {"cluster": "west", "user": "ops"}}],
    "current-context": "kns-manager",
})
JOB_FILE = {"jobs": [{"name": "align", "image": "busybox:1.36", "cpu": "1", "memory": "1Gi", "queue": "batch"}]}


def project(root: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the program with a site stack `dev` in two entry stacks: worker east's
    kubeconfig a file of the project, the manager and west reached through $KUBECONFIG, one
    entry in a job file. Returns the project and the environment its runs see."""
    root.mkdir(parents=True)
    for name in fingerprint.PROGRAM_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy(source, root / name)
    config = site(state={"entryStacks": SPLIT}, jobFiles=["jobs/*.yaml"])
    config["workers"][0]["kubeconfig"] = "kubeconfigs/east.yaml"
    for job in config["jobs"]:
        job.pop("credentials", None)
    del config["credentials"]
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {f"kns:{k}": v for k, v in config.items()}},
                                                       sort_keys=False))
    (root / "kubeconfigs").mkdir()
    (root / "kubeconfigs" / "east.yaml").write_text(EAST_KUBECONFIG)
    (root / "kubeconfigs" / "manager.yaml").write_text(MANAGER_KUBECONFIG)
    (root / "jobs").mkdir()
    (root / "jobs" / "team.yaml").write_text(yaml.safe_dump(JOB_FILE))
    return root, {"KUBECONFIG": str(root / "kubeconfigs" / "manager.yaml"), "HOME": str(root)}


def replace_in(path: str, old: str, new: str) -> Callable[[Path, dict[str, str]], None]:
    def change(root: Path, env: dict[str, str]) -> None:
        text = (root / path).read_text()
        assert old in text, (path, old)
        (root / path).write_text(text.replace(old, new))
    return change


def point_kubeconfig_elsewhere(root: Path, env: dict[str, str]) -> None:
    moved = root / "kubeconfigs" / "moved.yaml"
    moved.write_text(MANAGER_KUBECONFIG.replace("https://10.0.0.1:6443", "https://10.9.0.1:6443"))
    env["KUBECONFIG"] = str(moved)


CHANGES: dict[str, Callable[[Path, dict[str, str]], None]] = {
    "a worker's kubeconfig file: its server": replace_in("kubeconfigs/east.yaml", "10.1.0.1", "10.1.0.99"),
    "a worker's kubeconfig file: its credentials": replace_in("kubeconfigs/east.yaml", "s3cr3t-operator-token",
                                                              "rotated-operator-token"),
    "the manager's kubeconfig file": replace_in("kubeconfigs/manager.yaml", "10.0.0.1", "10.0.0.2"),
    "$KUBECONFIG names another file": point_kubeconfig_elsewhere,
    "a job file's entry": replace_in("jobs/team.yaml", "cpu: '1'", "cpu: '2'"),
    "the pinned toolchain": replace_in("versions.env", "PULUMI_VERSION=", "PULUMI_VERSION=9"),
    "the program": replace_in("plan/queues.py", '"""', '"""Changed. ', ),
}


def registered(root: Path, env: dict[str, str], stack: str, monkeypatch) -> str:
    """What the stack's program registers (every resource's type, name, provider and
    inputs, secrets' values included), as one text to compare."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    document = yaml.safe_load((root / "Pulumi.dev.yaml").read_text())["config"]
    config = {key.split(":", 1)[1]: value for key, value in document.items()}
    run = run_program(config, stack=stack, project_dir=root)
    return json.dumps(sorted(json.dumps([r.type, r.name, r.provider, r.inputs], sort_keys=True, default=str)
                             for r in run.resources)), run.outputs


def digests_of(root: Path, env: dict[str, str]) -> dict[str, str]:
    known = fullrun.offline_digests(root, "dev", SPLIT, env, "")
    assert known is not None, "the site passes offline"
    return {"dev": known.platform, **known.entries}


@pytest.mark.parametrize("case", sorted(CHANGES), ids=sorted(CHANGES))
def test_a_stack_whose_objects_an_input_changes_has_a_new_digest(tmp_path, monkeypatch, case):
    names = stacks.stacks("dev", SPLIT)
    root, env = project(tmp_path / "project")
    before = {stack: registered(root, env, stack, monkeypatch) for stack in names}
    digest_before = digests_of(root, env)
    assert before["dev"][1][digests.PLATFORM_OUTPUT] == digest_before["dev"]  # the program's own export
    CHANGES[case](root, env)
    after = {stack: registered(root, env, stack, monkeypatch) for stack in names}
    digest_after = digests_of(root, env)
    assert after["dev"][1][digests.PLATFORM_OUTPUT] == digest_after["dev"]
    changed = [stack for stack in names if before[stack][0] != after[stack][0]]
    stale = [stack for stack in changed if digest_before[stack] == digest_after[stack]]
    assert not stale, f"{case}: {stale} register other objects, with the digest on record"
    if case in ("a worker's kubeconfig file: its server", "a job file's entry"):
        assert changed, "the case changes what a stack registers"  # the comparison above is not empty


def test_inline_kubeconfig_text_is_covered_by_the_stack_file_not_hashed_again(tmp_path):
    """A worker's inline kubeconfig (a secret) is in the stack file as its ciphertext: the
    digests read no text of it."""
    from config import kubeconfig
    from config.models import Cluster

    class Worker:
        name, kubeconfig = "east", EAST_KUBECONFIG

    reads = kubeconfig.read_digests(Cluster(name="c", render_dir="out"), [Worker()], tmp_path, {})
    assert reads == {}
    Worker.kubeconfig = "east.yaml"
    (tmp_path / "east.yaml").write_text(EAST_KUBECONFIG)
    assert set(kubeconfig.read_digests(Cluster(name="c", render_dir="out"), [Worker()], tmp_path, {})) == {
        "worker:east"}
