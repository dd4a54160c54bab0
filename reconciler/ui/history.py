"""A target's history and a commit's page (pure): a timeline of applies, rollbacks, denials and rehearsals,
newest first. Each entry: the commit (sha, subject, author), the plan summary, the policy findings, the
verification chain (claim → device → node → pod ready) or the failure and its diagnosis, and what
promotion kept (the upstream's word, who approved, the rollback rehearsal's steps). Entries are
anchored by sha (`/targets/<t>/history#<sha>`) and by record id (`#record-<id>`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.ui.html import Html, join, link, path, short, tag
from reconciler.ui.layout import badge, definition_list, note, page, table
from reconciler.ui.targets import TargetView, commit_link

_OK = frozenset({"applied", "unchanged", "drift-corrected"})
# Outcomes that wait or record a person's word: their message is no failure.
_WAITING = frozenset({"awaiting-approval", "soaking", "approved", "suspended", "resumed"})


def _where(finding: Mapping[str, Any]) -> str:
    if finding.get("path"):
        return f"{finding['path']}:{finding.get('line') or 0}"
    return str(finding.get("ref") or "")


def findings_table(decisions: Sequence[Mapping[str, Any]], omitted: int = 0) -> Html:
    if not decisions:
        return note("No policy findings.")
    rows: list[list[object]] = [
        [
            tag(
                "span",
                "✖ deny" if f.get("severity") == "deny" else "⚠ warn",
                class_=f"sev {f.get('severity')}",
            ),
            tag("code", _where(f)),
            tag("code", f.get("rule") or ""),
            tag("code", f.get("ref") or ""),
            f.get("msg") or "",
        ]
        for f in decisions
    ]
    more = note(f"{omitted} more finding(s) not kept in the record.") if omitted else Html("")
    return Html(table(["Severity", "Location", "Rule", "Object", "Message"], rows, class_="findings") + more)


def chain(record: Mapping[str, Any]) -> Html:
    """claim → device(s) → node → pod ready, one line per claim the verification saw."""
    devices = record.get("devices") or []
    if not devices:
        return Html("")
    verified = record.get("outcome") in _OK
    items = []
    for d in devices:
        pod = d.get("pod")
        items.append(
            tag(
                "li",
                tag("span", "claim ", tag("code", d.get("claim") or "?"), class_="step"),
                tag("span", " → ", aria_hidden="true"),
                tag("span", "device ", tag("code", ", ".join(d.get("devices") or []) or "-"), class_="step"),
                tag("span", " → ", aria_hidden="true"),
                tag("span", "node ", tag("code", d.get("node") or "-"), class_="step"),
                tag("span", " → ", aria_hidden="true"),
                tag(
                    "span",
                    "pod ",
                    tag("code", pod or "-"),
                    " ready ✓" if verified and pod else (" (not verified)" if pod else ""),
                    class_="step",
                ),
            )
        )
    return tag("section", tag("h4", "Verification chain"), tag("ol", join(items), class_="chain"))


def _failure(record: Mapping[str, Any]) -> Html:
    parts = []
    if record.get("message"):
        parts.append(tag("pre", record["message"], class_="failure"))
    if "rolledBackTo" in record:
        parts.append(
            tag(
                "p",
                "↶ Rolled back to ",
                tag("code", short(record.get("rolledBackTo"))),
                ": ",
                badge(str(record.get("rollback") or "")),
            )
        )
    if record.get("from") and record.get("operation") == "rollback":
        parts.append(tag("p", "Rolled back from ", tag("code", short(record.get("from")))))
    drift = record.get("drift") or {}
    for kind, refs in drift.items():
        if refs:
            parts.append(tag("p", f"Drift ({kind}): ", join((tag("code", r) for r in refs), ", ")))
    if not parts:
        return Html("")
    return tag(
        "section",
        tag(
            "h4",
            "Failure and diagnosis"
            if record.get("message") and record.get("outcome") not in _WAITING
            else "Details",
        ),
        join(parts),
    )


def _promotion(record: Mapping[str, Any]) -> Html:
    """What promotion kept in the record: the upstream's word on the commit, who approved it, the ref it
    was published to, and its rollback rehearsal step by step (time and verification)."""
    facts: list[tuple[str, object]] = []
    promoted = record.get("promoted") or {}
    if promoted:
        said = promoted.get("rehearsed")
        rehearsed = ", rehearsed" if said is True else ", rehearsal failed" if said is False else ""
        facts.append(
            (
                "Promoted from",
                f"{promoted.get('from') or '?'} (verified at {promoted.get('verifiedAt') or '?'}{rehearsed})",
            )
        )
    approval = record.get("approval") or {}
    if approval:
        facts.append(("Approved", f"by {approval.get('by') or '?'} at {approval.get('at') or '?'}"))
    published = record.get("published") or {}
    if published:
        facts.append(
            ("Published", f"{published.get('ref')}: {published.get('sha') or published.get('error')}")
        )
    parts = [definition_list(facts)] if facts else []
    rehearsal = record.get("rehearsal") or {}
    if rehearsal:
        rows: list[list[object]] = [
            [
                step.get("step") or "?",
                tag("code", short(step.get("sha"))),
                badge(str(step.get("outcome") or "")),
                tag("time", step.get("at") or "", datetime=step.get("at") or None),
                f"{step['seconds']:.1f}s" if isinstance(step.get("seconds"), int | float) else "",
                step.get("verified") or "",
                step.get("message") or "",
            ]
            for step in rehearsal.get("steps") or []
        ]
        verdict = "✓ passed" if rehearsal.get("ok") else "✗ failed"
        parts.append(
            table(
                ["Step", "Commit", "Outcome", "At", "Took", "Verification", "Message"],
                rows,
                caption=f"Rollback rehearsal: {verdict}",
                class_="rehearsal",
            )
        )
    if not parts:
        return Html("")
    return tag("section", tag("h4", "Promotion"), join(parts), class_="promotion")


def entry(target: TargetView, record: Mapping[str, Any], anchor: bool) -> Html:
    """One history record as an article; `anchor`: it carries the sha's id (the newest record of it)."""
    sha = record.get("sha")
    commit = target.commits.get(sha or "", {})
    ident = record.get("id")
    facts: list[tuple[str, object]] = [("Commit", commit_link(target.name, sha))]
    if commit.get("subject"):
        facts.append(("Subject", commit["subject"]))
    if commit.get("author"):
        facts.append(("Author", commit["author"]))
    if record.get("requestedBy"):
        facts.append(("Requested by", record["requestedBy"]))
    summary = (record.get("diff") or {}).get("summary")
    if summary:
        facts.append(("Plan", summary))
    timings = record.get("timings") or {}
    if timings:
        facts.append(
            (
                "Stages",
                ", ".join(
                    f"{k} {v:.1f}s" if isinstance(v, int | float) else f"{k} {v}" for k, v in timings.items()
                ),
            )
        )
    decisions = record.get("decisions")
    body = [
        definition_list(facts),
        chain(record),
        _promotion(record),
        _failure(record),
    ]
    if decisions:
        body.append(
            tag(
                "section",
                tag("h4", "Policy findings"),
                findings_table(decisions, int(record.get("decisionsOmitted") or 0)),
            )
        )
    if sha:
        body.append(
            tag(
                "p",
                link(path("targets", target.name, "commits", sha, "report"), "Policy report of this commit"),
            )
        )
    heading = tag(
        "h3",
        badge(str(record.get("outcome") or "")),
        " ",
        record.get("operation") or "?",
        " ",
        tag("code", short(sha)),
        " ",
        tag("time", record.get("at") or "", datetime=record.get("at") or None),
        tag("span", f" #{ident}" if ident is not None else "", class_="dim"),
    )
    return tag(
        "article",
        heading,
        join(body),
        class_=f"entry {record.get('operation') or ''}",
        id=sha if anchor and sha else None,
        data_record=ident,
    )


