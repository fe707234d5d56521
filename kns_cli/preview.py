"""`./kns preview ENTRY...`: a real `pulumi preview` of the named entries only.

The one `kns` command that runs the engine. It validates the stack offline first (nothing
starts on bad input), then runs `pulumi preview --json` with the engine set-up
of `scripts/up.sh` (toolchain, backend, passphrase, stack, policy pack), restricted with
`--target` to the URNs of the named entries' resources (`plan.targeting.entry_urns`) and
`--target-dependents`, and with `plan.targeting.ONLY_ENTRIES` set so that the program
registers only those entries (see plan/targeting.py for why that is safe). The result is
the per-entry summary of `scripts/preview-summary.py`, whose functions do the rendering.

Pulumi 3.259's preview JSON has no policy violations; the engine's event log has them
(`--event-log`, a flag the CLI shows with PULUMI_DEBUG_COMMANDS=true), and they go into the
summary as its `policyViolations`: one engine run, where CI runs the preview twice. The log
also has the `same` steps, which the summary counts per entry.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping, Optional, Sequence

import yaml

from plan.targeting import ONLY_ENTRIES

from .engine import engine_settings
from .stack import ROOT, UsageError

DEV_STACK = "dev"
DEV_PASSPHRASE = "kns-dev-local"  # the dev stack's committed encryptionsalt belongs to it (scripts/up.sh)
SUMMARY_SCRIPT = ROOT / "scripts" / "preview-summary.py"
TOOLCHAIN_SCRIPT = ROOT / "scripts" / "toolchain.sh"
# What the engine says when a targeted resource needs one that is not in the stack yet.
UNTARGETED_CREATE = "was not specified in --target list"


class PreviewFailed(Exception):
    """The engine could not start or run the preview (exit status 1)."""


@functools.lru_cache(maxsize=None)
def summary_module() -> ModuleType:
    """scripts/preview-summary.py, the summary CI prints (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("preview_summary", SUMMARY_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


def project_name(project_dir: Path) -> str:
    try:
        return str(yaml.safe_load((project_dir / "Pulumi.yaml").read_text(encoding="utf-8"))["name"])
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the project name from {project_dir / 'Pulumi.yaml'}: {exc}") from None


def toolchain() -> str:
    """The bin directory of the pinned Pulumi CLI, language host and provider
    (`scripts/toolchain.sh`, which builds them on first use)."""
    done = subprocess.run(["bash", str(TOOLCHAIN_SCRIPT)], stdout=subprocess.PIPE, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise PreviewFailed(f"scripts/toolchain.sh failed (exit {done.returncode}); its messages are above")
    return done.stdout.strip().splitlines()[-1]


def engine_environment(project_dir: Path, stack: str, names: Sequence[str], bin_dir: str,
                       environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of scripts/up.sh (with the engine settings of scripts/lib/engine.sh),
    plus the entries the program is to register, if any are named."""
    env = {**environ, **engine_settings(environ)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PULUMI_SKIP_UPDATE_CHECK"] = "true"
    env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"
    if not env.get("PULUMI_BACKEND_URL"):
        state = project_dir / ".pulumi-state"
        state.mkdir(exist_ok=True)
        env["PULUMI_BACKEND_URL"] = f"file://{state}"
    if stack == DEV_STACK and not env.get("PULUMI_CONFIG_PASSPHRASE") and not env.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        env["PULUMI_CONFIG_PASSPHRASE"] = DEV_PASSPHRASE
    env["PULUMI_DEBUG_COMMANDS"] = "true"  # what makes `pulumi preview --event-log` available
    if names:
        env[ONLY_ENTRIES] = ",".join(names)
    else:
        env.pop(ONLY_ENTRIES, None)
    return env


def _pulumi(args: Sequence[str], project_dir: Path, env: Mapping[str, str], **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(["pulumi", *args, "--non-interactive"], cwd=project_dir, env=dict(env), text=True, **kwargs)


NO_SUCH_STACK = "no stack named"


def select_stack(project_dir: Path, stack: str, env: Mapping[str, str], create: bool = True) -> None:
    """`pulumi stack select`, or `init` when the backend has no such stack (as up.sh). Any
    other failure (a backend left unreadable by a killed run) is reported, never answered
    with an `init` that would fail on the stack's lock instead."""
    done = _pulumi(["stack", "select", stack], project_dir, env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode == 0:
        return
    if not create or NO_SUCH_STACK not in done.stderr:
        raise PreviewFailed(f"cannot select stack {stack} on {env['PULUMI_BACKEND_URL']}: {done.stderr.strip()}"
                            + ("" if NO_SUCH_STACK in done.stderr else
                               " (after an interrupted run: ./kns recover, docs/operations.md)"))
    print(f"kns preview: creating stack {stack} on {env['PULUMI_BACKEND_URL']}", file=sys.stderr)
    if _pulumi(["stack", "init", stack], project_dir, env, stdout=subprocess.DEVNULL).returncode != 0:
        raise PreviewFailed(f"cannot create stack {stack} on {env['PULUMI_BACKEND_URL']}")


def policy_pack(project_dir: Path) -> Path:
    """The project's `policy/` pack (`--policy-pack policy`, as up.sh), or this repository's
    for a project directory without one."""
    own = project_dir / "policy"
    return own if (own / "PulumiPolicy.yaml").is_file() else ROOT / "policy"


def preview_arguments(stack: str, urns: Sequence[str], event_log: Path, policy: Path,
                      policy_config: Optional[str]) -> list[str]:
    args = ["preview", "--stack", stack, "--json", "--event-log", str(event_log), "--policy-pack", str(policy)]
    if policy_config:
        args += ["--policy-pack-config", policy_config]
    for urn in urns:
        args += ["--target", urn]
    return args + ["--target-dependents"]


def read_event_log(text: str) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """From an engine event log (one JSON event per line): the policy violations, in the
    shape of a preview JSON's `policyViolations` (an event's message is the policy's
    description, then the violation's own message, which is what the summary shows); and
    the `same` steps, with the type and parent the summary reads. The preview JSON leaves
    those out: `--show-sames` would list the whole stack's, which costs the engine seconds
    per thousand entries; the log has them anyway."""
    violations: list[dict[str, str]] = []
    sames: list[dict[str, Any]] = []
    for line in text.splitlines():
        if '"policyEvent"' not in line and '"resourcePreEvent"' not in line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        policy = event.get("policyEvent")
        if policy:
            violation = {key: str(policy.get(key, "")) for key in
                         ("enforcementLevel", "policyPackName", "policyName", "resourceUrn")}
            lines = str(policy.get("message", "")).strip().splitlines()
            violation["message"] = " ".join(line.strip() for line in (lines[1:] or lines))
            violations.append(violation)
        metadata = (event.get("resourcePreEvent") or {}).get("metadata") or {}
        if metadata.get("op") == "same" and metadata.get("urn"):
            state = metadata.get("new") or metadata.get("old") or {}
            sames.append({"op": "same", "urn": metadata["urn"],
                          "newState": {"type": state.get("type") or metadata.get("type"), "parent": state.get("parent", "")}})
    return violations, sames


def run_preview(project_dir: Path, stack: str, urns: Sequence[str], names: Sequence[str],
                environ: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """Run the targeted preview: the preview JSON, with the event log's policy violations
    (as `policyViolations`) and `same` steps added, and pulumi's exit status."""
    env = engine_environment(project_dir, stack, names, toolchain(), environ)
    select_stack(project_dir, stack, env)
    with tempfile.TemporaryDirectory(prefix="kns-preview-") as tmp:
        events = Path(tmp) / "events.jsonl"
        args = preview_arguments(stack, urns, events, policy_pack(project_dir), env.get("KNS_POLICY_CONFIG"))
        done = _pulumi(args, project_dir, env, stdout=subprocess.PIPE)
        log = events.read_text(encoding="utf-8", errors="replace") if events.exists() else ""
    try:
        preview = json.loads(done.stdout)
    except json.JSONDecodeError:
        preview = None
    if not isinstance(preview, dict):
        raise PreviewFailed(f"pulumi preview failed (exit {done.returncode}) without a JSON preview; its messages are above")
    violations, sames = read_event_log(log)
    preview["policyViolations"] = [*(preview.get("policyViolations") or []), *violations]
    listed = {step.get("urn") for step in preview.get("steps") or []}
    preview["steps"] = [*(preview.get("steps") or []), *(step for step in sames if step["urn"] not in listed)]
    return preview, done.returncode


def render_summary(preview: dict[str, Any], stack: str, names: Sequence[str], others: int) -> str:
    """The CI summary (scripts/preview-summary.py) of the named entries, and a line saying
    what was not previewed: untargeted resources are `same` steps the engine never diffed
    (the platform the entries depend on, read from state; the other entries, carried over),
    so "unchanged" would be a claim this preview cannot make about them."""
    summary = summary_module()
    full = summary.summarise(preview, stack)
    named = [section for section in full.entries if section.title in set(names)]
    totals: dict[str, int] = {}
    for section in named:
        for op, count in section.counts().items():
            totals[op] = totals.get(op, 0) + count
    platform = len(full.platform.changes) + full.platform.same
    text = summary.render(dataclasses.replace(full, totals=totals, entries=named,
                                              platform=summary.Section(summary.PLATFORM)))
    text = text.partition(f"\n### {summary.PLATFORM}:")[0].rstrip("\n")
    return (f"{text}\n\n**Not previewed** (`--target`): the platform ({platform} resources) and the {others} "
            f"other entries stay as the stack has them; `make preview` previews the whole stack.\n")


def hint(preview: Mapping[str, Any]) -> Optional[str]:
    """What to do when the engine refused the targets because something they need is new."""
    if any(UNTARGETED_CREATE in str(d.get("message", "")) for d in preview.get("diagnostics") or []):
        return ("kns preview: the named entries need resources the stack does not have yet (a stack never "
                "applied, or a new cluster, provider or queue); preview the whole stack with `make preview`")
    return None
