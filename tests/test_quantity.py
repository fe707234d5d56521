"""Quantity parsing and normalisation (pure, no Pulumi)."""

from decimal import Decimal

import pytest

from config.quantity import Kind, QuantityError, kind_for_resource, minimum, normalise, parse, render, scale


@pytest.mark.parametrize(
    "value, kind, expected",
    [
        ("4Gi", Kind.BYTES, "4Gi"),
        ("4096Mi", Kind.BYTES, "4Gi"),
        (512, Kind.BYTES, "512Mi"),  # bare numbers are MiB for memory and storage
        ("1536", Kind.BYTES, "1536"),  # a string is a Kubernetes quantity: bytes
        ("1048576", Kind.BYTES, "1Mi"),
        (1.5, Kind.BYTES, "1536Ki"),
        ("1G", Kind.BYTES, "1000000000"),
        ("1024Ki", Kind.BYTES, "1Mi"),
        ("2", Kind.CPU, "2"),
        (2, Kind.CPU, "2"),
        ("500m", Kind.CPU, "500m"),
        ("0.25", Kind.CPU, "250m"),
        ("1500m", Kind.CPU, "1500m"),
        ("2000m", Kind.CPU, "2"),
        ("1e3", Kind.COUNT, "1000"),
        ("2k", Kind.COUNT, "2000"),
    ],
)
def test_normalise(value, kind, expected):
    assert normalise(value, kind) == expected


@pytest.mark.parametrize("value", ["12Qi", "four", "", "1.2.3", "Gi", "1 Gi", True, [1]])
def test_not_a_quantity(value):
    with pytest.raises(QuantityError, match="is not a quantity"):
        normalise(value, Kind.BYTES)


def test_no_quantity_is_a_key_given_without_a_value():
    with pytest.raises(QuantityError) as info:
        normalise(None, Kind.BYTES)
    assert str(info.value) == "is given without a value: write a quantity, or remove the key"


def test_negative_is_rejected():
    with pytest.raises(QuantityError, match="must not be negative"):
        normalise("-1", Kind.CPU)


def test_zero_can_be_refused():
    assert normalise(0, Kind.COUNT) == "0"
    with pytest.raises(QuantityError, match="greater than zero"):
        normalise(0, Kind.CPU, allow_zero=False)


def test_cpu_finer_than_a_millicore_is_rejected():
    with pytest.raises(QuantityError, match="finer than 1m"):
        normalise("0.0001", Kind.CPU)


def test_fractional_bytes_are_rejected():
    with pytest.raises(QuantityError, match="whole number of bytes"):
        normalise("1.0000001Ki", Kind.BYTES)


def test_parse_suffixes():
    assert parse("1Ki", Kind.BYTES) == 1024
    assert parse("1M", Kind.BYTES) == 1_000_000
    assert parse("100m", Kind.CPU) == Decimal("0.1")
    assert parse(3, Kind.BYTES) == 3 * 2**20
    assert parse("3", Kind.BYTES) == 3


def test_render_prefers_the_largest_exact_binary_unit():
    assert render(Decimal(3 * 2**30), Kind.BYTES) == "3Gi"
    assert render(Decimal(3 * 2**30 + 2**20), Kind.BYTES) == "3073Mi"
    assert render(Decimal(1001), Kind.BYTES) == "1001"


def test_kind_for_resource():
    assert kind_for_resource("cpu") is Kind.CPU
    assert kind_for_resource("requests.cpu") is Kind.CPU
    assert kind_for_resource("limits.memory") is Kind.BYTES
    assert kind_for_resource("requests.ephemeral-storage") is Kind.BYTES
    assert kind_for_resource("nvidia.com/gpu") is Kind.COUNT
    assert kind_for_resource("pods") is Kind.COUNT


def test_arithmetic():
    assert scale("1500m", 4, Kind.CPU) == "6"
    assert scale("512Mi", 4, Kind.BYTES) == "2Gi"
    assert minimum("1", "500m", Kind.CPU) == "500m"
    assert minimum("1Gi", "2Gi", Kind.BYTES) == "1Gi"
