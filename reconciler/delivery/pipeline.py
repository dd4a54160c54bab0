"""One-shot delivery of a revision: check → dry-run → staged apply → verify, with one evidence record.

`dra-gitops apply` calls `deliver()`; the reconcile loop calls it per pass. Nothing here decides how to
print: the result (`delivery/result.py`) renders itself as text or JSON.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconciler.cluster import applyset
from reconciler.cluster.apply import (
    ApplyResult,
    DryRunResult,
    StageResult,
    apply_plan,
    desired_digest,
    dry_run,
    unchanged_since_delivery,
)
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.facts import collect_facts
from reconciler.cluster.verify import verify_workloads
from reconciler.cluster.verify.wait import STOPPED
from reconciler.delivery.check import CheckOptions, CheckRun, run_check
from reconciler.delivery.desired import DesiredState
from reconciler.delivery.recreate import recreate_refused
from reconciler.delivery.result import Delivery
from reconciler.model import dra
from reconciler.model.objects import Manifest, ObjRef
from reconciler.model.plan import Plan, compute_plan
from reconciler.model.repoconfig import allowing_no_nodes, declared_workloads, rollouts_of
from reconciler.model.scope import live_ref
from reconciler.model.stages import WORKLOADS, stage_label
from reconciler.outcome import Outcome
from reconciler.render.capabilities import Capabilities, from_served

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DeliverOptions:
    """How one revision is delivered. The reconcile loop holds one for all its deliveries
    (`loop/passes/reconcile_types.py`'s `ReconcileOptions.delivery`) and sets the last four per delivery."""

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
    # Asked at every poll of verification (an `abort` ends it at once), when given.
    during_verify: Callable[[], str | None] | None = None


def cluster_capabilities_of(client: ClusterClient) -> Capabilities:
    """The `.Capabilities` charts render with for this cluster: its version and what discovery lists."""
    version = client.server_version()
    served = client.served_kinds()
    return from_served(version, served.kinds, f"the cluster, {version}", served.namespaced)


def stale_manifests(
    client: ClusterClient, set_id: str, head: list[Manifest], keep: frozenset[ObjRef] = frozenset()
) -> list[Manifest]:
    """Objects our ApplySet manages that the revision no longer has (deleted from Git)."""
    desired = {m.ref for m in head} | keep
    stale = []
    for body in applyset.prune_candidates(client, set_id, desired):
        stale.append(Manifest(body=body, ref=live_ref(body), path="", line=0))
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
    *,
    hooks: DeliverHooks | None = None,
) -> Delivery:
    """`_deliver` with driver workloads recognized by what the revision (and its base) say of drivers."""
    seen = [*desired.manifests.manifests, *(base.manifests.manifests if base is not None else ())]
    hints = dra.hints_of(
        seen,
        declared_workloads(desired.drivers),
        allowing_no_nodes(desired.drivers),
        rollouts_of(desired.drivers),
    )
    with dra.driver_hints(hints):
        return _deliver(client, desired, check_options, options, progress, base, hooks=hooks)


