"""What an operator does to a target from a laptop, besides rollback and sync (`loop/passes/handoff.py`):
suspend and resume it, ask its controller for a pass now, list the targets a cluster holds.

Each writes only the target's state ConfigMap (re-read on conflicts) and the request annotation of its
Lease, so the `dra-operator` role in `deploy/operator` is enough; each records who did it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from reconciler.cluster import applyset
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.lease import LeaseLock
from reconciler.errors import UserError
from reconciler.loop.config.targets import RESOURCE_PREFIX
from reconciler.loop.store.records import AbortRequest, HistoryRecord, Suspension
from reconciler.loop.store.state import StateStore, TargetState, now_iso
from reconciler.outcome import Outcome


@dataclass(frozen=True)
class TargetRef:
    name: str
    namespace: str = applyset.DEFAULT_NAMESPACE

    @property
    def lease(self) -> str:
        return RESOURCE_PREFIX + self.name


class UnknownTarget(UserError):
    """No state of that target in the cluster: a verb writes nothing for a target no pass or verb made."""


def load_known(client: ClusterClient, target: TargetRef) -> TargetState:
    """The target's state; UnknownTarget, naming the targets the namespace holds, when it has none."""
    store = StateStore(client, target.name, target.namespace)
    state = store.load()
    if state.resource_version is None:
        known = cluster_targets(client, target.namespace)
        listed = ", ".join(known) if known else "none"
        raise UnknownTarget(
            f"no target {target.name!r}: its state is not in namespace {target.namespace} "
            f"(targets there: {listed}); give one with --target, or the namespace with --state-namespace",
            where=store.ref,
        )
    return state


def suspend(client: ClusterClient, target: TargetRef, by: str, reason: str) -> TargetState:
    """Stop applying and correcting the target until `resume`; a pass running now finishes first."""
    load_known(client, target)

    def change(state: TargetState) -> None:
        if state.suspended is not None:
            raise UserError(
                f"suspended already, since {state.suspended.at} by {state.suspended.by}",
                where=StateStore(client, target.name, target.namespace).ref,
            )
        at = now_iso()
        state.suspended = Suspension(at=at, by=by, reason=reason)
        state.record(_record("suspend", state.last_good, at, by, reason))

    return StateStore(client, target.name, target.namespace).update(change)


def resume(
    client: ClusterClient, target: TargetRef, by: str, lease_client: ClusterClient | None = None
) -> TargetState:
    """Follow Git again; the controller is asked for a pass at once (through the target's Lease, in
    `lease_client`'s cluster when the target's state lives in a cluster of its own)."""
    store = StateStore(client, target.name, target.namespace)
    load_known(client, target)

    def change(state: TargetState) -> None:
        if state.suspended is None:
            raise UserError("not suspended", where=store.ref)
        at = now_iso()
        state.record(_record("resume", state.last_good, at, by, f"suspended since {state.suspended.at}"))
        state.suspended = None

    state = store.update(change)
    request_pass(lease_client or client, target, f"resumed by {by}")
    return state


def abort(
    client: ClusterClient, target: TargetRef, by: str, lease_client: ClusterClient | None = None
) -> str:
    """Ask the running pass to stop at its next stage boundary and roll back what it wrote; the sha of
    the revision it was delivering. A UserError when no pass is running. When the apply's pass ended
    suspended (a rollout in waves paused by `suspend`), the controller is asked for a pass at once: that
    pass rolls it back without `resume` (`lease_client` as for `resume`)."""
    store = StateStore(client, target.name, target.namespace)
    aborted: list[str] = []

    def change(state: TargetState) -> None:
        marker = state.in_progress
        if marker is None or marker.operation != "apply":
            raise UserError("no apply in progress: nothing to abort", where=store.ref)
        state.abort = AbortRequest(at=now_iso(), by=by, sha=marker.sha)
        aborted[:] = [marker.sha or ""]

    state = store.update(change)
    if state.suspended is not None:
        request_pass(lease_client or client, target, f"abort by {by} of a suspended apply")
    return aborted[0]


