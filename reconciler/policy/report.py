"""Render a :class:`CheckResult` as text, json, markdown, sarif, junit, GitHub workflow commands or
Code Climate JSON (GitLab code quality).

Text, json and markdown live here, the CI formats in `report_ci`, what they share in `report_common`.

Pure: every renderer takes a result and options and returns a string; nothing here reads or writes files.
A result whose check did not run (`result.error_result`) renders in every format too, carrying the error.
Output is deterministic — findings are always ordered by path, line, rule, ref and message — so reports can
be diffed, cached and asserted on.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from reconciler.markdown import md_code, md_text
from reconciler.policy.report_ci import render_codeclimate, render_github, render_junit, render_sarif
from reconciler.policy.report_common import (
    FORMATS,
    TOOL_NAME,
    RenderOptions,
    all_rules,
    capacity_line,
    error_dicts,
    finding_dict,
    finding_label,
    message_with_ref,
    skipped_dicts,
    skipped_lines,
    sorted_findings,
    summary_line,
    verdict,
)
from reconciler.policy.result import CheckResult, Finding

__all__ = [
    "FORMATS",
    "RENDERERS",
    "RenderOptions",
    "render",
    "render_codeclimate",
    "render_github",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_sarif",
    "render_text",
    "finding_dict",
    "skipped_dicts",
    "skipped_lines",
    "message_with_ref",
    "summary_line",
    "verdict",
]

# --------------------------------------------------------------------------------------------------------
# text


_RED = "\x1b[31m"
_YELLOW = "\x1b[33m"
_GREEN = "\x1b[32m"
_DIM = "\x1b[2m"
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"


def _paint(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{_RESET}" if color else text


def _text_msg(msg: str) -> str:
    # Continuation lines of a multi-line message stay indented under the finding.
    return "\n      ".join(msg.splitlines()) if msg else msg


def _text_line(f: Finding) -> str:
    line = f"  {finding_label(f)} {f.where}  {f.rule}  {_text_msg(message_with_ref(f))}"
    if f.waived is not None:
        line += f"  (waived: {_text_msg(f.waived)})"
    return line


def render_text(result: CheckResult, options: RenderOptions) -> str:
    """Conftest-like: active findings grouped by file, then waivers, then one summary line."""
    c = options.color
    out: list[str] = [_paint(f"  ERROR {e.message}", _RED, c) for e in result.errors]
    active = sorted_findings(f for f in result.findings if f.waived is None)
    current: str | None = None
    for f in active:
        group = f.path or "(no file)"
        if group != current:
            if current is not None:
                out.append("")
            out.append(_paint(group, _BOLD, c))
            current = group
        out.append(_paint(_text_line(f), _RED if f.severity == "deny" else _YELLOW, c))
    waived = sorted_findings(result.waived)
    if waived:
        if out:
            out.append("")
        out.append(_paint("Waived", _BOLD, c))
        out.extend(_paint(_text_line(f), _DIM, c) for f in waived)
    if result.skipped:
        if out:
            out.append("")
        out.append(_paint("Skipped (not checked, not applied)", _BOLD, c))
        out.extend(_paint(line, _YELLOW, c) for line in skipped_lines(result.skipped))
    if out:
        out.append("")
    v = verdict(result, options.fail_on_warn)
    colour = _RED if v == "Denied" else _YELLOW if result.warnings else _GREEN
    pending = capacity_line(result)
    if pending:
        out.append(_paint(pending, _YELLOW, c))
    out.append(_paint(f"{summary_line(result)} ({v.lower()})", colour, c))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------
# json


def render_json(result: CheckResult, options: RenderOptions) -> str:
    findings = sorted_findings(result.findings)
    doc = {
        "summary": {
            "verdict": verdict(result, options.fail_on_warn),
            "objects": result.objects_checked,
            "files": result.files_checked,
            "findings": len(findings),
            "denied": len(result.denials),
            "warnings": len(result.warnings),
            "waived": len(result.waived),
            "skipped": len(result.skipped),
            "errors": len(result.errors),
            "changes": {
                "create": result.changes.create,
                "update": result.changes.update,
                "delete": result.changes.delete,
            },
            "engine": result.engine,
            "fail_on_warn": options.fail_on_warn,
            "exit_code": result.exit_code(options.fail_on_warn),
            "tool": {"name": TOOL_NAME, "version": options.tool_version},
        },
        "errors": error_dicts(result.errors),
        "findings": [finding_dict(f) for f in findings],
        "waivers": [
            {
                "rule": f.rule,
                "severity": f.severity,
                "ref": f.ref,
                "path": f.path,
                "line": f.line,
                "reason": f.waived,
                "msg": f.msg,
            }
            for f in findings
            if f.waived is not None
        ],
        "skipped": skipped_dicts(result.skipped),
        "not_inspected": [u.to_json() for u in result.uninspected],
        "not_validated": [u.to_json() for u in result.unvalidated],
        "settings_changes": result.settings_changes,
        **({"capacity": result.capacity} if result.capacity is not None else {}),
        "rules": {
            r.id: {"title": r.title, "description": r.description, "severity": r.severity, "source": r.source}
            for r in all_rules(result)
        },
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------------
# markdown


def _md_where(f: Finding) -> str:
    return md_code(f.where)


def render_markdown(result: CheckResult, options: RenderOptions) -> str:
    """A PR comment: verdict, a per-rule table, the violations and the waivers (or why nothing ran)."""
    v = verdict(result, options.fail_on_warn)
    ch = result.changes
    out = [f"## {md_text(options.title)}", "", f"**{v}** — {summary_line(result)}.", ""]
    pending = capacity_line(result)
    if pending:
        out += [md_text(pending[0].upper() + pending[1:]) + ".", ""]
    if result.errors:
        # Nothing was checked: no rule table, no "No violations." that would read as a pass.
        out += ["### Errors", ""]
        out += [f"- {md_text(e.message)}" for e in result.errors]
        out += ["", f"{TOOL_NAME} {md_text(options.tool_version)}."]
        return "\n".join(out) + "\n"
    out += [
        f"Engine `{md_text(result.engine)}`; changes: {ch.create} create, {ch.update} update, "
        f"{ch.delete} delete; {TOOL_NAME} {md_text(options.tool_version)}.",
        "",
    ]
    rules = all_rules(result)
    if rules:
        out += ["| Rule | Title | Denied | Warnings | Waived |", "|---|---|---:|---:|---:|"]
        for r in rules:
            denied = sum(1 for f in result.denials if f.rule == r.id)
            warned = sum(1 for f in result.warnings if f.rule == r.id)
            skipped = sum(1 for f in result.waived if f.rule == r.id)
            out.append(f"| {md_code(r.id)} | {md_text(r.title)} | {denied} | {warned} | {skipped} |")
    else:
        out.append("_No rules ran._")
    out += ["", "### Violations", ""]
    active = sorted_findings(f for f in result.findings if f.waived is None)
    if active:
        out += ["| Severity | Location | Rule | Object | Message |", "|---|---|---|---|---|"]
        for f in active:
            sev = "deny" if f.severity == "deny" else "warn"
            out.append(
                f"| {sev} | {_md_where(f)} | {md_code(f.rule)} | {md_code(f.ref)} | {md_text(f.msg)} |"
            )
    else:
        out.append("No violations.")
    if result.settings_changes:
        out += ["", "### Gate settings changed", ""]
        out += ["This change is judged by the base's settings; its own take effect from the next commit.", ""]
        out += ["| Setting | Base | This change | Loosens the gate |", "|---|---|---|---|"]
        for c in result.settings_changes:
            out.append(
                f"| {md_code(c['setting'])} | {md_code(c['old'])} | {md_code(c['new'])} | "
                f"{'yes' if c['loosens'] else 'no'} |"
            )
    waived = sorted_findings(result.waived)
    if waived:
        out += ["", "### Waivers", ""]
        out += ["| Location | Rule | Object | Reason | Message |", "|---|---|---|---|---|"]
        for f in waived:
            out.append(
                f"| {_md_where(f)} | {md_code(f.rule)} | {md_code(f.ref)} | "
                f"{md_text(f.waived or '')} | {md_text(f.msg)} |"
            )
    if result.skipped:
        out += [
            "",
            "### Skipped files",
            "",
            "Neither checked nor applied (`kubectl apply -R` would apply them).",
            "",
        ]
        out += ["| File | Reason |", "|---|---|"]
        out += [f"| {md_code(s.path)} | {md_text(s.reason)} |" for s in result.skipped]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------
# registry

RENDERERS: dict[str, Callable[[CheckResult, RenderOptions], str]] = {
    "text": render_text,
    "json": render_json,
    "markdown": render_markdown,
    "sarif": render_sarif,
    "junit": render_junit,
    "github": render_github,
    "codeclimate": render_codeclimate,
}


def render(result: CheckResult, fmt: str, options: RenderOptions | None = None) -> str:
    """Render `result` in `fmt` (one of FORMATS). Unknown formats raise ValueError."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        # cause hidden: the KeyError of the renderer table says no more than this message
        raise ValueError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    return renderer(result, options or RenderOptions())
