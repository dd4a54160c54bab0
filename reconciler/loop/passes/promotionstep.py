"""The promotion gate in a pass of a promoted target (`promoteFrom`): instead of its branch's head, the
target delivers what `promotion.decide` lets through from its upstream's verified commits; a commit that
waits (soak, approval) leaves the target on its last good commit, drift still corrected.

The upstream's verified commits come from an `UpstreamReader`: the upstream target's state (read with the
client of the cluster it lives in), or a ref the upstream publishes to Git (`promoteFrom: {ref: ...}`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from reconciler.errors import DraGitopsError
from reconciler.loop.config.gates import VERIFIED_REF
from reconciler.loop.passes.passbase import short_sha
from reconciler.loop.passes.reconcile_types import PassResult, SourceHead
from reconciler.loop.passes.rollback import RollbackSteps
from reconciler.loop.promotion.decide import (
    WAIT_APPROVAL,
    WAIT_SOAK,
    Decision,
    decide,
    format_time,
    note_verified,
)
from reconciler.loop.promotion.upstream import UpstreamReader
from reconciler.loop.store.records import Approval, HistoryRecord, PromotionView, VerifiedCommit
from reconciler.loop.store.state import TargetState, now_iso
from reconciler.outcome import Outcome

log = logging.getLogger("dra_gitops.reconcile")


class PromotionSteps(RollbackSteps):
    """The gate of a promoted target, and what a target records for those promoting from it."""

    upstream: UpstreamReader | None = None
    # Seconds until a soaking commit becomes eligible: the controller looks again then, not at its poll.
    wake_after: float | None = None
    # The upstream's entry of the commit the gate let through, for the record of its delivery.
    promoted_from: VerifiedCommit | None = None
    _publish_error: str | None = None  # the last failure to publish, reported once

    def promoted_head(self, state: TargetState) -> SourceHead | PassResult:
        """The commit the pass delivers, or the pass's result when nothing is to be delivered now."""
        gates = self.options.gates
        self.wake_after = None
        upstream_name = gates.upstream or gates.upstream_ref or ""
        now = datetime.now(UTC)
        view = PromotionView(upstream=upstream_name)
        previous = state.promotion
        try:
            candidates = self.upstream() if self.upstream is not None else []
        except DraGitopsError as exc:
            view.error = f"cannot read the upstream {upstream_name}: {exc}"
            if previous is not None:
                view.first_seen = previous.first_seen
            self._note_view(state, view)
            return self._stay(state, Outcome.UNCHANGED, view.error)
        first_seen = dict((previous.first_seen or {}) if previous else {})
        if gates.upstream_ref:  # a ref says no time: count from when this target first saw the commit
            first_seen = {c.sha: first_seen.get(c.sha) or now_iso() for c in candidates}
            view.first_seen = first_seen or None
        decision = decide(candidates, gates, state.last_good, state.approval, now, first_seen, state.verified)
        view.eligible = decision.eligible
        view.waiting = decision.waiting
        view.soak_until = format_time(decision.soak_until) if decision.soak_until else None
        view.not_eligible = [{"sha": sha, "why": why} for sha, why in decision.not_eligible] or None
        self.wake_after = decision.seconds_to_soak(now)
        if decision.deliver is not None:
            self.promoted_from = next(c for c in candidates if c.sha == decision.deliver)
            self._note_view(state, view)
            return SourceHead(sha=decision.deliver, ref=f"verified by {upstream_name}")
        if decision.waiting == WAIT_APPROVAL:
            self._await_approval(state, decision, upstream_name)
        elif state.approval is not None and state.approval.sha != decision.eligible:
            state.approval = None  # no longer eligible (the target moved past it, or it was withdrawn)
        self._note_view(state, view)
        if decision.waiting == WAIT_APPROVAL:
            why = f"{short_sha(decision.eligible)} awaits approval: dra-gitops approve --target {self.options.target} {decision.eligible}"
            return self._stay(state, Outcome.AWAITING_APPROVAL, why, decision.eligible)
        if decision.waiting == WAIT_SOAK:
            why = dict(decision.not_eligible).get(decision.soaking or "", "")
            return self._stay(
                state, Outcome.SOAKING, f"{short_sha(decision.soaking)}: {why}", decision.soaking
            )
        return self._stay(state, Outcome.UNCHANGED, "", None)

    def _await_approval(self, state: TargetState, decision: Decision, upstream: str) -> None:
        sha = decision.eligible or ""
        pending = state.approval
        if pending is not None and pending.sha == sha:
            return
        message = f"verified by {upstream}; awaiting approval"
        if pending is not None:
            message += f" (supersedes {short_sha(pending.sha)}, awaiting since {pending.since})"
        state.approval = Approval(sha=sha, since=now_iso())
        state.record(
            HistoryRecord(
                sha=sha, operation="promote", outcome=Outcome.AWAITING_APPROVAL, at=now_iso(), message=message
            )
        )
        self.events.emit("AwaitingApproval", f"{short_sha(sha)} {message}")

    def _note_view(self, state: TargetState, view: PromotionView) -> None:
        """Record what the gate decided, written only when it changed (a steady pass writes nothing)."""
        state.promotion = view
        if state.to_data() != state.seen_data:
            self.store.save_during_pass(state)

    def _stay(self, state: TargetState, outcome: Outcome, why: str, sha: str | None = None) -> PassResult:
        """Nothing to deliver now: the last good commit stays (the pass corrects its drift)."""
        return PassResult(self.options.target, outcome, sha or state.last_good, message=why)

    # ---- what a target records for its downstreams --------------------------------------------------

    def note_promotion(self, state: TargetState, sha: str, record: HistoryRecord) -> None:
        """The record of `sha`'s delivery says what the upstream said of it and who approved it; the
        approval is used up whatever the delivery's outcome."""
        upstream, self.promoted_from = self.promoted_from, None
        if upstream is not None and upstream.sha == sha:
            gates = self.options.gates
            record.promoted = {
                "from": gates.upstream or gates.upstream_ref,
                "verifiedAt": upstream.at or None,
                "rehearsed": upstream.rehearsed,
            }
        approval = state.approval
        if approval is not None and approval.sha == sha:
            if approval.approved_by:
                record.approval = {"by": approval.approved_by, "at": approval.approved_at}
            state.approval = None

    def note_verified(self, state: TargetState, sha: str, at: str, rehearsed: bool | None = None) -> None:
        state.verified = note_verified(state.verified, sha, at, rehearsed=rehearsed)

    def publish_verified(self, state: TargetState) -> dict[str, Any] | None:
        """`publishVerified`: push the newest verified commit as `refs/dra-gitops/<target>/verified`
        (fast-forward only) for controllers on other clusters; again on later passes until it went
        through. A failure is recorded and leaves the pass as it was. A commit whose rollback rehearsal
        failed is not published."""
        newest = state.verified[0] if state.verified else None
        if not self.options.gates.publish_verified or newest is None or newest.published:
            return None
        if newest.sha != state.last_good or newest.withdrawn:
            return None
        if newest.rehearsed is False:  # a ref says nothing of rehearsals: publish only what passed one
            return {
                "ref": VERIFIED_REF.format(target=self.options.target),
                "error": "its rollback rehearsal failed",
            }
        ref = VERIFIED_REF.format(target=self.options.target)
        try:
            self.source.publish(newest.sha, ref)
        except DraGitopsError as exc:
            log.warning("cannot publish %s: %s", ref, exc, extra={"target": self.options.target})
            if self._publish_error != str(exc):  # an Event per new failure, not per poll
                self._publish_error = str(exc)
                self.events.emit("PublishFailed", f"{short_sha(newest.sha)} as {ref}: {exc}", warning=True)
            return {"ref": ref, "error": str(exc)}
        self._publish_error = None
        state.verified[0] = replace(newest, published=ref)
        self.events.emit("Published", f"{short_sha(newest.sha)} published as {ref}")
        return {"ref": ref, "sha": newest.sha}