def _deliver(
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
    before_write = _once(hooks.before_write)
    timings: dict[str, float] = {}
    revision = desired.revision.sha
    head = desired.manifests.manifests
    set_id = applyset.applyset_id(options.target, options.namespace)

    started = time.perf_counter()
    stale = stale_manifests(client, set_id, head, options.keep) if options.prune else []
    # Creates/updates of everything desired (the dry-run tells which are no-ops), deletes of what Git dropped.
    plan = compute_plan(stale, head)
    check = None
    if options.check:
        check = _check(client, desired, base, check_options, progress, pruned=stale)
        timings["check"] = time.perf_counter() - started
        if check.result.denials:
            return Delivery(Outcome.DENIED, revision, plan, check=check, timings=timings)

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
        recreated = recreate_refused(client, plan, dry, options.stage_timeout, before_write, progress)
        if recreated:
            dry = dry_run(client, plan, applyset_id=set_id)
    preexisting = frozenset(
        change.ref
        for change, result in zip(plan.changes, dry.results, strict=True)
        if change.op != "delete" and result.op in ("update", "unchanged")
    )
    progress(f"plan: {dry.summary_line()} (server-side dry-run)")
    delivery = Delivery(
        Outcome.APPLIED if dry.ok else Outcome.DRY_RUN_FAILED,
        revision,
        plan,
        check=check,
        dry_run=dry,
        timings=timings,
        preexisting=preexisting,
        recreated=recreated,
    )
    if not dry.ok:
        return delivery
    before_write()
    _write(client, delivery, head, digest, options, hooks, progress)
    return delivery


def _once(hook: Callable[[], None] | None) -> Callable[[], None]:
    """Calls `hook` the first time it is called, and never again (the first write, wherever it comes)."""
    called = False

    def call() -> None:
        nonlocal called
        if hook is not None and not called:
            called = True
            hook()

    return call


def _check(
    client: ClusterClient,
    desired: DesiredState,
    base: DesiredState | None,
    check_options: CheckOptions,
    progress: Progress,
    *,
    pruned: list[Manifest],
) -> CheckRun:
    """Policies judge the revision with live cluster data, and the change from `base` when there is one;
    without one, what the delivery prunes is judged as deletes."""
    facts = collect_facts(client, progress)
    settings = None
    if base is not None and base.settings is not None and desired.settings is not None:
        settings = (base.settings, desired.settings)
    return run_check(
        desired.manifests,
        base.manifests if base is not None else None,
        # A merged commit was reviewed: a loosened gate setting is a warning here, judged by the base's.
        dataclasses.replace(check_options, reviewed=False),
        revision=desired.revision,
        base_sha=base.revision.sha if base is not None else None,
        repo_params=desired.params,
        cluster=facts,
        drivers=desired.drivers,
        pruned=pruned,
        settings=settings,
    )


class _StagedWrites:
    """Applies parts of a dry-run plan stage by stage, reporting each stage to `progress` and the hooks and
    asking `hooks.cancelled` between stages; the first reason to stop is kept in `cancelled`."""

    def __init__(
        self,
        client: ClusterClient,
        set_id: str,
        dry: DryRunResult,
        options: DeliverOptions,
        hooks: DeliverHooks,
        progress: Progress,
    ) -> None:
        self.client = client
        self.set_id = set_id
        self.dry = dry
        self.options = options
        self.hooks = hooks
        self.progress = progress
        self.cancelled: str | None = None

    def run(self, part: Plan) -> ApplyResult:
        return apply_plan(
            self.client,
            part,
            applyset_id=self.set_id,
            stage_timeout=self.options.stage_timeout,
            checked=self.dry,  # the dry-run's answers stand for objects unchanged since: no second dry-run
            # Verification is the workloads stage's wait: it knows the DRA signals that should end it early.
            waited_by_caller=frozenset({WORKLOADS}) if self.options.verify else frozenset(),
            on_stage=self._on_stage,
            fail_fast=self._stop_for_shutdown,
        )

    def _ask(self) -> str | None:
        reason = self.hooks.cancelled() if self.hooks.cancelled is not None else None
        if reason and self.cancelled is None:
            self.cancelled = reason
        return reason

    def _stop_for_shutdown(self, _stage: int, _changes: Any) -> str | None:
        return self._ask()

    def _on_stage(self, stage: StageResult) -> None:
        self.progress(
            f"stage {stage.label}: {stage.applied} applied, {stage.unchanged} unchanged, {stage.deleted} deleted"
        )
        if self.hooks.after_stage is not None:
            self.hooks.after_stage(stage.label)
        if self.cancelled is None:
            self._ask()


def _write(
    client: ClusterClient,
    delivery: Delivery,
    head: list[Manifest],
    digest: str,
    options: DeliverOptions,
    hooks: DeliverHooks,
    progress: Progress,
) -> None:
    """The writes after a dry-run that passed: ApplySet parent, stages (prune first in a rollback), then
    verification and, once verified, the prune. The outcome lands in `delivery`."""
    assert delivery.dry_run is not None
    set_id = applyset.applyset_id(options.target, options.namespace)
    started = time.perf_counter()
    delivery.bookkeeping = _ensure_parent(client, options, head, progress)
    writes = _StagedWrites(client, set_id, delivery.dry_run, options, hooks, progress)
    applies = Plan(tuple(c for c in delivery.plan.changes if c.op != "delete"))
    deletes = Plan(tuple(c for c in delivery.plan.changes if c.op == "delete"))
    if options.prune_first and not deletes.empty:
        delivery.pruned = writes.run(deletes)
    delivery.pruned_first = options.prune_first
    delivery.applied = writes.run(applies)
    delivery.timings["apply"] = time.perf_counter() - started
    if writes.cancelled:
        delivery.outcome, delivery.cancelled = Outcome.APPLY_FAILED, writes.cancelled
        return
    if not delivery.applied.ok or (delivery.pruned is not None and not delivery.pruned.ok):
        delivery.outcome = Outcome.APPLY_FAILED
        return
    if options.verify and not _verify(
        client, delivery, workloads_of(head), options, progress, hooks.during_verify
    ):
        if delivery.verified is not None and delivery.verified.terminal == STOPPED:
            delivery.cancelled = delivery.verified.message.removeprefix("verification stopped: ")
        return
    if not options.prune_first and not deletes.empty:
        # Only a verified revision prunes: a failed one leaves the old objects for the rollback.
        started = time.perf_counter()
        delivery.pruned = writes.run(deletes)
        delivery.timings["prune"] = time.perf_counter() - started
        if not delivery.pruned.ok:
            delivery.outcome = Outcome.APPLY_FAILED
    if delivery.outcome == Outcome.APPLIED:
        # The next delivery of this very state may skip its dry-run (cluster/apply/noop.py).
        applyset.ensure_parent(client, options.target, options.namespace, delivered=digest)


def _ensure_parent(
    client: ClusterClient, options: DeliverOptions, head: list[Manifest], progress: Progress
) -> dict[str, str]:
    """The ApplySet parent (and its namespace) before the revision's objects; what it wrote, by ref."""
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
    return bookkeeping


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
        Outcome.APPLIED,
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
    stale = [Manifest(body=body, ref=live_ref(body), path="", line=0) for body in extra]
    plan = compute_plan(stale, reapply)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    dry = dry_run(client, plan, applyset_id=set_id)
    timings["dry_run"] = time.perf_counter() - started
    if not dry.ok:
        return Delivery(Outcome.DRY_RUN_FAILED, None, plan, dry_run=dry, timings=timings)
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
    delivery = Delivery(Outcome.APPLIED, None, plan, dry_run=dry, applied=applied, timings=timings)
    if not applied.ok:
        delivery.outcome = Outcome.APPLY_FAILED
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
    stop: Callable[[], str | None] | None = None,
) -> bool:
    """Verify the workloads into `delivery` (evidence, timing, outcome); whether every chain held."""
    started = time.perf_counter()
    progress(f"verify: {len(workloads)} workload(s)")
    delivery.verified = verify_workloads(
        client,
        workloads,
        timeout=options.verify_timeout,
        grace=options.grace,
        poll=0.25,
        progress=progress,
        stop=stop,
    )
    delivery.timings["verify"] = time.perf_counter() - started
    if not delivery.verified.ok:
        delivery.outcome = Outcome.VERIFY_FAILED
    return delivery.verified.ok
