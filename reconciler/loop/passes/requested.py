"""Deliveries a person asks for: `rollback` to a revision of the history, `sync --revision` of any commit.

Both go through every check a pass makes: the signature, the policies judged against the last good revision
with live cluster data, the server-side dry-run, the staged apply and verification; a failure after a write
puts the last good revision back the staged way, as a pass does. A rollback goes only to a revision the
history shows applied and verified (or the last good one); anything else, and a policy denial, needs
`force`, and the record says what it overrode. Every record names who asked (`requestedBy`).

Afterwards the target holds the revision as `rollback` always did: the followed head of that moment is not
delivered until a newer commit arrives or `retry` is run (Argo CD pauses auto-sync the same way).

Two ways in. From a laptop with the deployer's rights, `hold_lease` takes the target's Lease for the whole
delivery, so no pass of a controller runs meanwhile. Through the controller (the operator's rights: the
state and the Lease), the command writes a `request` into the state and stamps the Lease; the replica
holding the Lease runs it at the top of its next pass (`run_pending`), and the records carry the request's
id so the command can report the outcome. A delivery of either kind cut short is marked in progress as
`sync` or `rollback-request`; a later pass converges it like an interrupted apply.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace

from reconciler.cluster.client import ClusterClient, Conflict
from reconciler.cluster.leasemanager import LeaseManager
from reconciler.delivery.desired import DesiredState, empty_state
from reconciler.delivery.pipeline import DeliverOptions, deliver
from reconciler.delivery.result import Delivery
from reconciler.errors import DraGitopsError, EnvironmentProblem, UserError
from reconciler.loop.passes.passbase import PassBase
from reconciler.loop.passes.reconcile_types import PassResult
from reconciler.loop.promotion.decide import note_verified, withdraw
from reconciler.loop.store.evidence import count_violations, evidence_record
from reconciler.loop.store.records import AttemptRecord, HistoryRecord, InProgress, RevisionRequest
from reconciler.loop.store.state import StateConflict, TargetState, now_iso
from reconciler.outcome import Outcome

_HISTORY_ID = re.compile(r"\d{1,6}")  # shorter than any sha we accept: a sha prefix needs 7 characters
_SHA = re.compile(r"[0-9a-f]{7,40}")
_DELIVERED = ("apply", "rollback", "sync")


class RequestRefused(UserError):
    """The request was refused before anything was written (not in the history, denied, unknown)."""


def _short(sha: str | None) -> str:
    return (sha or "(none)")[:12]


def new_request(verb: str, revision: str, force: bool, by: str, yes_bad: bool = False) -> RevisionRequest:
    return RevisionRequest(
        verb=verb,
        revision=revision,
        force=force,
        by=by,
        at=now_iso(),
        id=uuid.uuid4().hex[:12],
        yes_bad=yes_bad,
    )


def known_bad(state: TargetState, sha: str) -> str | None:
    """Why `sha` is a known-bad commit (its newest delivery record failed on the cluster: its apply or
    its verification), or None. A policy denial is no such failure: `--force` goes past it, recorded."""
    for record in state.history:
        if record.sha == sha and record.operation in ("apply", "sync"):
            if record.outcome not in (Outcome.VERIFY_FAILED, Outcome.APPLY_FAILED):
                return None
            return (
                f"{_short(sha)}'s last record ({record.id}: {record.operation} {record.outcome}) is a failure"
            )
    return None


def refused(state: TargetState, verb: str, sha: str, force: bool, yes_bad: bool, where: str) -> list[str]:
    """What `force` overrides (recorded), or RequestRefused: without `force` anything `refusal` names,
    and even with it a known-bad commit without `yes_bad`."""
    why = refusal(state, verb, sha)
    if not why:
        return []
    if not force:
        raise RequestRefused(f"{why}; `--force` delivers it anyway, recorded", where=where)
    bad = known_bad(state, sha)
    if bad and not yes_bad:
        raise RequestRefused(f"{bad}: `--force --yes-bad` delivers a known-bad commit, recorded", where=where)
    return [why]


def applied_and_verified(state: TargetState) -> set[str]:
    """The revisions this target delivered and verified: the last good one and those the history shows."""
    shas = {
        r.sha for r in state.history if r.sha and r.operation in _DELIVERED and r.outcome == Outcome.APPLIED
    }
    return shas | ({state.last_good} if state.last_good else set())


def resolve(state: TargetState, revision: str, where: str) -> str:
    """The full sha `revision` names: a history id, a sha, or a prefix of a sha the state knows."""
    text = revision.strip().lower()
    if _HISTORY_ID.fullmatch(text):
        for record in state.history:
            if record.id == int(text):
                if not record.sha:
                    raise RequestRefused(f"history record {text} delivered no revision", where=where)
                return record.sha
        ids = ", ".join(str(r.id) for r in state.history if r.id is not None) or "none"
        raise RequestRefused(f"no history record {text} (ids: {ids}; see `dra-gitops status`)", where=where)
    if not _SHA.fullmatch(text):
        raise RequestRefused(f"{revision!r} is neither a sha nor a history id", where=where)
    known = {r.sha for r in state.history if r.sha} | {s for s in (state.last_good, state.hold) if s}
    matches = sorted(s for s in known if s.startswith(text))
    if len(matches) > 1:
        raise RequestRefused(f"{revision} is ambiguous: {', '.join(matches)}", where=where)
    if matches:
        return matches[0]
    if len(text) == 40:
        return text
    raise RequestRefused(
        f"{revision} is no revision of the history: give the full 40-character sha", where=where
    )


def refusal(state: TargetState, verb: str, sha: str) -> str | None:
    """Why `verb` may not go to `sha` without force (None: it may)."""
    if verb == "rollback" and sha not in applied_and_verified(state):
        last = next((r for r in state.history if r.sha == sha), None)
        if last is None:
            return f"{_short(sha)} was never applied and verified here (not in the history)"
        return (
            f"{_short(sha)} was never applied and verified here (its last record, {last.id}: "
            f"{last.operation} {last.outcome})"
        )
    return None


@contextlib.contextmanager
def hold_lease(
    client: ClusterClient, namespace: str, name: str, identity: str, wait: float, duration: float = 15.0
) -> Iterator[LeaseManager]:
    """Hold the target's Lease (renewed in the background) for a delivery from here; refuse, naming the
    holder, when a controller keeps it for longer than `wait` seconds."""
    namespaces = client.resource_for("v1", "Namespace")
    if client.get(namespaces, None, namespace) is None:  # a first delivery from here: as the controller does
        with contextlib.suppress(Conflict):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            client.create(namespaces, body)
    leases = LeaseManager(
        client,
        {name: (namespace, name)},
        identity,
        duration=duration,
        renew_deadline=duration * 2 / 3,
        retry_period=max(0.2, duration / 7),
    )
    leases.start()
    try:
        deadline = time.monotonic() + wait
        while not leases.held(name):
            if time.monotonic() >= deadline:
                lock = leases.locks[name]
                if lock.error is not None and not lock.observed_holder:
                    # Nobody holds it: it cannot be read or written (its namespace missing, no rights).
                    raise EnvironmentProblem(
                        f"cannot take the target's Lease: {lock.error}", where=lock.where
                    )
                holder = lock.observed_holder or "someone"
                raise RequestRefused(
                    f"the target's Lease is held by {holder}: a controller is reconciling it. Hand the "
                    "request to it (`--via controller`, the default when one runs) or stop it first",
                    where=leases.locks[name].where,
                )
            time.sleep(leases.retry_period / 2)
        yield leases
    finally:
        leases.stop(release=True)


class RequestedDelivery:
    """Runs one `rollback` or `sync` for the reconciler of its target (its client, source, store, events)."""

    def __init__(self, reconciler: PassBase) -> None:
        self.r = reconciler

    def _desired(self, sha: str | None) -> DesiredState:
        return empty_state() if sha is None else self.r.source.desired(sha)

    def _deliver(
        self,
        state: TargetState,
        desired: DesiredState,
        marker: InProgress,
        options: DeliverOptions,
        base: DesiredState | None = None,
    ) -> Delivery:
        hooks = self.r.hooks_for(state, marker)  # the pass's: operator writes kept, abort honoured
        check = self.r.check_options
        if options.recreate_immutable:
            # This delivery deletes and recreates claims whose immutable spec differs: immutable-claim
            # warns instead of denying (policies/README.md, `recreate_immutable`).
            check = replace(check, params={**check.params, "recreate_immutable": True})
        return deliver(self.r.client, desired, check, options, self.r.progress, base, hooks=hooks)

    def run(self, request: RevisionRequest, head: str | None) -> PassResult:
        """Deliver what `request` names; `head` is the followed head now (held afterwards)."""
        state = self.r.store.load()
        where = self.r.store.ref
        sha = resolve(state, request.revision, where)
        forced = refused(state, request.verb, sha, request.force, request.yes_bad, where)
        verified, signature = self.r.source.verify(sha)
        if not verified:  # no --force past a signature: that check is the repository's, not ours
            raise RequestRefused(f"{_short(sha)}: {signature}", where=where)
        rollback = request.verb == "rollback"
        delivery_options = replace(
            self.r.options.delivery, check=True, prune_first=rollback, recreate_immutable=rollback
        )
        operation = "rollback" if rollback else "sync"
        marker = InProgress(
            sha=sha, operation=f"{operation}-request" if rollback else "sync", from_sha=state.last_good
        )
        desired = self._desired(sha)
        base = self._desired(state.last_good) if state.last_good else None
        self.r.progress(f"{self.r.options.target}: {operation} to {_short(sha)} requested by {request.by}")
        delivery = self._deliver(state, desired, marker, delivery_options, base)
        decisions = None
        if delivery.outcome == Outcome.DENIED and request.force:
            denied = evidence_record(delivery, sha, operation)
            forced.append(f"policy denied: {denied.message}")
            decisions = denied.decisions
            delivery = self._deliver(state, desired, marker, replace(delivery_options, check=False), base)
        record = self._record(evidence_record(delivery, sha, operation), request, state.last_good, forced)
        if decisions is not None:
            record.decisions = decisions
        return self._conclude(state, request, sha, head, desired, delivery, record)

    def _record(
        self, record: HistoryRecord, request: RevisionRequest, from_sha: str | None, forced: list[str]
    ) -> HistoryRecord:
        record.from_sha = from_sha
        record.requested_by = request.by
        record.request = request.id or None
        record.forced = forced or None
        return record

    def _conclude(
        self,
        state: TargetState,
        request: RevisionRequest,
        sha: str,
        head: str | None,
        desired: DesiredState,
        delivery: Delivery,
        record: HistoryRecord,
    ) -> PassResult:
        target, events = self.r.options.target, self.r.events
        result = PassResult(target, delivery.outcome, sha, message=record.message or "", records=[record])
        result.delivery, result.violations = delivery, count_violations(delivery)
        verb = request.verb
        if delivery.outcome == Outcome.APPLIED:
            held = head if head and head != sha else None
            if self.r.options.gates.promoted:  # its gate holds it: it never takes a commit it had again
                held = None
            if verb == "rollback":  # what a person rolled back goes no further down a promotion chain
                why = f"rolled back to {_short(sha)} by {request.by}"
                state.verified = withdraw(state.verified, state.last_good, why)
            state.verified = note_verified(state.verified, sha, record.at)
            state.last_good, state.hold, state.in_progress = sha, held, None
            self.r.keep_last_good(sha)
            state.last_attempted = AttemptRecord(sha=sha, outcome=Outcome.APPLIED, at=record.at)
            state.inventory = sorted(f"{m.api_version} {m.ref}" for m in desired.manifests.manifests)
            reason = "RolledBack" if verb == "rollback" else "Synced"
            forced = " with --force" if record.forced else ""
            events.emit(
                reason,
                f"{verb} to {_short(sha)}{forced} requested by {request.by}, applied and verified; "
                f"holding {_short(held)}",
                warning=bool(record.forced),
            )
            result.outcome = Outcome.ROLLED_BACK if verb == "rollback" else Outcome.APPLIED
            return self._finish(state, result)
        if delivery.cancelled:
            result.outcome = Outcome.INTERRUPTED  # the marker stays: the next pass converges it
            self.r.progress(f"{target}: {verb} to {_short(sha)} stopped between stages: {delivery.cancelled}")
            state.record(record)
            with contextlib.suppress(StateConflict):
                self.r.store.save(state)
            return result
        if not delivery.wrote:
            state.in_progress = None
            events.emit("RequestRefused", f"{verb} to {_short(sha)}: {record.message}", warning=True)
            return self._finish(state, result)
        return self._put_back(state, request, sha, head, result)

    def _put_back(
        self, state: TargetState, request: RevisionRequest, sha: str, head: str | None, result: PassResult
    ) -> PassResult:
        """The requested revision failed after writing: deliver the last good one again, as a pass does."""
        good = state.last_good
        self.r.progress(
            f"{self.r.options.target}: {_short(sha)} {result.outcome}: putting back {_short(good)}"
        )
        options = replace(self.r.options.delivery, check=False, prune_first=True, recreate_immutable=True)
        marker = InProgress(sha=good, operation="rollback", from_sha=sha)
        back = self._deliver(state, self._desired(good), marker, options)
        back_record = self._record(evidence_record(back, good, "rollback"), request, sha, [])
        result.records[0].rolled_back_to, result.records[0].rollback = good, back.outcome
        result.records.append(back_record)
        result.rollback = back
        if head and head != good and state.failed(head):
            state.hold = head  # the failed head stays held although the last attempt is this one now
        state.in_progress = None
        state.last_attempted = AttemptRecord(
            sha=sha,
            outcome=result.outcome,
            at=result.records[0].at,
            rolled_back=back.outcome == Outcome.APPLIED,
        )
        if back.outcome != Outcome.APPLIED:
            result.outcome = Outcome.ROLLBACK_FAILED
            message = f"{request.verb} to {_short(sha)} failed and putting back {_short(good)} failed too"
            self.r.events.emit("RollbackFailed", f"{message}: the cluster needs a human", warning=True)
        else:
            message = f"{request.verb} to {_short(sha)} failed ({result.message}); {_short(good)} put back"
            self.r.events.emit("RolledBack", message, warning=True)
        return self._finish(state, result)

    def _finish(self, state: TargetState, result: PassResult) -> PassResult:
        for record in reversed(result.records):
            state.record(record)
        self.r.store.save(state)
        return result


def run_pending(reconciler: PassBase, state: TargetState) -> PassResult | None:
    """The pass's first duty after recovery: a `request` waiting in the state is taken up (cleared, so
    it runs once) and run; a refusal is recorded under its id for the command waiting on it."""
    request = state.request
    if request is None:
        return None
    state.request = None
    reconciler.store.save(state)  # a conflict: someone wrote meanwhile, the next pass reads it again
    target = reconciler.options.target
    try:
        attempted = state.last_attempted
        head = reconciler.source.head((attempted.sha if attempted else None) or state.last_good).sha
        return RequestedDelivery(reconciler).run(request, head)
    except DraGitopsError as exc:
        record = HistoryRecord(
            sha=None,
            operation=request.verb,
            outcome=Outcome.DENIED,
            at=now_iso(),
            message=f"refused: {exc}",
            requested_by=request.by,
            request=request.id or None,
        )
        fresh = reconciler.store.load()
        fresh.record(record)
        reconciler.store.save(fresh)
        reconciler.events.emit("RequestRefused", f"{request.verb} {request.revision}: {exc}", warning=True)
        return PassResult(target, Outcome.DENIED, None, message=str(exc), records=[record])


def answer_of(state: TargetState, request_id: str) -> list[HistoryRecord]:
    """The records the controller wrote for request `request_id` (oldest first); empty while it waits."""
    return [r for r in reversed(state.history) if r.request == request_id]
