"""The Targets page (pure): per target its last good commit, last attempt and outcome, what is in progress,
and, when a target's status carries them, what is eligible or awaiting approval (promotion gates)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.ui.html import Html, esc, join, link, path, short, tag
from reconciler.ui.layout import badge, note, page, table

# Keys of a target's status JSON that the promotion gates write (shown when present, in this order).
PROMOTION_KEYS = ("eligible", "awaitingApproval", "approval", "promotion")
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass
class TargetView:
    """One target as the pages see it: its name, where its state lives, and `status -o json`'s document."""

    name: str
    namespace: str
    status: dict[str, Any]
    # sha -> {"subject", "author"} of the commits the pages name, when Git could tell.
    commits: dict[str, dict[str, str]] = field(default_factory=dict)
    error: str = ""  # why the state could not be read


def pass_outcome(attempted: Mapping[str, Any] | None) -> str:
    """How the last attempt's pass ended (as `AttemptRecord.pass_outcome`): its rollback's result wins."""
    if not attempted:
        return ""
    if attempted.get("rolledBack") is False:
        return "rollback-failed"
    if attempted.get("rolledBack"):
        return "rolled-back"
    return str(attempted.get("outcome") or "")


def commit_link(target: str, sha: str | None, commits: Mapping[str, Mapping[str, str]] | None = None) -> Html:
    """A sha as a link to its commit page, with the subject when known."""
    if not sha:
        return esc("—")
    code = link(path("targets", target, "commits", sha), tag("code", short(sha)), class_="sha", title=sha)
    subject = (commits or {}).get(sha, {}).get("subject")
    return Html(code + (tag("span", " ", subject, class_="subject") if subject else ""))


def _in_progress(status: Mapping[str, Any]) -> Html:
    p = status.get("inProgress")
    if not p:
        return esc("nothing")
    return join(
        [
            tag("span", "↻ ", aria_hidden="true"),
            p.get("operation") or "?",
            " ",
            tag("code", short(p.get("sha"))),
            f" at stage {p.get('stage') or '-'} since {p.get('since') or '?'}",
        ]
    )


def _flags(status: Mapping[str, Any]) -> Html:
    parts: list[Html] = []
    if status.get("suspended"):
        s = status["suspended"]
        parts.append(tag("span", f"‖ suspended since {s.get('at')} by {s.get('by')}", class_="flag warn"))
    if status.get("hold"):
        parts.append(tag("span", f"‖ holding {short(status['hold'])}", class_="flag warn"))
    if status.get("retry"):
        parts.append(tag("span", f"↻ retry {short(status['retry'])}", class_="flag"))
    if status.get("request"):
        r = status["request"]
        parts.append(
            tag("span", f"requested: {r.get('verb')} {r.get('revision')} by {r.get('by')}", class_="flag")
        )
    source = status.get("source")
    if source and not source.get("ok", True):
        parts.append(
            tag(
                "span",
                f"✗ source failing since {source.get('since')}: {source.get('error')}",
                class_="flag bad",
            )
        )
    return join(parts, " ") if parts else esc("—")


def _promotion(target: TargetView) -> Html:
    """What the promotion gates wrote, as they wrote it (a sha as a link to its commit, the rest as text)."""
    items = []
    for key in PROMOTION_KEYS:
        if target.status.get(key) in (None, "", [], {}):
            continue
        items.append(tag("li", tag("span", key, class_="key"), ": ", _value(target, target.status[key])))
    return tag("ul", join(items), class_="plain") if items else esc("—")


def _value(target: TargetView, value: Any) -> Html:
    if isinstance(value, Mapping):
        return join(
            (Html(tag("span", k, class_="key") + esc("=") + _value(target, v)) for k, v in value.items()),
            ", ",
        )
    if isinstance(value, list | tuple):
        return join((_value(target, v) for v in value), ", ")
    if isinstance(value, str) and _SHA.fullmatch(value):
        return commit_link(target.name, value, target.commits)
    return esc(value)


def targets_page(targets: Sequence[TargetView]) -> Html:
    promotion = any(any(t.status.get(k) not in (None, "", [], {}) for k in PROMOTION_KEYS) for t in targets)
    header = ["Target", "Last good", "Last attempt", "Outcome", "In progress", "Notes"]
    if promotion:
        header.append("Eligible / awaiting approval")
    rows: list[list[object]] = []
    for t in targets:
        attempted = t.status.get("lastAttempted") or {}
        name = link(path("targets", t.name, "history"), t.name)
        if t.error:
            failed: list[object] = [name, tag("span", "✗ ", t.error, class_="flag bad"), "", "", "", ""]
            rows.append(failed + ([""] if promotion else []))
            continue
        row: list[object] = [
            Html(name + tag("div", f"state in {t.namespace}", class_="dim")),
            commit_link(t.name, t.status.get("lastGood"), t.commits),
            Html(
                commit_link(t.name, attempted.get("sha"), t.commits)
                + tag("div", attempted.get("at") or "", class_="dim")
            ),
            badge(pass_outcome(attempted)),
            _in_progress(t.status),
            _flags(t.status),
        ]
        if promotion:
            row.append(_promotion(t))
        rows.append(row)
    if not targets:
        return page(
            "Targets",
            note("No targets: no state ConfigMap was found (a target appears after its first pass)."),
            current="targets",
        )
    body = table(header, rows, caption=f"{len(targets)} target(s)", id="targets")
    return page("Targets", body, current="targets")
