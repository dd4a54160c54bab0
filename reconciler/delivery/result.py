"""The evidence record of one delivery attempt (`Delivery`): what was judged, dry-run, written and verified.

It renders itself as text (`apply`) and JSON (`apply -o json`, the reconcile loop's history records).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reconciler.cluster.apply import ApplyResult, DryRunResult, StageResult, render_dry_run
from reconciler.cluster.verify import VerifyResult, render_evidence
from reconciler.delivery.check import CheckRun
from reconciler.model.objects import ObjRef
from reconciler.model.plan import Plan
from reconciler.outcome import Outcome
from reconciler.policy.report import finding_dict, skipped_dicts, skipped_lines, summary_line


@dataclass
class Delivery:
    """The evidence record of one delivery attempt."""

    outcome: Outcome  # applied | denied | dry-run-failed | apply-failed | verify-failed
    revision: str | None
    plan: Plan
    check: CheckRun | None = None
    dry_run: DryRunResult | None = None
    applied: ApplyResult | None = None
    verified: VerifyResult | None = None
    timings: dict[str, float] = field(default_factory=dict)
    pruned: ApplyResult | None = None
    pruned_first: bool = False
    # Objects of the revision that existed before this delivery touched them (from the dry-run).
    preexisting: frozenset[ObjRef] = frozenset()
    cancelled: str | None = None
    recreated: list[str] = field(default_factory=list)
    # What dra-gitops wrote for its own bookkeeping (ApplySet parent and its namespace, state), by ref:
    # create | update | unchanged. Never part of the revision's counts.
    bookkeeping: dict[str, str] = field(default_factory=dict)

    @property
    def wrote(self) -> bool:
        """Whether anything reached the cluster (a denied or rejected delivery writes nothing)."""
        return bool(self.recreated) or any(
            r is not None and (r.writes or r.stages) for r in (self.applied, self.pruned)
        )

    def failure_message(self) -> str:
        """The first reason this delivery did not succeed, or ''."""
        if self.outcome == Outcome.APPLIED:
            return ""
        if self.cancelled:
            return f"cancelled: {self.cancelled}"
        if self.check is not None and self.check.result.denials:
            first = self.check.result.denials[0]
            more = len(self.check.result.denials) - 1
            return f"{first.where} {first.rule}: {first.msg}" + (f" (and {more} more)" if more else "")
        if self.dry_run is not None and not self.dry_run.ok:
            errors = [r for r in self.dry_run.results if r.error]
            if errors:
                return f"{errors[0].ref} dry-run failed: {errors[0].error}"
        for result in (self.applied, self.pruned):
            if result is not None and result.error:
                return str(result.error)
        if self.verified is not None and not self.verified.ok:
            return self.verified.message
        return self.outcome

    def counts(self) -> dict[str, int]:
        """The revision's create/update/delete/unchanged numbers: the server-side dry-run's, else the plan's."""
        if self.dry_run is not None:
            return self.dry_run.counts()
        return {op: self.plan.count(op) for op in ("create", "update", "delete")}

    def plan_line(self) -> str:
        """The one summary of the numbers that progress, text and JSON all print."""
        if self.dry_run is not None:
            return self.dry_run.summary_line()
        return f"{len(self.plan.changes)} object(s), not dry-run"

    def stages(self) -> list[StageResult]:
        """Every stage that ran, in order: applies, and the pruning (before them in a rollback)."""
        parts = [self.pruned, self.applied] if self.pruned_first else [self.applied, self.pruned]
        return [stage for part in parts if part is not None for stage in part.stages]

    def bookkeeping_line(self) -> str | None:
        if not self.bookkeeping:
            return None
        return ", ".join(f"{ref} {op}" for ref, op in sorted(self.bookkeeping.items()))

    def to_json(self) -> dict[str, Any]:
        check = self.check.result if self.check else None
        return {
            "outcome": self.outcome,
            "revision": self.revision,
            "plan": self.plan_line(),
            "counts": self.counts(),
            "bookkeeping": dict(sorted(self.bookkeeping.items())),
            "findings": [finding_dict(f) for f in (check.findings if check else [])],
            "skipped": skipped_dicts(check.skipped if check else []),
            "dry_run": [
                {"ref": r.ref, "op": r.op, "error": r.error, "path": r.path, "line": r.line}
                for r in (self.dry_run.results if self.dry_run else [])
            ],
            "stages": [
                {
                    "stage": s.stage,
                    "label": s.label,
                    "applied": s.applied,
                    "unchanged": s.unchanged,
                    "deleted": s.deleted,
                    "seconds": round(s.seconds, 3),
                    "error": s.error,
                }
                for s in self.stages()
            ],
            "writes": sum(r.writes for r in (self.applied, self.pruned) if r is not None),
            "evidence": [e.to_json() for e in (self.verified.evidence if self.verified else [])],
            "diagnoses": [
                *(d for stage in self.stages() for d in stage.diagnoses),
                *(d.to_json() for d in (self.verified.diagnoses if self.verified else [])),
            ],
            "exec": [
                {"pod": x.pod, "container": x.container, "command": x.command, "ok": x.ok, "output": x.output}
                for x in (self.verified.exec_results if self.verified else [])
            ],
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }

    def render_json(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    def render_text(self) -> str:
        lines = [f"revision: {self.revision or '(working tree)'}"]
        suffix = " (server-side dry-run)" if self.dry_run is not None else ""
        lines.append(f"plan: {self.plan_line()}{suffix}")
        bookkeeping = self.bookkeeping_line()
        if bookkeeping:
            lines.append(f"bookkeeping (ApplySet parent, not counted in the plan): {bookkeeping}")
        if self.check is not None:
            lines.append(f"policy: {summary_line(self.check.result)}")
            for finding in self.check.result.denials + self.check.result.warnings:
                label = "DENY" if finding.severity == "deny" else "WARN"
                lines.append(f"  {label} {finding.where}  {finding.rule}  {finding.msg}")
            lines.extend(skipped_lines(self.check.result.skipped))
        if self.dry_run is not None and (self.outcome == Outcome.DRY_RUN_FAILED or self.applied is None):
            lines.append(render_dry_run(self.dry_run, show_diff=False).rstrip("\n"))
        if self.applied is not None:
            for stage in self.stages():
                state = f"FAILED: {stage.error}" if stage.error else "ok"
                lines.append(
                    f"stage {stage.label}: {stage.applied} applied, {stage.unchanged} unchanged, "
                    f"{stage.deleted} deleted in {stage.seconds:.2f}s — {state}"
                )
        if self.verified is not None:
            evidence = render_evidence(self.verified).rstrip("\n")
            if evidence:
                lines.append(evidence)
        lines.append(f"outcome: {self.outcome}")
        return "\n".join(lines) + "\n"
