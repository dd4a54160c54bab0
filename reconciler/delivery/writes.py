"""The writes of a delivery after its dry-run passed: the ApplySet parent, the stages (prune first in a
rollback), verification and, once verified, the prune."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from reconciler.cluster import applyset
from reconciler.cluster.apply import ApplyResult, DryRunResult, StageResult, apply_plan
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.verify import verify_workloads
from reconciler.cluster.verify.wait import STOPPED
from reconciler.delivery.options import DeliverHooks, DeliverOptions
from reconciler.delivery.result import Delivery
from reconciler.model import dra
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan
from reconciler.model.stages import WORKLOADS
from reconciler.outcome import Outcome

Progress = Callable[[str], None]


def workloads_of(head: list[Manifest]) -> list[dict[str, Any]]:
    """Every workload of the revision (drivers are waited for in their own stage), changed or not."""
    return [
        m.body for m in head if dra.pod_spec_of(m.body) is not None and not dra.is_driver_workload(m.body)
    ]


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
            waves=self.hooks.waves,
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
        waves = self.hooks.waves
        if self.cancelled is None and waves is not None and waves.paused:
            self.cancelled = waves.paused  # a rollout in waves paused (suspend): its progress is kept
        if self.cancelled is None:
            self._ask()


def write_delivery(
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
    if options.verify and not verify_delivery(
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


def verify_delivery(
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


__all__ = ["verify_delivery", "workloads_of", "write_delivery"]
