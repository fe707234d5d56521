"""Versions live in one place: versions.env, and requirements.txt must agree with it."""

from __future__ import annotations

import re

from kns_testing.program import ROOT, pinned_versions


def read_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+-]+)", line)
            assert match, f"requirements.txt: {line!r} is not pinned with =="
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def test_every_requirement_is_pinned_exactly():
    assert {"pulumi", "pulumi-kubernetes", "pydantic", "croniter", "pyyaml", "pytest", "hypothesis"} <= set(read_pins())


def test_the_lock_covers_every_installed_package():
    from importlib.metadata import distributions

    installed = {d.metadata["Name"].lower().replace("_", "-") for d in distributions()} - {"pip", "setuptools"}
    assert installed <= set(read_pins()), installed - set(read_pins())


def test_sdk_pins_match_the_engine_versions():
    versions, pins = pinned_versions(), read_pins()
    assert pins["pulumi"] == versions["PULUMI_VERSION"]
    assert pins["pulumi-kubernetes"] == versions["PULUMI_KUBERNETES_VERSION"]


def test_installed_sdks_are_the_pinned_ones():
    from importlib.metadata import version

    pins = read_pins()
    assert version("pulumi") == pins["pulumi"]
    assert version("pulumi_kubernetes") == pins["pulumi-kubernetes"]
    assert version("pydantic") == pins["pydantic"]
