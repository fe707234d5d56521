"""Run the real `__main__.py` under recording Pulumi mocks, or copy the project for a run
of the real engine.

Each mock run gets fresh runtime settings, its own config, and a recorder of every
resource the program registers (type, logical name, inputs, provider, parent). The stack
outputs are resolved through the root Stack, so tests and benchmarks assert on what users
would see.
"""

from __future__ import annotations

import base64
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pulumi
import yaml

from kns_cli import versions
from kns_testing import tokens
from pulumi.runtime import rpc, settings

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "__main__.py"


@dataclass
class Registered:
    type: str
    name: str
    inputs: dict[str, Any]
    provider: Optional[str]
    custom: bool

    @property
    def metadata(self) -> dict[str, Any]:
        return self.inputs.get("metadata", {})


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every registration; returns inputs as outputs, ids from logical names."""

    def __init__(self) -> None:
        self.resources: list[Registered] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append(
            Registered(args.typ, args.name, dict(args.inputs), args.provider, bool(args.custom))
        )
        outputs = dict(args.inputs)
        if args.typ == "kubernetes:core/v1:Secret" and args.inputs.get("type") == TOKEN_SECRET:
            # What the token controller writes, which the provider waits for (a worker's
            # MultiKueue identity, components/worker.py).
            outputs["data"] = mock_token_data(args.name)
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}, None


@dataclass
class Run:
    resources: list[Registered]
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def named(self, type_: str, name: str) -> Registered:
        found = [r for r in self.resources if r.type == type_ and r.name == name]
        assert len(found) == 1, f"expected one {type_} named {name}, found {len(found)}"
        return found[0]

    @property
    def kubernetes(self) -> list[Registered]:
        return [r for r in self.resources if r.type.startswith("kubernetes:")]


TOKEN_SECRET = "kubernetes.io/service-account-token"


def mock_token_data(name: str) -> dict[str, str]:
    """A filled service-account-token Secret's data: a token and a CA named after it."""
    return {"token": base64.b64encode(f"token-of-{name}".encode()).decode(),
            "ca.crt": base64.b64encode(f"ca-of-{name}".encode()).decode()}


def secret_value(value: Any) -> Any:
    """The plain value inside a Pulumi secret envelope; fails if `value` is not a secret."""
    assert isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig, (
        f"not sent as a Pulumi secret: {value!r}"
    )
    return value["value"]


def encode_config(config: dict[str, Any]) -> dict[str, str]:
    """Config as the engine hands it to a program: `kns:` keys, structured values as JSON."""
    out = {}
    for key, value in config.items():
        full = key if ":" in key else f"kns:{key}"
        out[full] = value if isinstance(value, str) else json.dumps(value)
    return out


def run_program(
    config: dict[str, Any],
    secret_keys: tuple[str, ...] = (),
    stack: str = "test",
    mocks: Optional[RecordingMocks] = None,
    project_dir: Optional[Path] = None,
) -> Run:
    """Run `__main__.py` with `config`; raises what the program raises (e.g. RunError).

    Pass `mocks` to inspect what was registered even when the program fails, and
    `project_dir` to run the program from a copy of the project there (with its own
    Pulumi.<stack>.yaml and job files) instead of this repository.
    """
    main = MAIN
    if project_dir is not None:
        main = project_dir / MAIN.name
        shutil.copy(MAIN, main)
    mocks = mocks if mocks is not None else RecordingMocks()
    _fresh_runtime(mocks, stack)
    pulumi.runtime.set_all_config(encode_config(config), [f"kns:{k}" for k in secret_keys])
    stack_resource = settings.get_root_resource()
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        runpy.run_path(str(main), run_name="__main__")
        return pulumi.Output.from_input(dict(stack_resource.outputs)).apply(outputs.update)

    program()
    return Run(mocks.resources, outputs)


def _fresh_runtime(mocks: RecordingMocks, stack: str) -> None:
    settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project="kns-platform", stack=stack, preview=False)


def register_components(build: Callable[[], dict[str, Any]]) -> Run:
    """Run `build` (components registered by hand, from a plan made by hand: no config, no
    planner, no `__main__.py`) under recording mocks. The Run's outputs are what `build`
    returned, every Output in it resolved, so a test reads the children through the
    component's own attributes as well as through what the mocks were sent."""
    mocks = RecordingMocks()
    _fresh_runtime(mocks, "test")
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        return pulumi.Output.from_input(build()).apply(outputs.update)

    program()
    return Run(mocks.resources, outputs)


def pinned_versions() -> dict[str, str]:
    """versions.env, the one place tool versions are pinned: name -> version."""
    return versions.pinned(ROOT)


PROJECT_FILES = ("Pulumi.yaml", "__main__.py", "chrono", "config", "plan", "components", "jobs", "vendor")


