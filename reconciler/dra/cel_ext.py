"""Kubernetes' CEL extensions for DRA selectors, as custom functions of the CEL library (pure).

``quantity()`` with ``compareTo``/``isGreaterThan``/``isLessThan``/``asInteger``/``asApproximateFloat``/
``sign``/``isInteger``/``add``/``sub``, ``semver()``/``isSemver`` with ``major``/``minor``/``patch`` and
the same comparisons, plus a few string helpers (``lowerAscii``, ``upperAscii``, ``trim``). Quantities
and versions travel through the CEL library as small tagged maps (``{"__k8s_quantity__": "<exact
fraction>"}``, ``{"__k8s_semver__": "1.2.3"}``) so equality between two of them is exact; quantities are
parsed by :mod:`reconciler.dra.quantity`. A function
that fails sets ``ERRORS.failed`` instead of raising into the library. Used by :mod:`reconciler.dra.cel`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from reconciler.dra.quantity import parse_quantity

__all__ = [
    "ERRORS",
    "FUNCTIONS",
    "QUANTITY_TAG",
    "SEMVER_TAG",
    "SemVer",
    "parse_semver",
    "tag_quantity",
    "tag_semver",
]

QUANTITY_TAG = "__k8s_quantity__"
SEMVER_TAG = "__k8s_semver__"

_SEMVER_RE = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


# --------------------------------------------------------------------------------------------- quantities


def tag_quantity(value: Fraction) -> dict[str, str]:
    return {QUANTITY_TAG: f"{value.numerator}/{value.denominator}"}


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


def _semver_field(name: str) -> Callable[[Any], int]:
    """``major()``, ``minor()``, ``patch()``: one part of a semver."""

    def part(v: Any) -> int:
        sv = _semver_of(v)
        if sv is None:
            raise TypeError(f"{name}() needs a semver")
        return int(getattr(sv, name))

    return part


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
    "major": _semver_field("major"),
    "minor": _semver_field("minor"),
    "patch": _semver_field("patch"),
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
