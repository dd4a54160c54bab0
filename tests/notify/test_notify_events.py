"""Which outcome reports what: every outcome of a pass is either an event with its commit status, or
deliberately silent."""

from __future__ import annotations

import pytest

from reconciler.notify.events import Event, Report, StatusState, describe, event_of, one_line, status_state
from reconciler.outcome import Outcome

SILENT = {
    Outcome.UNCHANGED,
    Outcome.HELD,
    Outcome.INTERRUPTED,
    Outcome.SOURCE_ERROR,
    Outcome.SUSPENDED,
    Outcome.RESUMED,
    Outcome.DRIFTED,
    # A downstream waiting out its soak says nothing each pass; an approval is a record of the verb, and
    # the pass it asks for reports the delivery (started, then applied or failed).
    Outcome.SOAKING,
    Outcome.APPROVED,
}


@pytest.mark.parametrize("outcome", list(Outcome), ids=str)
def test_every_outcome_is_an_event_or_silent(outcome: Outcome) -> None:
    event = event_of(outcome)
    assert (event is None) == (outcome in SILENT)
    if outcome.exit_code and event is not None:  # a failed commit is a failure on the forge
        assert status_state(event) == StatusState.FAILURE
    if outcome == Outcome.APPLIED:
        assert status_state(Event.APPLIED) == StatusState.SUCCESS


def test_awaiting_approval_is_pending_and_drift_sets_no_status() -> None:
    assert event_of("awaiting-approval") == Event.AWAITING_APPROVAL
    assert status_state(Event.AWAITING_APPROVAL) == StatusState.PENDING
    assert status_state(Event.STARTED) == StatusState.RUNNING
    assert status_state(Event.DRIFT_CORRECTED) is None


def test_descriptions_are_one_short_line() -> None:
    report = Report(
        "prod", "a" * 40, Event.ROLLBACK_FAILED, "rollback-failed", "claim\n  not\tallocated", "verify-failed"
    )
    assert (
        describe(report) == "verify-failed, rollback failed: the cluster needs a human: claim not allocated"
    )
    failed = Report("prod", "a" * 40, Event.FAILED, "dry-run-failed", "dry-run-failed")
    assert describe(failed) == "dry-run-failed"  # the message repeats the outcome: said once
    assert one_line("x" * 200, 10) == "x" * 9 + "…"
