"""How a delivery or a reconcile pass ends, and the exit code of each: one vocabulary for every layer.

`delivery/` ends a delivery with one of the first five; the loop (`loop/passes/reconcile.py`) ends a pass with
any of them. A `str` enum: JSON output, metrics labels and the state ConfigMap (`loop/store/state.py`) carry
the plain strings (`"applied"`, `"rolled-back"`, ...). The exit codes are the README's: 0 success, 1
denied or failed, 4 environment, 5 the cluster needs a human.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Outcome(StrEnum):
    # A delivery of one revision (`delivery/pipeline.py`).
    APPLIED = "applied"
    DENIED = "denied"
    DRY_RUN_FAILED = "dry-run-failed"
    APPLY_FAILED = "apply-failed"
    VERIFY_FAILED = "verify-failed"
    # A reconcile pass, besides those of its delivery.
    UNCHANGED = "unchanged"
    DRIFT_CORRECTED = "drift-corrected"
    ROLLED_BACK = "rolled-back"
    ROLLBACK_FAILED = "rollback-failed"
    HELD = "held"  # the head failed before: not retried until a new commit or `retry`
    UNVERIFIED = "unverified"  # signature verification refused the commit
    INTERRUPTED = "interrupted"  # stopped between two stages (shutdown, lost lease), or found half-done
    SOURCE_ERROR = "source-error"  # the revision could not be fetched
    SUSPENDED = "suspended"  # `dra-gitops suspend`: the pass did nothing
    RESUMED = "resumed"  # `dra-gitops resume` (a history record)
    ABORTED = "aborted"  # `dra-gitops abort`: stopped at a stage boundary and rolled back
    DRIFTED = "drifted"  # drift found and left alone (`selfHeal: false`)
    INVALID = "invalid"  # the revision could not be read: a manifest that does not parse, a file too big
    # Promotion gates (`loop/promotion/decide.py`): the eligible commit waits; the last good one stays.
    AWAITING_APPROVAL = "awaiting-approval"  # `approval: manual`: until `dra-gitops approve`
    SOAKING = "soaking"  # `soak`: until the upstream has held it long enough
    APPROVED = "approved"  # `dra-gitops approve` (a history record)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self]


EXIT_CODES: dict[Outcome, int] = {
    Outcome.APPLIED: 0,
    Outcome.UNCHANGED: 0,
    Outcome.DRIFT_CORRECTED: 0,
    Outcome.HELD: 0,
    Outcome.SUSPENDED: 0,  # a person asked for it
    Outcome.RESUMED: 0,
    Outcome.ABORTED: 1,
    Outcome.DRIFTED: 0,  # reported, as the target asks  # holding on the last good revision is the loop doing its job
    Outcome.DENIED: 1,
    Outcome.DRY_RUN_FAILED: 1,
    Outcome.APPLY_FAILED: 1,
    Outcome.VERIFY_FAILED: 1,
    Outcome.ROLLED_BACK: 1,  # the commit failed, although the cluster is back on the last good one
    Outcome.UNVERIFIED: 1,
    Outcome.INVALID: 1,
    Outcome.AWAITING_APPROVAL: 0,  # a gate doing its job
    Outcome.SOAKING: 0,
    Outcome.APPROVED: 0,
    Outcome.INTERRUPTED: 1,
    Outcome.SOURCE_ERROR: 4,
    Outcome.ROLLBACK_FAILED: 5,
}


# An outcome this version does not know (a state written by a newer one) is not a success.
UNKNOWN_EXIT_CODE = 1


def read_outcome(value: object) -> Outcome | str:
    """An outcome as read from a state or record: the `Outcome`, or the plain string of an unknown one."""
    text = str(value or "")
    try:
        return Outcome(text)
    except ValueError:
        return text


def exit_code_of(outcome: str) -> int:
    outcome = read_outcome(outcome)
    return outcome.exit_code if isinstance(outcome, Outcome) else UNKNOWN_EXIT_CODE


def worst_exit_code(outcomes: Iterable[str]) -> int:
    """The exit code of several passes (`run --once`, `status`): the worst one's; 0 for none."""
    return max((exit_code_of(outcome) for outcome in outcomes), default=0)


def stopped_exit_code(outcomes: Iterable[str]) -> int:
    """`run` stopped by a signal: stopping is no failure, unless a target was left needing a human."""
    return Outcome.ROLLBACK_FAILED.exit_code if Outcome.ROLLBACK_FAILED in set(outcomes) else 0


def requested_rollback_exit_code(outcome: str) -> int:
    """`dra-gitops rollback`: rolled back is what was asked for (in a pass it means the commit failed)."""
    return 0 if outcome == Outcome.ROLLED_BACK else exit_code_of(outcome)
