"""The page shell every page shares (pure): head, skip link, navigation, main, footer; and outcome badges.

No inline script or style (the Content-Security-Policy forbids them): the stylesheet and the script are
files of the package (`static/`). Without JavaScript every page reads the same; with it, the page polls
`/api/version` and refreshes its main part when the state changes.
"""

from __future__ import annotations

from reconciler.ui.html import Html, join, link, tag

TITLE = "dra-gitops"
# Outcome -> (tone, symbol): the tone colours the badge, the symbol and the word carry the meaning.
_TONES = {
    "applied": ("good", "✓"),
    "unchanged": ("good", "✓"),
    "drift-corrected": ("good", "✓"),
    "resumed": ("good", "▶"),
    "denied": ("bad", "✖"),
    "dry-run-failed": ("bad", "✗"),
    "apply-failed": ("bad", "✗"),
    "verify-failed": ("bad", "✗"),
    "rolled-back": ("warn", "↶"),
    "rollback-failed": ("bad", "‼"),
    "aborted": ("warn", "↶"),
    "held": ("warn", "‖"),
    "suspended": ("warn", "‖"),
    "drifted": ("warn", "≠"),
    "interrupted": ("warn", "…"),
    "unverified": ("bad", "✗"),
    "source-error": ("bad", "✗"),
    "invalid": ("bad", "✗"),
}


def badge(outcome: str | None) -> Html:
    """An outcome as a symbol and a word (never colour alone)."""
    if not outcome:
        return tag("span", "—", class_="badge none")
    tone, symbol = _TONES.get(outcome, ("none", "•"))
    return tag(
        "span",
        tag("span", symbol, aria_hidden="true"),
        " ",
        outcome,
        class_=f"badge {tone}",
        data_outcome=outcome,
    )


def page(title: str, body: Html, *, current: str = "", refresh: bool = True) -> Html:
    """A whole document. `current` marks the navigation entry of this page (aria-current)."""
    nav = join(
        tag("li", link(href, label, aria_current="page" if key == current else None))
        for key, href, label in (("targets", "/", "Targets"), ("devices", "/devices", "Device map"))
    )
    return Html(
        "<!DOCTYPE html>\n"
        + '<html lang="en">'
        + tag(
            "head",
            Html('<meta charset="utf-8">'),
            Html('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            tag("title", f"{title} · {TITLE}"),
            Html('<link rel="stylesheet" href="/static/dashboard.css">'),
            Html('<script src="/static/dashboard.js" defer></script>'),
        )
        + tag(
            "body",
            link("#main", "Skip to content", class_="skip"),
            tag(
                "header",
                tag("span", link("/", TITLE), class_="brand"),
                tag("nav", tag("ul", nav), aria_label="Main"),
                tag("span", "", class_="live", id="live", role="status", aria_live="polite"),
            ),
            tag("main", tag("h1", title), body, id="main", tabindex="-1"),
            tag(
                "footer",
                "Read-only view of the dra-gitops state. ",
                link("/", "Targets"),
                " · ",
                link("/devices", "Device map"),
            ),
            data_poll="/api/version" if refresh else None,
        )
        + "</html>\n"
    )


def table(header: list[str], rows: list[list[object]], caption: object = "", **attributes: object) -> Html:
    """A table with a header row; each cell escaped unless it is `Html`."""
    head = tag("thead", tag("tr", join(tag("th", h, scope="col") for h in header)))
    body = tag("tbody", join(tag("tr", join(tag("td", cell) for cell in row)) for row in rows))
    return tag(
        "div",
        tag("table", tag("caption", caption) if caption else Html(""), head, body, **attributes),
        class_="scroll",
    )


def note(text: object, kind: str = "info") -> Html:
    return tag("p", text, class_=f"note {kind}", role="note")


def definition_list(items: list[tuple[str, object]]) -> Html:
    return tag("dl", join(Html(tag("dt", k) + tag("dd", v)) for k, v in items), class_="facts")
