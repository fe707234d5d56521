"""`./kns changed BASE [HEAD]` (issue 33, kns_cli/changed.py) on crafted commits: a temporary
git repository holding a copy of the project (kns_testing/program.py PROJECT_FILES and the
dev stack), one commit before a change and one after it."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Callable, Optional

import pytest
import yaml

from kns_cli import cli
from config.loader import check_config
from kns_testing.program import PROJECT_FILES, ROOT, dev_stack_config
from kns_testing.repos import git

# An encrypted value as a stack file holds it: `kns changed` never decrypts, so any text serves.
CIPHER_A = "v1:c2FsdA==:v1:AAAAAAAAAAAAAAAA:Zmlyc3Qgc2VjcmV0IHZhbHVl"
CIPHER_B = "v1:c2FsdA==:v1:BBBBBBBBBBBBBBBB:c2Vjb25kIHNlY3JldCB2YWx1ZQ=="


class Repo:
    """A git repository with the project in `project` (the root, or a subdirectory)."""

    def __init__(self, root: Path, project: Path):
        self.root = root
        self.project = project

    @property
    def stack_file(self) -> Path:
        return self.project / "Pulumi.dev.yaml"

    def commit(self, message: str) -> str:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.root, "rev-parse", "HEAD")

    def edit_config(self, change: Callable[[dict], None]) -> None:
        document = yaml.safe_load(self.stack_file.read_text())
        change(document["config"])
        self.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))

    def edit_yaml(self, relative: str, change: Callable[[dict], None]) -> None:
        path = self.project / relative
        document = yaml.safe_load(path.read_text()) if path.exists() else {}
        change(document)
        path.write_text(yaml.safe_dump(document, sort_keys=False))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The project files, copied once."""
    where = tmp_path_factory.mktemp("changed-template")
    for name in (*PROJECT_FILES, "Pulumi.dev.yaml"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, where / name)
    return where


def make_repo(template: Path, root: Path, sub: Optional[str] = None) -> Repo:
    project = root / sub if sub else root
    shutil.copytree(template, project)
    git(root, "init", "-q", "-b", "main")
    return Repo(root, project)


@pytest.fixture
def repo(template, tmp_path) -> Repo:
    return make_repo(template, tmp_path / "repo")


def kns_changed(repo: Repo, capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["changed", "--project-dir", str(repo.project), *args])
    out, err = capsys.readouterr()
    return code, out, err


