"""Render a :class:`CheckResult` as text, json, markdown, sarif, junit or GitHub workflow commands.

Pure: every renderer takes a result and options and returns a string; nothing here reads or writes files.
Output is deterministic — findings are always ordered by path, line, rule, ref and message — so reports can
be diffed, cached and asserted on.
"""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import reconciler
from reconciler.policy.result import CheckResult, Finding, RuleInfo, Severity

__all__ = [
    "FORMATS",
    "RENDERERS",
    "RenderOptions",
    "render",
    "render_github",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_sarif",
    "render_text",
    "summary_line",
    "verdict",
]

FORMATS = ("text", "json", "markdown", "sarif", "junit", "github")

TOOL_NAME = "dra-gitops"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"


@dataclass(frozen=True)
class RenderOptions:
    """How to render. `fail_on_warn` makes warnings count as failures (junit, json exit code, verdict)."""

    color: bool = False
    tool_version: str = reconciler.__version__
    title: str = "dra-gitops policy check"
    fail_on_warn: bool = False
    information_uri: str | None = None  # SARIF tool.driver.informationUri; omitted when None


# --------------------------------------------------------------------------------------------------------
# Shared helpers


def _sort_key(f: Finding) -> tuple[str, int, str, str, str]:
    return (f.path, f.line, f.rule, f.ref, f.msg)


def _sorted(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=_sort_key)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _all_rules(result: CheckResult) -> list[RuleInfo]:
    """The rules that ran plus any rule a finding names without metadata, sorted by id."""
    rules = dict(result.rules)
    for f in _sorted(result.findings):
        if f.rule not in rules:
            rules[f.rule] = RuleInfo(id=f.rule, title=f.rule, description="", severity=f.severity, source="")
    return [rules[k] for k in sorted(rules)]


def verdict(result: CheckResult, fail_on_warn: bool = False) -> str:
    """`Denied`, `Passed with warnings` or `Passed` (warnings deny when `fail_on_warn`)."""
    if result.exit_code(fail_on_warn):
        return "Denied"
    if result.warnings:
        return "Passed with warnings"
    return "Passed"


def summary_line(result: CheckResult) -> str:
    """E.g. ``3 objects, 2 files: 1 denied, 1 warning, 1 waived``."""
    return (
        f"{_plural(result.objects_checked, 'object')}, {_plural(result.files_checked, 'file')}: "
        f"{len(result.denials)} denied, {_plural(len(result.warnings), 'warning')}, "
        f"{len(result.waived)} waived"
    )


def _label(f: Finding) -> str:
    if f.waived is not None:
        return "WAIVED"
    return "FAIL" if f.severity == "deny" else "WARN"


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
    line = f"  {_label(f)} {f.where}  {f.rule}  {_text_msg(message_with_ref(f))}"
    if f.waived is not None:
        line += f"  (waived: {_text_msg(f.waived)})"
    return line


def render_text(result: CheckResult, options: RenderOptions) -> str:
    """Conftest-like: active findings grouped by file, then waivers, then one summary line."""
    c = options.color
    out: list[str] = []
    active = _sorted(f for f in result.findings if f.waived is None)
    current: str | None = None
    for f in active:
        group = f.path or "(no file)"
        if group != current:
            if current is not None:
                out.append("")
            out.append(_paint(group, _BOLD, c))
            current = group
        out.append(_paint(_text_line(f), _RED if f.severity == "deny" else _YELLOW, c))
    waived = _sorted(result.waived)
    if waived:
        if out:
            out.append("")
        out.append(_paint("Waived", _BOLD, c))
        out.extend(_paint(_text_line(f), _DIM, c) for f in waived)
    if out:
        out.append("")
    v = verdict(result, options.fail_on_warn)
    colour = _RED if v == "Denied" else _YELLOW if result.warnings else _GREEN
    out.append(_paint(f"{summary_line(result)} ({v.lower()})", colour, c))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------
# json


def message_with_ref(f: Finding) -> str:
    """The message led by the object ref; rules usually start their message with it already."""
    return f.msg if not f.ref or f.msg.startswith(f.ref) else f"{f.ref}: {f.msg}"


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "severity": f.severity,
        "msg": f.msg,
        "ref": f.ref,
        "path": f.path,
        "line": f.line,
        "waived": f.waived,
    }


