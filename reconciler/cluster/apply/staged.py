"""The staged apply of a Plan (model/stages.py the stages, docs/cluster-edge.md "Stage waits").

`apply_plan` goes stage by stage in plan order: it dry-runs the stage (`dryrun.check_item`, or reuses a
fresh `dry_run` answer whose live object has not moved), applies only what changes, concurrently, and
waits for the stage's readiness (`stagewait.py`) before the next one; deletions follow in reverse stage
order. Server-side apply with our field manager and force makes every step idempotent: a pass cut short
is finished by the next.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reconciler.cluster.apply.changeset import (
    ApplyResult,
    DryRunResult,
    ObjectResult,
    StageResult,
    WorkItem,
    error_text,
    read_live,
    resolve,
    stage_groups,
    terminating,
    version_of,
    work_items,
)
from reconciler.cluster.apply.dryrun import check_item
from reconciler.cluster.apply.stagewait import POLL_MAX, POLL_START, SLICE_GRACE, FailFast, StageWaiter
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.waverollout import WaveControl, clear_wave_taints, run_rollout
from reconciler.errors import DraGitopsError
from reconciler.model import dra
from reconciler.model.dra import DRA_GROUP
from reconciler.model.driver_rollout import RolloutSpec
from reconciler.model.plan import Plan
from reconciler.model.stages import CLASSES, DRIVERS, FOUNDATION, stage_label

_PREREQUISITE_KINDS = frozenset({"Namespace", "CustomResourceDefinition"})

# ---- applying -----------------------------------------------------------------------------------------


def _trusted(item: WorkItem, checked: dict[str, ObjectResult]) -> bool:
    """Reuse an earlier dry-run answer only if it was clean and the live object has not moved since."""
    previous = checked.get(item.result.ref)
    if previous is None or previous.error:
        return False
    if previous.op == "deferred":
        # A namespace-deferred object passed the schema probe and cannot exist yet; a CRD-deferred one
        # was never checked by the server.
        if (previous.deferred_reason or "").startswith("namespace") and item.live is None:
            item.result.op = "create"
            item.result.copy_diff(previous)
            return True
        return False
    if previous.op not in ("unchanged", "create", "update") or previous.live_version != version_of(item.live):
        return False
    item.result.op = previous.op
    item.result.copy_diff(previous)
    item.result.live_version = previous.live_version
    if previous.op == "unchanged":
        item.after = item.live
    return True


def _await_terminated(client: ClusterClient, items: Sequence[WorkItem], deadline: float) -> None:
    """Namespaces still terminating (pruned a moment ago) must be gone before they can be created again."""
    interval = POLL_START
    waiting = [i for i in items if i.change.ref.kind == "Namespace" and terminating(i.live)]
    while waiting and time.monotonic() < deadline:
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 1.6, POLL_MAX)
        for item in waiting:
            assert item.resource is not None
            item.live = client.get(item.resource, None, item.name)
        waiting = [i for i in waiting if terminating(i.live)]
    for item in waiting:
        item.result.error = (
            "still terminating at the stage timeout: it cannot be created again before it is gone"
        )


def _apply_group(
    client: ClusterClient,
    items: Sequence[WorkItem],
    pool: ThreadPoolExecutor,
    checked: dict[str, ObjectResult],
    stage_result: StageResult,
    deadline: float,
) -> bool:
    """Dry-run then apply one stage's creates/updates; False (results filled) when anything failed."""
    for item in items:
        resolve(client, item)
    read_live(client, [i for i in items if i.resource is not None], pool)
    _await_terminated(client, items, deadline)
    to_check: list[WorkItem] = []
    for item in items:
        if item.resource is None:
            item.result.error = item.resolve_error or "kind not served"
        elif not _trusted(item, checked):
            to_check.append(item)
    for future in [pool.submit(check_item, client, item, set(), set()) for item in to_check]:
        future.result()
    rejected = [item for item in items if item.result.error]
    if rejected:
        for item in items:
            item.result.outcome = "failed" if item.result.error else "not-attempted"
        stage_result.error = "dry-run rejected " + "; ".join(
            f"{i.result.ref}: {i.result.error}" for i in rejected[:5]
        )
        return False

    def write(item: WorkItem) -> None:
        try:
            item.after = client.apply(item.body, where=item.result.ref)
            item.result.outcome = "applied"
        except (DraGitopsError, OSError) as exc:
            item.result.error = error_text(exc)
            item.result.outcome = "failed"

    changed = [item for item in items if item.result.op in ("create", "update")]
    for future in [pool.submit(write, item) for item in changed]:
        future.result()
    for item in items:
        if item.result.op == "unchanged":
            item.result.outcome = "unchanged"
    stage_result.applied += sum(1 for item in changed if item.result.outcome == "applied")
    stage_result.unchanged += sum(1 for item in items if item.result.outcome == "unchanged")
    failed = [item for item in changed if item.result.error]
    if failed:
        stage_result.error = "apply failed for " + "; ".join(
            f"{i.result.ref}: {i.result.error}" for i in failed[:5]
        )
        return False
    return True


