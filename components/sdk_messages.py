"""Debug messages the SDK sends the engine, kept in the program unless asked for.

Pulumi's Python SDK (3.259, requirements.txt) sends four debug messages per registered
resource (registering, prepared, successful, the RPC's end): each a blocking gRPC call to
the engine, and those naming a resource one more pending output each (to resolve its URN)
that the program's end waits for. The engine shows them only with `pulumi up --debug`,
which the CLI never tells the program. Kept in the program, a fresh 300-entry preview
takes 0.6 of the time it took (with components/output_drain.py; docs/benchmarks.md,
section 14). `KNS_SDK_DEBUG=true` sends them (docs/operations.md).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from pulumi import log as _log

DEBUG_ENV = "KNS_SDK_DEBUG"

# The SDK's own function, kept when it is replaced (tests compare against it).
sdk_debug = _log.debug


def _dropped(msg: str, resource: Any = None, stream_id: Any = None, ephemeral: Any = None) -> None:
    """Not sent: the engine's display drops debug messages unless run with --debug."""


def debug_messages_on_request(env: Optional[Mapping[str, str]] = None) -> bool:
    """Every later SDK debug message is dropped in the program unless KNS_SDK_DEBUG=true;
    True when they are dropped."""
    wanted = (os.environ if env is None else env).get(DEBUG_ENV, "").lower() == "true"
    _log.debug = sdk_debug if wanted else _dropped
    return not wanted
