"""A commit's policy report page (pure): what `check -o markdown` says of that commit, as HTML.

The same parts in the same order as `policy.report.render_markdown`: the verdict and summary line, the
engine and changes, the per-rule table, the violations, the waivers and the skipped files (or, when the
check could not run, its errors). The Markdown itself is one link away (`?format=markdown`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.policy.report_common import (
    TOOL_NAME,
    RenderOptions,
    all_rules,
    sorted_findings,
    summary_line,
    verdict,
)
from reconciler.policy.result import CheckResult
from reconciler.ui.history import findings_table
from reconciler.ui.html import Html, join, link, path, short, tag
from reconciler.ui.layout import note, page, table


@dataclass
class CommitReport:
    """The check of one commit against its base (the last good commit before it), or why there is none."""

    target: str
    sha: str
    base: str | None = None
    result: CheckResult | None = None
    markdown: str = ""
    unavailable: str = ""  # why the report cannot be produced


def _result_html(result: CheckResult, options: RenderOptions) -> Html:
    v = verdict(result, options.fail_on_warn)
    tone = {"Passed": "good", "Passed with warnings": "warn"}.get(v, "bad")
    parts: list[Html] = [
        tag("p", tag("strong", v, class_=f"badge {tone}"), " — ", summary_line(result), ".", id="verdict")
    ]
    if result.errors:
        parts.append(tag("h2", "Errors"))
        parts.append(tag("ul", join(tag("li", e.message) for e in result.errors)))
        return join(parts)
    ch = result.changes
    parts.append(
        tag(
            "p",
            "Engine ",
            tag("code", result.engine),
            f"; changes: {ch.create} create, {ch.update} update, {ch.delete} delete; {TOOL_NAME} {options.tool_version}.",
        )
    )
    rules = all_rules(result)
    if rules:
        rows: list[list[object]] = []
        for r in rules:
            rows.append(
                [
                    tag("code", r.id),
                    r.title,
                    sum(1 for f in result.denials if f.rule == r.id),
                    sum(1 for f in result.warnings if f.rule == r.id),
                    sum(1 for f in result.waived if f.rule == r.id),
                ]
            )
        parts.append(table(["Rule", "Title", "Denied", "Warnings", "Waived"], rows, id="rules"))
    else:
        parts.append(tag("p", tag("em", "No rules ran.")))
    parts.append(tag("h2", "Violations"))
    active = sorted_findings(f for f in result.findings if f.waived is None)
    if active:
        parts.append(
            table(
                ["Severity", "Location", "Rule", "Object", "Message"],
                [
                    [
                        tag(
                            "span",
                            "✖ deny" if f.severity == "deny" else "⚠ warn",
                            class_=f"sev {f.severity}",
                        ),
                        tag("code", f.where),
                        tag("code", f.rule),
                        tag("code", f.ref),
                        f.msg,
                    ]
                    for f in active
                ],
                id="violations",
            )
        )
    else:
        parts.append(tag("p", "No violations."))
    waived = sorted_findings(result.waived)
    if waived:
        parts.append(tag("h2", "Waivers"))
        parts.append(
            table(
                ["Location", "Rule", "Object", "Reason", "Message"],
                [
                    [tag("code", f.where), tag("code", f.rule), tag("code", f.ref), f.waived or "", f.msg]
                    for f in waived
                ],
                id="waivers",
            )
        )
    if result.skipped:
        parts.append(tag("h2", "Skipped files"))
        parts.append(
            tag("p", "Neither checked nor applied (", tag("code", "kubectl apply -R"), " would apply them).")
        )
        parts.append(table(["File", "Reason"], [[tag("code", s.path), s.reason] for s in result.skipped]))
    return join(parts)


def report_page(report: CommitReport, recorded: Mapping[str, Any] | None = None) -> Html:
    """The report; `recorded`: the newest history record of the commit, whose findings are shown when the
    report itself cannot be produced."""
    options = RenderOptions()
    back = link(path("targets", report.target, "commits", report.sha), f"commit {short(report.sha)}")
    intro = tag(
        "p",
        "The policy check of ",
        back,
        " against ",
        tag("code", short(report.base)) if report.base else "no base (a first commit)",
        ", as ",
        tag("code", "dra-gitops check -o markdown"),
        " reports it.",
    )
    if report.result is None:
        parts = [intro, note(f"The report of this commit cannot be produced: {report.unavailable}", "bad")]
        decisions = recorded.get("decisions") if recorded else None
        if recorded and decisions is not None:
            parts.append(tag("h2", "What its pass recorded"))
            parts.append(findings_table(decisions, int(recorded.get("decisionsOmitted") or 0)))
        body = join(parts)
    else:
        markdown = link(
            path("targets", report.target, "commits", report.sha, "report") + "?format=markdown",
            "the same report as Markdown",
        )
        body = join(
            [
                intro,
                tag("h2", options.title),
                _result_html(report.result, options),
                tag("p", "Also as ", markdown, "."),
            ]
        )
    return page(f"Policy report of {short(report.sha)}", body)
