"""What every report format shares: render options, ordering, the verdict and the summary line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import reconciler
from reconciler.model.loader import SkippedFile
from reconciler.policy.result import CheckError, CheckResult, Finding, RuleInfo

FORMATS = ("text", "json", "markdown", "sarif", "junit", "github", "codeclimate")

TOOL_NAME = "dra-gitops"


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


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in report order."""
    return sorted(findings, key=_sort_key)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def all_rules(result: CheckResult) -> list[RuleInfo]:
    """The rules that ran plus any rule a finding names without metadata, sorted by id."""
    rules = dict(result.rules)
    for f in sorted_findings(result.findings):
        if f.rule not in rules:
            rules[f.rule] = RuleInfo(id=f.rule, title=f.rule, description="", severity=f.severity, source="")
    return [rules[k] for k in sorted(rules)]


def verdict(result: CheckResult, fail_on_warn: bool = False) -> str:
    """`Error` (the check did not run), `Denied`, `Passed with warnings` or `Passed` (warnings deny when
    `fail_on_warn`)."""
    if result.errors:
        return "Error"
    if result.exit_code(fail_on_warn):
        return "Denied"
    if result.warnings:
        return "Passed with warnings"
    return "Passed"


def summary_line(result: CheckResult) -> str:
    """E.g. ``3 objects, 2 files: 1 denied, 1 warning, 1 waived`` (``2 files (1 skipped)`` when some were)."""
    if result.errors:
        return f"the check did not run: {_plural(len(result.errors), 'error')}"
    skipped = f" ({len(result.skipped)} skipped)" if result.skipped else ""
    return (
        f"{_plural(result.objects_checked, 'object')}, {_plural(result.files_checked, 'file')}{skipped}: "
        f"{len(result.denials)} denied, {_plural(len(result.warnings), 'warning')}, "
        f"{len(result.waived)} waived"
    )


def capacity_line(result: CheckResult) -> str | None:
    """``capacity: 0–1 of 4 pods may stay Pending`` when some pod of the change may not get a node."""
    pending = (result.capacity or {}).get("pending") or {}
    if not pending.get("max"):
        return None
    return f"capacity: {pending.get('summary')}"


def finding_label(f: Finding) -> str:
    """FAIL, WARN or WAIVED."""
    if f.waived is not None:
        return "WAIVED"
    return "FAIL" if f.severity == "deny" else "WARN"


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
        # A rendered object: the kustomization, or the chart release with its values files.
        **({"renderedBy": f.via} if f.via else {}),
    }


SKIPPED_TITLE = "manifest file skipped"


def skipped_message(skipped: SkippedFile) -> str:
    """One sentence for a skipped file, the same in every format."""
    return f"{skipped.path}: not checked and not applied ({skipped.reason})"


def skipped_dicts(skipped: Iterable[SkippedFile]) -> list[dict[str, str]]:
    return [{"path": s.path, "reason": s.reason} for s in skipped]


def skipped_lines(skipped: Iterable[SkippedFile]) -> list[str]:
    """Text lines for skipped files (check, plan and apply print the same)."""
    return [f"  SKIP {s.path}  {s.reason}" for s in skipped]


ERROR_TITLE = "dra-gitops could not check"


def error_dicts(errors: Iterable[CheckError]) -> list[dict[str, Any]]:
    return [{"message": e.message, "path": e.path, "line": e.line, "kind": e.kind} for e in errors]
