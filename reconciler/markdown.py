"""Markdown building blocks shared by every `-o markdown` report (pure).

GitHub-flavoured Markdown: text and code spans safe inside table cells, tables, fenced blocks that no
backtick run in the content can close early.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["md_code", "md_fence", "md_table", "md_text"]

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#])")


def md_text(s: str) -> str:
    """Plain text for a table cell: markdown/HTML specials escaped, pipes escaped, newlines as <br>."""
    s = s.replace("&", "&amp;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return "<br>".join(s.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def md_code(s: str) -> str:
    """A code span for a table cell; pipes stay escaped (GFM splits cells before parsing code spans)."""
    s = " ".join(s.splitlines()).replace("|", "\\|")
    if not s:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_fence(content: str, language: str = "") -> list[str]:
    """A fenced code block, its fence longer than any backtick run of the content."""
    longest = max((len(m) for m in re.findall(r"`{3,}", content)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", *content.rstrip("\n").split("\n"), fence]


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A table; cells are taken as Markdown already, with only their pipes escaped."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    return out
