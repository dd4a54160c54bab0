"""Fields of objects as the API server or a stored record returns them: JSON values of any shape.

A field read from a live object may be missing, null or of another type than the schema says; these
readers give the typed view, or an empty one, and never raise.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    """The value if it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """The value if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 / ISO 8601 timestamp (`2026-01-02T03:04:05Z`); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
