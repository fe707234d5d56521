"""`./kns up ENTRY...` without an engine (kns_cli/up.py, config/fingerprint.py): what it
records and compares, how it reads the state, what it targets, and that a refusal or a bad
name stops it before the engine. The real engine on a control plane: tests/test_drift.py
(`test_kns_up_...`)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from config import fingerprint
from config.invocation import TARGETED_RUN, marker
from config.source import read_stack_file
from kns_cli import cli
from kns_cli import preview as preview_module
from kns_cli import up as up_module
from kns_cli.stack import UsageError, load_stack
from kns_testing import tokens
from kns_testing.program import ROOT, dev_stack_config, run_program
from plan.targeting import ONLY_ENTRIES, entry_urns
from plan.stackplan import plan_stack

STACK_URN = "urn:pulumi:dev::kns-platform::pulumi:pulumi:Stack::kns-platform-dev"


def urn(types: str, name: str) -> str:
    return f"urn:pulumi:dev::kns-platform::{types}::{name}"


def export(digest, *entries: tuple[str, str, list[str]]) -> dict:
    """A `pulumi stack export` document: the root stack with its digest output, a platform
    component, and each entry's component (type, name) with children (logical names)."""
    resources = [{"urn": STACK_URN, "type": "pulumi:pulumi:Stack",
                  "outputs": {} if digest is None else {fingerprint.OUTPUT: digest}},
                 {"urn": urn(tokens.KNS_CLUSTER, "kns-dev"), "type": tokens.KNS_CLUSTER,
                  "parent": STACK_URN}]
    for kind, name, children in entries:
        root = urn(kind, name)
        resources.append({"urn": root, "type": kind, "parent": STACK_URN})
        inner = urn(f"{kind}${tokens.JOB_NAMESPACE}", f"{name}-ns")
        resources.append({"urn": inner, "type": tokens.JOB_NAMESPACE, "parent": root})
        for child in children:  # grandchildren: under the namespace component
            resources.append({"urn": urn(f"{kind}${tokens.JOB_NAMESPACE}$kubernetes:batch/v1:Job", child),
                              "type": "kubernetes:batch/v1:Job", "parent": inner})
    return {"version": 3, "deployment": {"resources": resources}}


# ---- the record: platformDigest --------------------------------------------------------------


def test_shared_digests_follow_shared_sections_only():
    config = {"kns:cluster": {"name": "a", "renderDir": "x"}, "kns:nodePools": [{"name": "p", "role": "compute"}],
              "kns:jobs": [{"name": "j"}], "kns:profiles": {"*": {"maxCpu": 4}}}
    base = fingerprint.shared_digests(config)
    assert list(base) == list(fingerprint.SHARED)
    assert fingerprint.shared_digests({**config, "kns:jobs": [{"name": "k"}], "kns:jobFiles": ["jobs/*.yaml"]}) == base
    reordered = {"kns:cluster": {"renderDir": "x", "name": "a"}, **{k: v for k, v in config.items() if k != "kns:cluster"}}
    assert fingerprint.shared_digests(reordered) == base  # key order is not a change
    changed = fingerprint.shared_digests({**config, "kns:profiles": {"*": {"maxCpu": 8}}})
    assert fingerprint.differences(base, changed) == ["kns:profiles"]
    sealed = fingerprint.shared_digests({**config, "kns:credentials": {"s3": {"key": {"secure": "v1:AAA"}}}})
    again = fingerprint.shared_digests({**config, "kns:credentials": {"s3": {"key": {"secure": "v1:BBB"}}}})
    assert fingerprint.differences(sealed, again) == ["kns:credentials"]  # a secret set again


