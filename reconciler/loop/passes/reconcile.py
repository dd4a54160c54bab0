"""One reconcile pass of one target: source → check → dry-run → staged apply → verify → prune → record.

On a failure after anything was written, the pass rolls back: it delivers the last good revision (or, on
the very first pass, nothing) the same staged way and verifies it. Every pass that decides something ends
with one evidence record in the state store and a Kubernetes Event. A pass on the last good sha only
compares live objects with it (one LIST per kind) and re-applies what drifted.

The pass never prints: it reports through `progress` and returns a `PassResult`.
"""

from __future__ import annotations

import logging
import time

from reconciler.cluster import applyset
from reconciler.cluster.apply import scan_drift
from reconciler.cluster.client import Forbidden
from reconciler.delivery.pipeline import deliver_drift, delivered_manifests
from reconciler.errors import DraGitopsError, EnvironmentProblem, UserError
from reconciler.loop.passes.passbase import Progress, short_sha
from reconciler.loop.passes.promotionstep import PromotionSteps
from reconciler.loop.passes.reconcile_types import Cancelled, PassResult, SourceHead
from reconciler.loop.passes.rehearsal import RehearsalSteps
from reconciler.loop.passes.requested import run_pending
from reconciler.loop.passes.rollback import RECOVER_HINT
from reconciler.loop.passes.sourcehealth import observe_fetch
from reconciler.loop.store.evidence import count_violations, drift_text, evidence_record
from reconciler.loop.store.records import AttemptRecord, HistoryRecord, InProgress
from reconciler.loop.store.state import RECORD_ITEMS, TargetState, now_iso
from reconciler.model.wave_progress import SUSPENDED, paused_rollout
from reconciler.outcome import Outcome

__all__ = ["Progress", "Reconciler"]

log = logging.getLogger("dra_gitops.reconcile")