def request_pass(client: ClusterClient, target: TargetRef, reason: str) -> bool:
    """Ask the replica holding the target's Lease for a pass now (as a webhook does); False when no
    controller holds it (then the next controller to take it runs one anyway)."""
    lock = LeaseLock(client, target.namespace, target.lease, f"dra-gitops-cli-{uuid.uuid4().hex[:8]}")
    return lock.request(reason)


def wait_for_pass(
    client: ClusterClient, target: TargetRef, after: TargetState, timeout: float, poll: float = 0.5
) -> TargetState | None:
    """The state once a pass recorded something new after `after` (a newer history record or attempt),
    None when `timeout` passed first. A pass that found nothing to do records nothing: it is not seen."""
    store = StateStore(client, target.name, target.namespace)
    deadline = time.monotonic() + timeout
    seen = (after.history[0].id if after.history else None, after.last_attempted)
    while time.monotonic() < deadline:
        state = store.load()
        if (state.history[0].id if state.history else None, state.last_attempted) != seen:
            return state
        time.sleep(poll)
    return None


def retry_choice(state: TargetState, sha: str | None, where: str) -> str:
    """The sha `retry` lets the next pass try again: the one given (a full sha or a prefix of one the state
    knows) or else the held or last attempted one; refused when retrying it would do nothing (unknown,
    the last good commit, not failed, or not what the target follows now)."""
    attempted = state.last_attempted
    failed = attempted.sha if attempted is not None and attempted.failed() else None
    # The failed head a pass attempted comes first: a hold a sync or rollback left may be older than it.
    head_failed = failed and any(r.sha == failed and r.operation == "apply" for r in state.history)
    candidates = list(dict.fromkeys(s for s in ((failed if head_failed else None), state.hold, failed) if s))
    if sha is None:
        if not candidates:
            said = "nothing was attempted yet" if attempted is None else "nothing failed or is held"
            raise UserError(f"{said}: nothing to retry", where=where)
        return candidates[0]
    known = {r.sha for r in state.history if r.sha} | set(candidates) | {state.last_good or ""}
    matches = sorted({k for k in known if k and len(sha) >= 7 and k.startswith(sha.lower())})
    if not matches:
        raise UserError(f"{sha} is no commit this target attempted: nothing to retry", where=where)
    if len(matches) > 1:
        raise UserError(f"{sha} names several commits ({', '.join(m[:12] for m in matches)})", where=where)
    full = matches[0]
    if full == state.last_good and full not in candidates:
        raise UserError(f"{full[:12]} is the last good commit: nothing to retry", where=where)
    if full not in candidates:
        latest = ", ".join(c[:12] for c in candidates) or "none"
        raise UserError(
            f"{full[:12]} is not what the target follows now (held or failed: {latest}): a retry "
            "would do nothing; `dra-gitops sync --revision` delivers an older commit",
            where=where,
        )
    return full


def cluster_targets(client: ClusterClient, namespace: str) -> list[str]:
    """The targets whose state lives in `namespace`: ConfigMaps `dra-gitops-<target>` holding a state
    (written by a pass or a verb) or being an ApplySet parent."""
    names = []
    for item in client.list_kind("", "ConfigMap", namespace):
        meta = item.get("metadata") or {}
        name = str(meta.get("name") or "")
        is_state = "lastGood" in (item.get("data") or {}) or applyset.ID_LABEL in (meta.get("labels") or {})
        if name.startswith(RESOURCE_PREFIX) and is_state:
            names.append(name.removeprefix(RESOURCE_PREFIX))
    return sorted(names)


def _record(operation: str, sha: str | None, at: str, by: str, message: str) -> HistoryRecord:
    outcome = Outcome.SUSPENDED if operation == "suspend" else Outcome.RESUMED
    return HistoryRecord(
        sha=sha, operation=operation, outcome=outcome, at=at, requested_by=by, message=message
    )