def timeline(target: TargetView, records: Sequence[Mapping[str, Any]]) -> Html:
    seen: set[str] = set()
    items = []
    for record in records:
        sha = str(record.get("sha") or "")
        anchor = bool(sha) and sha not in seen
        seen.add(sha)
        items.append(
            tag(
                "li",
                entry(target, record, anchor),
                id=f"record-{record.get('id')}" if record.get("id") is not None else None,
            )
        )
    if not items:
        return note("No history yet.")
    return tag("ol", join(items), class_="timeline", reversed=True)


def history_page(target: TargetView) -> Html:
    status = target.status
    intro = tag(
        "p",
        "Last good ",
        commit_link(target.name, status.get("lastGood"), target.commits),
        f"; state ConfigMap dra-gitops-{target.name} in {target.namespace}. Newest first.",
    )
    if target.error:  # its state could not be read (its cluster does not answer): say so, not "no history"
        return page(f"History of {target.name}", note(f"✗ {target.error}", "bad"))
    body = Html(intro + timeline(target, status.get("history") or []))
    return page(f"History of {target.name}", body)


def matching(records: Sequence[Mapping[str, Any]], sha: str) -> list[Mapping[str, Any]]:
    """The records of a commit, by full sha or a prefix of at least 4 characters."""
    if len(sha) < 4:
        return []
    return [r for r in records if str(r.get("sha") or "").startswith(sha)]


def commit_page(target: TargetView, sha: str) -> Html:
    records = matching(target.status.get("history") or [], sha)
    full = str(records[0].get("sha")) if records else sha
    commit = target.commits.get(full, {})
    facts: list[tuple[str, object]] = [
        ("Target", link(path("targets", target.name, "history"), target.name)),
        ("Sha", tag("code", full)),
    ]
    if commit.get("subject"):
        facts.append(("Subject", commit["subject"]))
    if commit.get("author"):
        facts.append(("Author", commit["author"]))
    if commit.get("message") and commit.get("message") != commit.get("subject"):
        facts.append(("Message", tag("pre", commit["message"])))
    parts = [
        definition_list(facts),
        tag(
            "p",
            link(
                path("targets", target.name, "commits", full, "report"),
                "Policy report (as check -o markdown)",
            ),
        ),
    ]
    if records:
        parts.append(tag("h2", f"{len(records)} record(s) in the history"))
        parts.append(join(entry(target, r, i == 0) for i, r in enumerate(records)))
    else:
        parts.append(
            note(
                "The target's history holds no record of this commit (the history keeps the newest records only)."
            )
        )
    return page(f"Commit {short(full)} of {target.name}", join(parts))
