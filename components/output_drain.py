"""How the program waits for its outputs at the end, in time linear in their number.

After the program's code has run, Pulumi's Python SDK (3.259, requirements.txt; 3.274.1 is
the same) waits for every pending output in `pulumi.runtime.stack.wait_for_rpcs`: a loop
that calls `asyncio.wait(all_pending, FIRST_COMPLETED)`, handles the one that finished and
puts the rest back. Each round adds and removes a done-callback on every pending output,
so draining n outputs that finish one at a time costs n²/2 callbacks: 558,000 in a fresh
300-entry `up`, the largest cost centre of the program then (docs/benchmarks.md, section
14). The replacement keeps the SDK's loop and its meaning (every RPC and output awaited,
the first failure raised as soon as its output finishes, a registration the engine reported
failed left to `Output.recover`, outputs made while waiting picked up in the next round)
and drains each round with `asyncio.as_completed`: one callback per output.
"""

from __future__ import annotations

import asyncio

from pulumi import log
from pulumi.runtime import stack as _stack
from pulumi.runtime.settings import SETTINGS, _get_rpc_manager
from pulumi.runtime.stack import ResourceRegistrationFailed

# The SDK's own function, kept when it is replaced (tests compare against it).
sdk_wait_for_rpcs = _stack.wait_for_rpcs


async def drain_outputs() -> None:
    """Await every pending output, those created meanwhile too; raise the first failure."""
    while True:
        with SETTINGS.lock:
            if not SETTINGS.outputs:
                return
            pending = list(SETTINGS.outputs)
            SETTINGS.outputs.clear()
        for finished in asyncio.as_completed(pending):
            try:
                await finished
            except ResourceRegistrationFailed:
                pass


async def wait_for_rpcs(await_all_outstanding_tasks: bool = True) -> None:
    """`pulumi.runtime.stack.wait_for_rpcs` with `drain_outputs` for its output loop."""
    rpc_manager = _get_rpc_manager()
    while True:
        while rpc_manager.rpcs:
            await asyncio.sleep(0)
            try:
                await rpc_manager.rpcs.pop()
            except Exception as exn:
                if rpc_manager.unhandled_exception is not None:
                    raise exn from rpc_manager.unhandled_exception.with_traceback(rpc_manager.exception_traceback)
                raise
        if rpc_manager.unhandled_exception is not None:
            raise rpc_manager.unhandled_exception.with_traceback(rpc_manager.exception_traceback)
        log.debug("RPCs successfully completed")
        if await_all_outstanding_tasks:
            await drain_outputs()
            log.debug("All outstanding outputs completed.")
        if not rpc_manager.rpcs:
            break


def linear_output_drain() -> None:
    """From now on the program's end waits through `wait_for_rpcs` above (the SDK's
    `run_in_stack` looks the function up when the program's code has run)."""
    _stack.wait_for_rpcs = wait_for_rpcs
