"""Which commit a promoted target may take now: pure decisions over what its upstream verified.

The upstream keeps the commits it verified (`TargetState.verified`, newest first): `note_verified` writes
that list as commits are verified and rolled back. A downstream (`promoteFrom`) reads it and `decide`s:
the newest commit newer than its own last good that the upstream verified and did not withdraw, that was
rehearsed when `requireRehearsal` asks for it, and that the upstream has held as its last good for `soak`;
with `approval: manual` it waits for `dra-gitops approve`. Every newer commit that is not eligible comes
with the reason, which `status` shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from reconciler.loop.config.gates import Gates
from reconciler.loop.store.records import Approval, VerifiedCommit

# How many verified commits a target keeps for its downstreams.
VERIFIED_LIMIT = 10
WAIT_APPROVAL = "approval"
WAIT_SOAK = "soak"


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None  # edited by hand into something else: treated as unknown


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def note_verified(
    verified: list[VerifiedCommit], sha: str, at: str, *, rehearsed: bool | None = None
) -> list[VerifiedCommit]:
    """`sha` became the last good commit at `at`: it heads the list; the one held before is held no more."""
    kept = []
    for entry in verified:
        if entry.sha == sha:
            continue  # verified again (a rollback to it, a sync): held from now on
        if entry.until is None:
            entry = replace(entry, until=at)
        kept.append(entry)
    return [VerifiedCommit(sha=sha, at=at, rehearsed=rehearsed), *kept][:VERIFIED_LIMIT]


def withdraw(verified: list[VerifiedCommit], sha: str | None, why: str) -> list[VerifiedCommit]:
    """A person rolled `sha` back: it never goes further down the chain."""
    return [replace(e, withdrawn=why) if e.sha == sha and not e.withdrawn else e for e in verified]


@dataclass
class Decision:
    eligible: str | None = None  # the newest commit every gate but approval lets through
    deliver: str | None = None  # what to deliver now (the eligible commit, approved where needed)
    waiting: str | None = None  # WAIT_APPROVAL | WAIT_SOAK
    soaking: str | None = None  # the newest commit that soaks upstream
    soak_until: datetime | None = None  # when it becomes eligible
    not_eligible: list[tuple[str, str]] = field(default_factory=list)  # newer commits, and why not

    def seconds_to_soak(self, now: datetime) -> float | None:
        """When a pass should look again (the soak ends), None when nothing soaks."""
        if self.soak_until is None:
            return None
        return max(0.0, (self.soak_until - now).total_seconds())


def _duration(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))


def decide(
    candidates: list[VerifiedCommit],
    gates: Gates,
    last_good: str | None,
    approval: Approval | None,
    now: datetime,
    first_seen: dict[str, str] | None = None,
    had: list[VerifiedCommit] | None = None,
) -> Decision:
    """What a promoted target may deliver, from its upstream's verified commits (newest first).

    Commits no newer than the target's own last good are not looked at, nor any the target `had` (its own
    verified commits: one it moved past, or a person rolled back): a downstream never moves back on its
    own. `first_seen` dates a commit the upstream gave no time for (a published ref) by when this target
    first saw it.
    """
    decision = Decision()
    own = {entry.sha: entry for entry in had or []}
    for candidate in candidates:
        sha = candidate.sha
        if sha == last_good:
            break
        if sha in own:
            if own[sha].withdrawn:
                decision.not_eligible.append((sha, f"rolled back here: {own[sha].withdrawn}"))
            break
        why = _why_not(candidate, gates, now, first_seen or {}, decision)
        if why is None:
            decision.eligible = sha
            break
        decision.not_eligible.append((sha, why))
    if decision.eligible is None or decision.eligible == last_good:
        return decision
    if gates.approval == "manual":
        given = approval is not None and approval.sha == decision.eligible and approval.approved_by
        if not given:
            decision.waiting = WAIT_APPROVAL
            return decision
    decision.deliver = decision.eligible
    return decision


def _why_not(
    candidate: VerifiedCommit, gates: Gates, now: datetime, first_seen: dict[str, str], decision: Decision
) -> str | None:
    if candidate.withdrawn:
        return f"withdrawn upstream: {candidate.withdrawn}"
    if gates.require_rehearsal and not candidate.rehearsed:
        if candidate.rehearsed is False:
            return "its rollback rehearsal failed upstream"
        return "its rollback was not rehearsed upstream (requireRehearsal)"
    if gates.soak <= 0:
        return None
    since = parse_time(candidate.at) or parse_time(first_seen.get(candidate.sha))
    if since is None:
        return "the upstream gives no time it was verified at: cannot judge the soak"
    until = parse_time(candidate.until)
    held = ((until or now) - since).total_seconds()
    if held >= gates.soak:
        return None
    if until is not None:
        return (
            f"held upstream only {_duration(held)} before a newer commit replaced it "
            f"(soak {_duration(gates.soak)})"
        )
    ends = since + timedelta(seconds=gates.soak)
    if decision.soak_until is None:
        decision.soaking, decision.soak_until = candidate.sha, ends
        decision.waiting = WAIT_SOAK
    return f"soaking upstream until {format_time(ends)} (soak {_duration(gates.soak)})"
