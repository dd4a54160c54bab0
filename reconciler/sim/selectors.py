"""Label and field selectors, with the semantics of a real API server.

``key!=v`` and ``key notin (...)`` also match objects without the label, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Matcher = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_KEY_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


class SelectorError(ValueError):
    """A selector the server cannot parse (the API answers 400 BadRequest)."""


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def parse_labels(selector: str) -> Callable[[dict[str, str]], bool]:
    """Compile a label selector into a predicate over a labels dict."""
    reqs: list[Callable[[dict[str, str]], bool]] = []
    for part in _split(selector):
        m = _SET_RE.match(part)
        if m:
            if m.group(1):
                raise SelectorError(f"unable to parse requirement: {part.strip()}")
            key, op = m.group(2), m.group(3)
            values = frozenset(v.strip() for v in m.group(4).split(",") if v.strip())
            if op == "in":
                reqs.append(lambda lb, k=key, vs=values: k in lb and lb[k] in vs)
            else:
                reqs.append(lambda lb, k=key, vs=values: lb.get(k) not in vs)
            continue
        m = _CMP_RE.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3)
            if op == "!=":
                reqs.append(lambda lb, k=key, v=value: lb.get(k) != v)
            else:
                reqs.append(lambda lb, k=key, v=value: lb.get(k) == v)
            continue
        m = _KEY_RE.match(part)
        if m:
            key = m.group(2)
            if m.group(1):
                reqs.append(lambda lb, k=key: k not in lb)
            else:
                reqs.append(lambda lb, k=key: k in lb)
            continue
        raise SelectorError(f"unable to parse requirement: {part.strip()}")
    return lambda labels: all(r(labels) for r in reqs)


def field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_fields(selector: str) -> Matcher:
    """Compile a field selector (``a=b``, ``a==b``, ``a!=b``, comma-separated) into a predicate."""
    reqs: list[Matcher] = []
    for part in _split(selector):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{part.strip()}'")
        path, op, value = m.groups()
        if op == "!=":
            reqs.append(lambda o, p=path, v=value: field_value(o, p) != v)
        else:
            reqs.append(lambda o, p=path, v=value: field_value(o, p) == v)
    return lambda obj: all(r(obj) for r in reqs)


def compile_selectors(label_selector: str | None, field_selector: str | None) -> Matcher | None:
    """One predicate over whole objects, or None when nothing is selected on."""
    checks: list[Matcher] = []
    if label_selector and label_selector.strip():
        lab = parse_labels(label_selector)
        checks.append(lambda o: lab(o.get("metadata", {}).get("labels") or {}))
    if field_selector and field_selector.strip():
        checks.append(parse_fields(field_selector))
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda o: all(c(o) for c in checks)
