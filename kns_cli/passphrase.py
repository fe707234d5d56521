"""The one passphrase rule of every door that runs the Pulumi engine: `make up`, `make
preview`, `make outputs` (scripts/up.sh), the CI scripts and the `./kns` commands that run
it (preview, up, recover, restack, applied, outputs).

The dev passphrase is the `dev` stack's alone (its committed `encryptionsalt` belongs to
it, and the stack needs no external cluster), and its entry stacks'. Any other stack whose
secrets provider is the passphrase (Pulumi's default) needs PULUMI_CONFIG_PASSPHRASE or
PULUMI_CONFIG_PASSPHRASE_FILE. Without either, each door stops with `missing`'s message
before it builds, creates or touches anything: defaulting it would create a new stack with
a passphrase nobody chose, and leaving it to Pulumi fails halfway, on one door and not on
another.

    python -m kns_cli.passphrase STACK [--as NAME]
        (scripts/lib/passphrase.sh) the dev passphrase on stdout when the stack is to use it,
        nothing when none is needed or one is set; exit 2 with the message, prefixed NAME,
        when the stack needs one that is not set
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

import yaml

from plan import stacks

from .stack import UsageError

DEV_PASSPHRASE = "kns-dev-local"  # Pulumi.dev.yaml's committed encryptionsalt belongs to it
PASSPHRASE = "PULUMI_CONFIG_PASSPHRASE"
PASSPHRASE_FILE = "PULUMI_CONFIG_PASSPHRASE_FILE"


class PassphraseMissing(UsageError):
    """A stack other than dev, with the passphrase secrets provider, and no passphrase set."""


def secrets_provider(project_dir: Path, base: str) -> Optional[str]:
    """The stack's `secretsprovider` (a cloud KMS, say); None for the passphrase's."""
    try:
        document = yaml.safe_load((project_dir / f"Pulumi.{base}.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    value = document.get("secretsprovider") if isinstance(document, dict) else None
    return str(value) if value and value != "passphrase" else None


def missing(stack: str) -> str:
    base = stacks.role(stack).base
    return (f"stack {base} needs its passphrase: set {PASSPHRASE} or {PASSPHRASE_FILE} (the dev passphrase is "
            f"the {stacks.DEV} stack's only; README, \"Passphrases\"). Nothing was run.")


def passphrase_environment(project_dir: Path, stack: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What to add to `environ` to run the engine on `stack`: the dev passphrase for the dev
    stack when none is set, otherwise nothing; PassphraseMissing when the stack needs one
    that is not set (or a passphrase file that cannot be read)."""
    named = environ.get(PASSPHRASE_FILE)
    if environ.get(PASSPHRASE):
        return {}
    if named:
        if not os.access(named, os.R_OK) or not Path(named).is_file():
            raise PassphraseMissing(f"{PASSPHRASE_FILE} names {named}, which is not a readable file. Nothing was run.")
        return {}
    base = stacks.role(stack).base
    if base == stacks.DEV:
        return {PASSPHRASE: DEV_PASSPHRASE}
    if secrets_provider(project_dir, base):
        return {}
    raise PassphraseMissing(missing(stack))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kns_cli.passphrase")
    parser.add_argument("stack")
    parser.add_argument("--as", dest="name", default="kns", help="the door's name, which prefixes the message")
    args = parser.parse_args(argv)
    try:
        added = passphrase_environment(Path.cwd(), args.stack, os.environ)
    except PassphraseMissing as exc:
        print(f"{args.name}: {exc}", file=sys.stderr)
        return 2
    if PASSPHRASE in added:
        print(added[PASSPHRASE])
    return 0


if __name__ == "__main__":
    sys.exit(main())