def test_the_program_digest_is_its_files_not_what_python_or_editors_leave(tmp_path):
    for name in (*fingerprint.PROGRAM_FILES, "docs"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    base = fingerprint.program_digest(tmp_path)
    assert fingerprint.program_digest(ROOT) == base
    (tmp_path / "plan" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "plan" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "config" / "models.py~").write_text("backup")
    (tmp_path / "docs" / "cli.md").write_text("docs are not the program")
    assert fingerprint.program_digest(tmp_path) == base
    path = tmp_path / "plan" / "manifests.py"
    path.write_text(path.read_text() + "\n")
    assert fingerprint.program_digest(tmp_path) != base
    path.write_text(path.read_text()[:-1])
    (tmp_path / "components" / "extra.py").write_text("")
    assert fingerprint.program_digest(tmp_path) != base  # a new file counts


def test_the_program_exports_what_kns_up_computes_offline():
    """The program (under the mocks, from the engine's decrypted config) and `./kns up`
    (offline) compute the digest from the same stack file: they agree."""
    run = run_program(dev_stack_config(), stack="dev")
    exported = run.outputs[fingerprint.OUTPUT]
    offline = fingerprint.platform_digest(read_stack_file(ROOT, "dev").config, ROOT)
    assert exported == offline and set(exported) == {*fingerprint.SHARED, fingerprint.PROGRAM}
    assert fingerprint.differences(exported, offline) == []
    assert fingerprint.differences(None, offline) == list(offline)


# ---- the state -------------------------------------------------------------------------------


def test_the_state_gives_the_record_and_every_urn_under_each_entry():
    state = up_module.read_state(export({"kns:cluster": "x"}, (tokens.JOB, "a", ["a", "a-extra"]),
                                        (tokens.SCHEDULE, "b", ["b"])))
    assert state.digest == {"kns:cluster": "x"}
    assert set(state.entries) == {"a", "b"}
    assert state.entries["a"][0] == urn(tokens.JOB, "a")
    assert set(state.entries["a"]) == {
        urn(tokens.JOB, "a"), urn(f"{tokens.JOB}${tokens.JOB_NAMESPACE}", "a-ns"),
        urn(f"{tokens.JOB}${tokens.JOB_NAMESPACE}$kubernetes:batch/v1:Job", "a"),
        urn(f"{tokens.JOB}${tokens.JOB_NAMESPACE}$kubernetes:batch/v1:Job", "a-extra")}
    assert up_module.read_state(export(None)).digest is None


def test_names_are_split_into_applied_and_removed_and_unknown_ones_refused():
    _, plans = load_stack(ROOT, "dev")
    state = up_module.read_state(export(None, (tokens.JOB, "old-job", []),
                                        (tokens.JOB, "train-resnet", [])))
    assert up_module.split_names(plans, state, ["train-resnet", "old-job", "hourly-sync"], "dev") == (
        ["train-resnet", "hourly-sync"], ["old-job"])
    with pytest.raises(UsageError) as info:
        up_module.split_names(plans, state, ["train-resnt", "old-jb", "zzzzzz"], "dev")
    assert str(info.value) == (
        'no entry named "train-resnt" in the config or the state of stack dev; did you mean "train-resnet"?; '
        'no entry named "old-jb" in the config or the state of stack dev; did you mean "old-job"?; '
        'no entry named "zzzzzz" in the config or the state of stack dev')


def test_the_refusal_names_what_changed_and_what_to_run():
    assert up_module.refusal("dev", ["kns:queues"], {}) == (
        "kns up: refused, nothing was applied: shared section changed since the last full `up`: kns:queues; every "
        "entry depends on it. Apply the whole stack with `make up` (then `./kns up ENTRY...` applies single "
        "entries again)")
    text = up_module.refusal("prod", ["kns:profiles", "program"], {})
    assert "shared sections changed since the last full `up`: kns:profiles, program (the program's files); every " \
           "entry depends on them. Apply the whole stack with `KNS_STACK=prod make up`" in text
    assert "no record of a full `up` by this version of the program" in up_module.refusal("dev", ["x"], None)
    # A new layout: the full `up` itself refuses until the entries' state is moved, so the
    # advice leads through `./kns restack` first.
    assert up_module.refusal("prod", ["kns:state"], {}).endswith(
        "Apply the whole stack with `./kns restack --stack prod` (kns:state moves entries between stacks), then "
        "`KNS_STACK=prod make up` (then `./kns up ENTRY...` applies single entries again)")


def test_the_update_carries_the_marker_and_targets_and_no_policy_pack():
    """The pack's rules ran in the offline check (kns_cli/up.py says why not in the engine)."""
    args = up_module.up_arguments("dev", ["urn:a", "urn:b"], "t0k3n")
    assert args[:4] == ["pulumi", "up", "--yes", "--skip-preview"]
    assert args[args.index("--message") + 1] == marker("t0k3n")
    assert not any(a.startswith("--policy-pack") for a in args)
    assert [args[i + 1] for i, a in enumerate(args) if a == "--target"] == ["urn:a", "urn:b"]
    assert args[-1] == "--target-dependents"


# ---- the whole command, with the engine replaced -----------------------------------------------


class Engine:
    """Stands in for the toolchain, the state export and the engine run."""

    def __init__(self, monkeypatch, state: dict):
        self.runs: list[tuple[list[str], dict]] = []
        monkeypatch.setattr(preview_module, "toolchain", lambda: "/nonexistent/bin")
        monkeypatch.setattr(up_module, "export_state", lambda *a: up_module.read_state(state))
        # Where the entries are is checked first (test_entry_stacks.py, the hand-moved entry).
        monkeypatch.setattr(up_module.layout, "check_placement", lambda *a: None)

        def run(action, stack, command, **kwargs):
            self.runs.append((list(command), dict(kwargs["env"])))
            kwargs["out"].write("summary\n")
            return 0
        monkeypatch.setattr(up_module.engine_run, "run", run)


def dev_digest() -> dict:
    return fingerprint.platform_digest(read_stack_file(ROOT, "dev").config, ROOT)


def test_an_up_targets_the_named_entries_and_a_removed_entry_s_state(monkeypatch):
    removed_children = ["old-job", "old-job-extra"]
    engine = Engine(monkeypatch, export(dev_digest(), (tokens.JOB, "old-job", removed_children),
                                        (tokens.JOB, "train-resnet", ["train-resnet"])))
    cfg, plans = load_stack(ROOT, "dev")
    out, err = io.StringIO(), io.StringIO()
    assert up_module.run_up(ROOT, plan_stack(cfg, plans), "dev", ["train-resnet", "old-job"], {"PATH": "/usr/bin"},
                            out=out, err=err) == 0
    (command, env), = engine.runs
    targets = [command[i + 1] for i, a in enumerate(command) if a == "--target"]
    assert targets[:len(entry_urns(plan_stack(cfg, plans), ["train-resnet"], "dev", "kns-platform"))] == \
        entry_urns(plan_stack(cfg, plans), ["train-resnet"], "dev", "kns-platform")
    assert urn(tokens.JOB, "old-job") in targets
    assert urn(f"{tokens.JOB}${tokens.JOB_NAMESPACE}$kubernetes:batch/v1:Job", "old-job-extra") in targets
    assert len(targets) == len(set(targets))
    assert env[ONLY_ENTRIES] == "train-resnet" and command[command.index("--message") + 1] == marker(env[TARGETED_RUN])
    assert "kns up: stack dev, 2 entries (train-resnet, old-job (removed)): pulumi up --skip-preview --target" in err.getvalue()
    assert out.getvalue() == ("summary\nNot applied (--target): the platform and the 6 other entries stay as the "
                              "stack has them; `make up` applies the whole stack.\n")


@pytest.mark.parametrize("recorded", [None, "stale"], ids=["no record", "a shared change"])
def test_a_refused_up_never_starts_the_engine(monkeypatch, recorded):
    digest = None if recorded is None else {**dev_digest(), "kns:queues": "0" * 64}
    engine = Engine(monkeypatch, export(digest))
    cfg, plans = load_stack(ROOT, "dev")
    with pytest.raises(up_module.UpRefused) as info:
        up_module.run_up(ROOT, plan_stack(cfg, plans), "dev", ["train-resnet"], {}, out=io.StringIO(), err=io.StringIO())
    assert engine.runs == []
    assert ("no record of a full `up`" if recorded is None else "kns:queues; every entry") in str(info.value)


def test_the_command_line_stops_on_bad_config_or_a_refusal(monkeypatch, tmp_path, capsys):
    engine = Engine(monkeypatch, export({**dev_digest(), "program": "old"}))
    assert cli.main(["up", "train-resnet"]) == up_module.REFUSED == 3
    assert capsys.readouterr().err.startswith("kns up: refused, nothing was applied: shared section changed since the "
                                              "last full `up`: program (the program's files)")
    config = {f"kns:{k}": v for k, v in dev_stack_config().items()}
    config["kns:jobs"][0]["memory"] = "12Qi"
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    (tmp_path / "Pulumi.broken.yaml").write_text(yaml.safe_dump({"config": config}))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "broken-stack")  # a stack other than dev needs its own
    assert cli.main(["up", "--project-dir", str(tmp_path), "--stack", "broken", "train-resnet"]) == 1
    assert "kns-platform: invalid configuration" in capsys.readouterr().err
    assert engine.runs == []
    assert cli.main(["up", "no-such-entry"]) == 2
    assert 'kns up: no entry named "no-such-entry" in the config or the state of stack dev' in capsys.readouterr().err


