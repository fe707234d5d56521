"""How this project runs the Pulumi engine: the settings of scripts/lib/engine.sh, which
scripts/up.sh sources, read here by sourcing the same file so that `./kns preview`,
`./kns recover`, the tests and the benchmarks run the engine exactly as `make up` does
(docs/benchmarks.md, "`pulumi up` against a real API server")."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Mapping, Optional

ENGINE_SH = Path(__file__).resolve().parent.parent / "scripts" / "lib" / "engine.sh"


def setting_names() -> list[str]:
    return re.findall(r"^export (\w+)=", ENGINE_SH.read_text(), re.MULTILINE)


def engine_settings(given: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """Each variable scripts/lib/engine.sh exports, with its value once bash has sourced the
    file in an environment holding only those of `given` (the operator's own values win)."""
    names = setting_names()
    own = {name: value for name, value in (given or {}).items() if name in names}
    done = subprocess.run(["bash", "-c", '. "$1" && env -0', "engine-settings", str(ENGINE_SH)],
                          env={"PATH": "/usr/bin:/bin", **own}, capture_output=True, check=True, timeout=60)
    exported = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return {name: exported[name] for name in names}
