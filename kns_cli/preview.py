"""`./kns preview ENTRY...`: a real `pulumi preview` of the named entries only.

The one `kns` command that runs the engine. It validates the stack offline first (nothing
starts on bad input), then runs `pulumi preview --json` with the engine set-up
of `scripts/up.sh` (toolchain, backend, passphrase, stack, policy pack), restricted with
`--target` to the URNs of the named entries' resources (`plan.targeting.entry_urns`) and
`--target-dependents`, and with `plan.targeting.ONLY_ENTRIES` set so that the program
registers only those entries (see plan/targeting.py for why that is safe). The program
honours that variable only in a run `./kns` started: a new token in `KNS_TARGETED_RUN`, and
`--message kns-targeted:<token>` on the pulumi command (config/invocation.py). The result is
printed as aligned text on a terminal (kns_cli/summary.py `render_text`: one row per
changed object, named as the cluster names it), as the Markdown CI posts with `--format
markdown` (scripts/preview-summary.py), or as the JSON itself. The engine's own messages
are kept from the terminal: when the named entries need something the stack does not have
yet, it says so once per dependent object, and `missing_dependency` makes that one line.

Pulumi 3.259's preview JSON has no policy violations; the engine's event log has them
(`--event-log`, a flag the CLI shows with PULUMI_DEBUG_COMMANDS=true), and they go into the
summary as its `policyViolations`: one engine run, where CI runs the preview twice. The log
also has the `same` steps, which the summary counts per entry.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import yaml

from config.invocation import TARGETED_RUN, message_arguments, new_token
from plan import stacks
from plan.targeting import ONLY_ENTRIES

from . import summary
from .engine import engine_settings
from .passphrase import passphrase_environment, secrets_provider
from .stack import ROOT, UsageError

TOOLCHAIN_SCRIPT = ROOT / "scripts" / "toolchain.sh"
# What the engine says when a targeted resource needs one that is not in the stack yet
# (pulumi 3.259 writes "which was was not specified"; either is read).
UNTARGETED_CREATE = re.compile(r"depends on '([^']+)' which was (?:was )?not specified in --target list")


class PreviewFailed(Exception):
    """The engine could not start or run the preview (exit status 1)."""


summary_module = summary.summary_module


def project_name(project_dir: Path) -> str:
    try:
        return str(yaml.safe_load((project_dir / "Pulumi.yaml").read_text(encoding="utf-8"))["name"])
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the project name from {project_dir / 'Pulumi.yaml'}: {exc}") from None


@functools.lru_cache(maxsize=1)
def toolchain() -> str:
    """The bin directory of the pinned Pulumi CLI, language host and provider
    (`scripts/toolchain.sh`, which builds them on first use); found once per process, so
    its line is printed once."""
    done = subprocess.run(["bash", str(TOOLCHAIN_SCRIPT)], stdout=subprocess.PIPE, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise PreviewFailed(f"scripts/toolchain.sh failed (exit {done.returncode}); its messages are above")
    return done.stdout.strip().splitlines()[-1]


def engine_environment(project_dir: Path, stack: str, names: Sequence[str], bin_dir: str,
                       environ: Mapping[str, str], token: Optional[str] = None,
                       narrowed: Optional[bool] = None) -> dict[str, str]:
    """The environment of scripts/up.sh (with the engine settings of scripts/lib/engine.sh,
    and the passphrase rule of kns_cli/passphrase.py: PassphraseMissing for a stack that
    needs one that is not set), plus the entries the program is to register, if any are named (or `narrowed`: `./kns up`
    of removed entries only names none), with the run's `token` (which the pulumi
    command's `--message` must carry: `preview_arguments`)."""
    env = {**environ, **engine_settings(environ), **passphrase_environment(project_dir, stack, environ)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PULUMI_SKIP_UPDATE_CHECK"] = "true"
    env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"
    if not env.get("PULUMI_BACKEND_URL"):
        state = project_dir / ".pulumi-state"
        state.mkdir(exist_ok=True)
        env["PULUMI_BACKEND_URL"] = f"file://{state}"
    env["PULUMI_DEBUG_COMMANDS"] = "true"  # what makes `pulumi preview --event-log` available
    if names if narrowed is None else narrowed:
        if not token:
            raise ValueError("naming entries needs the run's token (config.invocation.new_token)")
        env[ONLY_ENTRIES] = ",".join(names)
        env[TARGETED_RUN] = token
    else:
        env.pop(ONLY_ENTRIES, None)
        env.pop(TARGETED_RUN, None)
    return env


def _pulumi(args: Sequence[str], project_dir: Path, env: Mapping[str, str], **kwargs: Any) -> subprocess.CompletedProcess:
    return subprocess.run(["pulumi", *args, "--non-interactive"], cwd=project_dir, env=dict(env), text=True, **kwargs)


NO_SUCH_STACK = "no stack named"


def select_stack(project_dir: Path, stack: str, env: Mapping[str, str], create: bool = True) -> None:
    """`pulumi stack select`, or `init` when the backend has no such stack (as up.sh). Any
    other failure (a backend left unreadable by a killed run) is reported, never answered
    with an `init` that would fail on the stack's lock instead. A new entry stack
    (docs/entry-stacks.md) gets the stack's secrets provider and no config file of its own:
    it runs with the stack's (`--config-file`)."""
    done = _pulumi(["stack", "select", stack], project_dir, env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode == 0:
        return
    if not create or NO_SUCH_STACK not in done.stderr:
        raise PreviewFailed(f"cannot select stack {stack} on {env['PULUMI_BACKEND_URL']}: {done.stderr.strip()}"
                            + ("" if NO_SUCH_STACK in done.stderr else
                               f" (after an interrupted run: {stacks.kns_command('recover', stack)}, "
                               "docs/operations.md)"))
    this = stacks.role(stack)
    print(f"kns: creating {'stack' if this.index is None else 'entry stack'} {stack} on {env['PULUMI_BACKEND_URL']}",
          file=sys.stderr)
    own = project_dir / f"Pulumi.{stack}.yaml"
    existed = own.exists()
    provider = secrets_provider(project_dir, this.base) if this.index is not None else None
    made = _pulumi(["stack", "init", stack, *(["--secrets-provider", provider] if provider else [])], project_dir, env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if this.index is not None and not existed:
        own.unlink(missing_ok=True)
    if made.returncode != 0:
        raise PreviewFailed(f"cannot create stack {stack} on {env['PULUMI_BACKEND_URL']}: {made.stderr.strip()}")


def policy_pack(project_dir: Path) -> Path:
    """The project's `policy/` pack (`--policy-pack policy`, as up.sh), or this repository's
    for a project directory without one."""
    own = project_dir / "policy"
    return own if (own / "PulumiPolicy.yaml").is_file() else ROOT / "policy"


def preview_arguments(stack: str, urns: Sequence[str], event_log: Path, policy: Path,
                      policy_config: Optional[str], token: Optional[str] = None) -> list[str]:
    """The `pulumi` arguments of the targeted preview; with the run's `token`, the
    `--message` that lets the program honour `ONLY_ENTRIES` (config/invocation.py)."""
    args = ["preview", "--stack", stack, *stacks.config_arguments(stack), "--json", "--event-log", str(event_log),
            "--policy-pack", str(policy)]
    if policy_config:
        args += ["--policy-pack-config", policy_config]
    if token:
        args += message_arguments(token)
    for urn in urns:
        args += ["--target", urn]
    return args + ["--target-dependents"]


def run_preview(project_dir: Path, stack: str, urns: Sequence[str], names: Sequence[str],
                environ: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """Run the targeted preview: the preview JSON, with the event log's policy violations
    (as `policyViolations`) and `same` steps added, and pulumi's exit status."""
    token = new_token()
    env = engine_environment(project_dir, stack, names, toolchain(), environ, token)
    select_stack(project_dir, stack, env)
    with tempfile.TemporaryDirectory(prefix="kns-preview-") as tmp:
        events = Path(tmp) / "events.jsonl"
        args = preview_arguments(stack, urns, events, policy_pack(project_dir), env.get("KNS_POLICY_CONFIG"),
                                 token if names else None)
        done = _pulumi(args, project_dir, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        log = events.read_text(encoding="utf-8", errors="replace") if events.exists() else ""
    try:
        preview = json.loads(done.stdout)
    except json.JSONDecodeError:
        preview = None
    if not isinstance(preview, dict):
        lines = done.stderr.strip().splitlines()
        raise PreviewFailed(f"pulumi preview failed (exit {done.returncode}) without a JSON preview"
                            + (": " + "\n".join(lines[-10:]) if lines else ""))
    found = summary.read_events(log)
    preview["policyViolations"] = [*(preview.get("policyViolations") or []), *found.violations]
    listed = {step.get("urn") for step in preview.get("steps") or []}
    sames = [step for step in found.planned if step["op"] == "same" and step["urn"] not in listed]
    preview["steps"] = [*(preview.get("steps") or []), *sames]
    return preview, done.returncode


def combine(parts: Sequence[tuple[dict[str, Any], int]]) -> tuple[dict[str, Any], int]:
    """The previews of several Pulumi stacks (a stack's entry stacks) as one
    (scripts/preview-summary.py `combine`), with the first failing status."""
    if len(parts) == 1:
        return parts[0]
    return summary_module().combine([preview for preview, _ in parts]), next(
        (status for _, status in parts if status != 0), 0)


def render_summary(preview: dict[str, Any], stack: str, names: Sequence[str], others: int) -> str:
    """The CI summary (scripts/preview-summary.py) of the named entries, and a line saying
    what was not previewed: untargeted resources are `same` steps the engine never diffed
    (the platform the entries depend on, read from state; the other entries, carried over),
    so "unchanged" would be a claim this preview cannot make about them."""
    ps = summary_module()
    full = ps.summarise(preview, stack)
    named = [section for section in full.entries if section.title in set(names)]
    totals = ps._count(named)
    platform = len(full.platform.changes) + full.platform.same
    text = ps.render(dataclasses.replace(full, totals=totals, entries=named,
                                    platform=ps.Section(ps.PLATFORM)))
    text = text.partition(f"\n### {ps.PLATFORM}:")[0].rstrip("\n")
    return (f"{text}\n\n**Not previewed** (`--target`): the platform ({platform} resources) and the {others} "
            f"other entries stay as the stack has them; `{stacks.make_command('preview', stack)}` previews the whole "
            f"stack.\n")


def missing_dependency(preview: Mapping[str, Any], stack: str,
                       owners: Mapping[tuple[str, str], str] = {}) -> Optional[str]:
    """When the engine refused the targets because something they need is not in the stack
    yet (a new queue, a stack never applied): one message naming the first such resource by
    its kind and the config it comes from (`owners`: (type, logical name) -> config path,
    from plan/inventory.py), and what to run instead. The engine says it once per
    dependent resource; one line is what a reader needs."""
    for diagnostic in preview.get("diagnostics") or []:
        match = UNTARGETED_CREATE.search(str(diagnostic.get("message", "")))
        if not match:
            continue
        ps = summary_module()
        needed = ps.parse_urn(match[1])
        owner = owners.get((needed.type, needed.name))
        what = f"the {ps.kind_of(needed.type)} of {owner}" if owner else f"{ps.kind_of(needed.type)} {needed.name}"
        return (f"kns preview: the named entries depend on {what}, which the stack does not have yet "
                f"(a new queue, pool or cluster, or a stack never applied): preview the whole stack with "
                f"`{stacks.make_command('preview', stack)}`, and apply it with `{stacks.make_command('up', stack)}` "
                f"before previewing entries one by one")
    return None
