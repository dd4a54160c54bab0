"""HTML building blocks (pure): one escaping rule for every value a page shows.

`Html` marks text that is already HTML. `esc` turns anything else into text: a commit message, a name, a
label or an annotation holding `<script>` is shown as those characters, never parsed. Templates build
pages only from `esc(...)`, `tag(...)` and other `Html`, so nothing reaches a page unescaped.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable, Mapping
from urllib.parse import quote


class Html(str):
    """Text that is already safe HTML (built here from escaped parts)."""

    __slots__ = ()


def esc(value: object) -> Html:
    """`value` as HTML text: quotes too, so the result is safe in an attribute as well."""
    if isinstance(value, Html):
        return value
    return Html(_html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Html:
    return Html(esc(sep).join(esc(p) for p in parts))


def attrs(values: Mapping[str, object]) -> Html:
    """` name="value"` pairs; None or False leaves an attribute out, True writes it bare."""
    out = []
    for name, value in values.items():
        if value is None or value is False:
            continue
        key = name.rstrip("_").replace("_", "-")
        out.append(f" {key}" if value is True else f' {key}="{esc(value)}"')
    return Html("".join(out))


def tag(element: str, /, *children: object, **attributes: object) -> Html:
    """`<element attrs>children</element>`, every child escaped unless it is `Html`."""
    return Html(f"<{element}{attrs(attributes)}>{join(children)}</{element}>")


def link(href: str, *children: object, **attributes: object) -> Html:
    return tag("a", *children, href=href, **attributes)


def path(*segments: str) -> str:
    """An absolute URL path of segments, each percent-encoded (a name with `/` or `?` stays one segment)."""
    return "/" + "/".join(quote(s, safe="") for s in segments)


def short(sha: str | None, width: int = 12) -> str:
    return (sha or "")[:width] or "(none)"