@pytest.mark.parametrize("rule, edit, pack", [
    ("allowed-registries", lambda job: job.update(image="registry.example.com/team/train:1"), None),
    ("allowed-registries", lambda job: None, {"allowed-registries": {"allowedRegistries": ["registry.example.com"]}}),
    ("privileged-only-where-allowed", lambda job: job.update(jsonOverrides=[
        {"path": "/spec/template/spec/containers/0/securityContext", "value": {"privileged": True}}]), None),
], ids=["an image from elsewhere", "the pack's own config", "privilege by jsonOverrides (a stack rule)"])
def test_what_the_policy_pack_refuses_stops_kns_up_before_the_engine(monkeypatch, tmp_path, capsys, rule, edit, pack):
    """The targeted update runs without the pack: its rules, with the pack's config
    (KNS_POLICY_CONFIG), judge the entries in the offline check, which names the rule and
    starts nothing."""
    engine = Engine(monkeypatch, export(dev_digest()))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "judged-stack")  # a stack other than dev needs its own
    config = {f"kns:{k}": v for k, v in dev_stack_config().items()}
    job = next(j for j in config["kns:jobs"] if j["name"] == "train-resnet")
    edit(job)
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    (tmp_path / "Pulumi.judged.yaml").write_text(yaml.safe_dump({"config": config}))
    if pack is not None:
        (tmp_path / "pack.json").write_text(json.dumps(pack))
        monkeypatch.setenv("KNS_POLICY_CONFIG", "pack.json")
    assert cli.main(["up", "--project-dir", str(tmp_path), "--stack", "judged", "train-resnet"]) == 1
    said = capsys.readouterr().err
    assert f"(policy {rule}, docs/policy.md)" in said and "train-resnet" in said, said
    assert engine.runs == []


