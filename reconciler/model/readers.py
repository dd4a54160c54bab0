"""Defensive readers of manifest and live-object fields (pure), for every part of the package.

Manifests come from users and live objects from servers of many versions, so nothing here trusts a
field's type: a string where a list belongs reads as an empty list, never as an exception.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = [
    "annotations_of",
    "api_version_of",
    "as_dict",
    "as_dicts",
    "as_list",
    "as_str",
    "dig",
    "kind_of",
    "labels_of",
    "parse_time",
    "unique",
]


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else {}."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else []."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    """``value`` when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def as_dicts(value: Any) -> list[dict[str, Any]]:
    """The dicts of a list (anything else in it, or a non-list, is left out)."""
    return [item for item in as_list(value) if isinstance(item, dict)]


def dig(body: Any, *path: str) -> Any:
    """The value at ``path`` through nested dicts; None where a step is missing or not a dict."""
    cur = body
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def unique(items: list[str]) -> list[str]:
    """``items`` without repeats, in first-seen order."""
    return list(dict.fromkeys(items))


def kind_of(body: Any) -> str:
    return str(as_dict(body).get("kind") or "")


def api_version_of(body: Any) -> str:
    value = as_dict(body).get("apiVersion")
    return value if isinstance(value, str) else ""


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as Kubernetes writes it ("2024-05-01T10:00:00Z"); None when it is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def labels_of(meta: Any) -> dict[str, Any]:
    """The labels of an object's metadata."""
    return as_dict(as_dict(meta).get("labels"))


def annotations_of(body: Any) -> dict[str, Any]:
    """The annotations of an object."""
    return as_dict(dig(body, "metadata", "annotations"))
