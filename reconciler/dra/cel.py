"""CEL selectors of DeviceClasses and requests, evaluated against one device (pure, no I/O).

Built on ``common-expression-language`` (Rust core), with Kubernetes' CEL extensions (``quantity()``,
``semver()`` and their methods, a few string helpers) from :mod:`reconciler.dra.cel_ext`, whose
semver helpers are re-exported here (quantities: :mod:`reconciler.dra.quantity`).

``evaluate_detail`` answers ``True``, ``False`` or a :class:`CelFailure`: a run-time error Kubernetes'
CEL raises too (``runtime``: reading a key a map does not have, dividing by zero; the structured
allocator then fails the pod's scheduling) or something this model cannot decide (not ``runtime``: the
expression does not compile, uses an unsupported function, or a value we cannot convert).
``evaluate`` folds both failures into ``None`` ("unknown"). Nothing here raises.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.dra.cel_ext import ERRORS, FUNCTIONS, SemVer, parse_semver, tag_quantity, tag_semver
from reconciler.dra.quantity import parse_quantity

try:  # pragma: no cover - import guard only
    import cel as _cel
except ImportError:  # pragma: no cover - the library is a hard dependency, but stay "unknown"-safe
    _cel = None  # type: ignore[assignment]

__all__ = [
    "CelFailure",
    "CompiledSelector",
    "SemVer",
    "compile_selector",
    "device_context",
    "evaluate",
    "evaluate_detail",
    "parse_semver",
    "qualify_attributes",
]


# --------------------------------------------------------------------------------------- device context

_DOMAIN_LITERAL = re.compile(r"""\b(attributes|capacity)\s*\[\s*(?:'([^']*)'|"([^"]*)")\s*\]""")


