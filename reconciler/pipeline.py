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
from reconciler.cluster.apply import (
    ApplyResult,
    DryRunResult,
    StageResult,
    apply_plan,
    desired_digest,
    dry_run,
    render_dry_run,
    unchanged_since_delivery,
)
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.facts import collect_facts
from reconciler.cluster.verify import VerifyResult, render_evidence, verify_workloads
from reconciler.model import dra
from reconciler.model.objects import Manifest, ObjRef, ref_of
from reconciler.model.plan import Plan, compute_plan
from reconciler.model.stages import WORKLOADS, stage_label
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
    # Policies judge the revision (off for a rollback to a revision that was judged when it was applied).
    check: bool = True
    # Members of the set never pruned (objects that existed before a first pass adopted them).
    keep: frozenset[ObjRef] = frozenset()
    # A rollback prunes what the failed revision added before applying (those objects may hold the
    # devices the last good revision needs to verify), and deletes and recreates claims and templates whose
    # immutable spec differs (a forward change of one is refused by the dry-run and the `immutable-claim`
    # rule instead).
    prune_first: bool = False
    recreate_immutable: bool = False


@dataclass
class DeliverHooks:
    """How a caller (the reconcile loop) follows a delivery: state is marked before the first write."""

    before_write: Callable[[], None] | None = None
    after_stage: Callable[[str], None] | None = None
    # Asked between stages: a reason to stop (shutting down), or None to go on.
    cancelled: Callable[[], str | None] | None = None


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
    def exit_code(self) -> int:
        return 0 if self.outcome == "applied" else 1

    @property
    def wrote(self) -> bool:
        """Whether anything reached the cluster (a denied or rejected delivery writes nothing)."""
        return bool(self.recreated) or any(
            r is not None and (r.writes or r.stages) for r in (self.applied, self.pruned)
        )

    def failure_message(self) -> str:
        """The first reason this delivery did not succeed, or ''."""
        if self.outcome == "applied":
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
            "diagnoses": [d.to_json() for d in (self.verified.diagnoses if self.verified else [])],
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
        if self.dry_run is not None and (self.outcome == "dry-run-failed" or self.applied is None):
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


def stale_manifests(
    client: ClusterClient, set_id: str, head: list[Manifest], keep: frozenset[ObjRef] = frozenset()
) -> list[Manifest]:
    """Objects our ApplySet manages that the revision no longer has (deleted from Git)."""
    desired = {m.ref for m in head} | keep
    stale = []
    for body in applyset.prune_candidates(client, set_id, desired):
        stale.append(Manifest(body=body, ref=ref_of(body), path="", line=0))
    return stale


def workloads_of(head: list[Manifest]) -> list[dict[str, Any]]:
    """Every workload of the revision (drivers are waited for in their own stage), changed or not."""
    return [
        m.body for m in head if dra.pod_spec_of(m.body) is not None and not dra.is_driver_workload(m.body)
    ]


IMMUTABLE_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate"})


def _immutable_rejections(dry: DryRunResult, plan: Plan) -> list[Manifest]:
    """Claims and templates the dry-run refused because their spec is immutable (and changed)."""
    by_ref = {str(change.ref): change for change in plan.changes if change.op != "delete"}
    found = []
    for result in dry.results:
        change = by_ref.get(result.ref)
        if (
            change is not None
            and change.ref.kind in IMMUTABLE_KINDS
            and result.error
            and "immutable" in result.error.lower()
        ):
            found.append(change.current)
    return found


def _recreate(
    client: ClusterClient, manifests: list[Manifest], timeout: float, progress: Progress
) -> list[str]:
    """Delete objects whose spec cannot change in place and wait until they are gone.

    A claim goes only when nothing reserves it any more (its delete-protection finalizer), so pods of the
    failed revision that still hold it are deleted too; their controllers recreate them, and they wait,
    Pending, for the claim the apply recreates right after.
    """
    deadline = time.monotonic() + timeout
    gone: list[str] = []
    for manifest in manifests:
        resource = client.resource_for(manifest.api_version, manifest.kind, where=str(manifest.ref))
        namespace = manifest.ref.namespace or None
        progress(f"recreate {manifest.ref}: its spec is immutable and differs")
        live = client.get(resource, namespace, manifest.ref.name)
        client.delete(resource, namespace, manifest.ref.name)
        if manifest.kind == "ResourceClaim" and live is not None:
            pods = client.resource_for("v1", "Pod")
            for holder in (live.get("status") or {}).get("reservedFor") or []:
                if holder.get("resource") == "pods" and holder.get("name"):
                    client.delete(pods, namespace, str(holder["name"]))
        while client.get(resource, namespace, manifest.ref.name) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{manifest.ref}: still present {timeout:.0f}s after its delete")
            time.sleep(0.1)
        gone.append(str(manifest.ref))
    return gone


