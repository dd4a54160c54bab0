"""Durations as a user writes them (`30s`, `1m30s`, `500ms`, plain seconds) and jittered intervals.

Targets (`targets.py`) read their `pollInterval` and `grace` with `parse_duration`; the worker loops and
the Lease manager wait `jittered` intervals, so replicas and targets do not act in lockstep.
"""

from __future__ import annotations

import random
import re

from reconciler.errors import UserError

DEFAULT_JITTER = 0.1

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object, where: str) -> float:
    """Seconds from `30s`, `1m30s`, `500ms`, `1h`, or plain seconds (`30`, `2.5`); UserError otherwise."""
    if isinstance(value, bool):
        raise UserError(f"expected a duration like 30s, got {value!r}", where=where)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = _parse_go_duration(text, where)
    else:
        raise UserError(f"expected a duration like 30s, got {type(value).__name__}", where=where)
    if seconds != seconds or seconds in (float("inf"), float("-inf")) or seconds < 0:
        raise UserError(f"duration must be a finite, non-negative time, got {value!r}", where=where)
    return seconds


def _parse_go_duration(text: str, where: str) -> float:
    position = 0
    total = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not text or position != len(text):
        raise UserError(
            f"invalid duration {text!r} (use e.g. 30s, 1m30s, 500ms, 2h or plain seconds)", where=where
        )
    return total


def jittered(interval: float, fraction: float = DEFAULT_JITTER, rng: random.Random | None = None) -> float:
    """`interval` moved by up to ±`fraction` at random, so replicas and targets do not poll in lockstep."""
    spread = interval * fraction
    return interval + (rng or random).uniform(-spread, spread)
