"""The pull request side of CI (.github/workflows/preview.yml, docs/ci.md).

scripts/pr-comment.py runs against a fake GitHub REST API (http.server in a thread), which
serves comments two to a page so that pagination is followed. The preview job's secrets
check and summary steps run as GitHub runs them (bash -eo pipefail, the step's env).
scripts/ci-preview.sh runs on
the real engine: a temporary git repository holding a copy of the project with a small
stack (render mode, no cluster), its base applied with `pulumi up` to a local file backend
that stands for the shared one, then a pull request's commit previewed; the shared
backend's files must come out byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from kns_testing.program import PROJECT_FILES, ROOT, built_toolchain, engine_project
from plan import stacks

COMMENT = ROOT / "scripts" / "pr-comment.py"
CI_PREVIEW = ROOT / "scripts" / "ci-preview.sh"
MARKER = "<!-- kns-preview -->"
TOKEN = "ghs_fakeToken0123456789abcdef"
BOT = "github-actions[bot]"


# ---- scripts/pr-comment.py against a fake API ---------------------------------------------


class FakeGitHub:
    """The issue-comment endpoints of one repository, two comments to a page."""

    PAGE = 2

    def __init__(self) -> None:
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.requests: list[dict[str, Any]] = []
        self.fail: Optional[int] = None  # answer every request with this status
        self.next_id = 1000
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, status: int, body: Any, headers: Optional[dict[str, str]] = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self, method: str) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append({"method": method, "path": url.path, "query": parse_qs(url.query),
                                      "headers": dict(self.headers.items()), "body": body})
                if fake.fail:
                    return self.answer(fake.fail, {"message": "Resource not accessible by integration"})
                parts = url.path.strip("/").split("/")
                if parts[:3] != ["repos", "org", "platform"] or parts[3] != "issues":
                    return self.answer(404, {"message": "Not Found"})
                if len(parts) == 6 and parts[5] == "comments" and method == "GET":
                    listing = fake.comments.get(int(parts[4]), [])
                    page = int(parse_qs(url.query).get("page", ["1"])[0])
                    chunk = listing[(page - 1) * fake.PAGE:page * fake.PAGE]
                    more = page * fake.PAGE < len(listing)
                    link = f'<{fake.url}{url.path}?per_page=100&page={page + 1}>; rel="next"' if more else ""
                    return self.answer(200, chunk, {"Link": link} if link else None)
                if len(parts) == 6 and parts[5] == "comments" and method == "POST":
                    fake.next_id += 1
                    made = {"id": fake.next_id, "body": body["body"], "user": {"login": BOT}}
                    fake.comments.setdefault(int(parts[4]), []).append(made)
                    return self.answer(201, made)
                if len(parts) == 6 and parts[4] == "comments" and method == "PATCH":
                    for comment in (c for listing in fake.comments.values() for c in listing):
                        if comment["id"] == int(parts[5]):
                            comment["body"] = body["body"]
                            return self.answer(200, comment)
                return self.answer(404, {"message": "Not Found"})

            def do_GET(self) -> None:
                self.handle_any("GET")

            def do_POST(self) -> None:
                self.handle_any("POST")

            def do_PATCH(self) -> None:
                self.handle_any("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def writes(self) -> list[tuple[str, str]]:
        return [(r["method"], r["path"]) for r in self.requests if r["method"] != "GET"]


@pytest.fixture
def github():
    fake = FakeGitHub()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def pr_comment(github: FakeGitHub, tmp_path: Path, number: int, *summaries: str,
               **env: str) -> subprocess.CompletedProcess:
    files = []
    for i, text in enumerate(summaries):
        path = tmp_path / f"summary-{i}.md"
        path.write_text(text)
        files.append(str(path))
    return subprocess.run([str(COMMENT), "--head", "0123456789abcdef0123", str(number), *files],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "GITHUB_API_URL": github.url, "GITHUB_TOKEN": TOKEN,
                               "GITHUB_REPOSITORY": "org/platform", "GITHUB_SERVER_URL": "https://github.example",
                               "GITHUB_RUN_ID": "4242", **env})


def others() -> list[dict[str, Any]]:
    """What a pull request holds before the workflow comments: a person quoting the marker,
    another bot's comment, a review remark."""
    return [{"id": 1, "body": f"quoting the bot: {MARKER} old text", "user": {"login": "alice"}},
            {"id": 2, "body": "coverage: 91%", "user": {"login": BOT}},
            {"id": 3, "body": "please split this entry", "user": {"login": "bob"}}]


