"""Label and field selectors, with the semantics of a real API server.

``key!=v`` and ``key notin (...)`` also match objects without the label, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from reconciler.errors import DraGitopsError

Matcher = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_KEY_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


class SelectorError(DraGitopsError):
    """A selector the server cannot parse (the API answers 400 BadRequest)."""


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth, cur = 0, list[str]()
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


LabelPredicate = Callable[[dict[str, str]], bool]


def _requirement(key: str, op: str, values: frozenset[str]) -> LabelPredicate:
    def check(labels: dict[str, str]) -> bool:
        if op == "in":
            return key in labels and labels[key] in values
        if op in ("notin", "!="):
            return labels.get(key) not in values  # also true without the label, as on a real server
        if op == "=":
            return labels.get(key) in values
        if op == "exists":
            return key in labels
        return key not in labels  # "!exists"

    return check


def parse_labels(selector: str) -> LabelPredicate:
    """Compile a label selector into a predicate over a labels dict."""
    reqs: list[LabelPredicate] = []
    for part in _split(selector):
        m = _SET_RE.match(part)
        if m:
            if m.group(1):
                raise SelectorError(f"unable to parse requirement: {part.strip()}")
            values = frozenset(v.strip() for v in m.group(4).split(",") if v.strip())
            reqs.append(_requirement(m.group(2), m.group(3), values))
            continue
        m = _CMP_RE.match(part)
        if m:
            op = "!=" if m.group(2) == "!=" else "="
            reqs.append(_requirement(m.group(1), op, frozenset([m.group(3)])))
            continue
        m = _KEY_RE.match(part)
        if m:
            reqs.append(_requirement(m.group(2), "!exists" if m.group(1) else "exists", frozenset()))
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


def _field_requirement(path: str, negate: bool, value: str) -> Matcher:
    def check(obj: dict[str, Any]) -> bool:
        return (field_value(obj, path) == value) != negate

    return check


def parse_fields(selector: str) -> Matcher:
    """Compile a field selector (``a=b``, ``a==b``, ``a!=b``, comma-separated) into a predicate."""
    reqs: list[Matcher] = []
    for part in _split(selector):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{part.strip()}'")
        path, op, value = m.groups()
        reqs.append(_field_requirement(path, op == "!=", value))
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