def deliver(
    client: ClusterClient,
    desired: DesiredState,
    check_options: CheckOptions,
    options: DeliverOptions,
    progress: Progress,
    base: DesiredState | None = None,
    *,
    hooks: DeliverHooks | None = None,
) -> Delivery:
    """Check, dry-run, apply stage by stage, verify, then prune one revision. Stops at the first failure.

    With a `base` (the revision the cluster was delivered from), policies judge the change between the two,
    as `check --repo` does: that is what lets `driver-canary` see a driver update. Objects the revision
    dropped are pruned only once it verified (before applying, with `options.prune_first`).
    `hooks.before_write` runs once, right before the first write.
    """
    hooks = hooks or DeliverHooks()
    timings: dict[str, float] = {}
    revision = desired.revision.sha
    head = desired.manifests.manifests
    set_id = applyset.applyset_id(options.target, options.namespace)
    prune_first = options.prune_first

    started = time.perf_counter()
    stale = stale_manifests(client, set_id, head, options.keep) if options.prune else []
    # Creates/updates of everything desired (the dry-run tells which are no-ops), deletes of what Git dropped.
    plan = compute_plan(stale, head)
    check = None
    if options.check:
        facts = collect_facts(client, progress)
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
    digest = desired_digest(head, set_id)
    unchanged = unchanged_since_delivery(client, plan, options.target, options.namespace, digest)
    if unchanged is not None:
        timings["dry_run"] = time.perf_counter() - started
        progress(f"plan: {unchanged.summary_line()} (as last delivered: live objects compared, no dry-run)")
        return _deliver_unchanged(client, desired, plan, check, unchanged, options, progress, timings)
    progress(f"dry-run of {len(plan.changes)} object(s)")
    dry = dry_run(client, plan, applyset_id=set_id)
    timings["dry_run"] = time.perf_counter() - started
    recreated: list[str] = []
    if not dry.ok and options.recreate_immutable:
        rejected = _immutable_rejections(dry, plan)
        if rejected and len(rejected) == sum(1 for r in dry.results if r.error):
            if hooks.before_write is not None:
                hooks.before_write()
                hooks = DeliverHooks(None, hooks.after_stage, hooks.cancelled)
            recreated = _recreate(client, rejected, options.stage_timeout, progress)
            dry = dry_run(client, plan, applyset_id=set_id)
    preexisting = frozenset(
        change.ref
        for change, result in zip(plan.changes, dry.results, strict=True)
        if change.op != "delete" and result.op in ("update", "unchanged")
    )
    progress(f"plan: {dry.summary_line()} (server-side dry-run)")
    if not dry.ok:
        return Delivery(
            "dry-run-failed",
            revision,
            plan,
            check=check,
            dry_run=dry,
            timings=timings,
            preexisting=preexisting,
            recreated=recreated,
        )

    if hooks.before_write is not None:
        hooks.before_write()
    started = time.perf_counter()
    bookkeeping: dict[str, str] = {}
    applyset.ensure_parent(
        client,
        options.target,
        options.namespace,
        sorted({applyset.group_kind(m.body) for m in head}),
        record=bookkeeping,
    )
    progress(
        f"bookkeeping (ApplySet parent): {', '.join(f'{r} {o}' for r, o in sorted(bookkeeping.items()))}"
    )
    applies = Plan(tuple(c for c in plan.changes if c.op != "delete"))
    deletes = Plan(tuple(c for c in plan.changes if c.op == "delete"))
    first, last = (deletes, applies) if prune_first else (applies, deletes)
    cancelled: list[str] = []

    def stop_for_shutdown(_stage: int, _changes: Any) -> str | None:
        reason = hooks.cancelled() if hooks.cancelled is not None else None
        if reason:
            cancelled.append(reason)
        return reason

    def run(part: Plan) -> ApplyResult:
        return apply_plan(
            client,
            part,
            applyset_id=set_id,
            stage_timeout=options.stage_timeout,
            checked=dry,  # the dry-run's answers stand for objects unchanged since: no second dry-run
            # Verification is the workloads stage's wait: it knows the DRA signals that should end it early.
            waited_by_caller=frozenset({WORKLOADS}) if options.verify else frozenset(),
            on_stage=on_stage,
            fail_fast=stop_for_shutdown,
        )

    def on_stage(stage: StageResult) -> None:
        progress(
            f"stage {stage.label}: {stage.applied} applied, {stage.unchanged} unchanged, {stage.deleted} deleted"
        )
        if hooks.after_stage is not None:
            hooks.after_stage(stage.label)
        if hooks.cancelled is not None and not cancelled:
            reason = hooks.cancelled()
            if reason:
                cancelled.append(reason)

    pruned = run(first) if prune_first and not deletes.empty else None
    applied = run(last if prune_first else first)
    timings["apply"] = time.perf_counter() - started
    delivery = Delivery(
        "applied",
        revision,
        plan,
        check=check,
        dry_run=dry,
        applied=applied,
        timings=timings,
        pruned=pruned,
        pruned_first=prune_first,
        preexisting=preexisting,
        recreated=recreated,
        bookkeeping=bookkeeping,
    )
    if cancelled:
        delivery.outcome, delivery.cancelled = "apply-failed", cancelled[0]
        return delivery
    if not applied.ok or (pruned is not None and not pruned.ok):
        delivery.outcome = "apply-failed"
        return delivery

    if options.verify and not _verify(client, delivery, workloads_of(head), options, progress):
        return delivery
    if not prune_first and not deletes.empty:
        # Only a verified revision prunes: a failed one leaves the old objects for the rollback.
        started = time.perf_counter()
        delivery.pruned = run(deletes)
        timings["prune"] = time.perf_counter() - started
        if not delivery.pruned.ok:
            delivery.outcome = "apply-failed"
    if delivery.outcome == "applied":
        # The next delivery of this very state may skip its dry-run (cluster/apply/noop.py).
        applyset.ensure_parent(client, options.target, options.namespace, delivered=digest)
    return delivery