def test_the_first_run_posts_and_later_runs_edit_the_same_comment(github, tmp_path):
    github.comments[7] = others()
    before = json.loads(json.dumps(others()))
    first = pr_comment(github, tmp_path, 7, "## Preview of stack `dev`\n\nfirst push\n")
    assert first.returncode == 0, first.stderr
    assert github.writes() == [("POST", "/repos/org/platform/issues/7/comments")]
    (ours,) = [c for c in github.comments[7] if c["id"] > 1000]
    assert ours["body"].startswith(MARKER) and "first push" in ours["body"]
    assert "0123456789ab" in ours["body"] and "https://github.example/org/platform/actions/runs/4242" in ours["body"]
    assert f"posted comment {ours['id']}" in first.stdout

    github.requests.clear()
    second = pr_comment(github, tmp_path, 7, "## Preview of stack `dev`\n\nsecond push\n", "## Stack `prod`\n\nmore\n")
    assert second.returncode == 0, second.stderr
    # Ours is fourth, on the second page: found by following the Link header.
    gets = [r for r in github.requests if r["method"] == "GET"]
    assert [r["query"].get("page", ["1"]) for r in gets] == [["1"], ["2"]]
    assert gets[0]["query"]["per_page"] == ["100"]
    assert github.writes() == [("PATCH", f"/repos/org/platform/issues/comments/{ours['id']}")]
    assert len(github.comments[7]) == 4 and github.comments[7][:3] == before  # the others untouched
    assert "second push" in ours["body"] and "first push" not in ours["body"] and "## Stack `prod`" in ours["body"]
    assert f"updated comment {ours['id']}" in second.stdout


def test_the_token_is_a_header_and_never_printed(github, tmp_path):
    done = pr_comment(github, tmp_path, 3, "summary\n")
    assert done.returncode == 0, done.stderr
    assert github.requests and all(r["headers"]["Authorization"] == f"Bearer {TOKEN}" for r in github.requests)
    assert all(TOKEN not in json.dumps({k: v for k, v in r.items() if k != "headers"}) for r in github.requests)
    github.fail = 403
    refused = pr_comment(github, tmp_path, 3, "summary\n")
    assert refused.returncode == 1 and "HTTP 403" in refused.stderr and "not accessible" in refused.stderr
    for done in (done, refused):
        assert TOKEN not in done.stdout + done.stderr
    missing = pr_comment(github, tmp_path, 3, "summary\n", GITHUB_TOKEN="")
    assert missing.returncode == 2 and "GITHUB_TOKEN" in missing.stderr


def test_a_comment_longer_than_github_allows_is_cut_with_a_pointer_to_the_run(github, tmp_path):
    rows = "".join(f"| `+` create | `Namespace` | `kns-entry-{i:05d}` |  |\n" for i in range(2000))
    done = pr_comment(github, tmp_path, 9, "## Preview of stack `big`\n\n" + rows)
    assert done.returncode == 0, done.stderr
    (posted,) = github.comments[9]
    text = posted["body"]
    assert len(text) <= 65_536 < len(rows)
    assert text.startswith(MARKER) and "**Truncated:**" in text
    assert "https://github.example/org/platform/actions/runs/4242" in text.split("**Truncated:**", 1)[1]
    kept = text.split("**Truncated:**", 1)[0].rstrip().splitlines()
    assert kept[-1].endswith("|  |")  # cut at a line, not inside a row


# ---- the preview job's own steps, run as GitHub runs them ------------------------------------


def step_script(name: str) -> str:
    document = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
    (step,) = [s for s in document["jobs"]["preview"]["steps"] if s.get("name") == name]
    return step["run"]