def render_json(result: CheckResult, options: RenderOptions) -> str:
    findings = _sorted(result.findings)
    doc = {
        "summary": {
            "verdict": verdict(result, options.fail_on_warn),
            "objects": result.objects_checked,
            "files": result.files_checked,
            "findings": len(findings),
            "denied": len(result.denials),
            "warnings": len(result.warnings),
            "waived": len(result.waived),
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
        "rules": {
            r.id: {"title": r.title, "description": r.description, "severity": r.severity, "source": r.source}
            for r in _all_rules(result)
        },
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------------
# markdown

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#])")


def _md_text(s: str) -> str:
    """Plain text for a table cell: markdown/HTML specials escaped, pipes escaped, newlines as <br>."""
    s = s.replace("&", "&amp;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return "<br>".join(s.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def _md_code(s: str) -> str:
    """A code span for a table cell; pipes stay escaped (GFM splits cells before parsing code spans)."""
    s = " ".join(s.splitlines()).replace("|", "\\|")
    if not s:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _md_where(f: Finding) -> str:
    return _md_code(f.where)


def render_markdown(result: CheckResult, options: RenderOptions) -> str:
    """A PR comment: verdict, a per-rule table, the violations and the waivers."""
    v = verdict(result, options.fail_on_warn)
    ch = result.changes
    out = [
        f"## {_md_text(options.title)}",
        "",
        f"**{v}** — {summary_line(result)}.",
        "",
        f"Engine `{_md_text(result.engine)}`; changes: {ch.create} create, {ch.update} update, "
        f"{ch.delete} delete; {TOOL_NAME} {_md_text(options.tool_version)}.",
        "",
    ]
    rules = _all_rules(result)
    if rules:
        out += ["| Rule | Title | Denied | Warnings | Waived |", "|---|---|---:|---:|---:|"]
        for r in rules:
            denied = sum(1 for f in result.denials if f.rule == r.id)
            warned = sum(1 for f in result.warnings if f.rule == r.id)
            skipped = sum(1 for f in result.waived if f.rule == r.id)
            out.append(f"| {_md_code(r.id)} | {_md_text(r.title)} | {denied} | {warned} | {skipped} |")
    else:
        out.append("_No rules ran._")
    out += ["", "### Violations", ""]
    active = _sorted(f for f in result.findings if f.waived is None)
    if active:
        out += ["| Severity | Location | Rule | Object | Message |", "|---|---|---|---|---|"]
        for f in active:
            sev = "deny" if f.severity == "deny" else "warn"
            out.append(
                f"| {sev} | {_md_where(f)} | {_md_code(f.rule)} | {_md_code(f.ref)} | {_md_text(f.msg)} |"
            )
    else:
        out.append("No violations.")
    waived = _sorted(result.waived)
    if waived:
        out += ["", "### Waivers", ""]
        out += ["| Location | Rule | Object | Reason | Message |", "|---|---|---|---|---|"]
        for f in waived:
            out.append(
                f"| {_md_where(f)} | {_md_code(f.rule)} | {_md_code(f.ref)} | "
                f"{_md_text(f.waived or '')} | {_md_text(f.msg)} |"
            )
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------
# sarif

_SARIF_LEVEL: dict[Severity, str] = {"deny": "error", "warn": "warning"}


def _sarif_uri(path: str) -> str:
    p = path.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    if p.startswith("/"):
        return "file://" + quote(p)
    return quote(p)


def _rule_name(rule_id: str) -> str:
    """`class-before-template` → `ClassBeforeTemplate` (SARIF's human-readable rule identifier)."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", rule_id) if part)


def _sarif_rule(r: RuleInfo) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "id": r.id,
        "name": _rule_name(r.id) or r.id,
        "shortDescription": {"text": r.title or r.id},
        "fullDescription": {"text": r.description or r.title or r.id},
        "defaultConfiguration": {"level": _SARIF_LEVEL[r.severity]},
        "properties": {"severity": r.severity, "tags": ["dra", "policy"]},
    }
    if r.source:
        rule["properties"]["source"] = r.source
    return rule


def _fingerprint(f: Finding) -> str:
    return hashlib.sha256(f"{f.rule}\0{f.ref}\0{f.msg}".encode()).hexdigest()[:32]


def render_sarif(result: CheckResult, options: RenderOptions) -> str:
    rules = _all_rules(result)
    rule_index = {r.id: i for i, r in enumerate(rules)}
    findings = _sorted(result.findings)
    artifacts = sorted({f.path for f in findings if f.path})
    artifact_index = {p: i for i, p in enumerate(artifacts)}

    results: list[dict[str, Any]] = []
    for f in findings:
        location: dict[str, Any] = {}
        if f.path:
            location["physicalLocation"] = {
                "artifactLocation": {"uri": _sarif_uri(f.path), "index": artifact_index[f.path]},
                "region": {"startLine": max(f.line, 1)},
            }
        location["logicalLocations"] = [{"fullyQualifiedName": f.ref, "kind": "resource"}]
        res: dict[str, Any] = {
            "ruleId": f.rule,
            "ruleIndex": rule_index[f.rule],
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": message_with_ref(f)},
            "locations": [location],
            "partialFingerprints": {"draGitopsFinding/v1": _fingerprint(f)},
            "suppressions": (
                [{"kind": "inSource", "justification": f.waived}] if f.waived is not None else []
            ),
        }
        results.append(res)

    driver: dict[str, Any] = {"name": TOOL_NAME, "version": options.tool_version}
    if options.information_uri:
        driver["informationUri"] = options.information_uri
    driver["rules"] = [_sarif_rule(r) for r in rules]
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "artifacts": [{"location": {"uri": _sarif_uri(p)}} for p in artifacts],
        "results": results,
        "properties": {
            "objectsChecked": result.objects_checked,
            "filesChecked": result.files_checked,
            "engine": result.engine,
            "changes": {
                "create": result.changes.create,
                "update": result.changes.update,
                "delete": result.changes.delete,
            },
        },
    }
    doc = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------------
# junit

# Characters XML 1.0 cannot carry at all, even escaped.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(s: str) -> str:
    return _XML_INVALID.sub("\ufffd", s)


def render_junit(result: CheckResult, options: RenderOptions) -> str:
    """One testsuite per rule; a testcase per finding, or a single `passed` testcase for a clean rule.

    deny → <failure>; warn → <failure> only with `fail_on_warn`, else a passing case with <system-out>;
    waived → <skipped> with the reason.
    """
    root = ET.Element("testsuites", {"name": _xml(options.title)})
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    findings = _sorted(result.findings)
    for r in _all_rules(result):
        mine = [f for f in findings if f.rule == r.id]
        suite = ET.SubElement(root, "testsuite", {"name": _xml(r.id)})
        props = ET.SubElement(suite, "properties")
        for key, value in (("title", r.title), ("severity", r.severity), ("source", r.source)):
            ET.SubElement(props, "property", {"name": key, "value": _xml(value)})
        classname = _xml(f"{TOOL_NAME}.{r.id}")
        failures = skipped = 0
        for f in mine:
            attrs = {"classname": classname, "name": _xml(f"{f.ref} ({f.where})" if f.path else f.ref)}
            if f.path:
                attrs["file"] = _xml(f.path)
                attrs["line"] = str(f.line)
            case = ET.SubElement(suite, "testcase", attrs)
            detail = _xml(f"{f.where}: {message_with_ref(f)}")
            if f.waived is not None:
                skipped += 1
                ET.SubElement(case, "skipped", {"message": _xml(f"waived: {f.waived}")})
                ET.SubElement(case, "system-out").text = detail
            elif f.severity == "deny" or options.fail_on_warn:
                failures += 1
                fail = ET.SubElement(case, "failure", {"message": _xml(f.msg), "type": f.severity})
                fail.text = detail
            else:
                ET.SubElement(case, "system-out").text = f"warning: {detail}"
        if not mine:
            ET.SubElement(suite, "testcase", {"classname": classname, "name": "passed"})
        tests = max(len(mine), 1)
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", str(skipped))
        totals["tests"] += tests
        totals["failures"] += failures
        totals["skipped"] += skipped
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("skipped", str(totals["skipped"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --------------------------------------------------------------------------------------------------------
# github


def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def _gh_command(command: str, props: list[tuple[str, str]], message: str) -> str:
    p = ",".join(f"{k}={_gh_prop(v)}" for k, v in props)
    return f"::{command}{' ' + p if p else ''}::{_gh_data(message)}"


def render_github(result: CheckResult, options: RenderOptions) -> str:
    """GitHub Actions workflow commands: ::error / ::warning per finding, ::notice per waiver, a summary."""
    out: list[str] = []
    for f in _sorted(result.findings):
        props: list[tuple[str, str]] = []
        if f.path:
            props += [("file", f.path.replace("\\", "/")), ("line", str(max(f.line, 1)))]
        text = message_with_ref(f)
        if f.waived is not None:
            out.append(
                _gh_command(
                    "notice", [*props, ("title", f"{f.rule} (waived)")], f"{text} (waived: {f.waived})"
                )
            )
        else:
            command = "error" if f.severity == "deny" else "warning"
            out.append(_gh_command(command, [*props, ("title", f.rule)], text))
    v = verdict(result, options.fail_on_warn)
    out.append(_gh_command("notice", [("title", options.title)], f"{v}: {summary_line(result)}"))
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
}


def render(result: CheckResult, fmt: str, options: RenderOptions | None = None) -> str:
    """Render `result` in `fmt` (one of FORMATS). Unknown formats raise ValueError."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    return renderer(result, options or RenderOptions())
