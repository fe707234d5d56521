"""A command as a hint prints it for a stack (plan/stacks.py `make_command`,
`kns_command`), for the shell scripts' hints:

    python -m kns_cli.hint STACK make TARGET     `make TARGET`, or `KNS_STACK=STACK make TARGET`
    python -m kns_cli.hint STACK kns COMMAND...  `./kns COMMAND...`, with `--stack STACK` unless dev
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from plan import stacks


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] not in ("make", "kns"):
        print("usage: python -m kns_cli.hint STACK make TARGET | STACK kns COMMAND...", file=sys.stderr)
        return 2
    stack, door, words = args[0], args[1], " ".join(args[2:])
    print(stacks.make_command(words, stack) if door == "make" else stacks.kns_command(words, stack))
    return 0


if __name__ == "__main__":
    sys.exit(main())
