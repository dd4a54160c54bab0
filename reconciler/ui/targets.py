"""The Targets page (pure): per target its last good commit, last attempt and outcome, what is in progress,
and, when a target's status carries them, what promotion decided (the same data `status` prints): the
upstream, the eligible commit, the approval it awaits (with the command that gives it) or the soak, why
newer commits are not eligible, and the last verified commit (what downstream targets may take)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from reconciler.ui.html import Html, esc, join, link, path, short, tag
from reconciler.ui.layout import badge, note, page, table

# Keys of a target's status JSON that promotion writes (`loop/store/state.py`: `promotion`, `approval` of a
# promoted target, `verified` of one that others promote from).
PROMOTION_KEYS = ("promotion", "approval", "verified")


@dataclass
class TargetView:
    """One target as the pages see it: its name, where its state lives, and `status -o json`'s document."""

    name: str
    namespace: str
    status: dict[str, Any]
    # sha -> {"subject", "author"} of the commits the pages name, when Git could tell.
    commits: dict[str, dict[str, str]] = field(default_factory=dict)
    error: str = ""  # why the state could not be read
    # (label, device map key) of the target's own cluster; ("", "") in the controller's
    cluster: tuple[str, str] = ("", "")


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
    """What `status` prints of promotion (`statusview._promotion_lines`), the shas as links."""
    status, name = target.status, target.name
    items: list[Html] = []

    def item(key: str, *children: object) -> None:
        items.append(tag("li", tag("span", key, class_="key"), " ", *children))

    view = status.get("promotion") or {}
    if view:
        item("promotes from", tag("code", view.get("upstream") or "?"))
        if view.get("error"):
            item("upstream", tag("span", "✗ ", view["error"], class_="flag bad"))
        eligible = view.get("eligible")
        item("eligible", commit_link(name, eligible, target.commits) if eligible else "nothing newer")
    approval = status.get("approval") or {}
    if approval.get("approvedBy"):
        item(
            "approved",
            commit_link(name, approval.get("sha"), target.commits),
            f" by {approval['approvedBy']} at {approval.get('approvedAt') or '?'}",
        )
    elif approval:
        sha = str(approval.get("sha") or "")
        item(
            "awaiting approval",
            tag("span", "‖ ", aria_hidden="true"),
            commit_link(name, sha, target.commits),
            f" since {approval.get('since') or '?'}: ",
            tag("code", f"dra-gitops approve --target {name} {sha[:12]}", class_="command"),
        )
    if view.get("waiting") == "soak" and view.get("soakUntil"):
        item("soaking", f"a newer commit is eligible at {view['soakUntil']}")
    for entry in view.get("notEligible") or []:
        item("not eligible", commit_link(name, entry.get("sha")), ": ", entry.get("why") or "")
    verified = status.get("verified") or []
    if verified:
        v = verified[0]
        rehearsed = {True: " (rehearsed)", False: " (rehearsal failed)"}.get(v.get("rehearsed"), "")
        withdrawn = f" withdrawn: {v['withdrawn']}" if v.get("withdrawn") else ""
        # As `status` says it: what the targets promoting from this one may take.
        item(
            "verified",
            commit_link(name, v.get("sha"), target.commits),
            f" since {v.get('at') or '?'}{rehearsed}{withdrawn}",
        )
    return tag("ul", join(items), class_="plain promotion") if items else esc("—")


def _cluster_link(target: TargetView) -> Html:
    label, key = target.cluster
    # The key (its targets' names) as the words, the kubeconfig and context in the title and on the map.
    return link(f"/devices?{urlencode({'cluster': key})}", key, title=f"the device map of {label}")


def targets_page(targets: Sequence[TargetView]) -> Html:
    promotion = any(any(t.status.get(k) not in (None, "", [], {}) for k in PROMOTION_KEYS) for t in targets)
    header = ["Target", "Last good", "Last attempt", "Outcome", "In progress", "Notes"]
    if promotion:
        header.append("Promotion: eligible / awaiting approval")
    rows: list[list[object]] = []
    for t in targets:
        attempted = t.status.get("lastAttempted") or {}
        name = link(path("targets", t.name, "history"), t.name)
        if t.error:
            failed: list[object] = [
                Html(name + (tag("div", "cluster ", _cluster_link(t), class_="dim") if t.cluster[0] else "")),
                tag("span", "✗ ", t.error, class_="flag bad"),
                "",
                "",
                "",
                "",
            ]
            rows.append(failed + ([""] if promotion else []))
            continue
        where = tag("div", f"state in {t.namespace}", class_="dim")
        if t.cluster[0]:
            where = Html(where + tag("div", "cluster ", _cluster_link(t), class_="dim"))
        row: list[object] = [
            Html(name + where),
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
