"""What CI's drift check (scripts/ci-drift.sh) calls drift, read from `pulumi preview
--refresh --json` of a stack and its entry stacks: a step that would change an object (an
update back to the config, a create of what was deleted, a replace), never the stack's
outputs or its providers, which differ whenever the reading identity does (the platform
digest covers the kubeconfig a run reads, a provider takes it as an input: the drift check
reads with the preview identity, not the apply's), and never a refresh's own read steps. A
provider change that would replace objects shows as their replacements, which count.

    python -m kns_cli.drift PREVIEW.json...    exit 0 no drift, 1 drift, 2 a preview failed
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

CHANGES = {"create", "update", "delete", "replace", "create-replacement", "delete-replaced", "import"}
STACK_TYPE = "pulumi:pulumi:Stack"
PROVIDERS = "pulumi:providers:"


def _type(urn: str) -> str:
    return urn.split("::")[-2].split("$")[-1] if urn.count("::") >= 3 else ""


def drifted(preview: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(op, URN) of each step that changes an object."""
    return [(step["op"], step["urn"]) for step in preview.get("steps") or []
            if step.get("op") in CHANGES and _type(step.get("urn", "")) != STACK_TYPE
            and not _type(step.get("urn", "")).startswith(PROVIDERS)]


def errors(preview: Mapping[str, Any]) -> list[str]:
    return [str(d.get("message", "")).strip() for d in preview.get("diagnostics") or [] if d.get("severity") == "error"]


def check(paths: Sequence[Path]) -> tuple[int, list[str]]:
    status, lines = 0, []
    for path in paths:
        try:
            preview = json.loads(path.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            preview = None
        if not isinstance(preview, dict):
            lines.append(f"{path.stem}: the preview produced no result (its log says why)")
            status = 2
            continue
        failed = errors(preview)
        if failed:
            lines += [f"{path.stem}: the preview failed: {message}" for message in failed]
            status = 2
            continue
        for op, urn in drifted(preview):
            lines.append(f"{path.stem}: {op} {urn.rsplit('::', 1)[-1]} ({_type(urn)})")
            status = max(status, 1)
    return status, lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: python -m kns_cli.drift PREVIEW.json...", file=sys.stderr)
        return 2
    status, lines = check(paths)
    for line in lines:
        print(f"drift: {line}")
    return status


if __name__ == "__main__":
    sys.exit(main())
