"""components/sdk_messages.py: the SDK's debug messages stay in the program unless
KNS_SDK_DEBUG=true; every other message still reaches the engine."""

from __future__ import annotations

import pulumi
from pulumi import log as sdk_log
from pulumi.runtime.proto import engine_pb2

from components import sdk_messages
from kns_testing.program import dev_stack_config, run_program


class Engine:
    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    def Log(self, request) -> None:  # noqa: N802 - the gRPC stub's name
        self.sent.append((request.severity, request.message))


def test_debug_messages_are_dropped_unless_asked_for_and_others_still_sent(monkeypatch):
    engine = Engine()
    monkeypatch.setattr(sdk_log, "get_engine", lambda: engine)
    monkeypatch.setattr(sdk_log, "debug", sdk_log.debug)  # restored after the test
    monkeypatch.setattr(pulumi.log, "debug", pulumi.log.debug)

    assert sdk_messages.debug_messages_on_request({}) is True
    sdk_log.debug("registering")
    pulumi.log.debug("registering")
    pulumi.log.warn("a warning")
    assert engine.sent == [(engine_pb2.WARNING, "a warning")]

    assert sdk_messages.debug_messages_on_request({"KNS_SDK_DEBUG": "true"}) is False
    sdk_log.debug("registering")
    assert engine.sent[-1] == (engine_pb2.DEBUG, "registering")


def test_the_program_drops_them_and_keeps_them_when_asked(monkeypatch):
    monkeypatch.setattr(sdk_log, "debug", sdk_messages.sdk_debug)
    monkeypatch.delenv("KNS_SDK_DEBUG", raising=False)
    run_program(dev_stack_config())
    assert sdk_log.debug is not sdk_messages.sdk_debug and pulumi.log.debug is sdk_log.debug
    monkeypatch.setenv("KNS_SDK_DEBUG", "true")
    run_program(dev_stack_config())
    assert sdk_log.debug is sdk_messages.sdk_debug
