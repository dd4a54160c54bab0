"""The command's side of `rollback` and `sync` (`loop/passes/requested.py` runs them): which way to go, and each way.

* Through the controller (the Argo CD way, the default while a controller holds the target's Lease): the
  request goes into the target's state, the Lease is stamped so the holder starts a pass now, and the
  command waits for the records that answer it. The operator needs rights on the state and the Lease
  only (deploy/operator); the controller, which has the apply rights, does the work and records it.
* From here (`--via local`, the default when no controller holds the Lease: push mode, `run --once` jobs):
  the command takes the target's Lease for the whole delivery, so no pass runs meanwhile, and delivers
  with the caller's own rights (the deployer's) and Git access.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.lease import LEASE_API_VERSION, REQUEST_ANNOTATION, LeaseLock, LeaseRecord
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.errors import EnvironmentProblem
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import PassResult, ReconcileOptions
from reconciler.loop.passes.requested import (
    RequestedDelivery,
    RequestRefused,
    answer_of,
    applied_and_verified,
    hold_lease,
    new_request,
    refused,
    resolve,
)
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.loop.store.operations import TargetRef, load_known
from reconciler.loop.store.records import HistoryRecord, RevisionRequest
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.outcome import Outcome

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Ask:
    """What the person asked for, and for which target."""

    verb: str  # rollback | sync
    revision: str | None  # None: rollback to the good revision before the last good one
    force: bool
    by: str
    target: str
    namespace: str
    lease: str  # the target's Lease name
    yes_bad: bool = False  # with force: onto a commit whose last record is a failure


def controller_holds(client: ClusterClient, ask: Ask) -> str:
    """The holder of the target's Lease ("" when there is none or it was released)."""
    resource = client.resource_for(LEASE_API_VERSION, "Lease")
    lease = client.get(resource, ask.namespace, ask.lease)
    return LeaseRecord.of(lease).holder if lease else ""


def previous_good(state: TargetState, where: str) -> str:
    """`rollback` with no revision: the newest revision applied and verified before the last good one."""
    applied = applied_and_verified(state)
    for record in state.history:
        if record.sha and record.sha in applied and record.sha != state.last_good:
            return record.sha
    raise RequestRefused("no earlier good revision in the history: name one (sha or history id)", where=where)


def _chosen(state: TargetState, ask: Ask, where: str) -> str:
    sha = resolve(state, ask.revision, where) if ask.revision else previous_good(state, where)
    refused(state, ask.verb, sha, ask.force, ask.yes_bad, where)
    return sha


def hand_to_controller(
    client: ClusterClient,
    ask: Ask,
    timeout: float,
    progress: Progress,
    lease_client: ClusterClient | None = None,
) -> tuple[RevisionRequest, list[HistoryRecord]]:
    """Queue the request in the state, wake the holder, wait up to `timeout` seconds for its records
    (none when `timeout` is 0). The history check is made here first, so a refusal is immediate.
    `lease_client`: the controller's cluster, when the target's state lives in a cluster of its own."""
    leases = lease_client or client
    store = StateStore(client, ask.target, ask.namespace)
    sha = _chosen(load_known(client, TargetRef(ask.target, ask.namespace)), ask, store.ref)
    request = new_request(ask.verb, sha, ask.force, ask.by, ask.yes_bad)

    def put(state: TargetState) -> None:
        waiting = state.request
        if waiting is not None:
            raise RequestRefused(
                f"a {waiting.verb} to {waiting.revision[:12]} by {waiting.by} ({waiting.at}) is waiting for "
                "the controller already",
                where=store.ref,
            )
        state.request = request

    store.update(put)
    lock = LeaseLock(leases, ask.namespace, ask.lease, f"dra-gitops-{ask.verb}-{uuid.uuid4().hex[:8]}")
    woke = lock.request(f"{ask.verb} {sha[:12]} requested by {ask.by}")
    if not woke and controller_holds(leases, ask):
        # The Lease is there but would not take the stamp (its warning above says why, e.g. Forbidden):
        # take the request back rather than leave it for whenever the holder polls next.
        store.update(lambda state: setattr(state, "request", None) if state.request == request else None)
        raise EnvironmentProblem(
            f"cannot wake the controller: the Lease's {REQUEST_ANNOTATION} annotation could not be "
            "written (the operator role allows get and update on leases); nothing was requested",
            where=lock.where,
        )
    progress(
        f"{ask.target}: {ask.verb} to {sha[:12]} handed to the controller"
        + ("" if woke else " (no Lease to stamp: it runs when a controller takes the target)")
    )
    deadline = time.monotonic() + timeout
    while timeout > 0:
        records = answer_of(store.load(), request.id)
        if records:
            return request, records
        if time.monotonic() >= deadline:
            raise EnvironmentProblem(
                f"the controller did not take up the {ask.verb} within {timeout:g}s; it stays queued "
                f"(request {request.id}) until a controller holding the Lease does: `dra-gitops status`",
                where=f"Lease/{ask.namespace}/{ask.lease}",
            )
        time.sleep(0.5)
    return request, []


def deliver_here(
    client: ClusterClient,
    ask: Ask,
    revisions: GitRevisions,
    delivery: DeliverOptions,
    check: CheckOptions,
    lease_wait: float,
    progress: Progress,
    lease_client: ClusterClient | None = None,
) -> PassResult:
    """Take the target's Lease (in `lease_client`'s cluster when given: the controller's, for a target
    with a cluster of its own) and deliver from here with the caller's rights (`--via local`)."""
    identity = f"dra-gitops-{ask.verb}-{uuid.uuid4().hex[:8]}"
    # The source first: a remote that cannot be reached is said as such, before any wait for the Lease.
    known = StateStore(client, ask.target, ask.namespace).load()
    revisions.head((known.last_attempted.sha if known.last_attempted else None) or known.last_good)
    with hold_lease(lease_client or client, ask.namespace, ask.lease, identity, lease_wait) as leases:

        def lost() -> str | None:
            return None if leases.held(ask.lease) else "the command lost the target's Lease"

        reconciler = Reconciler(
            client, revisions, ReconcileOptions(delivery), check, progress=progress, should_stop=lost
        )
        state = reconciler.store.load()
        attempted = state.last_attempted
        head = revisions.head((attempted.sha if attempted else None) or state.last_good).sha
        sha = _chosen(state, ask, reconciler.store.ref)
        return RequestedDelivery(reconciler).run(
            new_request(ask.verb, sha, ask.force, ask.by, ask.yes_bad), head
        )


def outcome_of(records: list[HistoryRecord], verb: str) -> Outcome:
    """How a request the controller ran ended, from its records (the command's exit code): a delivery
    that failed after writing ends as it failed (the last good put back) or rollback-failed."""
    put_back = next((r for r in records if r.rollback is not None), None)
    if put_back is not None:
        if put_back.rollback != Outcome.APPLIED:
            return Outcome.ROLLBACK_FAILED
        failed = put_back.outcome
        return failed if isinstance(failed, Outcome) else Outcome.APPLY_FAILED
    first = records[0]
    if first.outcome == Outcome.APPLIED:
        return Outcome.ROLLED_BACK if verb == "rollback" else Outcome.APPLIED
    if len(records) > 1 and records[-1].outcome != Outcome.APPLIED:
        return Outcome.ROLLBACK_FAILED
    outcome = first.outcome
    return outcome if isinstance(outcome, Outcome) else Outcome.DENIED