def qualify_attributes(driver: str, flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Slice attribute/capacity names ("model", "gpu.example.com/model") → {domain: {name: value}}.

    Names without a domain are qualified with the driver name, as Kubernetes does.
    """
    out: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        domain, sep, name = str(key).rpartition("/")
        if not sep:
            domain, name = driver, str(key)
        out.setdefault(domain, {})[name] = value
    return out


def _attribute_value(raw: Any) -> Any:
    """A ResourceSlice attribute ({string|int|bool|version: ...}) → the CEL value."""
    if isinstance(raw, Mapping):
        if "version" in raw:
            try:
                return tag_semver(parse_semver(str(raw["version"])))
            except ValueError:
                return str(raw["version"])
        for key in ("string", "int", "bool"):
            if key in raw:
                return raw[key]
        for key in ("strings", "ints", "bools"):
            if key in raw:
                return list(raw[key] or [])
        if "versions" in raw:
            return [tag_semver(parse_semver(str(x))) for x in raw["versions"] or []]
        return None
    return raw


def _capacity_value(raw: Any) -> Any:
    value = raw.get("value") if isinstance(raw, Mapping) else raw
    if value is None:
        return None
    return tag_quantity(parse_quantity(value))


def device_context(
    driver: str,
    attributes: Mapping[str, Any] | None = None,
    capacity: Mapping[str, Any] | None = None,
    allow_multiple_allocations: bool = False,
) -> dict[str, Any]:
    """Build the CEL ``device`` variable from slice-shaped attributes and capacity.

    ``attributes``: {name: {string|int|bool|version: v}} as in a v1 ResourceSlice (names optionally
    domain-qualified). ``capacity``: {name: {value: "40Gi"}} or {name: "40Gi"}.
    Raises ValueError on unparsable values (callers treat that as "unknown").
    """
    attrs = {
        dom: {n: _attribute_value(v) for n, v in names.items()}
        for dom, names in qualify_attributes(driver, attributes or {}).items()
    }
    caps = {
        dom: {n: _capacity_value(v) for n, v in names.items()}
        for dom, names in qualify_attributes(driver, capacity or {}).items()
    }
    return {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": bool(allow_multiple_allocations),
    }


# ------------------------------------------------------------------------------------------- compilation


@dataclass(frozen=True)
class CompiledSelector:
    expression: str
    program: Any  # cel.Program or None when compilation failed
    error: str | None
    domains: tuple[str, ...]  # literal domains used in attributes[...] / capacity[...]

    @property
    def ok(self) -> bool:
        return self.program is not None


_CACHE: dict[str, CompiledSelector] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 4096


def compile_selector(expression: str) -> CompiledSelector:
    """Compile once (cached by expression text). Never raises."""
    cached = _CACHE.get(expression)
    if cached is not None:
        return cached
    program: Any = None
    error: str | None = None
    domains = tuple(sorted({m.group(2) or m.group(3) or "" for m in _DOMAIN_LITERAL.finditer(expression)}))
    if _cel is None:  # pragma: no cover
        error = "CEL library not installed"
    else:
        try:
            program = _cel.compile(expression)
        except Exception as exc:  # noqa: BLE001 - syntax errors and anything the library throws
            program, error = None, f"compilation failed: {exc}"
    compiled = CompiledSelector(expression, program, error, domains)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[expression] = compiled
    return compiled


_CONTEXT_CLASS: Any = getattr(_cel, "Context", None) if _cel is not None else None


@dataclass(frozen=True)
class CelFailure:
    """Why an evaluation gave no boolean.

    ``runtime``: a CEL run-time error that kube-scheduler hits too (``message`` in cel-go's words,
    e.g. "no such key: productName"; ``key`` the missing key). Otherwise the model cannot decide.
    """

    message: str
    runtime: bool = False
    key: str | None = None


def _failure(exc: Exception) -> CelFailure:
    if isinstance(exc, KeyError) and exc.args:
        key = str(exc.args[0])
        return CelFailure(f"no such key: {key}", runtime=True, key=key)
    if isinstance(exc, ZeroDivisionError):
        text = str(exc)
        return CelFailure("modulus by zero" if "modulo" in text else "division by zero", runtime=True)
    return CelFailure(f"cannot be evaluated here: {str(exc).split('. ')[0]}")


def evaluate_detail(expression: str | CompiledSelector, device: Mapping[str, Any]) -> bool | CelFailure:
    """Evaluate one selector against a device context (see ``device_context``).

    Missing attribute *domains* read as empty maps (as in Kubernetes); a missing attribute inside a
    domain is a run-time error ("no such key: <name>"). ``&&``/``||`` absorb errors as CEL does.
    """
    compiled = expression if isinstance(expression, CompiledSelector) else compile_selector(expression)
    if compiled.program is None or _CONTEXT_CLASS is None:
        return CelFailure(compiled.error or "CEL library not installed")
    try:
        dev = dict(device)
        if compiled.domains:
            attrs = dict(dev.get("attributes") or {})
            caps = dict(dev.get("capacity") or {})
            for dom in compiled.domains:
                attrs.setdefault(dom, {})
                caps.setdefault(dom, {})
            dev["attributes"], dev["capacity"] = attrs, caps
        ctx = _CONTEXT_CLASS(variables={"device": dev}, functions=FUNCTIONS)
        ERRORS.failed = False
        result = compiled.program.execute(ctx)
    except Exception as exc:  # noqa: BLE001 - every evaluation problem becomes a CelFailure
        if getattr(ERRORS, "failed", False):
            return CelFailure("a Kubernetes CEL extension failed on its arguments")
        return _failure(exc)
    if getattr(ERRORS, "failed", False):
        return CelFailure("a Kubernetes CEL extension failed on its arguments")
    if isinstance(result, bool):
        return result
    return CelFailure(f"the result is not a bool ({type(result).__name__})")


def evaluate(expression: str | CompiledSelector, device: Mapping[str, Any]) -> bool | None:
    """True / False, or None when unknown or failing (see ``evaluate_detail`` for which)."""
    result = evaluate_detail(expression, device)
    return result if isinstance(result, bool) else None
