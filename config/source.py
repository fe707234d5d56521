"""Where stack config comes from: the `kns:` values Pulumi delivers, and the stack file.

The engine hands a program each config key as text (structured values as JSON with sorted
keys) and says which keys are secret. `kns_config` turns that into the raw values the
loader validates; `authored_config` reads Pulumi.<stack>.yaml as written, whose key order
`restore_order` puts back (the order of profile rules matters). No Pulumi import: the
composition root reads the engine's values and passes them in, so the offline `kns`
commands share every step here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Collection, Mapping, Optional

import yaml

NAMESPACE = "kns"
OBJECT_KEYS = ("cluster", "packingScheduler", "knsScheduler", "profiles", "credentials")
LIST_KEYS = ("nodePools", "jobs", "schedules", "jobFiles")
STRING_KEYS = ("keycloakClientSecret",)
SECRET_KEYS = ("keycloakClientSecret", "credentials")
KNOWN_KEYS = OBJECT_KEYS + LIST_KEYS + STRING_KEYS


def decode_value(key: str, value: Any) -> Any:
    """A `kns:` value as the engine delivers it (text) decoded as the program reads it:
    JSON, except for the string keys and text that is not JSON."""
    if key not in STRING_KEYS and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
    return value


def kns_config(values: Mapping[str, Any], secret: Collection[str]) -> tuple[dict[str, Any], frozenset[str]]:
    """The `kns:` keys of `values` (full keys, as the engine delivers them) without the
    prefix and decoded, and those of them that are in `secret`."""
    raw: dict[str, Any] = {}
    secret_keys: set[str] = set()
    for full_key in sorted(values):
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            continue
        raw[key] = decode_value(key, values[full_key])
        if full_key in secret:
            secret_keys.add(key)
    return raw, frozenset(secret_keys)


def restore_order(delivered: Any, authored: Any) -> Any:
    """`delivered` with its mappings in the key order of `authored` where both hold the same
    keys. The engine passes structured config as JSON with sorted keys, but order means
    something here: profile rules apply top to bottom, and env entries may refer to
    earlier ones."""
    if isinstance(delivered, dict) and isinstance(authored, dict):
        keys = list(authored) if set(authored) == set(delivered) else list(delivered)
        return {k: restore_order(delivered[k], authored.get(k)) for k in keys}
    if isinstance(delivered, list) and isinstance(authored, list) and len(delivered) == len(authored):
        return [restore_order(d, a) for d, a in zip(delivered, authored)]
    return delivered


def authored_config(project_dir: Path, stack: str) -> Optional[dict[str, Any]]:
    """The `kns:` keys of Pulumi.<stack>.yaml as written (None when there is no such file)."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    config = document.get("config") or {}
    return {k.partition(":")[2]: v for k, v in config.items() if k.startswith(f"{NAMESPACE}:")}
