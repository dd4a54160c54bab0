"""Reports for CI systems: SARIF (code scanning), JUnit XML, GitHub Actions workflow commands and the
Code Climate JSON that GitLab's code quality report reads."""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import quote

from reconciler.policy.report_common import (
    ERROR_TITLE,
    SKIPPED_TITLE,
    TOOL_NAME,
    RenderOptions,
    all_rules,
    error_dicts,
    message_with_ref,
    skipped_dicts,
    skipped_message,
    sorted_findings,
    summary_line,
    verdict,
)
from reconciler.policy.result import CheckError, CheckResult, Finding, RuleInfo, Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
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


def _sarif_error(error: CheckError) -> dict[str, Any]:
    notification: dict[str, Any] = {
        "level": "error",
        "descriptor": {"id": error.kind},
        "message": {"text": error.message},
    }
    if error.path:
        physical: dict[str, Any] = {"artifactLocation": {"uri": _sarif_uri(error.path)}}
        if error.line:
            physical["region"] = {"startLine": error.line}
        notification["locations"] = [{"physicalLocation": physical}]
    return notification


def render_sarif(result: CheckResult, options: RenderOptions) -> str:
    rules = all_rules(result)
    rule_index = {r.id: i for i, r in enumerate(rules)}
    findings = sorted_findings(result.findings)
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
        if f.via:  # where the rendered object came from: the kustomization, or chart + release + values
            res["properties"] = {"renderedBy": f.via}
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
    if result.errors or result.skipped:
        # Not results (nothing about the files was judged): notes of the run, as SARIF has for tools.
        invocation: dict[str, Any] = {"executionSuccessful": not result.errors}
        if result.errors:
            invocation["exitCode"] = result.exit_code()
            run["properties"]["errors"] = error_dicts(result.errors)
        invocation["toolExecutionNotifications"] = [_sarif_error(e) for e in result.errors] + [
            {
                "level": "note",
                "descriptor": {"id": "skipped-file"},
                "message": {"text": skipped_message(s)},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": _sarif_uri(s.path)}}}],
            }
            for s in result.skipped
        ]
        run["invocations"] = [invocation]
    if result.skipped:
        run["properties"]["skippedFiles"] = skipped_dicts(result.skipped)
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
    waived → <skipped> with the reason. Skipped manifest files: a `skipped-files` suite of <skipped> cases.
    A check that did not run: an `input` suite with an <error> case per error, and nothing else.
    """
    root = ET.Element("testsuites", {"name": _xml(options.title)})
    if result.errors:
        return _junit_errors(root, result.errors)
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    findings = sorted_findings(result.findings)
    for r in all_rules(result):
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
    if result.skipped:
        # Files nobody checked: a skipped testcase each, so CI dashboards count them.
        suite = ET.SubElement(root, "testsuite", {"name": "skipped-files"})
        for s in result.skipped:
            case = ET.SubElement(
                suite,
                "testcase",
                {"classname": f"{TOOL_NAME}.skipped-files", "name": _xml(s.path), "file": _xml(s.path)},
            )
            ET.SubElement(case, "skipped", {"message": _xml(s.reason)})
        count = str(len(result.skipped))
        for key, value in (("tests", count), ("failures", "0"), ("errors", "0"), ("skipped", count)):
            suite.set(key, value)
        totals["tests"] += len(result.skipped)
        totals["skipped"] += len(result.skipped)
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("skipped", str(totals["skipped"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _junit_errors(root: ET.Element, errors: list[CheckError]) -> str:
    """A check that did not run: one <error> case per error, in a suite of its own."""
    suite = ET.SubElement(root, "testsuite", {"name": "input"})
    for e in errors:
        attrs = {"classname": f"{TOOL_NAME}.input", "name": _xml(e.where or "check")}
        if e.path:
            attrs["file"] = _xml(e.path)
            if e.line:
                attrs["line"] = str(e.line)
        case = ET.SubElement(suite, "testcase", attrs)
        ET.SubElement(case, "error", {"message": _xml(e.message), "type": e.kind}).text = _xml(e.message)
    for element in (suite, root):
        for key, value in (("tests", len(errors)), ("failures", 0), ("errors", len(errors)), ("skipped", 0)):
            element.set(key, str(value))
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
    """GitHub Actions workflow commands: ::error per error of a check that did not run, ::error / ::warning
    per finding, ::notice per waiver and per skipped file, a summary."""
    out: list[str] = []
    for e in result.errors:
        at = [("file", e.path.replace("\\", "/"))] if e.path else []
        at += [("line", str(e.line))] if e.path and e.line else []
        out.append(_gh_command("error", [*at, ("title", ERROR_TITLE)], e.message))
    for f in sorted_findings(result.findings):
        props: list[tuple[str, str]] = []
        if f.path:
            props += [("file", f.path.replace("\\", "/")), ("line", str(max(f.line, 1)))]
        text = message_with_ref(f)
        if f.via:
            text = f"{text} (rendered by {f.via})"
        if f.waived is not None:
            out.append(
                _gh_command(
                    "notice", [*props, ("title", f"{f.rule} (waived)")], f"{text} (waived: {f.waived})"
                )
            )
        else:
            command = "error" if f.severity == "deny" else "warning"
            out.append(_gh_command(command, [*props, ("title", f.rule)], text))
    for s in result.skipped:
        out.append(_gh_command("notice", [("file", s.path), ("title", SKIPPED_TITLE)], skipped_message(s)))
    v = verdict(result, options.fail_on_warn)
    out.append(_gh_command("notice", [("title", options.title)], f"{v}: {summary_line(result)}"))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------
# codeclimate (GitLab code quality)

# GitLab's severities are info, minor, major, critical and blocker; a denial blocks the change.
_CODECLIMATE_SEVERITY: dict[Severity, str] = {"deny": "critical", "warn": "minor"}


def render_codeclimate(result: CheckResult, options: RenderOptions) -> str:
    """A JSON array of Code Climate issues, the format of GitLab's `artifacts:reports:codequality`.

    A `blocker` issue per error of a check that did not run, one issue per active finding (waived findings were accepted, so they are not issues; skipped files
    were not judged). Warnings count as `major` with `fail_on_warn`. A finding without a file is located
    at its object ref, line 1, so that it still shows. The fingerprint is stable across runs, so GitLab
    can tell new findings of a merge request from those of its target branch.
    """
    issues: list[dict[str, Any]] = [
        {
            "type": "issue",
            "engine_name": TOOL_NAME,
            "check_name": e.kind,
            "description": e.message,
            "categories": ["Bug Risk"],
            "severity": "blocker",  # nothing was checked: nothing of the change can be trusted
            "fingerprint": hashlib.sha256(f"{e.kind}\0{e.message}".encode()).hexdigest()[:32],
            "location": {"path": e.path.replace("\\", "/") or ".", "lines": {"begin": max(e.line, 1)}},
        }
        for e in result.errors
    ]
    for f in sorted_findings(result.findings):
        if f.waived is not None:
            continue
        severity = _CODECLIMATE_SEVERITY[f.severity]
        if f.severity == "warn" and options.fail_on_warn:
            severity = "major"
        issues.append(
            {
                "type": "issue",
                "engine_name": TOOL_NAME,
                "check_name": f.rule,
                "description": message_with_ref(f),
                "categories": ["Bug Risk"],
                "severity": severity,
                "fingerprint": _fingerprint(f),
                "location": {
                    "path": f.path.replace("\\", "/") if f.path else f.ref,
                    "lines": {"begin": max(f.line, 1)},
                },
            }
        )
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"
