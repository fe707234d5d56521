"""What every entry shares, as digests: the record that lets `./kns up ENTRY...` refuse a
targeted apply when something shared changed since the last full `make up`.

Each entry's objects depend on what all entries share: the cluster, its node pools, the
schedulers, Kueue and its queues and priorities, the profiles, the credential sets, and the
program that turns config into objects. A targeted `up` applies the named entries only; if
any of those changed, applying it to some entries and not others would leave the cluster
half in one state and half in the other. So every run of the program exports
`platformDigest` (docs/outputs.md): one SHA-256 per shared section, and one of the program's
files. `./kns up` computes the same digests offline from the same files and applies nothing
when one differs from what the stack holds, naming the sections (docs/cli.md).

Both sides read the stack file as written (`Pulumi.<stack>.yaml`), not the decrypted config:
the program could not otherwise match `./kns`, which has no passphrase, and a digest of a
decrypted secret would put something derived from it in state. An encrypted value counts
as its ciphertext, so setting a secret again (even to the same value) is a change. A
section is compared as its canonical JSON (key order and YAML spelling do not count, a
unit written another way does: the refusal errs on the side of a full `up`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from .source import NAMESPACE, SHARED_KEYS

# The shared sections, in the order they are reported (their stack config keys).
SHARED = tuple(f"{NAMESPACE}:{key}" for key in SHARED_KEYS)
PROGRAM = "program"
# What the program runs, relative to the project directory: a change here may change what
# the same config builds.
PROGRAM_FILES = ("Pulumi.yaml", "__main__.py", "requirements.txt", "versions.env", "chrono", "config", "plan", "components",
                 "vendor", "policy")
# Written by Python or editors beside the program's files, never part of it.
NOT_PROGRAM = ("__pycache__",)
NOT_PROGRAM_SUFFIXES = (".pyc", ".pyo", "~", ".swp")
OUTPUT = "platformDigest"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def shared_digests(stack_config: Mapping[str, Any]) -> dict[str, str]:
    """Section key -> SHA-256 of its value in the stack file's `config:` (absent: null)."""
    return {key: _sha(canonical(stack_config.get(key)).encode()) for key in SHARED}


def program_paths(project_dir: Path) -> Iterator[Path]:
    """The program's files (`PROGRAM_FILES`), sorted by their path in the project."""
    found: list[Path] = []
    for name in PROGRAM_FILES:
        path = project_dir / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(p for p in path.rglob("*") if p.is_file()
                         and not any(part in NOT_PROGRAM for part in p.relative_to(project_dir).parts)
                         and not p.name.endswith(NOT_PROGRAM_SUFFIXES))
    yield from sorted(found, key=lambda p: p.relative_to(project_dir).as_posix())


def program_digest(project_dir: Path) -> str:
    """SHA-256 over each program file's path and content."""
    digest = hashlib.sha256()
    for path in program_paths(project_dir):
        digest.update(path.relative_to(project_dir).as_posix().encode() + b"\0")
        digest.update(_sha(path.read_bytes()).encode() + b"\0")
    return digest.hexdigest()


def platform_digest(stack_config: Mapping[str, Any], project_dir: Path, program: Optional[str] = None) -> dict[str, str]:
    """The `platformDigest` output: each shared section's digest, and the program's
    (`program`, when the caller hashed the program's files already)."""
    return {**shared_digests(stack_config), PROGRAM: program or program_digest(project_dir)}


def differences(recorded: Any, current: Mapping[str, str]) -> list[str]:
    """The sections (in `SHARED` order, then `program`) whose digest differs from the
    record; every one of them when there is no record."""
    record = recorded if isinstance(recorded, Mapping) else {}
    return [key for key in current if record.get(key) != current[key]]
