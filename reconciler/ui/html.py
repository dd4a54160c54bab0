"""URL paths and short shas for the pages (pure). Escaping is the templates' (Jinja2 autoescape) and
`render.text`'s: nothing here builds markup."""

from __future__ import annotations

from urllib.parse import quote


def path(*segments: str) -> str:
    """An absolute URL path of segments, each percent-encoded (a name with `/` or `?` stays one segment)."""
    return "/" + "/".join(quote(s, safe="") for s in segments)


def short(sha: str | None, width: int = 12) -> str:
    return (sha or "")[:width] or "(none)"
