"""Kubernetes quantities (pure): "40Gi", "500m", "1.5G", "1e3" as exact Fractions, and back to text.

The one parser of the package: the CEL extensions' ``quantity()`` (:mod:`reconciler.dra.cel_ext`), device
capacity and counters (:mod:`reconciler.dra.devices`, :mod:`reconciler.dra.capacity_math`) and extended
resources (:mod:`reconciler.dra.noderesources`) all read quantities here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

__all__ = ["format_quantity", "parse_quantity", "quantity_or_none"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?$"
)


def parse_quantity(text: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity ("40Gi", "500m", "1.5G", "1e3", 3) into an exact Fraction.

    Raises ValueError for anything Kubernetes would refuse.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a quantity: {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(Decimal(repr(text)))
    s = str(text).strip()
    m = _QUANTITY_RE.match(s)
    if not m:
        raise ValueError(f"quantities must match the regular expression: {s!r}")
    number, suffix, exponent = m.group(1), m.group(2), m.group(3)
    try:
        value = Fraction(Decimal(number))
    except (InvalidOperation, ValueError) as exc:  # pragma: no cover - the regex already checked
        raise ValueError(f"bad quantity number: {s!r}") from exc
    if exponent is not None:
        return value * Fraction(10) ** int(exponent)
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    return value * _DECIMAL[suffix or ""]


def format_quantity(value: Fraction) -> str:
    """A readable canonical form (exact): integers plain, binary multiples with Ki..Ei, else a decimal."""
    if value.denominator == 1:
        n = value.numerator
        if n != 0:
            for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
                if n % _BINARY[suffix] == 0:
                    return f"{n // _BINARY[suffix]}{suffix}"
        return str(n)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(Decimal(value.numerator) / Decimal(value.denominator))


def quantity_or_none(raw: Any) -> Fraction | None:
    """A quantity, or the ``value`` of a capacity or counter entry (``{"value": "40Gi"}``); None when
    there is none or it does not parse."""
    value = raw.get("value") if isinstance(raw, Mapping) else raw
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None
