"""Kubernetes' CEL extensions for DRA selectors, as custom functions of the CEL library (pure).

``quantity()`` with ``compareTo``/``isGreaterThan``/``isLessThan``/``asInteger``/``asApproximateFloat``/
``sign``/``isInteger``/``add``/``sub``, ``semver()``/``isSemver`` with ``major``/``minor``/``patch`` and
the same comparisons, plus a few string helpers (``lowerAscii``, ``upperAscii``, ``trim``). Quantities
and versions travel through the CEL library as small tagged maps (``{"__k8s_quantity__": "<exact
fraction>"}``, ``{"__k8s_semver__": "1.2.3"}``) so equality between two of them is exact. A function
that fails sets ``ERRORS.failed`` instead of raising into the library. Used by :mod:`reconciler.dra.cel`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

__all__ = [
    "ERRORS",
    "FUNCTIONS",
    "QUANTITY_TAG",
    "SEMVER_TAG",
    "Quantity",
    "SemVer",
    "format_quantity",
    "parse_quantity",
    "parse_semver",
    "quantity_value",
    "tag_quantity",
    "tag_semver",
]

QUANTITY_TAG = "__k8s_quantity__"
SEMVER_TAG = "__k8s_semver__"

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
_SEMVER_RE = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


# --------------------------------------------------------------------------------------------- quantities


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


@dataclass(frozen=True, order=True)
class Quantity:
    """An exact Kubernetes quantity (convenience wrapper for callers outside CEL)."""

    value: Fraction

    @classmethod
    def parse(cls, text: str | int | float) -> Quantity:
        return cls(parse_quantity(text))

    def __str__(self) -> str:
        return format_quantity(self.value)


def tag_quantity(value: Fraction) -> dict[str, str]:
    return {QUANTITY_TAG: f"{value.numerator}/{value.denominator}"}


def quantity_value(obj: Any) -> Fraction | None:
    """The Fraction behind a tagged quantity map, a Quantity, or a quantity string; None when not one."""
    if isinstance(obj, Quantity):
        return obj.value
    if isinstance(obj, Mapping) and QUANTITY_TAG in obj:
        return Fraction(str(obj[QUANTITY_TAG]))
    if isinstance(obj, str | int) and not isinstance(obj, bool):
        try:
            return parse_quantity(obj)
        except ValueError:
            return None
    return None


# ------------------------------------------------------------------------------------------------ semver


@dataclass(frozen=True)
class SemVer:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    def key(self) -> tuple[Any, ...]:
        # A version without pre-release sorts after any pre-release of the same core version.
        pre_key: tuple[Any, ...] = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre_key)

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}.{self.patch}"
        return base + ("-" + ".".join(self.pre) if self.pre else "")


def parse_semver(text: str) -> SemVer:
    m = _SEMVER_RE.match(str(text).strip())
    if not m:
        raise ValueError(f"invalid semver: {text!r}")
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return SemVer(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre)


def tag_semver(v: SemVer) -> dict[str, str]:
    return {SEMVER_TAG: str(v)}


def _semver_of(obj: Any) -> SemVer | None:
    if isinstance(obj, Mapping) and SEMVER_TAG in obj:
        return parse_semver(str(obj[SEMVER_TAG]))
    return None


# -------------------------------------------------------------------------------------- custom functions


def _cmp(a: Any, b: Any) -> int:
    qa, qb = _tagged_quantity(a), _tagged_quantity(b)
    if qa is not None and qb is not None:
        return (qa > qb) - (qa < qb)
    va, vb = _semver_of(a), _semver_of(b)
    if va is not None and vb is not None:
        ka, kb = va.key(), vb.key()
        return (ka > kb) - (ka < kb)
    raise TypeError("compareTo needs two quantities or two semvers")


def _tagged_quantity(obj: Any) -> Fraction | None:
    if isinstance(obj, Mapping) and QUANTITY_TAG in obj:
        return Fraction(str(obj[QUANTITY_TAG]))
    return None


def _need_q(obj: Any) -> Fraction:
    q = _tagged_quantity(obj)
    if q is None:
        raise TypeError("not a quantity")
    return q


def _fn_quantity(s: Any) -> dict[str, str]:
    if not isinstance(s, str):
        raise TypeError("quantity() takes a string")
    return tag_quantity(parse_quantity(s))


def _fn_is_quantity(s: Any) -> bool:
    if not isinstance(s, str):
        return False
    try:
        parse_quantity(s)
    except ValueError:
        return False
    return True


def _fn_semver(s: Any, *normalize: Any) -> dict[str, str]:
    if not isinstance(s, str):
        raise TypeError("semver() takes a string")
    text = s
    if normalize and normalize[0] is True:
        text = text.lstrip("v")
        core, sep, rest = text.partition("-")
        parts = core.split(".")
        while len(parts) < 3:
            parts.append("0")
        text = ".".join(str(int(p)) for p in parts) + (sep + rest if sep else "")
    return tag_semver(parse_semver(text))


def _fn_is_semver(s: Any, *normalize: Any) -> bool:
    try:
        _fn_semver(s, *normalize)
    except (TypeError, ValueError):
        return False
    return True


def _fn_major(v: Any) -> int:
    sv = _semver_of(v)
    if sv is None:
        raise TypeError("major() needs a semver")
    return sv.major


def _fn_minor(v: Any) -> int:
    sv = _semver_of(v)
    if sv is None:
        raise TypeError("minor() needs a semver")
    return sv.minor


def _fn_patch(v: Any) -> int:
    sv = _semver_of(v)
    if sv is None:
        raise TypeError("patch() needs a semver")
    return sv.patch


def _fn_as_integer(q: Any) -> int:
    v = _need_q(q)
    if v.denominator != 1:
        raise ValueError("quantity is not an integer")
    if not -(2**63) <= v.numerator < 2**63:
        raise OverflowError("quantity overflows int64")
    return v.numerator


def _fn_is_integer(q: Any) -> bool:
    v = _need_q(q)
    return v.denominator == 1 and -(2**63) <= v.numerator < 2**63


def _fn_sign(q: Any) -> int:
    v = _need_q(q)
    return (v > 0) - (v < 0)


def _fn_add(a: Any, b: Any) -> dict[str, str]:
    other = Fraction(b) if isinstance(b, int) and not isinstance(b, bool) else _need_q(b)
    return tag_quantity(_need_q(a) + other)


def _fn_sub(a: Any, b: Any) -> dict[str, str]:
    other = Fraction(b) if isinstance(b, int) and not isinstance(b, bool) else _need_q(b)
    return tag_quantity(_need_q(a) - other)


def _fn_lower(s: Any) -> str:
    if not isinstance(s, str):
        raise TypeError("lowerAscii needs a string")
    return "".join(c.lower() if c.isascii() else c for c in s)


def _fn_upper(s: Any) -> str:
    if not isinstance(s, str):
        raise TypeError("upperAscii needs a string")
    return "".join(c.upper() if c.isascii() else c for c in s)


def _fn_trim(s: Any) -> str:
    if not isinstance(s, str):
        raise TypeError("trim needs a string")
    return s.strip()


ERRORS = threading.local()
_ERROR_MARK = {"__k8s_error__": True}


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Custom functions never raise into the CEL library (it would print); they flag the evaluation."""

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - any failure makes this evaluation "unknown"
            ERRORS.failed = True
            return _ERROR_MARK

    return call


_RAW_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _fn_quantity,
    "isQuantity": _fn_is_quantity,
    "semver": _fn_semver,
    "isSemver": _fn_is_semver,
    "compareTo": _cmp,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "major": _fn_major,
    "minor": _fn_minor,
    "patch": _fn_patch,
    "asInteger": _fn_as_integer,
    "isInteger": _fn_is_integer,
    "asApproximateFloat": lambda q: float(_need_q(q)),
    "sign": _fn_sign,
    "add": _fn_add,
    "sub": _fn_sub,
    "lowerAscii": _fn_lower,
    "upperAscii": _fn_upper,
    "trim": _fn_trim,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {name: _guarded(fn) for name, fn in _RAW_FUNCTIONS.items()}
