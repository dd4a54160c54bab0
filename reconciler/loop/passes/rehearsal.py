"""The rollback rehearsal (`rehearseRollback: true`): after a commit is verified, the pass rolls back to
the previous last good commit, verifies it, re-applies the commit and verifies it again, so the rollback
a later failure would need is known to work before the commit goes further down a promotion chain.

Each step's outcome, time and verification go into the commit's record (`rehearsal`), and whether it
passed into the target's verified commits, which a downstream with `requireRehearsal` reads. A re-apply
that fails is a failed apply: rolled back to the previous commit like any other.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from reconciler.delivery.desired import DesiredState
from reconciler.delivery.result import Delivery
from reconciler.loop.passes.passbase import short_sha
from reconciler.loop.passes.reconcile_types import Cancelled, PassResult
from reconciler.loop.passes.rollback import RollbackSteps
from reconciler.loop.store.records import HistoryRecord, InProgress
from reconciler.loop.store.state import TargetState, now_iso
from reconciler.outcome import Outcome


class RehearsalSteps(RollbackSteps):
    def rehearse(
        self,
        state: TargetState,
        sha: str,
        desired: DesiredState,
        applied: Delivery,
        record: HistoryRecord,
        violations: dict[tuple[str, str], int],
    ) -> bool | PassResult:
        """Rehearse the rollback of `sha` (just verified) to the last good commit; True when both steps
        verified, False when the rollback did not (the commit stays, re-applied), or the pass's result
        when the re-apply failed (rolled back as a failed apply)."""
        previous = state.last_good
        target = self.options.target
        self.progress(f"{target}: rehearsing the rollback of {short_sha(sha)} to {short_sha(previous)}")
        started = time.perf_counter()
        back = self._deliver_rollback(state, previous, sha, applied)
        steps = [_step("rollback", previous, back, time.perf_counter() - started)]
        if back.cancelled:
            raise Cancelled(
                f"{short_sha(sha)}: the rollback rehearsal stopped between stages: {back.cancelled}"
            )
        started = time.perf_counter()
        marker = InProgress(sha=sha, operation="apply", from_sha=previous)
        again = self._deliver(state, desired, marker, replace(self._deliver_options(), check=False))
        steps.append(_step("re-apply", sha, again, time.perf_counter() - started))
        ok = back.outcome == Outcome.APPLIED and again.outcome == Outcome.APPLIED
        record.rehearsal = {"ok": ok, "steps": steps}
        if again.outcome != Outcome.APPLIED:
            if again.cancelled:
                raise Cancelled(f"{short_sha(sha)}: the re-apply of the rehearsal stopped: {again.cancelled}")
            record.outcome = again.outcome
            record.message = (
                f"rollback rehearsal: re-applying {short_sha(sha)} failed: {steps[-1]['message']}"
            )
            return self._roll_back(state, sha, again, record, violations)
        if ok:
            self.events.emit(
                "RollbackRehearsed",
                f"{short_sha(sha)}: rolled back to {short_sha(previous)}, verified, re-applied and verified",
            )
        else:
            self.events.emit(
                "RollbackRehearsalFailed",
                f"{short_sha(sha)}: the rollback to {short_sha(previous)} failed ({steps[0]['message']}); "
                f"{short_sha(sha)} re-applied and verified",
                warning=True,
            )
        return ok


def _step(name: str, sha: str | None, delivery: Delivery, seconds: float) -> dict[str, Any]:
    """One step of a rehearsal as its record keeps it: what was delivered, how it ended, and the
    verification (claims allocated to their devices) that says so."""
    data = delivery.to_json()
    verified = [e for e in data.get("evidence") or [] if e.get("claim")]
    return {
        "step": name,
        "sha": sha,
        "outcome": str(delivery.outcome),
        "at": now_iso(),
        "seconds": round(seconds, 3),
        "verified": f"{len(verified)} claim(s) allocated" if delivery.outcome == Outcome.APPLIED else "",
        "message": delivery.failure_message()[:300] or "verified",
    }
