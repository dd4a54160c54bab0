"""A target's history and a commit's page.

The history is a compact table first (time, sha, subject cut with the whole of it on hover, outcome,
duration), filtered by outcome and paged, the live entry marked; each row links to its commit's page.
The commit's page puts the failure and its diagnosis first (as the pass that failed recorded them, so
they stay true later), then the changed objects, the verification chain with the failing claim marked,
what promotion kept, and the policy findings. Only full shas or unambiguous prefixes of commits in the
history have a page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from reconciler.ui.html import path, short
from reconciler.ui.render import render
from reconciler.ui.targets import RolloutView, TargetView, rollouts_of

GOOD = frozenset({"applied", "unchanged", "drift-corrected"})
# Outcomes that wait or record a person's word: their message is no failure.
WAITING = frozenset({"awaiting-approval", "soaking", "approved", "suspended", "resumed"})
PAGE_SIZE = 25
# ?outcome= -> (words, the outcomes it keeps; None: all)
FILTERS: dict[str, tuple[str, frozenset[str] | None]] = {
    "": ("all", None),
    "good": ("good (applied, unchanged, drift corrected)", GOOD),
    "failed": (
        "failed (denied, failed, rolled back)",
        frozenset(
            {
                "denied",
                "dry-run-failed",
                "apply-failed",
                "verify-failed",
                "rollback-failed",
                "rolled-back",
                "unverified",
                "source-error",
                "invalid",
                "aborted",
            }
        ),
    ),
}


@dataclass
class HistoryRow:
    record: Mapping[str, Any]
    subject: str
    reason: str
    took: float | None
    live: bool
    anchor: str  # unique on the page (a rollback record shares the id of the apply it answers)


def _took(record: Mapping[str, Any]) -> float | None:
    values = [v for v in (record.get("timings") or {}).values() if isinstance(v, int | float)]
    return float(sum(values)) if values else None


def live_record(records: Sequence[Mapping[str, Any]], last_good: str | None) -> int | None:
    """The index of the record that put the live revision on the cluster: the newest good one of the
    last good sha."""
    for index, record in enumerate(records):
        if last_good and record.get("sha") == last_good and record.get("outcome") in GOOD:
            return index
    return None


def anchors(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """`record-<id>` for each record, `-2`, `-3`... after a repeated id."""
    seen: dict[str, int] = {}
    out = []
    for index, record in enumerate(records):
        key = str(record.get("id") if record.get("id") is not None else f"n{index}")
        seen[key] = seen.get(key, 0) + 1
        out.append(f"record-{key}" + (f"-{seen[key]}" if seen[key] > 1 else ""))
    return out


def history_page(target: TargetView, outcome: str = "", page: int = 1) -> str:
    title = f"History of {target.name}"
    records = target.status.get("history") or []
    chosen = (
        outcome
        if outcome in FILTERS
        else (outcome if any(r.get("outcome") == outcome for r in records) else "")
    )
    keep = FILTERS[chosen][1] if chosen in FILTERS else frozenset({chosen})
    live = live_record(records, target.status.get("lastGood"))
    names = anchors(records)
    kept = [i for i, r in enumerate(records) if keep is None or r.get("outcome") in keep]
    pages = max(1, -(-len(kept) // PAGE_SIZE))
    page = min(max(1, page), pages)
    rows = []
    for index in kept[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]:
        record = records[index]
        commit = target.commits.get(str(record.get("sha") or ""), {})
        message = str(record.get("message") or "").strip()
        reason = message.splitlines()[0] if message and record.get("outcome") not in WAITING else ""
        subject = commit.get("subject", "")
        rows.append(HistoryRow(record, subject, reason, _took(record), index == live, names[index]))
    outcomes = sorted({str(r.get("outcome")) for r in records if r.get("outcome")})
    choices = [(key, words) for key, (words, _) in FILTERS.items()] + [(o, o) for o in outcomes]

    def page_link(number: int) -> str:
        query = {k: v for k, v in (("outcome", chosen), ("page", str(number))) if v}
        return path("targets", target.name, "history") + "?" + urlencode(query)

    marker, rollouts = in_progress(target)
    return render(
        "history.html",
        title=title,
        t=target,
        marker=marker,
        rollouts=rollouts,
        rows=rows,
        choices=choices,
        chosen=chosen,
        page=page,
        pages=pages,
        page_link=page_link,
        shown=len(kept),
        total=len(records),
    )


def matching(records: Sequence[Mapping[str, Any]], sha: str) -> list[Mapping[str, Any]]:
    """The records of one commit: by its full sha, or a prefix of at least 4 hex characters that names
    only one commit of the history (else none)."""
    sha = sha.lower()
    if len(sha) < 4 or len(sha) > 64 or any(c not in "0123456789abcdef" for c in sha):
        return []
    found = [r for r in records if str(r.get("sha") or "").startswith(sha)]
    if len({str(r.get("sha")) for r in found}) != 1:
        return []
    return found


def in_progress(target: TargetView, sha: str | None = None) -> tuple[Mapping[str, Any], list[RolloutView]]:
    """The target's delivery in progress (`inProgress`, {} when none, or when `sha` is given and it
    delivers another commit) and its driver rollouts in waves."""
    marker = target.status.get("inProgress") or {}
    if not marker or (sha is not None and marker.get("sha") != sha):
        return {}, []
    return marker, rollouts_of(target.status)


def in_progress_sha(target: TargetView, sha: str) -> str | None:
    """The full sha of the commit the target is delivering, when `sha` names it (in full, or a prefix of
    at least 4 hex characters), else None: it has a page before the history holds a record of it."""
    current = str((target.status.get("inProgress") or {}).get("sha") or "")
    sha = sha.lower()
    if len(sha) < 4 or len(sha) > 64 or any(c not in "0123456789abcdef" for c in sha):
        return None
    return current if current.startswith(sha) else None


def commit_page(target: TargetView, records: Sequence[Mapping[str, Any]], sha: str = "") -> str:
    """The page of a commit the history holds (`records`: its records, from `matching`), or of the commit
    in progress (`sha`, its records none yet)."""
    from markupsafe import Markup

    full = str(records[0].get("sha")) if records else sha
    marker, rollouts = in_progress(target, full)
    link_target = Markup('<a href="{}">{}</a>').format(path("targets", target.name, "history"), target.name)
    return render(
        "commit.html",
        title=f"Commit {short(full)} of {target.name}",
        t=target,
        full=full,
        records=list(records),
        marker=marker,
        rollouts=rollouts,
        link_target=link_target,
        sha_code=Markup("<code>{}</code>").format(full),
    )