def run_step(tmp_path: Path, name: str, **env: str) -> tuple[subprocess.CompletedProcess, str, str]:
    """The step's script under `bash -eo pipefail` in tmp_path; its result, GITHUB_OUTPUT and
    GITHUB_STEP_SUMMARY."""
    output, page = tmp_path / "output", tmp_path / "page"
    output.write_text("")
    page.write_text("")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step_script(name)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "STACK": "prod", "GITHUB_OUTPUT": str(output),
                               "GITHUB_STEP_SUMMARY": str(page), **env})
    return done, output.read_text(), page.read_text()


def test_without_secrets_a_pull_request_is_told_it_gets_no_preview_and_the_job_passes(tmp_path):
    (tmp_path / "build").mkdir()
    done, output, _ = run_step(tmp_path, "Check the preview secrets", PULUMI_BACKEND_URL="", PULUMI_CONFIG_PASSPHRASE="")
    assert done.returncode == 0 and output == "present=false\n", done.stderr
    assert "::notice::No preview of stack prod" in done.stdout and "fork" in done.stdout
    said = (tmp_path / "build" / "summary-prod.md").read_text()
    assert "## Stack `prod`: validated, not previewed" in said and "`./kns validate` passed" in said
    assert "PULUMI_BACKEND_URL PULUMI_CONFIG_PASSPHRASE" in said and "from a fork" in said
    # The summary step puts it on the run's page (and the comment job reads the file).
    done, _, page = run_step(tmp_path, "Summary", VALIDATE="success", PREVIEW="skipped")
    assert done.returncode == 0 and page == said

    (tmp_path / "build" / "summary-prod.md").unlink()
    done, output, _ = run_step(tmp_path, "Check the preview secrets", PULUMI_BACKEND_URL="s3://state",
                               PULUMI_CONFIG_PASSPHRASE="x")
    assert done.returncode == 0 and output == "present=true\n" and not (tmp_path / "build" / "summary-prod.md").exists()


def test_an_invalid_config_or_a_preview_ended_early_still_gets_a_summary(tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "validate-prod.txt").write_text('kns:jobs[a].memory: "12Qi" is not a quantity\n')
    done, _, page = run_step(tmp_path, "Summary", VALIDATE="failure", PREVIEW="skipped")
    assert done.returncode == 0 and page.startswith("## Stack `prod`: invalid configuration\n")
    assert '"12Qi" is not a quantity' in page
    (tmp_path / "build" / "summary-prod.md").unlink()
    done, _, page = run_step(tmp_path, "Summary", VALIDATE="success", PREVIEW="failure")
    assert done.returncode == 0 and "the preview ended (failure) before its summary" in page


# ---- scripts/ci-preview.sh on the real engine ------------------------------------------------

PASSPHRASE = "kns-dev-local"  # the committed encryptionsalt of Pulumi.dev.yaml belongs to it
GIT_ENV = {"GIT_AUTHOR_NAME": "kns test", "GIT_AUTHOR_EMAIL": "test@example.org",
           "GIT_COMMITTER_NAME": "kns test", "GIT_COMMITTER_EMAIL": "test@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def job(name: str, **over: Any) -> dict[str, Any]:
    return {"name": name, "user": "carol", "image": "busybox:1.37", "cpu": "500m", "memory": "256Mi",
            "pool": "vcluster", **over}


def small_stack(cluster: str = "kns-dev", **config: Any) -> dict[str, Any]:
    """Two entries on one pool: the least the program needs (seconds per engine run)."""
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    pool = dev["config"]["kns:nodePools"][0]
    return {"config": {"kns:cluster": {"name": cluster, "renderDir": f"build/manifests/{cluster}"},
                       "kns:nodePools": [pool], "kns:jobs": [job("alpha"), job("beta")], **config},
            "encryptionsalt": dev["encryptionsalt"]}


@dataclass
class Checkout:
    """A git repository holding the project, as CI checks it out; `state` is the shared backend."""

    root: Path
    env: dict[str, str]
    state: Path

    def run(self, *args: str, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
        done = subprocess.run(list(args), cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert not check or done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    def write(self, stack: str, document: dict[str, Any]) -> None:
        (self.root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))

    def edit(self, stack: str, change: Callable[[dict], None]) -> None:
        document = yaml.safe_load((self.root / f"Pulumi.{stack}.yaml").read_text())
        change(document["config"])
        self.write(stack, document)

    def commit(self, message: str) -> str:
        self.run("git", "add", "-A")
        self.run("git", "commit", "-q", "-m", message)
        return self.run("git", "rev-parse", "HEAD").stdout.strip()

    def apply(self, stack: str) -> None:
        """`pulumi up` of the stack and its entry stacks, as `make up` runs them."""
        names = self.run("python", "-m", "kns_cli.layout", "stacks", stack).stdout.split()
        self.run("python", "-m", "kns_cli.layout", "init", *names)
        for name in names:
            self.run("pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--stack", name,
                     *stacks.config_arguments(name))

    def preview(self, stack: str, base: str) -> subprocess.CompletedProcess:
        return self.run("bash", str(CI_PREVIEW), stack, base, check=False)

    def backend(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.state)): p.read_bytes() for p in sorted(self.state.rglob("*")) if p.is_file()}

    def shared_stacks(self) -> list[str]:
        listed = json.loads(self.run("pulumi", "stack", "ls", "--json", "--non-interactive").stdout)
        return sorted(item["name"] for item in listed)

    def summary(self, stack: str) -> str:
        return (self.root / "build" / f"summary-{stack}.md").read_text()

    def steps(self, stack: str) -> dict[str, list[dict[str, Any]]]:
        """Each previewed Pulumi stack -> the steps of its `--json --show-sames` preview."""
        return {p.stem: json.loads(p.read_text()).get("steps", [])
                for p in sorted((self.root / "build" / f"preview-{stack}").glob("*.json"))}