def test_an_entry_binds_nothing_but_its_own_role():
    """Why the cluster-admin rule needs no run in a targeted update (kns_cli/up.py): what it
    judges, bindings, an entry has one of, in its namespace, to its own Role; the
    ClusterRoleBindings are the platform's, the same with no entry at all."""
    config = dev_stack_config()
    run = run_program(config)
    bindings = run.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    namespaces = {ns.metadata["name"] for ns in run.of_type("kubernetes:core/v1:Namespace")
                  if "kns.io/job" in (ns.metadata.get("labels") or {})}
    assert len(namespaces) == len(load_stack(ROOT, "dev")[1]) > 5
    in_entries = [b for b in bindings if b.metadata.get("namespace") in namespaces]
    assert sorted(b.metadata["namespace"] for b in in_entries) == sorted(namespaces)
    assert all(b.inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kns-runner"}
               for b in in_entries)
    cluster_wide = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
    empty = run_program({key: value for key, value in config.items() if key not in ("jobs", "schedules", "jobFiles")})
    assert not empty.of_type("kubernetes:batch/v1:Job")
    assert sorted(r.name for r in run.of_type(cluster_wide)) == sorted(r.name for r in empty.of_type(cluster_wide))
    assert run.of_type(cluster_wide)


def test_the_documented_lines_are_what_kns_up_prints(monkeypatch):
    """docs/cli.md shows the refusal and the closing line as `./kns up` prints them."""
    doc = (ROOT / "docs" / "cli.md").read_text()
    section = doc[doc.index("## `./kns up ENTRY...`"):doc.index("## `./kns changed BASE [HEAD]`")]
    refusal = next(line.strip() for line in section.splitlines() if line.strip().startswith("kns up: refused"))
    assert refusal == up_module.refusal("prod", ["kns:nodePools", "kns:profiles"], {})
    closing = next(line for line in section.splitlines() if line.startswith("Not applied (--target)"))
    Engine(monkeypatch, export(dev_digest()))
    cfg, plans = load_stack(ROOT, "dev")
    out = io.StringIO()
    up_module.run_up(ROOT, plan_stack(cfg, plans), "dev", ["train-resnet"], {}, out=out, err=io.StringIO())
    assert out.getvalue().splitlines()[-1] == closing


def test_make_up_with_entries_runs_kns_up():
    """`make up ENTRIES="a b"` is `./kns up` of those entries (on KNS_STACK); without
    ENTRIES it stays the full `scripts/up.sh up`."""
    def planned(*args: str) -> str:
        done = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "up", *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert planned("ENTRIES=a b") == "./kns up --stack dev a b"
    assert planned("ENTRIES=a", "KNS_STACK=prod") == "./kns up --stack prod a"
    assert planned() == "bash scripts/up.sh up"
