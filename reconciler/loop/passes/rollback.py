"""How a pass puts the cluster back: the rollback after a failed apply, and the recovery of a pass that
died half-way (its `inProgress` marker found by the next pass), which converges to one revision before
anything else happens."""

from __future__ import annotations

import logging
from typing import Any

from reconciler.delivery.result import Delivery
from reconciler.errors import DraGitopsError, EnvironmentProblem
from reconciler.loop.passes.passbase import PassBase, short_sha
from reconciler.loop.passes.reconcile_types import PassResult
from reconciler.loop.store.evidence import evidence_record
from reconciler.loop.store.records import AttemptRecord, HistoryRecord, InProgress
from reconciler.loop.store.state import TargetState, now_iso
from reconciler.model.objects import ObjRef
from reconciler.model.wave_progress import DONE, SUSPENDED, paused_rollout, rollouts_from_json
from reconciler.outcome import Outcome

log = logging.getLogger("dra_gitops.reconcile")

# How a person gets a target out of a failed rollback whose target cannot be read.
RECOVER_HINT = "push a fix, or deliver a commit that can be read with `dra-gitops sync --revision SHA`"


class RollbackSteps(PassBase):
    """Rollback and recovery, shared by the pass (`Reconciler`) and requested deliveries."""

    def _roll_back(
        self,
        state: TargetState,
        failed_sha: str,
        failed: Delivery | None,
        failed_record: HistoryRecord,
        violations: dict[tuple[str, str], int],
    ) -> PassResult:
        """Deliver the last good revision after `failed` (None: an apply whose pass ended before, such as
        a rollout in waves paused by `suspend` and then aborted; its record says what it was)."""
        target_sha = state.last_good
        failed_outcome = failed.outcome if failed is not None else failed_record.outcome
        why = failed_record.message or failed_outcome
        self.progress(
            f"{self.options.target}: {short_sha(failed_sha)} {failed_outcome}: rolling back to {short_sha(target_sha)}"
        )
        # The failed apply's record (its diagnosis) is saved before the rollback writes anything: a kill
        # during the rollback must not lose it. The rollback's first state write carries it.
        failed_record.rolled_back_to = target_sha
        unreadable = self._unreadable(target_sha)
        if unreadable is not None:
            return self._cannot_roll_back(state, failed_sha, failed, failed_record, violations, unreadable)
        state.record(failed_record)
        rollback = self._deliver_rollback(state, target_sha, failed_sha, failed)
        rb_record = evidence_record(rollback, target_sha, "rollback")
        rb_record.from_sha = failed_sha
        failed_record.rollback = rollback.outcome
        state.in_progress = None
        state.last_attempted = AttemptRecord(
            sha=failed_sha,
            outcome=failed_outcome,
            at=failed_record.at,
            rolled_back=rollback.outcome == Outcome.APPLIED,
        )
        self.fingerprints.clear()
        if rollback.outcome == Outcome.APPLIED:
            outcome = Outcome.ROLLED_BACK
            self.events.emit(
                "RolledBack",
                f"{short_sha(failed_sha)} {failed_outcome} ({why}); rolled back to {short_sha(target_sha)} and verified",
                warning=True,
            )
            if self.options.git_revert_branch:
                failed_record.revert = self._revert(failed_sha)
        else:
            outcome = Outcome.ROLLBACK_FAILED
            self.events.emit(
                "RollbackFailed",
                f"{short_sha(failed_sha)} {failed_outcome} ({why}); rollback to {short_sha(target_sha)} "
                f"failed: {rb_record.message or rollback.outcome}. The cluster needs a human.",
                warning=True,
            )
        result = PassResult(
            self.options.target,
            outcome,
            failed_sha,
            message=why,
            records=[failed_record, rb_record],
            delivery=failed,
            rollback=rollback,
            violations=violations,
        )
        # Recorded again below, in the order a reader expects: the failed apply above its rollback.
        state.history[:] = [record for record in state.history if record is not failed_record]
        return self._finish(state, result)

    def _unreadable(self, target_sha: str | None) -> str | None:
        """Why the rollback target cannot be read (gone from the remote, no copy kept), or None."""
        if target_sha is None:
            return None
        try:
            self._desired(target_sha)
        except EnvironmentProblem as exc:
            return exc.detail
        return None

    def _cannot_roll_back(
        self,
        state: TargetState,
        failed_sha: str,
        failed: Delivery | None,
        failed_record: HistoryRecord,
        violations: dict[tuple[str, str], int],
        why: str,
    ) -> PassResult:
        """The last good revision cannot be read: nothing to roll back to. The failed commit is held (not
        applied again), the outcome is rollback-failed, and the message says how a person gets out."""
        target_sha = state.last_good
        failed_outcome = failed.outcome if failed is not None else failed_record.outcome
        message = (
            f"{short_sha(failed_sha)} {failed_outcome} ({failed_record.message or failed_outcome}); the rollback "
            f"to {short_sha(target_sha)} is impossible: {why}. {short_sha(failed_sha)} stays on the cluster, "
            f"held; the cluster needs a human: {RECOVER_HINT}"
        )
        self.progress(f"{self.options.target}: {message}")
        failed_record.rollback = Outcome.ROLLBACK_FAILED
        failed_record.message = message
        state.in_progress = None
        state.last_attempted = AttemptRecord(
            sha=failed_sha, outcome=failed_outcome, at=failed_record.at, rolled_back=False
        )
        self.fingerprints.clear()
        self.events.emit("RollbackFailed", message, warning=True)
        result = PassResult(
            self.options.target,
            Outcome.ROLLBACK_FAILED,
            failed_sha,
            message=message,
            records=[failed_record],
            delivery=failed,
            violations=violations,
        )
        return self._finish(state, result)

    def _deliver_rollback(
        self, state: TargetState, target_sha: str | None, failed_sha: str | None, failed: Delivery | None
    ) -> Delivery:
        """Deliver the last good revision (nothing, on a first pass) from whatever the cluster has now."""
        desired = self._desired(target_sha)
        keep: frozenset[ObjRef] = frozenset()
        if target_sha is None and failed is not None:
            # The first pass ever: objects that existed before it are not ours to delete.
            keep = failed.preexisting
        marker = InProgress(sha=target_sha, operation="rollback", from_sha=failed_sha)
        return self._deliver(state, desired, marker, self._deliver_options(rollback=True, keep=keep))

    def _revert(self, sha: str) -> dict[str, Any]:
        branch = self.options.git_revert_branch or ""
        try:
            revert_sha = self.source.revert(sha, branch)
        except DraGitopsError as exc:
            return {"branch": branch, "error": str(exc)}
        self.events.emit(
            "RevertPushed", f"revert of {short_sha(sha)} pushed to {branch} as {short_sha(revert_sha)}"
        )
        return {"branch": branch, "sha": revert_sha}

    def _recover(self, state: TargetState) -> PassResult | None:
        """A pass died half-way (crash, kill -9, lost lease): converge to one revision before anything else."""
        marker = state.in_progress or InProgress()
        sha, operation = marker.sha, marker.operation
        self.progress(
            f"{self.options.target}: found {operation} of {short_sha(sha)} in progress "
            f"(stage {marker.stage or 'none'}): converging"
        )
        record = HistoryRecord(
            sha=sha,
            operation=operation,
            outcome=Outcome.INTERRUPTED,
            at=now_iso(),
            message=f"interrupted after stage {marker.stage}"
            if marker.stage
            else "interrupted before any stage finished",
        )
        self.events.emit(
            "Interrupted", f"{operation} of {short_sha(sha)} was interrupted; converging", warning=True
        )
        if operation == "rollback":
            failed_sha = marker.from_sha
            unreadable = self._unreadable(sha)
            if unreadable is not None:
                return self._recovery_impossible(state, sha, failed_sha, record, unreadable)
            rollback = self._deliver_rollback(state, sha, failed_sha, None)
            rb_record = evidence_record(rollback, sha, "rollback")
            rb_record.from_sha = failed_sha
            state.in_progress = None
            self._rollback_finished(state, sha, failed_sha, rollback)
            outcome = Outcome.ROLLED_BACK if rollback.outcome == Outcome.APPLIED else Outcome.ROLLBACK_FAILED
            result = PassResult(
                self.options.target, outcome, failed_sha, records=[rb_record, record], rollback=rollback
            )
            return self._finish(state, result)
        # An interrupted apply: clear the marker and let this pass deliver the head again (it is not a
        # failure, so it is retried); if that fails, the usual rollback puts back the last good revision.
        # A driver rollout in waves it left goes on at the wave it was in (not from the first).
        # (Each DaemonSet's: a delivery that upgrades two drivers in waves keeps both.)
        rollouts = rollouts_from_json(marker.rollout)
        if rollouts and sha:
            self.resumable = (sha, {progress.key: progress for progress in rollouts})
            rollout = rollouts[-1]  # the one under way when the pass ended
            why = "paused by `suspend`" if rollout.phase == SUSPENDED else record.message
            record.message = f"{why}; the rollout of {rollout.daemonset} resumes: {rollout.line()}" + "".join(
                f"; the rollout of {other.daemonset}: {other.line()}" for other in rollouts[:-1]
            )
            for progress in rollouts:
                if progress.phase != DONE:
                    self.events.emit(
                        "RolloutResumed",
                        f"DaemonSet/{progress.namespace}/{progress.daemonset} ({progress.driver}): "
                        f"{progress.line()}",
                    )
        state.in_progress = None
        if sha:
            state.last_attempted = AttemptRecord(sha=sha, outcome=Outcome.INTERRUPTED, at=record.at)
        state.record(record)
        self.store.save_during_pass(state)
        return None

    def _while_suspended(self, state: TargetState) -> PassResult | None:
        """What a pass of a suspended target still does, else None: take an `abort` of the apply it left
        (`_abort_paused`), and finish the rollback of such an abort that a pass left half-way (killed)."""
        marker, attempted = state.in_progress, state.last_attempted
        if marker is None:
            return None
        aborted_rollback = (
            marker.operation == "rollback"
            and attempted is not None
            and attempted.outcome == Outcome.ABORTED
            and attempted.sha == marker.from_sha
        )
        if state.abort is None and not aborted_rollback:
            return None
        try:  # the revisions a rollback reads come from the cache; a failure is left to the read
            self.source.head(state.last_good)
        except DraGitopsError as exc:
            log.debug("fetch while suspended: %s", exc, extra={"target": self.options.target})
        if state.abort is not None:
            return self._abort_paused(state)
        return self._recover(state)

    def _abort_paused(self, state: TargetState) -> PassResult | None:
        """`abort` of an apply whose pass ended before it finished: a driver rollout in waves paused by
        `suspend` between waves (or a pass that died while the target was suspended). No pass runs that
        could stop at a stage boundary, so this one rolls it back now, without `resume`: the last good
        revision re-applied, the old plugin back on the nodes the rollout touched, its taints removed. The
        target stays suspended. None when there is no such abort to take."""
        marker, request = state.in_progress, state.abort
        if request is None or marker is None or marker.operation != "apply" or not marker.sha:
            return None
        sha = marker.sha
        rollout = paused_rollout(marker.rollout)
        where = (
            f"its upgrade of DaemonSet/{rollout.namespace}/{rollout.daemonset} in waves was paused "
            f"({rollout.line()})"
            if rollout is not None
            else f"its pass had ended after stage {marker.stage or 'none'}"
        )
        suspended = f" by {state.suspended.by}" if state.suspended is not None else ""
        record = HistoryRecord(
            sha=sha,
            operation="apply",
            outcome=Outcome.ABORTED,
            at=now_iso(),
            message=f"aborted by {request.by} while the target was suspended{suspended}: {where}",
            requested_by=request.by,
        )
        state.abort = None
        # The rollback's first state write shows it so: `abort --wait` may read that one.
        state.last_attempted = AttemptRecord(sha=sha, outcome=Outcome.ABORTED, at=record.at)
        self.events.emit("Aborted", f"{short_sha(sha)}: {record.message}", warning=True)
        return self._roll_back(state, sha, None, record, {})

    def _recovery_impossible(
        self,
        state: TargetState,
        target_sha: str | None,
        failed_sha: str | None,
        record: HistoryRecord,
        why: str,
    ) -> PassResult:
        """An interrupted rollback whose target cannot be read any more: held as rollback-failed."""
        message = (
            f"the interrupted rollback of {short_sha(failed_sha)} to {short_sha(target_sha)} cannot be "
            f"finished: {why}; the cluster needs a human: {RECOVER_HINT}"
        )
        record.message = f"{record.message}; {message}"
        state.in_progress = None
        attempted = state.last_attempted
        if attempted is not None and failed_sha and attempted.sha == failed_sha:
            attempted.rolled_back = False
        elif failed_sha:
            state.last_attempted = AttemptRecord(
                sha=failed_sha, outcome=Outcome.ROLLBACK_FAILED, at=record.at, rolled_back=False
            )
        self.events.emit("RollbackFailed", message, warning=True)
        result = PassResult(
            self.options.target, Outcome.ROLLBACK_FAILED, failed_sha, message=message, records=[record]
        )
        return self._finish(state, result)

    def _rollback_finished(
        self, state: TargetState, target_sha: str | None, failed_sha: str | None, rollback: Delivery
    ) -> None:
        """A recovered rollback completes what the dead pass began: the failed apply's record and the last
        attempt say whether it was rolled back, as an uninterrupted rollback leaves them, with its Event."""
        done = rollback.outcome == Outcome.APPLIED
        attempted = state.last_attempted
        if attempted is not None and failed_sha and attempted.sha == failed_sha:
            attempted.rolled_back = done
        for entry in state.history:
            if entry.sha == failed_sha and entry.operation == "apply":
                if entry.rolled_back_to == target_sha and entry.rollback is None:
                    entry.rollback = rollback.outcome
                break
        if done:
            self.events.emit(
                "RolledBack",
                f"{short_sha(failed_sha)}: the interrupted rollback to {short_sha(target_sha)} was finished "
                "and verified",
                warning=True,
            )
        else:
            self.events.emit(
                "RollbackFailed",
                f"{short_sha(failed_sha)}: the interrupted rollback to {short_sha(target_sha)} failed: "
                f"{rollback.outcome}. The cluster needs a human.",
                warning=True,
            )
