"""Values that a policy evaluation produces and every report format renders."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.errors import DraGitopsError
from reconciler.model.loader import SkippedFile
from reconciler.model.objects import located

Severity = Literal["deny", "warn"]


@dataclass(frozen=True)
class RuleInfo:
    """What the `# METADATA` block of a rule says about it."""

    id: str
    title: str
    description: str
    severity: Severity
    source: str  # path of the .rego file, as the user would type it


@dataclass(frozen=True)
class Finding:
    """One violation. `waived` holds the waiver's reason when an annotation waived it."""

    rule: str
    severity: Severity
    msg: str
    ref: str
    path: str
    line: int
    waived: str | None = None
    via: str = ""  # a rendered object: the kustomization or chart release that produced it

    @property
    def where(self) -> str:
        return located(self.path, self.line, self.via) if self.path else self.ref


# `path:line` (or `path:line:column`) of a file the check reads: manifests, the repository config, policies.
_FILE_AT = re.compile(r"(?P<path>.+\.(?:ya?ml|json|rego))(?::(?P<line>\d+)(?::\d+)?)?")


@dataclass(frozen=True)
class CheckError:
    """Why the check did not run (bad input, an unreachable server): every format still reports it."""

    message: str  # the whole message, led by where it happened
    path: str = ""  # the file it names, when it names one
    line: int = 0
    kind: str = "UserError"  # the error's class
    exit_code: int = 1

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path

    @classmethod
    def of(cls, exc: DraGitopsError) -> CheckError:
        # A rendered object is shown as `overlay from file:line`: the file is what reports point at.
        at = _FILE_AT.fullmatch((exc.where or "").rsplit(" from ", 1)[-1])
        path, line = (at["path"], int(at["line"] or 0)) if at else ("", 0)
        return cls(str(exc), path, line, type(exc).__name__, exc.exit_code)


@dataclass(frozen=True)
class Uninspected:
    """An object that embeds pod specs the policies do not read (a custom resource such as an MPIJob)."""

    ref: str
    path: str
    line: int
    api_version: str
    kind: str
    pod_specs: tuple[str, ...]  # dotted paths inside the object

    @property
    def message(self) -> str:
        return (
            f"{self.path}:{self.line}: {self.ref} not inspected: the policies do not read the pod specs of "
            f"{self.api_version} {self.kind} ({', '.join(self.pod_specs)}), so their claims are not checked"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "path": self.path,
            "line": self.line,
            "apiVersion": self.api_version,
            "kind": self.kind,
            "pod_specs": list(self.pod_specs),
        }


@dataclass(frozen=True)
class Unvalidated:
    """An object no bundled schema (nor a CRD in the desired state) describes: left to the API server."""

    ref: str
    path: str
    line: int
    api_version: str
    kind: str
    reason: str

    @property
    def message(self) -> str:
        return f"{self.path}:{self.line}: {self.ref} not validated offline: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "path": self.path,
            "line": self.line,
            "apiVersion": self.api_version,
            "kind": self.kind,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class ChangeSummary:
    create: int = 0
    update: int = 0
    delete: int = 0


@dataclass
class CheckResult:
    """Everything a report needs: the findings, the rules that ran and what was looked at."""

    findings: list[Finding]
    rules: dict[str, RuleInfo]
    objects_checked: int
    files_checked: int
    changes: ChangeSummary = field(default_factory=ChangeSummary)
    engine: str = "embedded"
    # Manifest files the load passed over (hidden, outside the config's `paths`): reported, never failing.
    skipped: list[SkippedFile] = field(default_factory=list)
    # With cluster data: the predicted placement of the change's pods and claims (`input.capacity`).
    capacity: dict[str, Any] | None = None
    # Objects whose embedded pod specs no policy saw (`-v` lists them): reported, never failing.
    uninspected: list[Uninspected] = field(default_factory=list)
    # Objects of kinds no schema describes (custom resources whose CRD is elsewhere): reported, never failing.
    unvalidated: list[Unvalidated] = field(default_factory=list)
    # Against a base: the gate settings the change edits (`gate-settings`), each {setting, old, new, loosens}.
    settings_changes: list[dict[str, Any]] = field(default_factory=list)
    # Set instead of everything above when the check could not run (see `error_result`).
    errors: list[CheckError] = field(default_factory=list)

    @property
    def denials(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "deny" and f.waived is None]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warn" and f.waived is None]

    @property
    def waived(self) -> list[Finding]:
        return [f for f in self.findings if f.waived is not None]

    def exit_code(self, fail_on_warn: bool = False) -> int:
        if self.errors:
            return max(e.exit_code for e in self.errors)
        if self.denials or (fail_on_warn and self.warnings):
            return 1
        return 0


def error_result(exc: DraGitopsError) -> CheckResult:
    """The result of a check that did not run, so that a report in any format still carries the error."""
    return CheckResult(findings=[], rules={}, objects_checked=0, files_checked=0, errors=[CheckError.of(exc)])