def checkout(where: Path, document: dict[str, Any]) -> Checkout:
    """The project and one stack file `dev` committed in a new repository; ./kns, the
    layout module and scripts/preview-summary.py come from this repository."""
    root = where / "repo"
    env = engine_project(root, built_toolchain(), PASSPHRASE, files=(*PROJECT_FILES, "policy"))
    (root / ".venv").symlink_to(ROOT / ".venv")  # the policy pack's virtualenv, ../.venv
    (root / ".gitignore").write_text(".venv\nbuild/\n__pycache__/\n")
    env.update(GIT_ENV, KNS=str(ROOT / "kns"), PYTHONPATH=str(ROOT),
               PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}")
    project = Checkout(root, env, Path(env["PULUMI_BACKEND_URL"].removeprefix("file://")))
    project.write("dev", document)
    project.run("git", "init", "-q", "-b", "main")
    return project


@pytest.fixture(scope="module")
def applied(tmp_path_factory) -> tuple[Checkout, str]:
    """The small stack, committed and applied: the pull requests' base."""
    project = checkout(tmp_path_factory.mktemp("ci-preview"), small_stack())
    base = project.commit("base")
    project.apply("dev")
    return project, base


def test_a_pull_request_s_summary_shows_what_its_entries_ask_and_writes_nothing_shared(applied):
    project, base = applied
    project.run("git", "checkout", "-q", "-B", "entries", base)
    project.edit("dev", lambda c: c["kns:jobs"].__setitem__(1, job("beta", image="busybox:1.38")))
    project.edit("dev", lambda c: c["kns:jobs"].append(job("gamma", user="dana", image="registry.k8s.io/pause:3.10",
                                                           cpu=1, memory="512Mi")))
    # A secret of the new entry: encrypted in the stack file, never in the summary.
    project.run("pulumi", "config", "set", "--stack", "dev", "--secret", "--path", "kns:jobs[2].env.TOKEN",
                "tok-s3cr3t-2f9a")
    cipher = yaml.safe_load((project.root / "Pulumi.dev.yaml").read_text())["config"]["kns:jobs"][2]["env"]["TOKEN"]
    project.commit("pull request")
    shared = project.backend()

    done = project.preview("dev", base)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = project.summary("dev")
    assert "### Job `gamma`: `+` 10 to create" in summary
    assert "| `+-` replace | `Job` | `kns-beta/beta` | `spec.template.spec.containers[0].image` (replaces) |" in summary
    asks = summary.split("### What the changed entries ask", 1)[1]
    gamma, beta = asks.split("#### `gamma` (added)", 1)[1].split("#### `beta` (changed)")
    assert "images:         registry.k8s.io/pause:3.10" in gamma and "node pool:      vcluster (static)" in gamma
    assert "user:           dana" in gamma and "cpu=1 memory=512Mi" in gamma
    assert "images:         busybox:1.38" in beta
    assert "alpha" not in asks  # unchanged: not explained
    log = (project.root / "build" / "preview-dev.log").read_text()
    assert "kns-gamma" in log  # the full diff is kept for the artifact
    # What the artifact and the comment carry (not the JSON previews, whose inputs hold it).
    assert "tok-s3cr3t-2f9a" not in summary and "tok-s3cr3t-2f9a" not in log and '"[secret]"' in log
    assert cipher["secure"] not in summary
    # Nothing created or changed in the shared backend, nor in the checkout.
    assert project.backend() == shared
    assert project.run("git", "status", "--porcelain").stdout == ""