def _class_warnings(client: ClusterClient, items: Sequence[WorkItem]) -> list[str]:
    """A DeviceClass whose driver publishes no slices applies fine but cannot allocate anything yet."""
    drivers = {
        item.result.ref: dra.class_driver(item.body)
        for item in items
        if item.change.ref.kind == "DeviceClass"
    }
    wanted = {d for d in drivers.values() if d}
    if not wanted:
        return []
    publishing = {dra.slice_driver(s) for s in client.list_kind(DRA_GROUP, "ResourceSlice")}
    return [
        f"{ref}: driver {driver} publishes no ResourceSlices"
        for ref, driver in drivers.items()
        if driver and driver not in publishing
    ]


def _delete_group(
    client: ClusterClient,
    items: Sequence[WorkItem],
    pool: ThreadPoolExecutor,
    deadline: float,
    wait: bool,
    stage_result: StageResult,
) -> None:
    for item in items:
        resolve(client, item)

    def remove(item: WorkItem) -> None:
        if item.resource is None:
            item.result.outcome = "deleted"  # the kind is gone, and with it every object of it
            item.result.warning = "kind no longer served"
            return
        try:
            client.delete(
                item.resource,
                item.namespace if item.resource.namespaced else None,
                item.name,
                propagation="Background",
            )
            item.result.outcome = "deleted"
        except (DraGitopsError, OSError) as exc:
            item.result.error = error_text(exc)
            item.result.outcome = "failed"

    for future in [pool.submit(remove, item) for item in items]:
        future.result()
    failed = [item for item in items if item.result.error]
    if failed:
        stage_result.error = "delete failed for " + "; ".join(
            f"{i.result.ref}: {i.result.error}" for i in failed[:5]
        )
    pending = [item for item in items if item.result.outcome == "deleted" and item.resource is not None]
    interval = POLL_START
    while wait and pending:
        lives = list(pool.map(lambda item: _still_there(client, item), pending))
        still = [(item, live) for item, live in zip(pending, lives, strict=True) if live is not None]
        pending = [item for item, _ in still]
        if not pending:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            # Finalizers may hold an object for as long as their controller likes: report, don't block.
            for item, live in still:
                finalizers = (live.get("metadata") or {}).get("finalizers") or []
                held = f" (finalizers: {', '.join(finalizers)})" if finalizers else ""
                item.result.outcome = "pending-deletion"
                item.result.warning = f"still present after the stage timeout{held}"
                stage_result.warnings.append(f"{item.result.ref}: still present{held}")
            break
        time.sleep(min(interval, remaining))
        interval = min(interval * 1.6, POLL_MAX)
    stage_result.deleted = sum(1 for item in items if item.result.outcome in ("deleted", "pending-deletion"))


