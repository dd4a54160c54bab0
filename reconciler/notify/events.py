"""What a pass did, as the forge and the notification receivers are told: an event name, a commit status
and a one-line description. Pure.

Outcomes are read as plain strings (`reconciler.outcome` values), so an outcome another part adds later
(`awaiting-approval` from the promotion gates) maps here by its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# GitHub truncates a status description at 140 characters; the others take more, nobody reads more.
DESCRIPTION_LIMIT = 140


class Event(StrEnum):
    STARTED = "started"  # a pass began delivering a new commit
    APPLIED = "applied"  # applied and verified
    DENIED = "denied"  # refused by policy
    FAILED = "failed"  # refused before a write: invalid, unsigned, dry-run rejected
    ROLLED_BACK = "rolled-back"  # failed after a write, the last good commit put back and verified
    ROLLBACK_FAILED = "rollback-failed"  # the rollback itself failed: the cluster needs a human
    AWAITING_APPROVAL = "awaiting-approval"  # promotion: eligible, waiting for `dra-gitops approve`
    DRIFT_CORRECTED = "drift-corrected"  # live objects put back as in Git


EVENTS = tuple(e.value for e in Event)
# What a notification is sent for when its `events` are not given: what a person acts on.
DEFAULT_EVENTS = frozenset(
    {
        Event.APPLIED,
        Event.DENIED,
        Event.FAILED,
        Event.ROLLED_BACK,
        Event.ROLLBACK_FAILED,
        Event.AWAITING_APPROVAL,
    }
)

_EVENT_OF_OUTCOME = {
    "applied": Event.APPLIED,
    "denied": Event.DENIED,
    "dry-run-failed": Event.FAILED,
    "apply-failed": Event.FAILED,
    "verify-failed": Event.FAILED,
    "unverified": Event.FAILED,
    "invalid": Event.FAILED,
    "rolled-back": Event.ROLLED_BACK,
    "aborted": Event.ROLLED_BACK,
    "rollback-failed": Event.ROLLBACK_FAILED,
    "awaiting-approval": Event.AWAITING_APPROVAL,
    "drift-corrected": Event.DRIFT_CORRECTED,
}


class StatusState(StrEnum):
    """A commit status in the forges' common words; `forge.py` spells them per forge."""

    PENDING = "pending"  # waiting (for approval)
    RUNNING = "running"  # being delivered
    SUCCESS = "success"
    FAILURE = "failure"


_STATE_OF_EVENT = {
    Event.STARTED: StatusState.RUNNING,
    Event.APPLIED: StatusState.SUCCESS,
    Event.DENIED: StatusState.FAILURE,
    Event.FAILED: StatusState.FAILURE,
    Event.ROLLED_BACK: StatusState.FAILURE,
    Event.ROLLBACK_FAILED: StatusState.FAILURE,
    Event.AWAITING_APPROVAL: StatusState.PENDING,
}


@dataclass(frozen=True)
class Report:
    """One thing to report about a target's commit."""

    target: str
    sha: str
    event: Event
    outcome: str  # the pass's outcome (`started` for the start of a delivery)
    message: str = ""  # the first finding, the verification failure, ...
    failed: str = ""  # for a rollback: how the commit failed (`verify-failed`)
    at: str = ""  # ISO time of the report


def event_of(outcome: str) -> Event | None:
    """The event a pass with this outcome reports, None for a pass that reports nothing (unchanged,
    held, interrupted, a source error)."""
    return _EVENT_OF_OUTCOME.get(str(outcome))


def status_state(event: Event) -> StatusState | None:
    """The commit status of an event; None for an event that sets none (drift is no news about a commit)."""
    return _STATE_OF_EVENT.get(event)


def one_line(text: str, limit: int = DESCRIPTION_LIMIT) -> str:
    """`text` as one line of at most `limit` characters (cut with an ellipsis)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def describe(report: Report, limit: int = DESCRIPTION_LIMIT) -> str:
    """The one-line description: what happened, then the first finding or the verification failure."""
    head = {
        Event.STARTED: "delivering",
        Event.APPLIED: "applied and verified",
        Event.DENIED: "denied by policy",
        Event.FAILED: report.outcome,
        Event.ROLLED_BACK: f"{report.failed or 'failed'}, rolled back",
        Event.ROLLBACK_FAILED: f"{report.failed or 'failed'}, rollback failed: the cluster needs a human",
        Event.AWAITING_APPROVAL: "awaiting approval",
        Event.DRIFT_CORRECTED: "drift corrected",
    }[report.event]
    message = report.message if report.message and report.message != report.outcome else ""
    return one_line(f"{head}: {message}" if message else head, limit)
