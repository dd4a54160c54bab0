"""A server-side dry-run as text, JSON and Markdown (pure: rendering only).

`plan` prints one of these; text is also what `apply`, the reconciler's records and `watch` show.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from reconciler.cluster.apply.changeset import DryRunResult, ObjectResult
from reconciler.markdown import md_code, md_fence, md_table, md_text
from reconciler.model.loader import SkippedFile
from reconciler.policy.report_common import skipped_dicts, skipped_lines

__all__ = ["dry_run_json", "render_dry_run", "render_dry_run_markdown", "render_plan"]

_SIGNS = {"create": "+", "update": "~", "delete": "-", "unchanged": "=", "deferred": "?"}


def _verdict(result: DryRunResult) -> str:
    errors = sum(1 for r in result.results if r.error)
    return "dry-run ok" if result.ok else f"dry-run failed: {errors} object(s) rejected"


def render_dry_run(result: DryRunResult, show_diff: bool = True) -> str:
    """Text for humans: one line per object (and its diff), then one summary line per stage."""
    lines: list[str] = []
    for obj in result.results:
        if obj.error:
            lines.append(f"! error {obj.ref}  {obj.where}: {obj.error}")
            continue
        if obj.op == "unchanged":
            continue
        note = f"  (checked after creation: {obj.deferred_reason})" if obj.op == "deferred" else ""
        lines.append(f"{_SIGNS[obj.op]} {obj.op} {obj.ref}  {obj.where}{note}")
        if show_diff and obj.diff:
            lines.extend("    " + line for line in obj.diff.rstrip("\n").split("\n"))
        elif show_diff and obj.op == "update":
            lines.append("    (labels or field ownership only)")
    for label, counts in result.summary.items():
        extra = f", {counts['unchanged']} unchanged" if counts.get("unchanged") else ""
        deferred = (
            f" ({counts['deferred']} checked after their namespace or CRD)" if counts.get("deferred") else ""
        )
        lines.append(
            f"stage {label}: {counts['create']} create, {counts['update']} update, {counts['delete']} delete{extra}{deferred}"
        )
    total = result.counts()
    lines.append(
        f"{_verdict(result)}: {total['create']} create, {total['update']} update, {total['delete']} delete, "
        f"{total['unchanged']} unchanged"
    )
    return "\n".join(lines) + "\n"


def _object_json(obj: ObjectResult, show_diff: bool) -> dict[str, Any]:
    return {
        "ref": obj.ref,
        "op": None if obj.error else obj.op,
        "stage": obj.label,
        "path": obj.path,
        "line": obj.line,
        **({"rendered_by": obj.via} if obj.via else {}),
        "error": obj.error,
        "deferred_reason": obj.deferred_reason,
        "diff": obj.diff if show_diff and not obj.error and obj.op != "unchanged" else "",
    }


def dry_run_json(result: DryRunResult, show_diff: bool = True) -> dict[str, Any]:
    """The dry-run as a document: verdict, the counts (the same as text's), per stage and per object."""
    return {
        "ok": result.ok,
        "changes_pending": result.changes_pending,
        "summary": result.summary_line(),
        "counts": result.counts(),
        "stages": [{"stage": label, **counts} for label, counts in result.summary.items()],
        "objects": [_object_json(obj, show_diff) for obj in result.results],
    }


def render_dry_run_markdown(
    result: DryRunResult, show_diff: bool = True, title: str = "dra-gitops plan"
) -> str:
    """A pull-request comment or CI job summary: verdict, a table per stage, each change with its diff."""
    total = result.counts()
    out = [f"## {md_text(title)}", "", f"**{_verdict(result)}** — {result.summary_line()}.", ""]
    rows = [
        [md_code(label), c["create"], c["update"], c["delete"], c["unchanged"], c["deferred"]]
        for label, c in result.summary.items()
    ]
    rows.append(
        [
            "**total**",
            total["create"],
            total["update"],
            total["delete"],
            total["unchanged"],
            total["deferred"],
        ]
    )
    out += md_table(["Stage", "Create", "Update", "Delete", "Unchanged", "Checked after creation"], rows)
    rejected = [r for r in result.results if r.error]
    if rejected:
        out += ["", "### Rejected by the server", ""]
        out += md_table(
            ["Object", "Location", "Error"],
            [[md_code(r.ref), md_code(r.where), md_text(r.error or "")] for r in rejected],
        )
    changed = [r for r in result.results if not r.error and r.op != "unchanged"]
    out += ["", "### Changes", ""]
    if not changed:
        out.append("No changes: the cluster already matches.")
    for obj in changed:
        note = f" — checked after creation: {md_text(obj.deferred_reason)}" if obj.deferred_reason else ""
        out.append(f"- **{obj.op}** {md_code(obj.ref)} ({md_code(obj.where)}){note}")
        if not show_diff:
            continue
        if obj.diff:
            out += ["", "  <details><summary>diff</summary>", ""]
            out += ["  " + line if line else "" for line in md_fence(obj.diff, "diff")]
            out += ["", "  </details>", ""]
        elif obj.op == "update":
            out.append("  (labels or field ownership only)")
    return "\n".join(out).rstrip("\n") + "\n"


def render_plan(
    result: DryRunResult,
    fmt: str,
    *,
    show_diff: bool = True,
    revision: str | None = None,
    skipped: Sequence[SkippedFile] = (),
) -> str:
    """What `plan` prints: the dry-run in `fmt` (text, json, markdown), with the files left out."""
    if fmt == "json":
        doc = {
            "revision": revision or None,
            **dry_run_json(result, show_diff),
            "skipped": skipped_dicts(skipped),
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        title = f"dra-gitops plan of {revision[:12]}" if revision else "dra-gitops plan"
        text = render_dry_run_markdown(result, show_diff, title=title)
        if skipped:
            text += "\n### Skipped (not checked, not applied)\n\n"
            text += "".join(f"- {md_code(s.path)}: {md_text(s.reason)}\n" for s in skipped)
        return text
    if fmt != "text":
        raise ValueError(f"unknown plan format {fmt!r} (text, json, markdown)")
    text = render_dry_run(result, show_diff=show_diff)
    if skipped:
        text += "\n".join(["skipped (not checked, not applied):", *skipped_lines(skipped)]) + "\n"
    return text
