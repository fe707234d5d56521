"""Git repositories made by the tests, with the engine's git environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kns_testing import program


GIT_ENV = {**os.environ, **program.GIT_ENV}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()