def test_an_entry_in_a_job_file_is_explained_to_the_reviewer(applied):
    """A team's job file (kns:jobFiles), the file CODEOWNERS gives its leads: the comment
    says what its new entry asks without the reviewer reading YAML."""
    project, base = applied
    project.run("git", "checkout", "-q", "-B", "job-file", base)
    (project.root / "jobs" / "team-a.yaml").write_text(yaml.safe_dump(
        {"jobs": [job("delta", user="erin", image="ghcr.io/example/sim:2.1", cpu=2, memory="1Gi")]}))
    project.edit("dev", lambda c: c.__setitem__("kns:jobFiles", ["jobs/team-a.yaml"]))
    project.commit("team a's job file")

    done = project.preview("dev", base)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = project.summary("dev")
    assert "### Job `delta`: `+` 10 to create" in summary
    delta = summary.split("#### `delta` (added)", 1)[1]
    assert "images:         ghcr.io/example/sim:2.1" in delta and "node pool:      vcluster (static)" in delta
    assert "user:           erin" in delta and "cpu=2 memory=1Gi" in delta


def test_a_new_stack_previews_as_creates_without_being_created(applied):
    project, base = applied
    project.run("git", "checkout", "-q", "-B", "new-stack", base)
    project.write("qa", small_stack("kns-qa"))
    project.commit("a qa stack")
    shared = project.backend()

    done = project.preview("qa", base)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (steps,) = project.steps("qa").values()
    assert steps and {s["op"] for s in steps} == {"create"}
    summary = project.summary("qa")
    assert "### Job `alpha`: `+` 10 to create" in summary and "#### `alpha` (added)" in summary
    assert project.backend() == shared and project.shared_stacks() == ["dev"]
    assert project.run("git", "status", "--porcelain").stdout == ""


def test_a_layout_change_previews_the_moves_not_deletions(tmp_path):
    """entryStacks 2 -> 3 on an applied stack: both entries change stack (one into the new
    dev.entries-2). Previewed against the state as it is, the entries would be deleted from
    their old stacks and created in the new; the merge's restack moves them instead."""
    assert {name: (stacks.holder("dev", name, 2), stacks.holder("dev", name, 3)) for name in ("alpha", "beta")} == {
        "alpha": ("dev.entries-0", "dev.entries-2"), "beta": ("dev.entries-1", "dev.entries-0")}
    project = checkout(tmp_path, small_stack(**{"kns:state": {"entryStacks": 2}}))
    base = project.commit("base")
    project.apply("dev")
    project.edit("dev", lambda c: c.update({"kns:state": {"entryStacks": 3}}))
    project.commit("three entry stacks")
    shared = project.backend()

    done = project.preview("dev", base)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = project.summary("dev")
    moves = summary.split("### Layout change (`kns:state.entryStacks`)", 1)[1]
    assert "would move 1 entry from dev.entries-1 to dev.entries-0: beta" in moves
    assert "would move 1 entry from dev.entries-0 to dev.entries-2: alpha" in moves
    steps = project.steps("dev")
    assert sorted(steps) == ["dev", "dev.entries-0", "dev.entries-1", "dev.entries-2"]
    assert {s["op"] for each in steps.values() for s in each} == {"same"}  # no deletion, no create
    assert "**Unchanged entries (2):** `alpha` (10), `beta` (10)" in summary and "`-` delete" not in summary
    assert project.backend() == shared
    assert project.shared_stacks() == ["dev", "dev.entries-0", "dev.entries-1"]
