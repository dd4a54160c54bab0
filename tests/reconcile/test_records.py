"""The typed state records (`reconciler/loop/store/records.py`) and their JSON at the edge (`loop/store/state.py`):
records built here write the keys the reconciler always wrote, records read write back what was read."""

from __future__ import annotations

import json
from typing import Any

from reconciler.loop.store.records import AttemptRecord, HistoryRecord, InProgress
from reconciler.loop.store.state import HISTORY_LIMIT, TargetState
from reconciler.outcome import Outcome

GOOD = "a" * 40
BAD = "b" * 40


def failed_apply() -> HistoryRecord:
    return HistoryRecord(
        sha=BAD,
        operation="apply",
        outcome=Outcome.VERIFY_FAILED,
        at="2026-03-01T11:59:00Z",
        diff={"summary": "0 to create, 1 to update, 0 to delete, 11 unchanged", "create": 0, "update": 1},
        decisions=[],
        timings={"check": 0.1, "verify": 5.0},
        devices=[],
        message="verification failed: pod ml/x stays Pending",
    )


def test_a_new_record_writes_its_keys_in_the_order_the_reconciler_wrote_them() -> None:
    record = failed_apply()
    record.force_push = {"previous": GOOD}
    record.rolled_back_to, record.rollback = GOOD, Outcome.APPLIED
    record.revert = {"branch": "reverts", "sha": "c" * 40}
    written = record.to_json()
    assert list(written) == [
        "sha",
        "operation",
        "outcome",
        "at",
        "diff",
        "decisions",
        "timings",
        "devices",
        "message",
        "forcePush",
        "rolledBackTo",
        "rollback",
        "revert",
    ]
    assert written["outcome"] == "verify-failed" and type(written["outcome"]) is str
    assert written["rollback"] == "applied" and type(written["rollback"]) is str


def test_the_nulls_that_say_something_are_written() -> None:
    # A first pass rolled back to nothing: its record says so, and the rollback's record has no sha.
    failed = failed_apply()
    failed.rolled_back_to, failed.rollback = None, Outcome.APPLIED
    assert failed.to_json()["rolledBackTo"] is None and failed.rolled_back
    rollback = HistoryRecord(
        sha=None, operation="rollback", outcome=Outcome.APPLIED, at="t", diff={}, from_sha=None
    )
    assert {k: v for k, v in rollback.to_json().items() if v is None} == {"sha": None, "from": None}
    # Interrupted and refused records carry no evidence, and no `from`.
    interrupted = HistoryRecord(
        sha=GOOD, operation="rollback", outcome=Outcome.INTERRUPTED, at="t", message="m"
    )
    assert interrupted.to_json() == {
        "sha": GOOD,
        "operation": "rollback",
        "outcome": "interrupted",
        "at": "t",
        "message": "m",
    }
    assert not failed_apply().rolled_back and "rolledBackTo" not in failed_apply().to_json()


def test_a_record_read_writes_back_its_keys_as_read_with_those_of_another_version() -> None:
    raw: dict[str, Any] = {
        "sha": None,
        "operation": "rollback",
        "outcome": "verify-failed",
        "at": "2026-12-02T07:32:38Z",
        "diff": {"summary": "0 to create, 0 to update, 3 to delete, 0 unchanged"},
        "from": BAD,  # before `message`: not the order this version writes
        "message": "verification failed",
        "signedBy": {"key": "k"},  # a key of a newer version
    }
    record = HistoryRecord.from_json(raw)
    assert record is not None
    assert (record.sha, record.from_sha, record.outcome, record.extra) == (
        None,
        BAD,
        Outcome.VERIFY_FAILED,
        {"signedBy": {"key": "k"}},
    )
    assert json.dumps(record.to_json()) == json.dumps(raw)


def test_an_outcome_this_version_does_not_know_is_kept_as_its_string() -> None:
    attempt = AttemptRecord.from_json({"sha": BAD, "outcome": "paused", "at": "t"})
    assert attempt is not None and attempt.outcome == "paused" and not isinstance(attempt.outcome, Outcome)
    assert attempt.pass_outcome() == "paused" and attempt.failed()
    assert attempt.to_json() == {"sha": BAD, "outcome": "paused", "at": "t"}


def test_the_pass_outcome_of_an_attempt() -> None:
    def attempt(outcome: Outcome, rolled_back: bool | None = None) -> AttemptRecord:
        return AttemptRecord(sha=BAD, outcome=outcome, at="t", rolled_back=rolled_back)

    assert attempt(Outcome.APPLIED).pass_outcome() is Outcome.APPLIED
    assert attempt(Outcome.DENIED).pass_outcome() is Outcome.DENIED
    assert attempt(Outcome.VERIFY_FAILED, True).pass_outcome() is Outcome.ROLLED_BACK
    assert attempt(Outcome.VERIFY_FAILED, False).pass_outcome() is Outcome.ROLLBACK_FAILED
    assert not attempt(Outcome.APPLIED).failed() and not attempt(Outcome.INTERRUPTED).failed()
    assert attempt(Outcome.APPLY_FAILED, True).failed()
    assert "rolledBack" not in attempt(Outcome.APPLIED).to_json()
    assert attempt(Outcome.VERIFY_FAILED, False).to_json()["rolledBack"] is False


def test_a_new_state_round_trips_through_its_configmap_data() -> None:
    state = TargetState(
        last_good=GOOD,
        last_attempted=AttemptRecord(sha=BAD, outcome=Outcome.VERIFY_FAILED, at="t", rolled_back=True),
        in_progress=InProgress(sha=GOOD, operation="rollback", from_sha=None, stage="", since="t"),
        inventory=["v1 Namespace/ml"],
    )
    state.record(failed_apply())
    data = state.to_data()
    assert json.loads(data["inProgress"]) == {
        "from": None,
        "operation": "rollback",
        "sha": GOOD,
        "since": "t",
        "stage": "",
    }
    assert json.loads(data["lastAttempted"]) == {
        "at": "t",
        "outcome": "verify-failed",
        "rolledBack": True,
        "sha": BAD,
    }
    again = TargetState.from_data(data)
    assert again.to_data() == data
    assert (again.last_attempted, again.in_progress, again.history) == (
        state.last_attempted,
        state.in_progress,
        state.history,
    )


def test_values_edited_into_garbage_read_as_absent() -> None:
    state = TargetState.from_data(
        {
            "lastGood": GOOD,
            "lastAttempted": '"oops"',
            "inProgress": "{not json",
            "history": '[1, {"sha": "x"}]',
        }
    )
    assert state.last_attempted is None and state.in_progress is None
    assert [r.sha for r in state.history] == ["x"]


def test_history_ids_are_given_once_and_only_grow() -> None:
    state = TargetState()
    for n in range(HISTORY_LIMIT + 3):
        state.record(HistoryRecord(sha=f"{n:040x}", operation="apply", outcome="applied", at="t"))
    ids = [r.id for r in state.history]
    assert ids == list(range(HISTORY_LIMIT + 3, 3, -1))  # newest first; the oldest fell off
    again = TargetState.from_data(state.to_data())
    assert [r.id for r in again.history] == ids
    old = HistoryRecord.from_json({"sha": "a" * 40, "operation": "apply", "outcome": "applied", "at": "t"})
    assert old is not None and old.id is None and "id" not in old.to_json()
    again.record(HistoryRecord(sha="b" * 40, operation="sync", outcome="applied", at="t"))
    assert again.history[0].id == HISTORY_LIMIT + 4