def _still_there(client: ClusterClient, item: WorkItem) -> dict[str, Any] | None:
    """The live object a deletion still waits for, or None once it no longer matters.

    A Namespace is waited for only until no claim in it holds a device any more: the devices are what a
    rollback needs back, while the rest of its termination (the namespace controller's own passes) may
    take seconds more and goes on in the background. A later apply that creates the namespace again
    waits for it then.
    """
    assert item.resource is not None
    if item.change.ref.kind == "Namespace":
        live = client.get(item.resource, None, item.name)
        if live is None:
            return None
        claims = client.list_kind(DRA_GROUP, "ResourceClaim", item.name)
        held = [c for c in claims if (c.get("status") or {}).get("allocation")]
        if held:
            return live
        item.result.warning = "terminating in the background (no claim in it holds a device)"
        return None
    return client.get(item.resource, item.namespace if item.resource.namespaced else None, item.name)


def _waved(item: WorkItem) -> RolloutSpec | None:
    """The rollout in waves of a main driver DaemonSet of stage 1 (None: waited for as any other)."""
    if item.change.stage != DRIVERS or item.after is None or item.change.ref.kind != "DaemonSet":
        return None
    try:
        return dra.rollout_of(item.body, item.result.ref)
    except DraGitopsError:
        return None  # an unreadable annotation: the check reported it


def _wait_part(
    client: ClusterClient,
    part: list[WorkItem],
    pool: ThreadPoolExecutor,
    result: StageResult,
    deadline: float,
    fail_fast: FailFast | None,
    slice_grace: float,
    waves: WaveControl | None,
) -> str | None:
    """Wait for one applied part of a stage; main driver DaemonSets with a `rollout` go in waves instead
    (`cluster/waverollout.py`), after the rest of the part is ready. The error, or None."""
    rollouts = [(item, spec) for item in part if (spec := _waved(item)) is not None]
    waved = {id(item) for item, _ in rollouts}
    others = [item for item in part if id(item) not in waved]
    waiter = StageWaiter(client, others, pool, deadline, fail_fast, slice_grace)
    waited = waiter.run(result.stage, [item.change for item in others])
    result.warnings.extend(waiter.warnings)
    if waited is not None:
        return waited
    control = waves or WaveControl()
    settled: list[WorkItem] = []
    for item, spec in rollouts:
        outcome = run_rollout(client, item.after or item.body, spec, control)
        if outcome.warning:
            result.warnings.append(outcome.warning)
        if outcome.diagnosis is not None:
            result.diagnoses.append(outcome.diagnosis)
        if outcome.error:
            item.result.error = outcome.error
            return outcome.error if outcome.error.startswith("fail fast") else f"fail fast: {outcome.error}"
        if outcome.not_needed:
            settled.append(item)
    if settled:  # nothing to replace in waves: judged as any driver DaemonSet
        waiter = StageWaiter(client, settled, pool, deadline, fail_fast, slice_grace)
        waited = waiter.run(result.stage, [item.change for item in settled])
        result.warnings.extend(waiter.warnings)
    if waited is None and control.revert:
        # A rollback to a revision without waves: the drain a failed wave left goes too.
        for item in others:
            if item.change.stage == DRIVERS and item.change.ref.kind == "DaemonSet" and item.namespace:
                clear_wave_taints(client, item.namespace, item.name)
    return waited


