"""The outcome vocabulary and its exit codes (`reconciler/outcome.py`): one table for every command."""

from __future__ import annotations

import json

import pytest

from reconciler.outcome import (
    EXIT_CODES,
    UNKNOWN_EXIT_CODE,
    Outcome,
    exit_code_of,
    read_outcome,
    requested_rollback_exit_code,
    stopped_exit_code,
    worst_exit_code,
)


def test_every_outcome_has_an_exit_code() -> None:
    assert set(EXIT_CODES) == set(Outcome)
    assert {outcome: outcome.exit_code for outcome in Outcome} == EXIT_CODES


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (Outcome.APPLIED, 0),
        (Outcome.UNCHANGED, 0),
        (Outcome.DRIFT_CORRECTED, 0),
        (Outcome.HELD, 0),
        (Outcome.DENIED, 1),
        (Outcome.DRY_RUN_FAILED, 1),
        (Outcome.APPLY_FAILED, 1),
        (Outcome.VERIFY_FAILED, 1),
        (Outcome.ROLLED_BACK, 1),
        (Outcome.UNVERIFIED, 1),
        (Outcome.INTERRUPTED, 1),
        (Outcome.SOURCE_ERROR, 4),
        (Outcome.ROLLBACK_FAILED, 5),
    ],
)
def test_the_exit_code_of_each_outcome(outcome: Outcome, code: int) -> None:
    assert outcome.exit_code == code


def test_outcomes_are_the_plain_strings_of_the_state_json_and_metrics() -> None:
    assert [str(o) for o in (Outcome.APPLIED, Outcome.ROLLED_BACK, Outcome.DRY_RUN_FAILED)] == [
        "applied",
        "rolled-back",
        "dry-run-failed",
    ]
    assert json.dumps({"outcome": Outcome.ROLLBACK_FAILED}) == '{"outcome": "rollback-failed"}'
    assert f"{Outcome.SOURCE_ERROR}" == "source-error"


def test_an_outcome_read_back_is_the_enum_and_an_unknown_one_stays_its_string() -> None:
    assert read_outcome("verify-failed") is Outcome.VERIFY_FAILED
    assert read_outcome("paused-by-a-newer-version") == "paused-by-a-newer-version"
    assert exit_code_of("paused-by-a-newer-version") == UNKNOWN_EXIT_CODE == 1
    assert exit_code_of("applied") == 0


def test_the_worst_pass_decides() -> None:
    assert worst_exit_code([]) == 0
    assert worst_exit_code([Outcome.APPLIED, Outcome.HELD, Outcome.UNCHANGED]) == 0
    assert worst_exit_code([Outcome.APPLIED, Outcome.DENIED]) == 1
    assert worst_exit_code([Outcome.ROLLBACK_FAILED, Outcome.SOURCE_ERROR, Outcome.DENIED]) == 5
    assert worst_exit_code([Outcome.SOURCE_ERROR, Outcome.ROLLED_BACK]) == 4


def test_a_stopped_run_fails_only_when_a_rollback_failed() -> None:
    assert stopped_exit_code([]) == 0
    assert stopped_exit_code([Outcome.DENIED, Outcome.SOURCE_ERROR, Outcome.ROLLED_BACK]) == 0
    assert stopped_exit_code([Outcome.APPLIED, Outcome.ROLLBACK_FAILED]) == 5


def test_a_requested_rollback_succeeds_when_it_rolled_back() -> None:
    assert requested_rollback_exit_code(Outcome.ROLLED_BACK) == 0
    assert requested_rollback_exit_code(Outcome.ROLLBACK_FAILED) == 5
    assert Outcome.ROLLED_BACK.exit_code == 1  # in a pass of `run`, a rollback means the commit failed
