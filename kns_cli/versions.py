"""What `./kns --version` prints: this checkout and the versions it pins (versions.env, the
one place tool versions are pinned)."""

from __future__ import annotations

import subprocess
from pathlib import Path

SHOWN = (("Pulumi CLI", "PULUMI_VERSION"), ("pulumi-kubernetes provider", "PULUMI_KUBERNETES_VERSION"),
         ("Kubernetes", "KUBERNETES_VERSION"), ("Kueue", "KUEUE_VERSION"), ("Karpenter", "KARPENTER_VERSION"))


def pinned(root: Path) -> dict[str, str]:
    """versions.env: name -> version."""
    out = {}
    for line in (root / "versions.env").read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def checkout(root: Path) -> str:
    """The commit this checkout is at (with `-dirty` for local changes), or "unknown"."""
    try:
        done = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def text(root: Path) -> str:
    versions = pinned(root)
    lines = [f"kns-platform {checkout(root)}"]
    lines += [f"  {label} {versions[key]}" for label, key in SHOWN]
    return "\n".join(lines) + "\n"