def _apply_stage(
    client: ClusterClient,
    group: list[WorkItem],
    pool: ThreadPoolExecutor,
    known: dict[str, ObjectResult],
    result: StageResult,
    deadline: float,
    timeout: float,
    wait: bool,
    fail_fast: FailFast | None,
    slice_grace: float,
    waves: WaveControl | None = None,
) -> None:
    """Apply one stage and wait for it; namespaces and CRDs first, as the rest may live in them."""
    first = [item for item in group if item.change.ref.kind in _PREREQUISITE_KINDS]
    rest = [item for item in group if item.change.ref.kind not in _PREREQUISITE_KINDS]
    parts = [first, rest] if first and rest else [group]
    for index, part in enumerate(parts):
        if not _apply_group(client, part, pool, known, result, deadline):
            for later in parts[index + 1 :]:
                for item in later:
                    item.result.outcome = "not-attempted"
            return
        has_crds = any(item.change.ref.kind == "CustomResourceDefinition" for item in part)
        # Later objects need their namespaces Active and CRDs Established, even without `wait`.
        if wait or result.stage == FOUNDATION or has_crds or index < len(parts) - 1:
            waited = _wait_part(client, part, pool, result, deadline, fail_fast, slice_grace, waves)
            if waited is not None:
                detail = waited if waited.startswith("fail fast") else f"{waited} (timeout {timeout:g}s)"
                result.error = f"stage {result.label}: {detail}"
                for later in parts[index + 1 :]:
                    for item in later:
                        item.result.outcome = "not-attempted"
                return
        if has_crds:
            client.invalidate()  # discovery must see the new kinds from here on
    if wait and result.stage == CLASSES:
        with contextlib.suppress(DraGitopsError, OSError):
            result.warnings.extend(_class_warnings(client, group))


def apply_plan(
    client: ClusterClient,
    plan: Plan,
    *,
    applyset_id: str | None,
    stage_timeout: float = 300.0,
    concurrency: int = 16,
    wait: bool = True,
    on_stage: Callable[[StageResult], None] | None = None,
    fail_fast: FailFast | None = None,
    checked: DryRunResult | None = None,
    slice_grace: float = SLICE_GRACE,
    stage_timeouts: dict[int, float] | None = None,
    waited_by_caller: frozenset[int] = frozenset(),
    waves: WaveControl | None = None,
) -> ApplyResult:
    """Apply the plan stage by stage (canary step 1a before the main drivers), then delete in reverse order.

    `waited_by_caller`: stages whose readiness the caller waits for itself (the workloads stage, which
    verification watches with DRA-aware fail-fast signals), so the apply moves on right after writing.

    `checked`: a `dry_run` answer from just before, reused for objects whose live state has not moved
    since (saves a second dry-run per object). `fail_fast(stage, changes)` is asked on every poll of a
    stage wait and stops the apply with its reason. `stage_timeouts` overrides the timeout per stage.
    `waves`: how the caller follows main driver DaemonSets upgraded in waves (`cluster/waverollout.py`).
    """
    writes_before = client.writes_sent
    items = work_items(plan, applyset_id)
    known = {r.ref: r for r in checked.results} if checked is not None else {}
    stages: list[StageResult] = []
    failed = False
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for (stage, step, direction), group in stage_groups(items):
            label = stage_label(stage, step)
            if failed:
                for item in group:
                    item.result.outcome = "not-attempted"
                continue
            # Asked before each stage's writes too (a pass fenced on its Lease stops here, not after).
            stop = fail_fast(stage, [item.change for item in group]) if fail_fast is not None else None
            if stop:
                for item in group:
                    item.result.outcome = "not-attempted"
                stages.append(StageResult(stage=stage, label=label, error=f"stage {label}: {stop}"))
                failed = True
                continue
            started = time.monotonic()
            timeout = (stage_timeouts or {}).get(stage, stage_timeout)
            deadline = started + timeout
            result = StageResult(
                stage=stage, label=label, direction="delete" if direction == "delete" else "apply"
            )
            if direction == "delete":
                _delete_group(client, group, pool, deadline, wait, result)
            else:
                _apply_stage(
                    client,
                    group,
                    pool,
                    known,
                    result,
                    deadline,
                    timeout,
                    wait and stage not in waited_by_caller,
                    fail_fast,
                    slice_grace,
                    waves,
                )
            if result.error and not result.error.startswith("stage "):
                result.error = f"stage {label}: {result.error}"
            result.seconds = time.monotonic() - started
            failed = result.error is not None
            stages.append(result)
            if on_stage is not None:
                on_stage(result)
    results = [item.result for item in items]
    ok = not failed and not any(r.error for r in results)
    return ApplyResult(ok=ok, stages=stages, results=results, writes=client.writes_sent - writes_before)


__all__ = ["apply_plan"]
