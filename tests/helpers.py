"""Small helpers shared by tests (importable because pytest puts `tests/` on sys.path for its conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def wait_for(
    cond: Callable[[], T | None], timeout: float = 10.0, what: str = "condition", interval: float = 0.05
) -> T:
    """Poll `cond` until it returns something truthy (and return it), or fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of a file."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d]
