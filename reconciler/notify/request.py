"""One HTTP request to deliver: built by `forge.py` and `hooks.py` (pure), sent by `sender.py`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class HttpRequest:
    """A POST. Its URL and headers may hold secrets (a Slack URL, a token): they never show in a repr,
    and what is logged about a request is its `label` only."""

    label: str  # e.g. "github status prod abc123def456": says what it is, never where it goes
    url: str = field(repr=False)
    body: bytes = field(repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
