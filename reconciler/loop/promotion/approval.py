"""`dra-gitops approve`: a person lets the commit a target awaits approval for go on.

Only the commit the target's controller recorded as awaiting approval (`promotion.WAIT_APPROVAL`) can be
approved; anything else is refused with the reason its last pass recorded. The approval (who, when) is
written to the target's state ConfigMap only, so the `dra-operator` role (deploy/operator) is enough; the
controller's next pass delivers the commit and keeps the approval in its record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from reconciler.cluster.client import ClusterClient
from reconciler.errors import DraGitopsError, UserError
from reconciler.loop.store.operations import TargetRef, request_pass
from reconciler.loop.store.records import Approval, HistoryRecord
from reconciler.loop.store.state import StateStore, TargetState, now_iso
from reconciler.outcome import Outcome


def approve(
    client: ClusterClient,
    target: TargetRef,
    revision: str,
    by: str,
    lease_client: ClusterClient | None = None,
) -> Approval:
    """Record `by`'s approval of `revision` (a sha or a prefix of at least 7 characters of one); the pass
    is asked for on the Lease, in `lease_client`'s cluster when the state lives in a cluster of its own."""
    approval = _record_approval(client, target, revision, by)
    request_pass(lease_client or client, target, f"{approval.sha[:12]} approved by {by}")
    return approval


def approve_then_wake(
    client: ClusterClient, target: TargetRef, revision: str, by: str, lease: Callable[[], ClusterClient]
) -> tuple[Approval, str | None]:
    """`approve`, then ask for a pass on the Lease in `lease()`'s cluster if it can be reached; with the
    approval, why the controller could not be woken (None when it was). The approval stands either way:
    the controller's cluster is needed only to wake it, and it takes the approval at its next poll."""
    approval = _record_approval(client, target, revision, by)
    try:
        woke = request_pass(lease(), target, f"{approval.sha[:12]} approved by {by}")
    except DraGitopsError as exc:
        return approval, str(exc)
    return approval, None if woke else "no controller holds the target's Lease"


def _record_approval(client: ClusterClient, target: TargetRef, revision: str, by: str) -> Approval:
    store = StateStore(client, target.name, target.namespace)
    given: list[Approval] = []

    def change(state: TargetState) -> None:
        pending = _awaiting(state, revision.strip().lower(), store.ref, target.name)
        at = now_iso()
        approval = replace(pending, approved_by=by, approved_at=at)
        state.approval = approval
        message = f"awaiting approval since {pending.since}"
        state.record(
            HistoryRecord(
                sha=pending.sha,
                operation="approve",
                outcome=Outcome.APPROVED,
                at=at,
                requested_by=by,
                message=message,
            )
        )
        given[:] = [approval]

    store.update(change)
    return given[0]


def _awaiting(state: TargetState, revision: str, where: str, name: str) -> Approval:
    """The approval `revision` names, or a UserError saying why it cannot be approved."""
    if state.resource_version is None:
        raise UserError(f"unknown target {name!r}: it has no state (never reconciled here)", where=where)
    view = state.promotion
    if view is None:
        raise UserError(f"target {name!r} does not promote from an upstream: nothing to approve", where=where)
    if len(revision) < 7 or any(c not in "0123456789abcdef" for c in revision):
        raise UserError(f"{revision!r} is not a commit sha (give at least 7 hex digits)", where=where)
    pending = state.approval
    if pending is not None and pending.sha.startswith(revision):
        if pending.approved_by:
            raise UserError(
                f"{pending.sha[:12]} was approved already, by {pending.approved_by} at {pending.approved_at}",
                where=where,
            )
        return pending
    if state.last_good and state.last_good.startswith(revision):
        raise UserError(
            f"{state.last_good[:12]} is the last good commit already: nothing to approve", where=where
        )
    for entry in view.not_eligible or []:
        if str(entry.get("sha", "")).startswith(revision):
            raise UserError(f"{revision[:12]} is not eligible: {entry.get('why')}", where=where)
    if pending is not None:
        raise UserError(
            f"{revision[:12]} is not eligible: {pending.sha[:12]} awaits approval (the newest commit "
            f"{view.upstream} verified supersedes an earlier one)",
            where=where,
        )
    raise UserError(
        f"{revision[:12]} is not eligible: no commit awaits approval (not a commit {view.upstream} verified "
        "newer than the last good one)",
        where=where,
    )
