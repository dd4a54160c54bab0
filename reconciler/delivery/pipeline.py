"""One-shot delivery of a revision: check → dry-run → staged apply → verify, with one evidence record.

`dra-gitops apply` calls `deliver()`; the reconcile loop calls it per pass. Nothing here decides how to
print: the result (`delivery/result.py`) renders itself as text or JSON.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
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
from reconciler.delivery.check import CheckOptions, CheckRun, run_check
from reconciler.delivery.desired import DesiredState
from reconciler.delivery.options import DeliverHooks, DeliverOptions
from reconciler.delivery.recreate import recreate_refused
from reconciler.delivery.result import Delivery
from reconciler.delivery.writes import verify_delivery, workloads_of, write_delivery
from reconciler.model import dra
from reconciler.model.objects import Manifest, ObjRef
from reconciler.model.plan import Plan, compute_plan
from reconciler.model.repoconfig import allowing_no_nodes, declared_workloads, rollouts_of
from reconciler.model.scope import live_ref
from reconciler.model.stages import WORKLOADS, stage_label
from reconciler.model.wave_progress import with_wave_strategy
from reconciler.outcome import Outcome
from reconciler.render.capabilities import Capabilities, from_served

Progress = Callable[[str], None]


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
    with dra.driver_hints(_hints(desired, base)):
        return _deliver(client, desired, check_options, options, progress, base, hooks=hooks)


def _hints(desired: DesiredState, base: DesiredState | None = None) -> dra.DriverHints:
    seen = [*desired.manifests.manifests, *(base.manifests.manifests if base is not None else ())]
    return dra.hints_of(
        seen,
        declared_workloads(desired.drivers),
        allowing_no_nodes(desired.drivers),
        rollouts_of(desired.drivers),
    )


def delivered_manifests(desired: DesiredState) -> list[Manifest]:
    """The revision's objects as a delivery writes them: a main driver DaemonSet with a `rollout` gets
    `updateStrategy: OnDelete` (dra-gitops owns that field; `model/wave_progress.py`)."""
    with dra.driver_hints(_hints(desired)):
        return with_wave_strategy(desired.manifests.manifests)


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
    # Policies judge the revision as written; the cluster gets the strategy waves need (OnDelete).
    head = with_wave_strategy(desired.manifests.manifests)
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
    write_delivery(client, delivery, head, digest, options, hooks, progress)
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
        verify_delivery(client, delivery, workloads_of(desired.manifests.manifests), options, progress)
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
        verify_delivery(client, delivery, workloads, options, progress)
    return delivery


__all__ = [
    "DeliverHooks",
    "DeliverOptions",
    "cluster_capabilities_of",
    "deliver",
    "deliver_drift",
    "delivered_manifests",
    "stale_manifests",
    "workloads_of",
]
