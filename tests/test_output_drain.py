"""components/output_drain.py: the program's end waits for its outputs in linear time with
the SDK's meaning (docs/benchmarks.md, section 14)."""

from __future__ import annotations

import asyncio

import pytest
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime.stack import ResourceRegistrationFailed

from components import output_drain
from kns_testing.program import dev_stack_config, run_program


class Counted(asyncio.Future):
    """A future that counts the done-callbacks added to it (asyncio.wait and as_completed
    add theirs through this method)."""

    added = 0

    def add_done_callback(self, fn, *, context=None):
        Counted.added += 1
        return super().add_done_callback(fn, context=context)


@pytest.fixture
def outputs():
    """SETTINGS.outputs emptied for the test and given back after."""
    with SETTINGS.lock:
        saved = set(SETTINGS.outputs)
        SETTINGS.outputs.clear()
    yield SETTINGS.outputs
    with SETTINGS.lock:
        SETTINGS.outputs.clear()
        SETTINGS.outputs.update(saved)


def run(coroutine):
    """Run on a loop of its own, leaving the thread's current loop (which the SDK's mocks
    use) as it was: asyncio.run would unset it."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def callbacks_to_drain(wait, count: int) -> int:
    """Done-callbacks added while `wait` drains `count` outputs that finish one at a time."""

    async def scenario() -> int:
        futures = [Counted() for _ in range(count)]
        with SETTINGS.lock:
            SETTINGS.outputs.update(futures)
        Counted.added = 0

        async def finish_one_by_one():
            for future in futures:
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                future.set_result(None)

        finisher = asyncio.ensure_future(finish_one_by_one())
        await wait()
        await finisher
        assert all(future.done() for future in futures)
        return Counted.added

    return run(scenario())


def test_draining_n_outputs_adds_one_callback_each_where_the_sdk_adds_n_squared(outputs):
    count = 300
    ours = callbacks_to_drain(output_drain.wait_for_rpcs, count)
    assert ours <= count, ours
    theirs = callbacks_to_drain(output_drain.sdk_wait_for_rpcs, count)
    assert theirs >= count * count // 4, theirs  # the cost the replacement removes


def test_outputs_made_while_waiting_are_awaited_and_failures_raised(outputs):
    async def scenario():
        loop = asyncio.get_running_loop()
        first, later, failed = loop.create_future(), loop.create_future(), loop.create_future()
        registration = loop.create_future()
        with SETTINGS.lock:
            SETTINGS.outputs.update({first, registration})

        def made_meanwhile(_):
            with SETTINGS.lock:
                SETTINGS.outputs.add(later)
            loop.call_soon(later.set_result, "later")

        first.add_done_callback(made_meanwhile)
        loop.call_soon(first.set_result, "first")
        loop.call_soon(registration.set_exception, ResourceRegistrationFailed("left to Output.recover"))
        await output_drain.wait_for_rpcs()
        assert later.done() and later.result() == "later"  # picked up in the next round

        with SETTINGS.lock:
            SETTINGS.outputs.add(failed)
        loop.call_soon(failed.set_exception, ValueError("an apply failed"))
        with pytest.raises(ValueError, match="an apply failed"):
            await output_drain.wait_for_rpcs()

    run(scenario())


def test_the_program_ends_through_the_linear_drain(monkeypatch):
    """The program installs it (__main__.py) and its end waits through it (under mocks the
    test harness has awaited the outputs by then: the drain finds none left)."""
    drained = []
    real = output_drain.drain_outputs

    async def counting():
        drained.append(len(SETTINGS.outputs))
        await real()

    monkeypatch.setattr(output_drain, "drain_outputs", counting)
    run = run_program(dev_stack_config())
    from pulumi.runtime import stack
    assert stack.wait_for_rpcs is output_drain.wait_for_rpcs
    assert drained, "the program's end never reached the drain"
    assert run.outputs["namespaces"], run.outputs