class Reconciler(PromotionSteps, RehearsalSteps):
    """Reconciles one target; one instance per target, called by one thread at a time."""

    # ---- the pass ---------------------------------------------------------------------------------

    def reconcile(self) -> PassResult:
        started = time.perf_counter()
        result = self._reconcile()
        result.seconds = time.perf_counter() - started
        log.info("pass %s", result.outcome, extra={"target": self.options.target, "sha": result.sha or ""})
        return result

    def _reconcile(self) -> PassResult:
        state = self.store.load()
        self.check_cluster(state)  # before anything is written: the cluster must be the one recorded
        if state.abort is not None and state.in_progress is None:
            # It arrived after the pass it meant had ended: nothing left to stop.
            log.info(
                "abort by %s came after its pass ended", state.abort.by, extra={"target": self.options.target}
            )
            state.abort = None
            self.store.save_during_pass(state)
        if state.suspended is not None:  # `dra-gitops suspend`: nothing applied, nothing corrected
            taken = self._while_suspended(state)  # ... but an `abort` is taken, its rollback finished
            if taken is not None:
                return taken
            s = state.suspended
            why = f"suspended since {s.at} by {s.by}" + (f": {s.reason}" if s.reason else "")
            return PassResult(self.options.target, Outcome.SUSPENDED, state.last_good, message=why)
        # Fetch first, every pass: recovery and requests read revisions from the cache, which is empty
        # after a restart or a takeover (a temporary directory by default). A revision the fetch did not
        # bring (a last good commit off the branch) is fetched by id when it is read.
        attempted = state.last_attempted
        try:
            head: SourceHead | None = self.source.head(
                (attempted.sha if attempted else None) or state.last_good
            )
            fetch_error = ""
        except DraGitopsError as exc:
            head, fetch_error = None, str(exc)
        self._note_source(state, fetch_error or None)
        if state.in_progress:
            recovered = self._recover(state)
            if recovered is not None:
                return recovered
        requested = run_pending(self, state)  # a `rollback` or `sync` handed to the controller
        if requested is not None:
            return requested
        if head is None:
            return self._offline(state, fetch_error)
        if self.options.gates.promoted:  # only what the upstream verified, through the gates
            gated = self.promoted_head(state)
            if isinstance(gated, PassResult):
                return self._waiting(state, gated)
            head = gated
        sha = head.sha
        if sha == state.last_good and state.retry != sha:
            published = self.publish_verified(state)  # a push that failed before goes again
            if published is not None and "sha" in published:
                self.store.save_during_pass(state)
            return self._steady(state, sha)
        if state.failed(sha):
            return self._held(state, sha)
        self.on_deliver(sha)
        verified, why = self.source.verify(sha)
        if not verified:
            return self._refuse(state, sha, Outcome.UNVERIFIED, why, "SignatureRefused")
        try:
            return self._apply(state, sha, head)
        except Cancelled as exc:
            return PassResult(self.options.target, Outcome.INTERRUPTED, sha, message=str(exc))

    def _offline(self, state: TargetState, fetch_error: str) -> PassResult:
        """Git cannot be reached: the last good revision (its copy kept beside the state, or in memory) is
        still what the cluster must look like, so drift is corrected from it; the pass says both."""
        result = PassResult(self.options.target, Outcome.SOURCE_ERROR, None, message=fetch_error)
        if not state.last_good:
            return result
        try:
            steady = self._steady(state, state.last_good, offline=True)
        except EnvironmentProblem as exc:  # no copy kept either: nothing to compare with
            log.debug(
                "no drift check while Git is unreachable: %s", exc, extra={"target": self.options.target}
            )
            return result
        result.drift, result.records, result.delivery = steady.drift, steady.records, steady.delivery
        if steady.outcome == Outcome.DRIFT_CORRECTED:
            result.message = (
                f"{fetch_error}; drift corrected from the last good commit {short_sha(state.last_good)} "
                "kept beside the state"
            )
        elif steady.message:
            result.message = f"{fetch_error}; {steady.message}"
        return result

    def _held(self, state: TargetState, sha: str) -> PassResult:
        """The head failed before (or a rollback or sync holds the target): the last good commit stays, drift
        corrected; when the last good commit cannot be read, the held commit stays and a human is needed."""
        attempted = state.last_attempted
        if attempted is not None and attempted.sha == sha:
            why = f"{short_sha(sha)} failed before ({attempted.outcome})"
        else:
            why = f"{short_sha(sha)} is held (a rollback or sync put the target on {short_sha(state.last_good)})"
        result = PassResult(
            self.options.target,
            Outcome.HELD,
            sha,
            message=f"{why}; waiting for a new commit or `dra-gitops retry`",
        )
        if not state.last_good:
            return result
        unreadable = self._unreadable(state.last_good)
        if unreadable is not None:
            result.message = (
                f"{why}; the last good commit {short_sha(state.last_good)} cannot be read ({unreadable}): "
                f"the cluster needs a human: {RECOVER_HINT}"
            )
            return result
        held = self._steady(state, state.last_good)
        result.drift = held.drift
        if held.outcome == Outcome.DRIFT_CORRECTED:
            result.outcome = Outcome.DRIFT_CORRECTED
        return result

    def _waiting(self, state: TargetState, result: PassResult) -> PassResult:
        """A promoted target with nothing to deliver now stays on its last good commit, drift corrected."""
        if state.last_good is None:
            return result
        steady = self._steady(state, state.last_good)
        result.drift, result.records, result.delivery = steady.drift, steady.records, steady.delivery
        if steady.outcome != Outcome.UNCHANGED and result.outcome == Outcome.UNCHANGED:
            result.outcome, result.message = steady.outcome, steady.message
        return result

    def _note_source(self, state: TargetState, error: str | None) -> None:
        """Record the source's health when it changed, with an Event when it turned bad or recovered."""
        health, reason = observe_fetch(state.source, error, now_iso())
        if health is None:
            return
        state.source = health
        try:
            self.store.save_during_pass(state)
        except DraGitopsError as exc:  # the pass goes on; the next one records it
            log.warning("cannot record the source's health: %s", exc, extra={"target": self.options.target})
        if reason == "SourceFailed":
            self.events.emit(reason, f"cannot fetch the source: {error}", warning=True)
        elif reason is not None:
            self.events.emit(reason, "the source can be fetched again")

    def _refuse(self, state: TargetState, sha: str, outcome: Outcome, why: str, reason: str) -> PassResult:
        """Record `sha` as attempted and failed before anything was written, raise an Event, and hold it
        (not read again until a new commit or `retry`; the steady pass corrects drift meanwhile)."""
        record = HistoryRecord(sha=sha, operation="apply", outcome=outcome, at=now_iso(), message=why)
        state.last_attempted = AttemptRecord(sha=sha, outcome=outcome, at=record.at)
        state.retry = None
        self.events.emit(reason, f"{short_sha(sha)}: {why}", warning=True)
        return self._finish(
            state, PassResult(self.options.target, outcome, sha, message=why, records=[record])
        )

    def _apply(self, state: TargetState, sha: str, head: SourceHead) -> PassResult:
        target = self.options.target
        try:
            desired = self._desired(sha)
        except UserError as exc:  # a manifest that does not parse, a file over the size limit, ...
            return self._refuse(state, sha, Outcome.INVALID, str(exc), "InvalidRevision")
        try:
            base = self._desired(state.last_good) if state.last_good else None
        except EnvironmentProblem as exc:
            # The last good commit is gone (a force-push) and no copy of it was kept: a new head must
            # still be deliverable, judged against the live cluster alone.
            self.progress(f"{target}: last good {short_sha(state.last_good)} cannot be read: {exc.detail}")
            base = None
        self.progress(f"{target}: delivering {short_sha(sha)} (last good {short_sha(state.last_good)})")
        marker = InProgress(sha=sha, operation="apply", from_sha=state.last_good)
        try:
            delivery = self._deliver(state, desired, marker, self._deliver_options(), base)
        except (UserError, Forbidden) as exc:
            if state.in_progress is not None:
                raise  # something was written: the next pass converges from the marker
            # Refused before the first write (an object the API server forbids us, one it rejects).
            return self._refuse(state, sha, Outcome.DRY_RUN_FAILED, str(exc), "DryRunFailed")
        record = evidence_record(delivery, sha, "apply")
        self.note_promotion(state, sha, record)
        if head.forced:
            record.force_push = {"previous": head.previous}
        state.retry = None
        violations = count_violations(delivery)
        if delivery.outcome == Outcome.APPLIED:
            rehearsed: bool | None = None
            if self.options.gates.rehearse_rollback:
                done = self.rehearse(state, sha, desired, delivery, record, violations)
                if isinstance(done, PassResult):  # the re-apply failed: rolled back
                    return done
                rehearsed = done
            self.note_verified(state, sha, now_iso() if rehearsed is not None else record.at, rehearsed)
            state.last_good = sha
            record.published = self.publish_verified(state)
            self.keep_last_good(sha)
            state.last_attempted = AttemptRecord(sha=sha, outcome=Outcome.APPLIED, at=record.at)
            state.inventory = sorted(f"{m.api_version} {m.ref}" for m in desired.manifests.manifests)
            state.in_progress = None
            self.fingerprints.clear()
            self.events.emit("Applied", f"{short_sha(sha)} applied and verified: {record.summary}")
            result = PassResult(
                target, Outcome.APPLIED, sha, records=[record], delivery=delivery, violations=violations
            )
            return self._finish(state, result)
        state.last_attempted = AttemptRecord(sha=sha, outcome=delivery.outcome, at=record.at)
        if not delivery.wrote:
            # Denied or rejected before any write: the cluster was not touched; nothing to roll back.
            state.in_progress = None
            reason = "PolicyDenied" if delivery.outcome == Outcome.DENIED else "DryRunFailed"
            self.events.emit(reason, f"{short_sha(sha)}: {record.message or delivery.outcome}", warning=True)
            result = PassResult(
                target,
                delivery.outcome,
                sha,
                message=record.message or "",
                records=[record],
                delivery=delivery,
                violations=violations,
            )
            return self._finish(state, result)
        if delivery.cancelled and state.abort is None:
            paused = self._rollout_paused(state)
            if paused is not None:  # `suspend` between waves: the progress stays, `resume` goes on
                return PassResult(target, Outcome.SUSPENDED, sha, message=f"{short_sha(sha)}: {paused}")
            raise Cancelled(f"{short_sha(sha)}: stopped between stages: {delivery.cancelled}")
        if state.abort is not None:  # asked for: what it wrote is rolled back, the commit held
            record.requested_by, state.abort = state.abort.by, None
            record.outcome = delivery.outcome = Outcome.ABORTED
            during = "during verification" if delivery.verified is not None else "at a stage boundary"
            record.message = f"{delivery.cancelled} {during}"
            # The rollback's first state write shows it so: `abort --wait` may read that one.
            state.last_attempted = AttemptRecord(sha=sha, outcome=Outcome.ABORTED, at=record.at)
        return self._roll_back(state, sha, delivery, record, violations)

    @staticmethod
    def _rollout_paused(state: TargetState) -> str | None:
        """What a driver rollout in waves paused by `suspend` says of itself, or None."""
        marker = state.in_progress
        rollout = paused_rollout(marker.rollout) if marker is not None else None
        if state.suspended is None or rollout is None or rollout.phase != SUSPENDED:
            return None
        return (
            f"the upgrade of DaemonSet/{rollout.namespace}/{rollout.daemonset} in waves is paused "
            f"({rollout.line()}) by {state.suspended.by}; `dra-gitops resume` goes on with the next wave"
        )

    def _steady(self, state: TargetState, sha: str | None, offline: bool = False) -> PassResult:
        """The last good revision is the head: compare live objects, correct drift, write nothing else.
        `offline`: Git cannot be reached; the revision is read from its kept copy (the Event says so)."""
        desired = self._desired(sha)
        if not offline:
            self.keep_last_good(sha)  # a state written before copies were kept, or a copy lost
        manifests = delivered_manifests(desired)  # as delivered: a driver upgraded in waves is OnDelete
        kinds = {applyset.group_kind(m.body) for m in manifests}
        report = scan_drift(self.client, manifests, self.set_id, self.fingerprints, kinds)
        result = PassResult(self.options.target, Outcome.UNCHANGED, sha, drift=report)
        if not report.drifted:
            return result
        refs = report.refs()
        self.progress(f"{self.options.target}: drift on {short_sha(sha)}: {refs}")
        if not self.options.self_heal:
            result.outcome, result.message = Outcome.DRIFTED, f"{drift_text(refs)}; selfHeal is off"
            if refs != self._drift_reported:  # an Event per new drift, not per poll
                self._drift_reported = refs
                self.events.emit(
                    "DriftDetected", f"{short_sha(sha)}: {drift_text(refs)} (selfHeal off)", warning=True
                )
            return result
        marker = InProgress(sha=sha, operation="drift", from_sha=sha)
        # prune off: objects Git no longer has are reported, never deleted.
        extra = report.extra if self.options.delivery.prune else []
        if not (report.missing or report.changed or extra):
            result.message = f"{drift_text(refs)}; prune is off"
            return result
        corrected = deliver_drift(
            self.client,
            report.missing + report.changed,
            extra,
            self._deliver_options(),
            self.progress,
            hooks=self.hooks_for(state, marker),
        )
        record = evidence_record(corrected, sha, "drift")
        record.drift = {key: value[:RECORD_ITEMS] for key, value in refs.items()}
        state.in_progress = None
        result.records = [record]
        result.delivery = corrected
        if corrected.outcome == Outcome.APPLIED:
            result.outcome = Outcome.DRIFT_CORRECTED
            where = "from the copy kept beside the state (Git unreachable)" if offline else "as in Git"
            self.events.emit("DriftCorrected", f"{short_sha(sha)}: {drift_text(refs)} put back {where}")
        else:
            result.outcome = corrected.outcome
            result.message = record.message or ""
            self.events.emit(
                "DriftCorrectionFailed",
                f"{short_sha(sha)}: {drift_text(refs)}: {result.message}",
                warning=True,
            )
        return self._finish(state, result)
