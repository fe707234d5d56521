"""Serve the kns-platform policy pack to the Pulumi engine (started by the language host)."""

import sys
from pathlib import Path

from pulumi_policy import EnforcementLevel, PolicyPack

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policy.pack import PACK_NAME, POLICIES  # noqa: E402  (needs the repository root on sys.path)

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
