"""A commit's policy report page: what the pass that delivered (or refused) the commit recorded, with the
cluster data it had then (capacity findings included). It is never re-checked without the cluster: a
re-check would lose what only the cluster knew, and cost a full check per page view."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.ui.html import short
from reconciler.ui.render import render, where
from reconciler.ui.targets import TargetView


def verdict(record: Mapping[str, Any]) -> tuple[str, str, str]:
    """(verdict, tone, summary line) of the findings a record kept."""
    decisions = record.get("decisions") or []
    denied = sum(1 for d in decisions if d.get("severity") == "deny")
    warned = sum(1 for d in decisions if d.get("severity") != "deny")
    omitted = int(record.get("decisionsOmitted") or 0)
    summary = f"{denied} denied, {warned} warning(s)" + (f", {omitted} more not kept" if omitted else "")
    if denied:
        return "Denied", "bad", summary
    if warned:
        return "Passed with warnings", "warn", summary
    return "Passed", "good", summary


def report_page(target: TargetView, record: Mapping[str, Any]) -> str:
    said, tone, summary = verdict(record)
    return render(
        "report.html",
        title=f"Policy report of {short(str(record.get('sha')))}",
        t=target,
        r=record,
        verdict=said,
        tone=tone,
        summary=summary,
    )


def report_markdown(record: Mapping[str, Any]) -> str:
    """The same report as Markdown (cells with `|` and newlines made safe)."""

    def cell(value: object) -> str:
        return str(value or "").replace("|", "\\|").replace("\n", " ")

    said, _, summary = verdict(record)
    lines = [
        f"## Policy report of {record.get('sha')}",
        "",
        f"**{said}** — {summary}; recorded by the {record.get('operation') or 'pass'} of {record.get('at')}.",
        "",
    ]
    decisions = record.get("decisions") or []
    if decisions:
        lines += ["| Severity | Location | Rule | Object | Message |", "|---|---|---|---|---|"]
        lines += [
            f"| {cell(d.get('severity'))} | `{cell(where(d))}` | `{cell(d.get('rule'))}` | `{cell(d.get('ref'))}` | {cell(d.get('msg'))} |"
            for d in decisions
        ]
    else:
        lines.append("No violations.")
    return "\n".join(lines) + "\n"
