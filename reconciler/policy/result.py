"""Values that a policy evaluation produces and every report format renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.model.loader import SkippedFile

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

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.path else self.ref


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
        if self.denials or (fail_on_warn and self.warnings):
            return 1
        return 0
