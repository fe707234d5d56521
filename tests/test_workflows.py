"""The GitHub Actions workflows (.github/workflows) and the preview summary they post.

actionlint, built from Go modules by scripts/actionlint.sh (with shellcheck from
scripts/system-deps.sh for the `run:` scripts), must pass on the workflows and fail on a
broken copy; their structure is checked with PyYAML; the stack discovery script runs for
real; scripts/preview-summary.py runs on a real `pulumi preview --json --show-sames`
(tests/fixtures/preview-dev.json, see PREVIEW_FIXTURE) and on small synthetic previews.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from kns_testing import tokens
from kns_testing.program import ROOT, pinned_versions, site_steps

WORKFLOWS = ROOT / ".github" / "workflows"
PREVIEW = WORKFLOWS / "preview.yml"
UP = WORKFLOWS / "up.yml"
SUMMARY_SCRIPT = ROOT / "scripts" / "preview-summary.py"

# A real preview of a copy of the dev stack (kns_testing/program.py engine_project), after
# `pulumi up` and then, in Pulumi.dev.yaml: train-resnet's cpu 8 -> 12, nightly-report
# removed, a job `added-smoke` added, the packing scheduler's GPU weight 5 -> 7 and a
# label zone=b on the vcluster pool. Taken with `pulumi preview --json --show-sames`
# (pulumi 3.259.0, kubernetes 4.25.0) and trimmed: no `config`, and states keep only
# urn, custom, id, type, parent, provider and (for changed steps) inputs. The dev stack
# has no secrets; nothing in it is one.
PREVIEW_FIXTURE = ROOT / "tests" / "fixtures" / "preview-dev.json"


def load_summary_module():
    spec = importlib.util.spec_from_file_location("preview_summary", SUMMARY_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ps = load_summary_module()


# ---- actionlint -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def actionlint() -> str:
    build = subprocess.run(["bash", str(ROOT / "scripts" / "actionlint.sh")], capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, f"scripts/actionlint.sh failed:\n{build.stderr[-3000:]}"
    bin_dir = build.stdout.strip()
    assert "\n" not in bin_dir, f"scripts/actionlint.sh printed more than the bin dir:\n{build.stdout}"
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed (actionlint would skip the run: scripts); "
                    "`make test` installs it (scripts/system-deps.sh)")
    return str(Path(bin_dir) / "actionlint")


def lint(actionlint: str, *files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint, "-no-color", "-oneline", *map(str, files)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_actionlint_is_the_pinned_version(actionlint):
    versions = pinned_versions()
    done = subprocess.run([actionlint, "-version"], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[0] == f"v{versions['ACTIONLINT_VERSION']}"


def test_actionlint_passes_on_the_workflows(actionlint):
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"preview.yml", "up.yml"}
    done = lint(actionlint, *files)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_fails_on_a_broken_workflow(actionlint, tmp_path):
    text = PREVIEW.read_text()
    broken = (text.replace("needs: stacks\n", "needs: stackz\n", 1)  # a job that does not exist
              .replace("secrets.PULUMI_BACKEND_URL", "secret.PULUMI_BACKEND_URL", 1)  # an unknown context
              .replace('./kns validate --stack "$STACK"', "./kns validate --stack $STACK", 1))  # unquoted, for shellcheck
    assert broken.count("stackz") == 1 and "secret.PULUMI" in broken and "validate --stack $STACK" in broken
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    path = tmp_path / ".github" / "workflows" / "preview.yml"
    path.write_text(broken)
    done = lint(actionlint, path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r'needs job "stackz" which does not exist.*\[job-needs\]', done.stdout), done.stdout
    assert re.search(r'undefined variable "secret".*\[expression\]', done.stdout), done.stdout
    assert re.search(r"SC2086.*\[shellcheck\]", done.stdout), done.stdout


# ---- structure --------------------------------------------------------------------------


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads `on:` as True
    return document


def stack_job(document: dict[str, Any]) -> dict[str, Any]:
    (job,) = [j for name, j in document["jobs"].items() if name not in ("stacks", "comment")]
    return job


def step_index(job: dict[str, Any], fragment: str) -> int:
    found = [i for i, step in enumerate(job["steps"]) if fragment in step.get("run", "")]
    assert found, f"no step runs {fragment!r}"
    return found[0]


def runs(job: dict[str, Any], fragment: str) -> list[str]:
    return [line for step in job["steps"] for line in step.get("run", "").replace("\\\n", " ").splitlines()
            if fragment in line]


def envs(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield document.get("env") or {}
    for job in document["jobs"].values():
        yield job.get("env") or {}
        for step in job.get("steps", []):
            yield step.get("env") or {}


@pytest.fixture(params=[PREVIEW, UP], ids=lambda p: p.name)
def workflow(request) -> dict[str, Any]:
    return load(request.param)


def test_preview_runs_on_pull_requests_and_up_only_on_main():
    preview, up = load(PREVIEW), load(UP)
    assert set(preview["on"]) == {"pull_request"}
    assert set(up["on"]) == {"push", "workflow_dispatch"}  # nightly is the drift check's (drift.yml)
    assert up["on"]["push"] == {"branches": ["main"]}
    (nightly,) = load(WORKFLOWS / "drift.yml")["on"]["schedule"]
    minute, hour, *days = nightly["cron"].split()
    assert minute.isdigit() and hour.isdigit() and days == ["*", "*", "*"]  # once a day
    assert "github.ref == 'refs/heads/main'" in stack_job(up)["if"]  # also when started by hand


def test_backend_and_passphrase_come_from_secrets(workflow):
    job = stack_job(workflow)
    if workflow["name"] == "preview":  # step-scoped: only the secrets check and the preview get them
        holders = [s.get("id") for s in job["steps"] if "PULUMI_CONFIG_PASSPHRASE" in (s.get("env") or {})]
        assert holders == ["secrets", "preview"] and "PULUMI_BACKEND_URL" not in job["env"]
        assert job["environment"] == "preview"
    else:  # the write credentials: the one step that applies
        holders = [s.get("name") for s in job["steps"] if "PULUMI_CONFIG_PASSPHRASE" in (s.get("env") or {})]
        assert holders == ["Up"] and "PULUMI_BACKEND_URL" not in job["env"]
        assert job["environment"] == "${{ matrix.stack }}"
    assert workflow["env"]["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    for env in envs(workflow):
        for key, value in env.items():
            if "PASSPHRASE" in key or "BACKEND" in key:
                assert value == f"${{{{ secrets.{key} }}}}", (key, value)


def test_no_literal_passphrase_anywhere_in_the_workflows():
    for path in WORKFLOWS.glob("*.yml"):
        text = path.read_text()
        assert "kns-dev-local" not in text, path
        assert "PULUMI_CONFIG_PASSPHRASE=" not in text and "PULUMI_CONFIG_PASSPHRASE_FILE" not in text, path
        for match in re.finditer(r"PULUMI_CONFIG_PASSPHRASE:\s*(.*)", text):
            assert match[1].strip() == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}", (path, match[0])


def test_minimal_permissions(workflow):
    assert workflow["permissions"] == {"contents": "read"}
    # The preview's comment job alone writes, to the pull request's comments.
    writers = {name: job["permissions"] for name, job in workflow["jobs"].items() if "permissions" in job}
    assert writers == ({"comment": {"contents": "read", "pull-requests": "write"}} if workflow["name"] == "preview"
                       else {})


def test_one_job_per_stack_from_the_discovery_job(workflow):
    stacks = workflow["jobs"]["stacks"]
    (discover,) = [s for s in stacks["steps"] if s.get("id") == "discover"]
    assert stacks["outputs"]["stacks"] == "${{ steps.discover.outputs.stacks }}"
    assert "GITHUB_OUTPUT" in discover["run"]
    job = stack_job(workflow)
    assert job["needs"] == "stacks"
    assert job["strategy"]["matrix"] == {"stack": "${{ fromJSON(needs.stacks.outputs.stacks) }}"}
    assert job["strategy"]["fail-fast"] is False
    assert "needs.stacks.outputs.stacks != '[]'" in job["if"]  # an empty matrix is an error
    assert job["env"]["STACK"] == "${{ matrix.stack }}"


def test_the_toolchain_is_built_cached_and_put_on_path(workflow):
    job = stack_job(workflow)
    uses = [s.get("uses", "") for s in job["steps"]]
    assert uses[0].startswith("actions/checkout@")
    (python,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
    assert python["with"]["python-version"] == "3.11"
    (cache,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache@")]
    assert set(cache["with"]["path"].split()) == {
        "~/.cache/kns-platform/tools", "~/.pulumi/plugins", "~/go/pkg/mod", "~/.cache/go-build"}
    assert "hashFiles('versions.env', 'scripts/toolchain.sh', 'scripts/lib/*.sh')" in cache["with"]["key"]
    venv, toolchain = step_index(job, "make venv"), step_index(job, "bash scripts/toolchain.sh")
    assert uses.index(cache["uses"]) < toolchain and venv < toolchain
    assert "GITHUB_PATH" in job["steps"][toolchain]["run"]
    if workflow["name"] == "preview":  # validated first: a fork's pull request gets no toolchain
        assert venv < step_index(job, "./kns validate") < toolchain
    else:
        assert toolchain < step_index(job, "./kns validate")


def test_preview_validates_then_previews_with_the_policy_pack_and_summarises():
    """Validation first and without secrets; without them (a fork's pull request) the job
    says so and previews nothing; with them, scripts/ci-preview.sh against the pull
    request's base (fully fetched), whose summary goes to the run's page even after a
    failure, and whose logs are kept even on cancel (tests/test_ci_preview.py runs it)."""
    document = load(PREVIEW)
    job = stack_job(document)
    steps = job["steps"]
    assert steps[0]["with"] == {"fetch-depth": 0}
    validate = step_index(job, './kns validate --stack "$STACK"')
    secrets = [s.get("id") for s in steps].index("secrets")
    toolchain = step_index(job, "bash scripts/toolchain.sh")
    preview = step_index(job, "scripts/ci-preview.sh")
    summary = step_index(job, 'cat "$summary" >> "$GITHUB_STEP_SUMMARY"')
    assert validate < secrets < toolchain < preview < summary
    assert "if" not in steps[validate] and "env" not in steps[validate]
    check = steps[secrets]["run"]
    assert 'echo "present=false" >> "$GITHUB_OUTPUT"' in check and "::notice::" in check
    assert 'build/summary-$STACK.md' in check and "exit 1" not in check and "::error::" not in check
    # After the check, everything that needs the secrets or the toolchain is skipped without them.
    for step in steps[secrets + 1:summary]:
        assert step["if"] == "steps.secrets.outputs.present == 'true'", step
    assert steps[preview]["run"] == 'scripts/ci-preview.sh "$STACK" "$BASE"'
    assert steps[preview]["env"]["BASE"] == "${{ github.event.pull_request.base.sha }}"
    assert steps[summary]["if"] == "${{ !cancelled() }}"
    (artifact,) = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert artifact["if"] == "always()" and steps.index(artifact) > summary
    # The diff log and the summary; not the JSON previews, whose inputs hold secrets in plaintext.
    assert artifact["with"]["path"].split() == ["build/preview-*.log", "build/summary-*"]
    assert not runs(job, "pulumi up") and not runs(job, "pulumi stack select")
    assert document["concurrency"] == {"group": "preview-${{ github.event.pull_request.number }}",
                                       "cancel-in-progress": True}
    comment = document["jobs"]["comment"]
    assert comment["needs"] == ["stacks", "preview"]
    assert comment["if"] == ("${{ !cancelled() && github.event.pull_request.head.repo.full_name == "
                             "github.repository }}")
    assert "secrets." not in yaml.safe_dump(comment)
    (download,) = [s for s in comment["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert download["with"] == {"pattern": "preview-*", "path": "build", "merge-multiple": True}
    post = comment["steps"][-1]
    assert 'python3 scripts/pr-comment.py --head "$HEAD" "$NUMBER" build/summary-*.md' in post["run"]
    assert post["env"] == {"GITHUB_TOKEN": "${{ github.token }}", "NUMBER": "${{ github.event.pull_request.number }}",
                           "HEAD": "${{ github.event.pull_request.head.sha }}"}


def test_up_validates_then_applies_one_stack_at_a_time_in_its_environment():
    """Validation, then scripts/ci-up.sh (tests/test_ci_deploy.py runs it, and the rest of
    the apply side); pulumi up itself runs only inside the script's make up / ./kns up."""
    job = stack_job(load(UP))
    assert step_index(job, './kns validate --stack "$STACK"') < step_index(job, 'scripts/ci-up.sh "$STACK"')
    assert not runs(job, "pulumi up")
    assert job["concurrency"] == {"group": "up-${{ matrix.stack }}", "cancel-in-progress": False}


def test_both_workflows_discover_and_set_up_the_same_way():
    preview, up = load(PREVIEW), load(UP)
    assert preview["jobs"]["stacks"] == up["jobs"]["stacks"]

    def setup(job):  # preview's skip themselves without secrets (an `if:`), after its validation
        return {s.get("uses") or s["name"]: {k: v for k, v in s.items() if k != "if"} for s in job["steps"]
                if s.get("uses", "").startswith(("actions/setup-", "actions/cache@"))
                or s.get("name") in ("Virtualenv", "Pulumi toolchain")}
    assert len(setup(stack_job(up))) == 5 and setup(stack_job(preview)) == setup(stack_job(up))


# ---- stack discovery, for real ----------------------------------------------------------


def discover(cwd: Path, tmp_path: Path) -> list[str]:
    (step,) = [s for s in load(PREVIEW)["jobs"]["stacks"]["steps"] if s.get("id") == "discover"]
    output = tmp_path / "github-output"
    output.write_text("")
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "GITHUB_OUTPUT": str(output)}, timeout=60)
    assert done.returncode == 0, done.stderr
    (line,) = output.read_text().splitlines()
    key, _, value = line.partition("=")
    assert key == "stacks"
    return json.loads(value)


