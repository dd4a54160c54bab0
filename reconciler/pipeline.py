"""One-shot delivery of a revision: check → dry-run → staged apply → verify, with one evidence record.

`dra-gitops apply` calls `deliver()`; the reconcile loop will call it per pass. Nothing here decides how
to print: the result renders itself as text or JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.check import CheckOptions, CheckRun, DesiredState, run_check
from reconciler.cluster import applyset
from reconciler.cluster.apply import ApplyResult, DryRunResult, apply_plan, dry_run, render_dry_run
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.facts import collect_facts
from reconciler.cluster.verify import VerifyResult, render_evidence, verify_workloads
from reconciler.model import dra
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.plan import Plan, compute_plan
from reconciler.model.stages import WORKLOADS
from reconciler.policy.report import finding_dict, skipped_dicts, skipped_lines, summary_line

Progress = Callable[[str], None]


@dataclass
class DeliverOptions:
    target: str = applyset.DEFAULT_TARGET
    namespace: str = applyset.DEFAULT_NAMESPACE
    stage_timeout: float = 300.0
    verify_timeout: float = 300.0
    grace: float = 60.0
    prune: bool = True
    verify: bool = True


@dataclass
class Delivery:
    """The evidence record of one delivery attempt."""

    outcome: str  # applied | denied | dry-run-failed | apply-failed | verify-failed
    revision: str | None
    plan: Plan
    check: CheckRun | None = None
    dry_run: DryRunResult | None = None
    applied: ApplyResult | None = None
    verified: VerifyResult | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 0 if self.outcome == "applied" else 1

    def to_json(self) -> dict[str, Any]:
        check = self.check.result if self.check else None
        return {
            "outcome": self.outcome,
            "revision": self.revision,
            "plan": self.plan.summary(),
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
                for s in (self.applied.stages if self.applied else [])
            ],
            "writes": self.applied.writes if self.applied else 0,
            "evidence": [e.to_json() for e in (self.verified.evidence if self.verified else [])],
            "diagnoses": [d.to_json() for d in (self.verified.diagnoses if self.verified else [])],
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }

    def render_json(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    def render_text(self) -> str:
        lines = [f"revision: {self.revision or '(working tree)'}"]
        if self.dry_run is not None:
            counts = self.dry_run.counts()
            lines.append(
                f"plan: {counts['create'] + counts['deferred']} to create, {counts['update']} to update, {counts['delete']} to delete, "
                f"{counts['unchanged']} unchanged (server-side dry-run)"
            )
        else:
            lines.append(f"plan: {self.plan.summary()}")
        if self.check is not None:
            lines.append(f"policy: {summary_line(self.check.result)}")
            for finding in self.check.result.denials + self.check.result.warnings:
                label = "DENY" if finding.severity == "deny" else "WARN"
                lines.append(f"  {label} {finding.where}  {finding.rule}  {finding.msg}")
            lines.extend(skipped_lines(self.check.result.skipped))
        if self.dry_run is not None and (self.outcome == "dry-run-failed" or self.applied is None):
            lines.append(render_dry_run(self.dry_run, show_diff=False).rstrip("\n"))
        if self.applied is not None:
            for stage in self.applied.stages:
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


def stale_manifests(client: ClusterClient, set_id: str, head: list[Manifest]) -> list[Manifest]:
    """Objects our ApplySet manages that the revision no longer has (deleted from Git)."""
    desired = {m.ref for m in head}
    stale = []
    for body in applyset.prune_candidates(client, set_id, desired):
        stale.append(Manifest(body=body, ref=ref_of(body), path="", line=0))
    return stale


def workloads_of(head: list[Manifest]) -> list[dict[str, Any]]:
    """Every workload of the revision (drivers are waited for in their own stage), changed or not."""
    return [
        m.body for m in head if dra.pod_spec_of(m.body) is not None and not dra.is_driver_workload(m.body)
    ]


def deliver(
    client: ClusterClient,
    desired: DesiredState,
    check_options: CheckOptions,
    options: DeliverOptions,
    progress: Progress,
    base: DesiredState | None = None,
) -> Delivery:
    """Check, dry-run, apply stage by stage and verify one revision. Stops at the first failing step.

    With a `base` (the revision the cluster was delivered from), policies judge the change between the two,
    as `check --repo` does: that is what lets `driver-canary` see a driver update.
    """
    timings: dict[str, float] = {}
    revision = desired.revision.sha
    head = desired.manifests.manifests
    set_id = applyset.applyset_id(options.target, options.namespace)

    started = time.perf_counter()
    facts = collect_facts(client, progress)
    stale = stale_manifests(client, set_id, head) if options.prune else []
    # Creates/updates of everything desired (the dry-run tells which are no-ops), deletes of what Git dropped.
    plan = compute_plan(stale, head)
    # Policies judge the revision with live cluster data, and the change from `base` when there is one.
    check = run_check(
        desired.manifests,
        base.manifests if base is not None else None,
        check_options,
        revision=desired.revision,
        base_sha=base.revision.sha if base is not None else None,
        repo_params=desired.params,
        cluster=facts,
    )
    timings["check"] = time.perf_counter() - started
    if check.result.denials:
        return Delivery("denied", revision, plan, check=check, timings=timings)

    started = time.perf_counter()
    progress(f"dry-run: {plan.summary()}")
    dry = dry_run(client, plan, applyset_id=set_id)
    timings["dry_run"] = time.perf_counter() - started
    if not dry.ok:
        return Delivery("dry-run-failed", revision, plan, check=check, dry_run=dry, timings=timings)

    started = time.perf_counter()
    applyset.ensure_parent(
        client, options.target, options.namespace, sorted({applyset.group_kind(m.body) for m in head})
    )
    applied = apply_plan(
        client,
        plan,
        applyset_id=set_id,
        stage_timeout=options.stage_timeout,
        checked=dry,  # the dry-run's answers stand for objects unchanged since: no second dry-run
        # Verification is the workloads stage's wait: it knows the DRA signals that should end it early.
        waited_by_caller=frozenset({WORKLOADS}) if options.verify else frozenset(),
        on_stage=lambda stage: progress(
            f"stage {stage.label}: {stage.applied} applied, {stage.unchanged} unchanged"
        ),
    )
    timings["apply"] = time.perf_counter() - started
    if not applied.ok:
        return Delivery(
            "apply-failed", revision, plan, check=check, dry_run=dry, applied=applied, timings=timings
        )

    verified = None
    if options.verify:
        started = time.perf_counter()
        workloads = workloads_of(head)
        progress(f"verify: {len(workloads)} workload(s)")
        verified = verify_workloads(
            client,
            workloads,
            timeout=options.verify_timeout,
            grace=options.grace,
            poll=0.25,
            progress=progress,
        )
        timings["verify"] = time.perf_counter() - started
    outcome = "verify-failed" if verified is not None and not verified.ok else "applied"
    return Delivery(
        outcome, revision, plan, check=check, dry_run=dry, applied=applied, verified=verified, timings=timings
    )
