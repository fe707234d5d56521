"""`python -m kns_cli`: what `./kns` runs."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The project's own `config` and `plan` packages, whatever the working directory holds.
sys.path.insert(0, str(ROOT))

try:
    from kns_cli.cli import main
except ImportError as exc:  # run by a Python without the project's dependencies
    print(f"kns: {exc}; the repository's virtualenv has every dependency: run `make venv` in {ROOT}",
          file=sys.stderr)
    sys.exit(2)

sys.exit(main())
