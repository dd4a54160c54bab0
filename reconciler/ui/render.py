"""The dashboard's templates (`templates/`, Jinja2 with autoescape: every value is text unless a filter
here marks it safe after escaping it) and the filters they share.

`text` shows Git's and the cluster's strings safely for a reader: isolated for direction (`<bdi>`, so a
right-to-left name cannot reorder the sentence around it), bidi controls shown as visible marks (a U+202E
in a file name cannot reverse the message), and cut at a length with the whole value on hover.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from reconciler.ui.html import path, short
from reconciler.ui.layout import TONES

# Bidi controls (embeddings, overrides, isolates, marks): shown as their code point, never obeyed.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
_VISIBLE = {ord(c): f"⟨U+{ord(c):04X}⟩" for c in BIDI_CONTROLS}


def visible(value: object) -> str:
    """`value` as text with every bidi control shown as ⟨U+202E⟩."""
    return ("" if value is None else str(value)).translate(_VISIBLE)


def text(value: object, limit: int = 0, block: bool = False) -> Markup:
    """A string from Git or the cluster: escaped, direction-isolated, bidi controls visible, cut at
    `limit` characters (0: never) with the whole value in the title."""
    full = visible(value)
    if limit and len(full) > limit:
        cut = full[: limit - 1] + "…"
        return Markup(f'<bdi dir="auto" class="cut" title="{escape(full)}">{escape(cut)}</bdi>')
    if block:
        return Markup(f'<bdi dir="auto" class="block">{escape(full)}</bdi>')
    return Markup(f'<bdi dir="auto">{escape(full)}</bdi>')


def parse_time(value: object) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def age(value: object, now: datetime | None = None) -> str:
    """ "3 min ago" (or the value as written when it is no time)."""
    moment = parse_time(value)
    if moment is None:
        return visible(value)
    seconds = int(((now or datetime.now(UTC)) - moment).total_seconds())
    if seconds < 0:
        return "in the future"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def when(value: object) -> Markup:
    """A time as its age, with the UTC time on hover (and in `datetime` for machines)."""
    moment = parse_time(value)
    if moment is None:
        return text(value) if value else Markup("—")
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(str(value), stamp, age(moment))


def due(value: object, now: datetime | None = None) -> Markup:
    """A time still to come (a soak's end): its UTC time and how far off it is ("passed" once it was)."""
    moment = parse_time(value)
    if moment is None:
        return text(value) if value else Markup("—")
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    left = int((moment - (now or datetime.now(UTC))).total_seconds())
    off = (
        "passed"
        if left < 0
        else next(
            (
                f"in {left // size} {unit}"
                for unit, size in (("d", 86400), ("h", 3600), ("min", 60))
                if left >= size
            ),
            f"in {left} s",
        )
    )
    return Markup('<time datetime="{}" title="{}">{} ({})</time>').format(str(value), stamp, stamp, off)


def seconds(value: object) -> str:
    return f"{value:.1f}s" if isinstance(value, int | float) else ""


_ENV = Environment(
    loader=PackageLoader("reconciler.ui", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=StrictUndefined,
)
_ENV.filters.update(text=text, when=when, due=due, short=short, seconds=seconds, visible=visible)


def stages(timings: dict[str, Any]) -> str:
    return ", ".join(
        f"{k} {v:.1f}s" if isinstance(v, int | float) else f"{k} {v}" for k, v in timings.items()
    )


def failing_claims(record: dict[str, Any]) -> set[str]:
    """The claims (namespace/name) a record's diagnoses name: marked in its verification chain."""
    out = set()
    for diagnosis in record.get("diagnoses") or []:
        kind, _, rest = str(diagnosis.get("ref") or "").partition("/")
        if kind == "ResourceClaim":
            out.add(rest)
    return out


def where(finding: dict[str, Any]) -> str:
    if finding.get("path"):
        return f"{finding['path']}:{finding.get('line') or 0}"
    return str(finding.get("ref") or "")


_ENV.filters.update(where=where)
_ENV.globals.update(
    path=path,
    tones=TONES,
    stages=stages,
    failing_claims=failing_claims,
    good=frozenset({"applied", "unchanged", "drift-corrected"}),
    waiting=frozenset({"awaiting-approval", "soaking", "approved", "suspended", "resumed"}),
)


def render(template: str, **context: Any) -> str:
    """A page: `template` (extending `base.html`) with `context`."""
    return _ENV.get_template(template).render(**context)
