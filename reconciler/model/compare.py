"""Comparing a manifest with its live object, which the server has defaulted and canonicalised (pure)."""

from __future__ import annotations

from typing import Any

__all__ = ["covers"]


def covers(live: Any, desired: Any) -> bool:
    """Every value `desired` sets is set to the same value in `live` (extra live fields are defaults).

    A number the manifest writes where the server keeps a string (a quantity, an IntOrString) matches
    its canonical text: `cpu: 4` is "4" live.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return not desired
        for key, value in desired.items():
            if key not in live:
                if value in (None, {}, [], ""):
                    continue  # an empty value the server drops
                return False
            if not covers(live[key], value):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return not desired and not live
        return all(covers(a, b) for a, b in zip(live, desired, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return live is desired  # True == 1 in Python; not in Kubernetes
    if isinstance(desired, int | float) and isinstance(live, str):
        return str(desired) == live
    return bool(live == desired)