def test_discovery_lists_the_stack_files_of_the_repository(tmp_path):
    stacks = discover(ROOT, tmp_path)
    assert "dev" in stacks
    assert stacks == sorted(p.name[len("Pulumi."):-len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))


def test_adding_a_stack_file_adds_a_job(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.prod-eu.yaml", "notes.yaml"):
        (project / name).write_text("config: {}\n")
    assert discover(project, tmp_path) == ["dev", "prod-eu"]
    for name in ("Pulumi.dev.yaml", "Pulumi.prod-eu.yaml"):
        (project / name).unlink()
    assert discover(project, tmp_path) == []  # and the stack job's `if` skips the empty matrix


# ---- preview-summary.py on a real preview -----------------------------------------------


@pytest.fixture(scope="module")
def preview() -> dict[str, Any]:
    return json.loads(PREVIEW_FIXTURE.read_text())


@pytest.fixture(scope="module")
def summary(preview):
    return ps.summarise(preview, "dev")


@pytest.fixture(scope="module")
def markdown(summary) -> str:
    return ps.render(summary)


def by_name(summary) -> dict[str, Any]:
    return {section.title: section for section in summary.entries}


def ops(section) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for change in section.changes:
        out.setdefault(change.op, set()).add((ps.kind_of(change.type), change.name))
    return out


def test_the_script_is_an_executable_stdlib_script():
    text = SUMMARY_SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env python3\n")
    assert os.access(SUMMARY_SCRIPT, os.X_OK)
    imported = {m.split(".")[0] for m in re.findall(r"^(?:from|import) ([\w.]+)", text, re.M)}
    assert imported <= {"__future__", "argparse", "json", "re", "sys", "dataclasses", "typing"}, imported


def test_steps_are_grouped_under_their_entry(summary):
    entries = by_name(summary)
    config_entries = {"train-resnet", "etl-nightly-backfill", "vcluster-smoke", "added-smoke",
                      "weekly-finetune", "nightly-report", "genomics-align", "hourly-sync"}  # last two: jobs/*.yaml
    assert set(entries) == config_entries
    assert ops(entries["train-resnet"]) == {
        "replace": {("Job", "train-resnet")},
        "update": {("LimitRange", "train-resnet-defaults"), ("ResourceQuota", "train-resnet-quota")},
    }
    assert entries["train-resnet"].same == 6 and entries["train-resnet"].entry_type == tokens.JOB
    assert ops(entries["added-smoke"]) == {"create": {
        (tokens.JOB, "added-smoke"), (tokens.JOB_NAMESPACE, "added-smoke"), ("Namespace", "added-smoke"),
        ("LimitRange", "added-smoke-defaults"), ("ResourceQuota", "added-smoke-quota"),
        ("ServiceAccount", "added-smoke-runner"), ("Role", "added-smoke-runner"), ("RoleBinding", "added-smoke-runner"),
        ("Job", "added-smoke")}}
    # A removed entry: delete steps only have an oldState, and still find their entry.
    deleted = entries["nightly-report"]
    assert set(ops(deleted)) == {"delete"} and len(deleted.changes) == 9
    assert ("CronJob", "nightly-report") in ops(deleted)["delete"] and deleted.entry_type == tokens.SCHEDULE
    for name in ("etl-nightly-backfill", "vcluster-smoke", "weekly-finetune", "genomics-align", "hourly-sync"):
        assert not entries[name].changes and entries[name].same > 0, name


def test_platform_resources_are_separate(summary):
    platform = summary.platform
    assert ops(platform) == {
        "replace": {("ConfigMap", "kns-packing-config")},
        "update": {("NodePatch", f"vcluster.vc-node-{i}") for i in range(1, 5)},
    }
    assert platform.same == 26  # stack, cluster, provider, pools, schedulers, system namespace
    for change in platform.changes:
        assert "kns:workload:" not in change.urn
    for section in summary.entries:
        for change in section.changes:
            assert "kns:workload:" in change.urn


def test_counts_match_the_engines(preview, summary):
    assert summary.totals == preview["changeSummary"] == {"create": 9, "delete": 9, "replace": 2, "same": 77, "update": 6}
    assert ps._count([*summary.entries, summary.platform]) == summary.totals
    assert sum(summary.totals.values()) == len(preview["steps"])


def test_fields_are_the_changed_paths(summary):
    entries = by_name(summary)
    changes = {c.name + "/" + ps.kind_of(c.type): c for c in entries["train-resnet"].changes}
    job = changes["train-resnet/Job"]
    assert job.fields == ("spec.template.spec.containers[0].resources.limits.cpu",
                          "spec.template.spec.containers[0].resources.requests.cpu")
    assert job.replace_fields == job.fields
    assert changes["train-resnet-quota/ResourceQuota"].fields == ('spec.hard["limits.cpu"]', 'spec.hard["requests.cpu"]')


def test_markdown_sections_symbols_and_totals(markdown):
    assert markdown.startswith("## Preview of stack `dev`\n")
    assert ("**Totals:** `+` 9 to create, `~` 6 to update, `+-` 2 to replace, `-` 9 to delete, 77 unchanged "
            "(103 resources)") in markdown
    sections = {block.split("\n", 1)[0]: block for block in markdown.split("\n### ")[1:]}
    assert set(sections) == {
        "Job `added-smoke`: `+` 9 to create",
        "Schedule `nightly-report`: `-` 9 to delete",
        "Job `train-resnet`: `~` 2 to update, `+-` 1 to replace, 6 unchanged",
        "Platform: `~` 4 to update, `+-` 1 to replace, 26 unchanged",
    }
    train = sections["Job `train-resnet`: `~` 2 to update, `+-` 1 to replace, 6 unchanged"]
    assert ("| `+-` replace | `Job` | `kns-train-resnet/train-resnet` | `spec.template.spec.containers[0].resources.limits.cpu` (replaces), "
            "`spec.template.spec.containers[0].resources.requests.cpu` (replaces) |") in train
    assert '| `~` update | `ResourceQuota` | `kns-train-resnet/kns-quota` | `spec.hard["limits.cpu"]`, `spec.hard["requests.cpu"]` |' in train
    assert train.index("`+-` replace") < train.index("`~` update")  # most destructive first
    assert "| `-` delete | `CronJob` | `kns-nightly-report/nightly-report` |  |" in sections["Schedule `nightly-report`: `-` 9 to delete"]
    platform = sections["Platform: `~` 4 to update, `+-` 1 to replace, 26 unchanged"]
    assert "| `~` update | `NodePatch` | `vc-node-3` | `metadata.labels.zone` |" in platform
    assert "train-resnet" not in platform and "NodePatch" not in train
    assert ("**Unchanged entries (5):** `etl-nightly-backfill` (9), `genomics-align` (9), `hourly-sync` (9), "
            "`vcluster-smoke` (9), `weekly-finetune` (9)") in markdown
    assert "| `same`" not in markdown and " same |" not in markdown  # counted, never listed


def leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    elif value is not None:
        yield str(value)


def test_no_input_value_is_printed(preview, markdown):
    for known in ("nvcr.io/nvidia/pytorch:25.01-py3", "busybox:1.37", "MostAllocated", "NodeResourcesFit", "172800"):
        assert known in PREVIEW_FIXTURE.read_text() and known not in markdown, known
    # Every input value, less those that are (part of) what the summary does show:
    # resource names, kinds, type tokens, op words.
    shown = {ps.parse_urn(s["urn"]).name for s in preview["steps"]}
    shown |= {t for s in preview["steps"] for t in ps.parse_urn(s["urn"]).types} | set(ps.OPS) | {"unchanged"}
    shown |= {part for s in preview["steps"] for part in ps.kube_object(s).split("/")}  # the cluster's names
    values = {v for s in preview["steps"] for key in ("newState", "oldState")
              for v in leaves((s.get(key) or {}).get("inputs"))
              if len(v) >= 4 and not any(v in text for text in shown)}
    assert len(values) > 40
    leaked = sorted(v for v in values if v in markdown)
    assert not leaked, leaked


def test_the_command_line(tmp_path):
    done = subprocess.run([str(SUMMARY_SCRIPT), str(PREVIEW_FIXTURE), "--stack", "dev"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ps.render(ps.summarise(json.loads(PREVIEW_FIXTURE.read_text()), "dev"))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    done = subprocess.run([str(SUMMARY_SCRIPT), str(empty)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not the JSON of `pulumi preview --json`" in done.stderr
    assert done.stdout == ""


# ---- preview-summary.py on synthetic previews -------------------------------------------

S = "urn:pulumi:prod::kns-platform::"
STACK_URN = S + "pulumi:pulumi:Stack::kns-platform-prod"


def step(op: str, urn: str, parent: str | None = None, state: str = "newState", **extra) -> dict[str, Any]:
    body = {"urn": urn, "type": ps.parse_urn(urn).type}
    if parent:
        body["parent"] = parent
    return {"op": op, "urn": urn, state: body, **extra}


def test_parse_urn():
    urn = ps.parse_urn(S + f"{tokens.KNS_WORKLOAD}$kubernetes:core/v1:Namespace::name::with::colons")
    assert urn == ps.Urn("prod", "kns-platform", (tokens.KNS_WORKLOAD, "kubernetes:core/v1:Namespace"),
                         "name::with::colons")
    assert urn.type == "kubernetes:core/v1:Namespace"
    with pytest.raises(ValueError):
        ps.parse_urn("not-a-urn")


def test_a_parent_chain_without_a_workload_is_platform():
    pool = S + f"{tokens.NODE_POOL}::gpu"
    patch = S + f"{tokens.NODE_POOL}$kubernetes:core/v1:NodePatch::gpu.node-1"
    summary = ps.summarise({"steps": [
        step("same", pool, STACK_URN),
        step("update", patch, pool, detailedDiff={"metadata.labels.zone": {"kind": "add", "inputDiff": False}}),
    ]})
    assert summary.entries == [] and summary.stack == "prod"
    assert [(c.op, c.name, c.fields) for c in summary.platform.changes] == [
        ("update", "gpu.node-1", ("metadata.labels.zone",))]
    assert summary.platform.same == 1 and summary.totals == {"update": 1, "same": 1}


def test_delete_steps_use_the_old_state():
    entry = S + f"{tokens.KNS_WORKLOAD}::old-job"
    namespace = S + f"{tokens.KNS_WORKLOAD}$kubernetes:core/v1:Namespace::old-job"
    summary = ps.summarise({"steps": [
        step("delete", entry, STACK_URN, state="oldState"),
        step("delete", namespace, entry, state="oldState"),
    ], "changeSummary": {"delete": 2}})
    (section,) = summary.entries
    assert section.title == "old-job" and section.entry_type == tokens.KNS_WORKLOAD
    assert [(c.op, c.type) for c in section.changes] == [
        ("delete", tokens.KNS_WORKLOAD), ("delete", "kubernetes:core/v1:Namespace")]
    assert "| `-` delete | `Namespace` | `old-job` |  |" in ps.render(summary)


def test_without_parent_fields_the_urn_type_chain_finds_the_entry():
    """Longest name prefix among the known entry components of the type in the chain."""
    chain = S + f"{tokens.JOB}${tokens.JOB_NAMESPACE}$kubernetes:core/v1:"
    steps = [
        {"op": "same", "urn": S + f"{tokens.JOB}::train"},
        {"op": "same", "urn": S + f"{tokens.JOB}::train-big"},
        {"op": "update", "urn": chain + "LimitRange::train-big-defaults", "detailedDiff": {"spec.limits[0].max.cpu": {}}},
        {"op": "update", "urn": chain + "ResourceQuota::train-quota", "detailedDiff": {"spec.hard.pods": {}}},
        {"op": "create", "urn": S + f"{tokens.JOB}$kubernetes:batch/v1:Job::orphan"},
        {"op": "update", "urn": S + f"{tokens.KNS_CLUSTER}$pulumi:providers:kubernetes::k8s", "diffReasons": ["kubeconfig"]},
    ]
    summary = ps.summarise({"steps": steps})
    entries = by_name(summary)
    assert {c.name for c in entries["train-big"].changes} == {"train-big-defaults"}
    assert {c.name for c in entries["train"].changes} == {"train-quota"}
    assert {c.name for c in entries["orphan"].changes} == {"orphan"}
    assert [(c.name, c.fields) for c in summary.platform.changes] == [("k8s", ("kubeconfig",))]


def test_replacement_halves_are_one_replace_row():
    entry = S + f"{tokens.SCHEDULE}::nightly"
    cron = S + f"{tokens.SCHEDULE}$kubernetes:batch/v1:CronJob::nightly"
    diff = {"detailedDiff": {"spec.schedule": {"kind": "update", "inputDiff": False},
                             "metadata.name": {"kind": "update-replace", "inputDiff": False}}}
    summary = ps.summarise({"steps": [
        step("same", entry, STACK_URN),
        step("create-replacement", cron, entry, **diff),
        step("replace", cron, entry, replaceReasons=["metadata.name"], **diff),
        step("delete-replaced", cron, entry, state="oldState"),
    ]})
    (section,) = summary.entries
    (change,) = section.changes
    assert change.op == "replace" and change.replace_fields == ("metadata.name",)
    assert change.fields == ("metadata.name", "spec.schedule")
    assert "`metadata.name` (replaces), `spec.schedule` |" in ps.render(summary)


def test_secret_inputs_stay_out_and_paths_are_escaped():
    secret = S + f"{tokens.KNS_WORKLOAD}$kubernetes:core/v1:Secret::creds"
    entry = S + f"{tokens.KNS_WORKLOAD}::creds"
    body = step("update", secret, entry, detailedDiff={"data.x509up": {"kind": "update"}, 'data["a|b"]': {"kind": "add"}})
    body["newState"]["inputs"] = {"data": {"x509up": "PROXY-s3cr3t-51c0aa", "a|b": "[secret]"}}
    body["oldState"] = {**body["newState"], "inputs": {"data": {"x509up": "OLD-s3cr3t-0001"}}}
    markdown = ps.render(ps.summarise({"steps": [step("same", entry, STACK_URN), body]}))
    assert "`data.x509up`" in markdown and r'`data["a\|b"]`' in markdown
    assert "s3cr3t" not in markdown and "[secret]" not in markdown


def test_diagnostics_and_policy_violations_are_shown():
    preview = {
        "steps": [step("same", STACK_URN)],
        "diagnostics": [
            {"severity": "error", "message": 'error: kns-platform: invalid configuration, 1 problem; nothing was applied:\n'
                                             '  - kns:jobs[a].memory: "12Qi" is not a quantity\n'},
            {"severity": "info", "message": "a program print\n"},
        ],
        "policyViolations": [{"enforcementLevel": "mandatory", "policyPackName": "kns", "policyName": "no-latest-tag",
                              "resourceUrn": S + f"{tokens.JOB}$kubernetes:batch/v1:Job::a",
                              "message": "image tag :latest is not allowed\nmore"}],
        "changeSummary": {"same": 1},
    }
    markdown = ps.render(ps.summarise(preview))
    assert "**The preview failed:**" in markdown and "### Diagnostics (1 errors, 0 warnings)" in markdown
    assert 'kns:jobs[a].memory: "12Qi" is not a quantity' in markdown and "a program print" not in markdown
    assert "| mandatory | `kns/no-latest-tag` | a | `a` | image tag :latest is not allowed |" in markdown
    # Without --show-sames the unchanged resources are only a total.
    assert "counted in the totals only" in markdown


def test_an_empty_preview():
    markdown = ps.render(ps.summarise({}, "dev"))
    assert "**Totals:** no changes (0 resources)" in markdown and "### Platform: no changes" in markdown


# The log of `pulumi preview --diff --policy-pack policy` on the dev stack with an entry
# whose jsonOverrides make it privileged and pull from another registry (as tests/test_policy.py
# does): the lines around the violations, as the engine printed them.
POLICY_LOG = """\
    + kubernetes:batch/v1:Job: (create)
        [urn=urn:pulumi:dev::kns-platform::kns:workload:Job$kubernetes:batch/v1:Job::vcluster-smoke]
    kns-platform@v0.1.0 [mandatory]  allowed-registries  (kubernetes:batch/v1:Job: vcluster-smoke)Images come only from the allowed registries.
Job kns-vcluster-smoke/vcluster-smoke: containers[0] 'vcluster-smoke' image 'registry.example.com/tools/debug:1' (registry.example.com/tools/debug) is not from an allowed registry (registry.k8s.io, docker.io)
    + pulumi:pulumi:Stack: (create)
    kns-platform@v0.1.0 [mandatory]  cluster-admin-only-kns  (kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding: kns-scheduler-cluster-admin)cluster-admin is bound only to the KNS scheduler's ServiceAccount.
ClusterRoleBinding kns-scheduler-cluster-admin: binds cluster-admin to Group devs; only the KNS scheduler's ServiceAccount (kns-system/kns-scheduler) may have it
error: preview failed
Resources:
    + 94 to create
"""


def test_policy_violations_are_read_from_the_diff_log_and_placed_under_their_entry(preview):
    violations = ps.violations_from_log(POLICY_LOG)
    assert [(v["policyName"], v["resourceType"], v["resourceName"], v["enforcementLevel"]) for v in violations] == [
        ("allowed-registries", "kubernetes:batch/v1:Job", "vcluster-smoke", "mandatory"),
        ("cluster-admin-only-kns", "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
         "kns-scheduler-cluster-admin", "mandatory"),
    ]
    assert violations[0]["message"].startswith("Job kns-vcluster-smoke/vcluster-smoke: containers[0]")
    assert "error: preview failed" not in violations[1]["message"]
    text = ps.render(ps.summarise(preview, "dev", POLICY_LOG))
    table = text.split("### Policy violations", 1)[1].split("###", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| mandatory")]
    assert rows[0].startswith("| mandatory | `kns-platform/allowed-registries` | vcluster-smoke | `Job vcluster-smoke` |")
    assert rows[1].startswith("| mandatory | `kns-platform/cluster-admin-only-kns` | Platform |")
    assert ps.violations_from_log("Resources:\n    + 94 to create\n") == []


# --- the shell scripts CI and users run ----------------------------------------------------

SHELL_SCRIPTS = sorted([*ROOT.glob("scripts/*.sh"), ROOT / ".ci" / "run", ROOT / "kns"])


def shellcheck(*paths: Path) -> subprocess.CompletedProcess:
    assert shutil.which("shellcheck"), "shellcheck is missing: run `make system-deps`"
    return subprocess.run(["shellcheck", "-x", "-P", "SCRIPTDIR", "-S", "warning", *map(str, paths)],
                          capture_output=True, text=True, timeout=300)


def test_the_shell_scripts_pass_shellcheck():
    assert len(SHELL_SCRIPTS) >= 10
    done = shellcheck(*SHELL_SCRIPTS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_shellcheck_fails_on_a_broken_script(tmp_path):
    broken = tmp_path / "broken.sh"
    broken.write_text('#!/usr/bin/env bash\nfor f in $(ls *.yaml); do rm $f; done\n')
    done = shellcheck(broken)
    assert done.returncode != 0 and "SC2045" in done.stdout


def test_the_documented_summary_is_this_fixture_s():
    """docs/ci.md's worked example is what the script prints for tests/fixtures/preview-dev.json
    (KNS_WRITE_DOCS=1 rewrites it)."""
    doc = ROOT / "docs" / "ci.md"
    text = doc.read_text()
    start = text.index("```markdown\n", text.index("### A worked example")) + len("```markdown\n")
    end = text.index("```\n", start)
    printed = ps.render(ps.summarise(json.loads(PREVIEW_FIXTURE.read_text()), "dev"))
    if os.environ.get("KNS_WRITE_DOCS") == "1":
        doc.write_text(text[:start] + printed + text[end:])
        text = doc.read_text()
        end = text.index("```\n", start)
    assert text[start:end] == printed


def test_on_a_site_the_ci_summary_names_each_objects_cluster():
    """The same LimitRange in an entry's namespace on the manager and two workers: CI's
    table says which cluster each row is on (the provider it is applied through)."""
    steps = site_steps()
    markdown = ps.render(ps.summarise({"steps": steps}, "site"))
    assert all(f"`kns-train/kns-defaults` on {cluster}" in markdown for cluster in ("site", "east", "west")), markdown
