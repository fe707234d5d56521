"""Kubernetes quantity parsing, normalisation and arithmetic.

Pure functions (no Pulumi) so quotas, LimitRanges and profile maxima can be computed
and tested exactly. Values are held as `Decimal` in base units (cores, bytes, counts).
Bare numbers mean MiB for memory and storage, as in Nodepool and RStudio (docs/reference.md).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from enum import Enum

from .errors import without_a_value

# The parts of a Kubernetes quantity, also used by the JSON Schema (tools/schema.py).
UNSIGNED_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
SUFFIX = r"(?:[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)"
_QUANTITY = re.compile(rf"^(?P<num>[+-]?{UNSIGNED_NUMBER})(?P<suffix>{SUFFIX})?$")

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
MIB = Decimal(2**20)
# The API server holds a quantity's value (CPU: its thousandths) in a signed 64-bit integer.
INT64_MAX = Decimal(2**63 - 1)


class Kind(str, Enum):
    """What a quantity measures; decides the meaning of bare numbers and the output form."""

    CPU = "cpu"
    BYTES = "bytes"
    COUNT = "count"


class QuantityError(ValueError):
    """A value that is not a usable Kubernetes quantity; the message is user-facing."""


def parse(value: object, kind: Kind = Kind.COUNT) -> Decimal:
    """Parse a quantity (string or number) into base units.

    Bare numbers (YAML numbers, not strings) are MiB for `Kind.BYTES`, as in Nodepool and
    RStudio; a string is a Kubernetes quantity, so "4096" is 4096 bytes. CPU numbers are cores.
    """
    if value is None:
        raise QuantityError(without_a_value("a quantity"))
    if isinstance(value, bool):
        raise QuantityError(f"{_show(value)} is not a quantity")
    bare_number = isinstance(value, (int, float, Decimal))
    if bare_number:
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise QuantityError(f"{_show(value)} is not a quantity")
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"{_show(value)} is not a quantity{_unit_hint(text)}")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"{_show(value)} is not a quantity") from exc
    suffix = match["suffix"]
    if suffix is None:
        # A YAML number is MiB for memory and storage; a string is a Kubernetes quantity.
        amount = number * MIB if kind is Kind.BYTES and bare_number else number
    elif suffix in _BINARY:
        amount = number * _BINARY[suffix]
    elif suffix in _DECIMAL:
        amount = number * _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > 40:  # far past either bound below; spares Decimal a huge power
            raise QuantityError(f"{_show(value)} is {'larger' if exponent > 0 else 'finer'} than Kubernetes can hold")
        amount = number * (Decimal(10) ** exponent)
    if abs(amount) * (1000 if kind is Kind.CPU else 1) > INT64_MAX:
        raise QuantityError(f"{_show(value)} is larger than Kubernetes can hold")
    return amount


def normalise(value: object, kind: Kind, *, allow_zero: bool = True) -> str:
    """Parse and render a quantity in canonical form; negative values are errors."""
    amount = parse(value, kind)
    if amount < 0:
        raise QuantityError(f"{_show(value)} must not be negative")
    if amount == 0 and not allow_zero:
        raise QuantityError(f"{_show(value)} must be greater than zero")
    if kind is Kind.CPU and amount * 1000 != (amount * 1000).to_integral_value():
        raise QuantityError(f"{_show(value)} is finer than 1m (a thousandth of a core)")
    if kind is Kind.BYTES and amount != amount.to_integral_value():
        raise QuantityError(f"{_show(value)} is not a whole number of bytes")
    return render(amount, kind)


def render(amount: Decimal, kind: Kind) -> str:
    """Canonical text for an amount in base units: `2`, `500m`, `4Gi`, `1536Mi`, `1000`."""
    if kind is Kind.CPU:
        if amount == amount.to_integral_value():
            return str(int(amount))
        return f"{int((amount * 1000).to_integral_value())}m"
    if kind is Kind.BYTES:
        whole = int(amount.to_integral_value())
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY[suffix]
            if whole and whole % unit == 0:
                return f"{whole // unit}{suffix}"
        return str(whole)
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{int((amount * 1000).to_integral_value())}m"


def human(amount: Decimal, kind: Kind) -> str:
    """An amount as a person writes it, for what the CLI prints (never for manifests): whole
    or decimal cores (`2`, `1.6`, `2046.4`; `500m` under one core), bytes in the largest
    binary unit that is at least one, to two decimals (`16Ti`, `1.5Gi`, `256Mi`), counts
    as numbers (`8`, `0.5`)."""
    if kind is Kind.CPU:
        if abs(amount) < 1 and amount != amount.to_integral_value():
            return render(amount, kind)
        return _decimal(amount)
    if kind is Kind.BYTES:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = Decimal(_BINARY[suffix])
            if abs(amount) >= unit:
                return _decimal((amount / unit).quantize(Decimal("0.01"))) + suffix
        return _decimal(amount.to_integral_value())
    return _decimal(amount)


def human_of(resource: str, amount: Decimal) -> str:
    """`human` for an amount of a named resource (requests, limits and quota keys)."""
    return human(amount, kind_for_resource(resource))


def _decimal(amount: Decimal) -> str:
    text = f"{amount:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def kind_for_resource(resource: str) -> Kind:
    """The kind of a resource name as used in requests, limits and quotas."""
    base = resource.split(".", 1)[1] if resource.startswith(("requests.", "limits.")) else resource
    if base == "cpu":
        return Kind.CPU
    if base in ("memory", "ephemeral-storage", "storage") or base.endswith(".storage"):
        return Kind.BYTES
    return Kind.COUNT


def scale(value: str, factor: int | Decimal, kind: Kind) -> str:
    """Multiply a canonical quantity by a factor (quota = per-pod amount x pods)."""
    return render(parse(value, kind) * Decimal(factor), kind)


def minimum(a: str, b: str, kind: Kind) -> str:
    """The smaller of two quantities, in canonical form."""
    return a if parse(a, kind) <= parse(b, kind) else b


# A unit as written elsewhere (GB, MiB, kb): the number, then its Kubernetes suffixes.
_BYTE_UNIT = re.compile(rf"^(?P<num>{UNSIGNED_NUMBER})\s*(?P<unit>[kKmMgGtTpPeE])(?P<binary>i?)[bB]$")


def _unit_hint(text: str) -> str:
    """The did-you-mean of a byte unit Kubernetes does not write (`64GB`, `512MiB`, `1kb`)."""
    match = _BYTE_UNIT.match(text)
    if not match:
        return ""
    letter = match["unit"].upper()
    decimal = "k" if letter == "K" else letter
    binary = f"{match['num']}{letter}i"
    if match["binary"]:
        return f'; did you mean "{binary}"?'
    return f'; did you mean "{match["num"]}{decimal}" or "{binary}"?'


def _show(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)