def _deliver_unchanged(
    client: ClusterClient,
    desired: DesiredState,
    plan: Plan,
    check: CheckRun | None,
    unchanged: DryRunResult,
    options: DeliverOptions,
    progress: Progress,
    timings: dict[str, float],
) -> Delivery:
    """The desired state is the one last delivered and every live object is still as it left them:
    nothing to write; the workloads are verified as after any apply."""
    stages: dict[tuple[int, int], StageResult] = {}
    for change in plan.changes:
        key = (change.stage, change.step)
        if key not in stages:
            stages[key] = StageResult(stage=change.stage, label=stage_label(change.stage, change.step))
        stages[key].unchanged += 1
    applied = ApplyResult(ok=True, stages=list(stages.values()), results=unchanged.results, writes=0)
    delivery = Delivery(
        "applied",
        desired.revision.sha,
        plan,
        check=check,
        dry_run=unchanged,
        applied=applied,
        timings=timings,
        preexisting=frozenset(change.ref for change in plan.changes),
    )
    if options.verify:
        _verify(client, delivery, workloads_of(desired.manifests.manifests), options, progress)
    return delivery


def deliver_drift(
    client: ClusterClient,
    reapply: list[Manifest],
    extra: list[dict[str, Any]],
    options: DeliverOptions,
    progress: Progress,
    *,
    hooks: DeliverHooks | None = None,
) -> Delivery:
    """Put back what drifted from the last good revision: re-apply changed or deleted objects, prune extras.

    Only the drifted objects are dry-run and written, stage by stage, and the workloads among them verified.
    """
    hooks = hooks or DeliverHooks()
    set_id = applyset.applyset_id(options.target, options.namespace)
    stale = [Manifest(body=body, ref=ref_of(body), path="", line=0) for body in extra]
    plan = compute_plan(stale, reapply)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    dry = dry_run(client, plan, applyset_id=set_id)
    timings["dry_run"] = time.perf_counter() - started
    if not dry.ok:
        return Delivery("dry-run-failed", None, plan, dry_run=dry, timings=timings)
    if hooks.before_write is not None:
        hooks.before_write()
    started = time.perf_counter()
    applied = apply_plan(
        client,
        plan,
        applyset_id=set_id,
        stage_timeout=options.stage_timeout,
        checked=dry,
        waited_by_caller=frozenset({WORKLOADS}) if options.verify else frozenset(),
    )
    timings["apply"] = time.perf_counter() - started
    delivery = Delivery("applied", None, plan, dry_run=dry, applied=applied, timings=timings)
    if not applied.ok:
        delivery.outcome = "apply-failed"
        return delivery
    workloads = workloads_of(reapply)
    if options.verify and workloads:
        _verify(client, delivery, workloads, options, progress)
    return delivery


def _verify(
    client: ClusterClient,
    delivery: Delivery,
    workloads: list[dict[str, Any]],
    options: DeliverOptions,
    progress: Progress,
) -> bool:
    """Verify the workloads into `delivery` (evidence, timing, outcome); whether every chain held."""
    started = time.perf_counter()
    progress(f"verify: {len(workloads)} workload(s)")
    delivery.verified = verify_workloads(
        client, workloads, timeout=options.verify_timeout, grace=options.grace, poll=0.25, progress=progress
    )
    delivery.timings["verify"] = time.perf_counter() - started
    if not delivery.verified.ok:
        delivery.outcome = "verify-failed"
    return delivery.verified.ok