def built_toolchain() -> str:
    """The bin directory scripts/toolchain.sh prints (it builds the pinned toolchain on first
    use); fails the calling test with the end of its messages when it cannot."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "toolchain.sh")], capture_output=True, text=True,
                          timeout=5400)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def engine_project(root: Path, bin_dir: str, passphrase: str, base_env: Optional[dict[str, str]] = None,
                   files: tuple[str, ...] = PROJECT_FILES) -> dict[str, str]:
    """Copy the project to `root` for a run of the real engine, using this repository's
    virtualenv, with a file:// backend beside it; returns the environment to run pulumi in."""
    root.mkdir(parents=True, exist_ok=True)
    for name in files:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, root / name)
    settings = yaml.safe_load((root / "Pulumi.yaml").read_text())
    settings["runtime"]["options"]["virtualenv"] = str(ROOT / ".venv")
    (root / "Pulumi.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    state = root.parent / f"{root.name}-state"
    state.mkdir()
    env = dict(os.environ if base_env is None else base_env)
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    env.update({
        "PATH": f"{bin_dir}:{env['PATH']}",
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    })
    # As scripts/lib/engine.sh runs it: no automatic debug log (docs/operations.md, "The CLI patch").
    env.setdefault("PULUMI_AUTOMATIC_LOGGING", "false")
    return env


# What CI runs beside the program (scripts/ci-*.sh call ./kns and make in the checkout).
CI_TOOLS = ("kns", "kns_cli", "scripts", "policy", "Makefile", "versions.env")
GIT_ENV = {"GIT_AUTHOR_NAME": "kns test", "GIT_AUTHOR_EMAIL": "test@example.org",
           "GIT_COMMITTER_NAME": "kns test", "GIT_COMMITTER_EMAIL": "test@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def ci_checkout(root: Path) -> str:
    """Make the project copy in `root` a checkout as CI has it: the tools CI's scripts run
    (this repository's, its virtualenv linked, whose install stamp stays newer than the
    copied requirements so `make` installs nothing) and a git repository with one commit;
    returns the commit."""
    for name in CI_TOOLS:
        source = ROOT / name
        if not (root / name).exists():
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, root / name)
    shutil.copy2(ROOT / "requirements.txt", root / "requirements.txt")
    if not (root / ".venv").exists():
        (root / ".venv").symlink_to(ROOT / ".venv")
    (root / ".gitignore").write_text(".venv\nbuild/\n__pycache__/\n")
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "--allow-empty", "-m", "checkout"]):
        subprocess.run(["git", "-C", str(root), *args], env=env, check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def dev_stack_config() -> dict[str, Any]:
    """The checked-in dev stack's config, keys without the `kns:` prefix."""
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    return {key.split(":", 1)[1]: value for key, value in document["config"].items()}


def registration_requests(monkeypatch) -> dict[tuple[str, str], Any]:
    """(type, logical name) -> the RegisterResource request the program's later runs send
    the mock monitor: what mocks' resources do not show (options such as ignoreChanges or
    deleteBeforeReplace, the stack trace)."""
    from pulumi.runtime import mocks as pulumi_mocks

    found: dict[tuple[str, str], Any] = {}
    register = pulumi_mocks.MockMonitor.RegisterResource

    def recording(self, request):
        found[(request.type, request.name)] = request
        return register(self, request)

    monkeypatch.setattr(pulumi_mocks.MockMonitor, "RegisterResource", recording)
    return found


def run_laid_out(cron: dict[str, Any], code: dict[str, Any], into: Path, probe: str) -> subprocess.CompletedProcess:
    """Lay a platform pod's code ConfigMap out as the CronJob's pod mounts it, then run
    `probe` there in a Python that sees nothing else: isolated, without site-packages (the
    pod's image has the standard library only), with the container's own environment."""
    files = {**{k: v.encode() for k, v in code["data"].items()},
             **{k: base64.b64decode(v) for k, v in code.get("binaryData", {}).items()}}
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for item in pod["volumes"][0]["configMap"]["items"]:
        (into / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (into / item["path"]).write_bytes(files[item["key"]])
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"] if "value" in e}
    return subprocess.run([sys.executable, "-I", "-S", "-B", "-c", "import sys; sys.path.insert(0, '.')\n" + probe],
                          cwd=into, capture_output=True, text=True, env={**env, "PATH": "/usr/bin:/bin"}, timeout=60)


# The place a stack-file problem is printed at (`Pulumi.case.yaml:6:5: ` before its path).
STACK_FILE_PLACE = re.compile(r"^(\s*(?:- )?)Pulumi\.[^:/\s]+\.yaml:[0-9]+:[0-9]+: ", re.MULTILINE)


def without_places(text: str) -> str:
    """`./kns validate`'s text without the stack file's places, for tests of what a problem
    says (its path and message) against the program run on a config without a file;
    tests/test_stack_file_places.py holds the places themselves."""
    return STACK_FILE_PLACE.sub(r"\1", text)


def site_steps() -> list[dict[str, Any]]:
    """Preview steps of one entry on a MultiKueue site: its component, and the same
    LimitRange `kns-train/kns-defaults` through the manager's provider and each worker's
    (`<cluster>-kubernetes`), as `pulumi preview --json` lists them."""
    project = "urn:pulumi:site::kns-platform::"
    entry = f"{project}{tokens.JOB}::train"
    steps = [{"op": "create", "urn": entry, "newState": {"type": tokens.JOB, "parent": ""}}]
    for cluster in ("site", "east", "west"):
        steps.append({"op": "create", "urn": f"{project}{tokens.JOB}$kubernetes:core/v1:LimitRange::train-{cluster}",
                      "newState": {"type": "kubernetes:core/v1:LimitRange", "parent": entry,
                                   "provider": f"{project}pulumi:providers:kubernetes::{cluster}-kubernetes::0a1b",
                                   "inputs": {"metadata": {"name": "kns-defaults", "namespace": "kns-train"}}}})
    return steps