def report(repo: Repo, capsys, *args: str) -> dict:
    code, out, err = kns_changed(repo, capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def summary(found: dict) -> dict:
    return {key: found[key] for key in ("added", "changed", "removed", "shared")}


def entry(config: dict, kind: str, name: str) -> dict:
    return next(item for item in config[f"kns:{kind}"] if item["name"] == name)


NOTHING = {"added": [], "changed": [], "removed": [], "shared": []}


def add_change_remove(config: dict) -> None:
    config["kns:jobs"].append({"name": "added-smoke", "image": "busybox:1.37", "cpu": 1, "memory": 256})
    entry(config, "jobs", "train-resnet")["cpu"] = 12
    config["kns:schedules"].remove(entry(config, "schedules", "nightly-report"))


def test_an_entry_added_changed_and_removed(repo, capsys):
    base = repo.commit("base")
    repo.edit_config(add_change_remove)
    head = repo.commit("head")
    found = report(repo, capsys, base, head)
    assert summary(found) == {"added": ["added-smoke"], "changed": ["train-resnet"], "removed": ["nightly-report"],
                              "shared": []}
    assert (found["stack"], found["base"], found["head"]) == ("dev", base, head)
    code, out, err = kns_changed(repo, capsys, base, head)
    assert (code, err) == (0, "")
    assert out == ("stack dev: 1 added (added-smoke), 1 changed (train-resnet), 1 removed (nightly-report); "
                   "shared sections unchanged\n")
    # What CI's apply reads (scripts/ci-up.sh): a targeted up of the three.
    assert kns_changed(repo, capsys, base, head, "--format", "up-plan") == (
        0, "targeted added-smoke train-resnet nightly-report\n", "")


def test_head_is_the_commit_checked_out_not_the_working_tree(repo, capsys):
    base = repo.commit("base")
    repo.edit_config(add_change_remove)
    repo.commit("head")
    repo.edit_config(lambda config: entry(config, "jobs", "vcluster-smoke").update(cpu=2))  # not committed
    assert summary(report(repo, capsys, base)) == {
        "added": ["added-smoke"], "changed": ["train-resnet"], "removed": ["nightly-report"], "shared": []}
    assert summary(report(repo, capsys, "HEAD", "HEAD")) == NOTHING


def test_the_project_in_a_subdirectory_of_the_repository(template, tmp_path, capsys):
    repo = make_repo(template, tmp_path / "repo", sub="infra/kns")
    (repo.root / "README").write_text("the repository holds more than the project\n")
    base = repo.commit("base")
    repo.edit_config(add_change_remove)
    (repo.root / "README").write_text("changed, outside the project\n")
    found = report(repo, capsys, base)
    assert summary(found) == NOTHING  # not committed yet
    repo.commit("head")
    assert summary(report(repo, capsys, base)) == {
        "added": ["added-smoke"], "changed": ["train-resnet"], "removed": ["nightly-report"], "shared": []}


def test_an_entry_moved_between_the_stack_file_and_job_files_is_unchanged(repo, capsys):
    base = repo.commit("base")
    moved: dict = {}

    def out_of_the_stack_file(config):
        moved["job"] = entry(config, "jobs", "train-resnet")
        config["kns:jobs"].remove(moved["job"])
    repo.edit_config(out_of_the_stack_file)
    # train-resnet into jobs/research.yaml; hourly-sync from there into a new jobs/sync.yaml.
    research = yaml.safe_load((repo.project / "jobs" / "research.yaml").read_text())
    sync = next(s for s in research["schedules"] if s["name"] == "hourly-sync")
    research["schedules"].remove(sync)
    research["jobs"].append(moved["job"])
    repo.edit_yaml("jobs/research.yaml", lambda document: document.update(research))
    repo.edit_yaml("jobs/sync.yaml", lambda document: document.update(schedules=[sync]))
    head = repo.commit("move entries between files")
    assert git(repo.root, "diff", "--stat", base, head)  # the text did change
    assert summary(report(repo, capsys, base, head)) == NOTHING
    # The same move with a real change in the moved entry is that entry's change only.
    repo.edit_yaml("jobs/sync.yaml", lambda document: document["schedules"][0].update(schedule="10 * * * *"))
    assert summary(report(repo, capsys, base, repo.commit("change"))) == {**NOTHING, "changed": ["hourly-sync"]}


def test_a_reordering_and_respelling_is_no_change(repo, capsys):
    base = repo.commit("base")

    def reversed_keys(item):
        return {key: item[key] for key in reversed(list(item))}

    def respell(config):
        for kind in ("kns:jobs", "kns:schedules"):  # entries and their keys in another order
            config[kind] = [reversed_keys(item) for item in reversed(config[kind])]
        entry(config, "jobs", "train-resnet")["memory"] = "65536Mi"   # 64Gi
        entry(config, "jobs", "train-resnet")["cpu"] = "8000m"        # 8
        entry(config, "jobs", "etl-nightly-backfill")["memory"] = "4Gi"  # was 4096 (MiB)
        entry(config, "jobs", "vcluster-smoke")["cpu"] = 0.5           # was 500m
        config["kns:cluster"] = reversed_keys(config["kns:cluster"])
        for key in list(config)[:3]:  # top-level keys in another order
            config[key] = config.pop(key)
    repo.edit_config(respell)
    text = repo.stack_file.read_text()
    repo.stack_file.write_text("# a comment, and flow style below\n" + yaml.safe_dump(
        yaml.safe_load(text), sort_keys=False, default_flow_style=True, width=70))
    repo.edit_yaml("jobs/research.yaml", lambda document: document["jobs"][0].update(memory="49152Mi"))  # 48Gi
    head = repo.commit("respell")
    assert git(repo.root, "diff", "--stat", base, head)
    assert summary(report(repo, capsys, base, head)) == NOTHING
    code, out, _ = kns_changed(repo, capsys, base, head)
    assert (code, out) == (0, "stack dev: 0 added, 0 changed, 0 removed; shared sections unchanged\n")
    assert kns_changed(repo, capsys, base, head, "--format", "up-plan")[:2] == (0, "none\n")


def test_a_profile_change_marks_shared(repo, capsys):
    repo.edit_config(lambda config: config.setdefault("kns:profiles", {}).update({"@data": {"maxCpu": 32}}))
    base = repo.commit("base, with a rule for the data group")
    repo.edit_config(lambda config: config["kns:profiles"]["@data"].update(maxCpu=64))
    found = report(repo, capsys, base, repo.commit("profile"))
    assert summary(found) == {**NOTHING, "shared": ["kns:profiles"]}  # a cap: no entry's result changes
    code, out, _ = kns_changed(repo, capsys, base)
    assert out.endswith("; shared sections changed: kns:profiles\n")
    assert kns_changed(repo, capsys, base, "--format", "up-plan")[:2] == (
        0, "full shared sections changed: kns:profiles\n")


def test_a_pool_change_marks_shared(repo, capsys):
    base = repo.commit("base")
    repo.edit_config(lambda config: next(p for p in config["kns:nodePools"] if p["name"] == "vcluster")
                     ["nodes"].append("vc-node-5"))
    found = report(repo, capsys, base, repo.commit("a fifth vcluster node"))
    assert summary(found) == {**NOTHING, "shared": ["kns:nodePools"]}


@pytest.mark.parametrize("before,after", [(None, 2), (2, 3), (3, None)], ids=["split", "reshaped", "joined"])
def test_a_layout_change_marks_shared_so_ci_runs_the_full_up(repo, capsys, before, after):
    """kns:state.entryStacks moves entries' state (`./kns restack`, which only the full up
    runs): an apply that read it as no change would skip the move."""
    def layout(count):
        def change(config):
            config.pop("kns:state", None)
            if count is not None:
                config["kns:state"] = {"entryStacks": count}
        return change

    repo.edit_config(layout(before))
    base = repo.commit("base")
    repo.edit_config(layout(after))
    found = report(repo, capsys, base, repo.commit("layout"))
    assert summary(found) == {**NOTHING, "shared": ["kns:state"]}
    assert kns_changed(repo, capsys, base, "--format", "up-plan")[:2] == (0, "full shared sections changed: kns:state\n")


RESERVATION = {"name": "maint", "pool": "burst", "resources": {"cpu": 4}, "schedule": "0 22 * * 0", "duration": "2h",
               "timeZone": "Etc/UTC"}
BUDGET = {"name": "research-q", "queues": ["research"], "limits": {"cpu": 1000}, "reset": "0 0 1 */3 *"}


@pytest.mark.parametrize("key, item, edit", [
    ("kns:reservations", RESERVATION, lambda r: r.update(duration="3h")),
    ("kns:budgets", BUDGET, lambda b: b.update(limits={"cpu": 2000})),
], ids=["reservations", "budgets"])
def test_every_section_that_is_no_entry_is_shared_so_ci_runs_the_full_up(repo, capsys, key, item, edit):
    """A reservation's window or a budget's limits change what the platform stack holds
    (the switch, the counters): no entry changes, and CI must still apply."""
    repo.edit_config(lambda config: config.__setitem__(key, [copy.deepcopy(item)]))
    base = repo.commit("base")
    repo.edit_config(lambda config: edit(config[key][0]))
    found = report(repo, capsys, base, repo.commit("edited"))
    assert summary(found) == {**NOTHING, "shared": [key]}
    assert kns_changed(repo, capsys, base, "--format", "up-plan")[:2] == (0, f"full shared sections changed: {key}\n")


def test_the_shared_sections_are_every_section_but_the_entries_read_by_every_command():
    """One list (config/source.py): `./kns changed` compares each, the digests of
    `./kns up` and the entry stacks hash each, docs/cli.md's table lists each."""
    from config.fingerprint import SHARED, shared_digests
    from config.source import ENTRY_KEYS, KNOWN_KEYS, SHARED_KEYS
    from kns_cli.changed import shared_sections
    assert sorted(SHARED_KEYS + ENTRY_KEYS) == sorted(KNOWN_KEYS) and not set(SHARED_KEYS) & set(ENTRY_KEYS)
    config = {**dev_stack_config(), "reservations": [RESERVATION], "budgets": [BUDGET]}
    cfg = check_config(config, project_dir=ROOT, environ={}, secret_keys=frozenset()).config
    sections = shared_sections(cfg)
    assert list(sections) == list(SHARED) and sections["kns:budgets"][0]["name"] == "research-q"
    assert list(shared_digests({})) == list(SHARED)
    table = (ROOT / "docs" / "cli.md").read_text().split("| shared | what |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"`(kns:[A-Za-z]+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:]))
    assert listed == list(SHARED)


def test_a_secret_change_marks_shared(repo, capsys):
    """Encrypted values are compared as ciphertext: set again, a secret is a change."""
    def credentials(cipher):
        def change(config):
            config["kns:credentials"] = {"registry": {"token": {"secure": cipher}}}
        return change

    repo.edit_config(credentials(CIPHER_A))
    base = repo.commit("base, with a credential set")
    assert summary(report(repo, capsys, base, repo.commit("the same again"))) == NOTHING
    repo.edit_config(credentials(CIPHER_B))
    assert summary(report(repo, capsys, base, repo.commit("a new ciphertext"))) == {
        **NOTHING, "shared": ["kns:credentials"]}


def test_a_secret_inside_an_entry_is_that_entry_s_change(repo, capsys):
    def token(cipher):
        return lambda config: entry(config, "jobs", "vcluster-smoke").setdefault("env", {}).update(
            TOKEN={"secure": cipher})

    repo.edit_config(token(CIPHER_A))
    base = repo.commit("base")
    repo.edit_config(token(CIPHER_B))
    assert summary(report(repo, capsys, base, repo.commit("new token"))) == {**NOTHING, "changed": ["vcluster-smoke"]}


def test_a_change_of_the_program_marks_it_shared(repo, capsys):
    base = repo.commit("base")
    with (repo.project / "plan" / "planner.py").open("a") as handle:
        handle.write("\n# the same config may now build other objects\n")
    found = report(repo, capsys, base, repo.commit("planner"))
    assert summary(found) == {**NOTHING, "shared": ["program"]}
    assert found["programFiles"] == ["plan/planner.py"]


def test_a_stack_new_at_head_adds_every_entry_and_marks_shared(repo, capsys):
    stack = repo.stack_file.read_text()
    repo.stack_file.unlink()
    base = repo.commit("no stack yet")
    repo.stack_file.write_text(stack)
    found = report(repo, capsys, base, repo.commit("the dev stack"))
    assert found["added"] == ["etl-nightly-backfill", "genomics-align", "hourly-sync", "nightly-report",
                              "train-resnet", "vcluster-smoke", "weekly-finetune"]
    assert found["changed"] == found["removed"] == []
    assert {"kns:cluster", "kns:nodePools", "kns:profiles", "kns:queues"} <= set(found["shared"])


def test_a_project_directory_new_at_head_adds_every_entry(template, tmp_path, capsys):
    repo = make_repo(template, tmp_path / "repo", sub="infra/kns")
    moved = tmp_path / "aside"
    repo.project.rename(moved)
    (repo.root / "README").write_text("the project comes later\n")
    base = repo.commit("no project yet")
    moved.rename(repo.project)
    found = report(repo, capsys, base, repo.commit("the project"))
    assert len(found["added"]) == 7 and found["changed"] == found["removed"] == []
    assert found["shared"][0] == "kns:cluster" and found["shared"][-1] == "program"


@pytest.mark.parametrize("args,message", [
    (["nope"], 'kns changed: "nope" is not a commit of the repository at'),
    (["HEAD", "main~5"], 'kns changed: "main~5" is not a commit of the repository at'),
    (["--stack", "prod", "HEAD"], "kns changed: no stack file Pulumi.prod.yaml at HEAD ("),
], ids=["bad-base", "bad-head", "no-stack-file"])
def test_a_usage_error_exits_2(repo, capsys, args, message):
    repo.commit("base")
    code, out, err = kns_changed(repo, capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith(message), err


def test_outside_a_repository_is_a_usage_error(template, tmp_path, capsys):
    project = tmp_path / "not-a-repo"
    shutil.copytree(template, project)
    code, _, err = kns_changed(Repo(project, project), capsys, "HEAD")
    assert code == 2 and "is not in a git repository" in err, err


def test_a_config_error_at_head_exits_1_naming_the_revision(repo, capsys):
    base = repo.commit("base")
    repo.edit_config(lambda config: entry(config, "jobs", "train-resnet").update(memory="12Qi"))
    repo.edit_yaml("jobs/research.yaml", lambda document: document["jobs"][0].update(cpu="lots"))
    head = repo.commit("broken")
    code, out, err = kns_changed(repo, capsys, base)
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == f"kns changed: stack dev is invalid at HEAD ({head[:7]}):"
    # ... then the problems exactly as `./kns validate` prints them
    assert lines[1] == "kns-platform: invalid configuration, 2 problems; nothing was applied:"
    assert any(line.startswith('  - Pulumi.dev.yaml:') and line.endswith(': kns:jobs[train-resnet].memory: "12Qi" is not a quantity')
               for line in lines)
    assert any(line.startswith("  - jobs/research.yaml:") and "jobs[genomics-align].cpu" in line for line in lines)
    assert "invalid at main" not in err and base[:7] not in err  # the base is fine


def test_the_documented_changed_session_is_what_kns_prints(repo, capsys):
    """docs/cli.md's `./kns changed` session, on the branch it describes: two commits on
    `main`, the first adding, changing and removing an entry, the second adding a profile
    rule. Commit ids differ per run, so both sides show them as <commit>."""
    repo.commit("main")
    git(repo.root, "checkout", "-q", "-b", "topic")
    repo.edit_config(add_change_remove)
    repo.commit("add, change, remove")
    repo.edit_config(lambda config: config.setdefault("kns:profiles", {}).update({"@data": {"maxCpu": 32}}))
    repo.commit("a rule for the data group")
    printed = ""
    for args in (["main", "HEAD~1"], ["main"], ["main", "--format", "json"]):
        code, out, err = kns_changed(repo, capsys, *args)
        assert (code, err) == (0, "")
        printed += f"$ ./kns changed {' '.join(args)}\n{out}"
    doc = (ROOT / "docs" / "cli.md").read_text()
    start = doc.index("```console\n$ ./kns changed main HEAD~1\n") + len("```console\n")
    shown = doc[start:doc.index("```\n", start)]
    commit = re.compile(r"\b[0-9a-f]{40}\b")
    assert commit.sub("<commit>", printed) == commit.sub("<commit>", shown)
