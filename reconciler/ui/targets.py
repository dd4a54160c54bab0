"""The Targets page (pure): per target its last good commit, last attempt and outcome, what is in progress,
and, when a target's status carries them, what promotion decided (the same data `status` prints): the
upstream, the eligible commit, the approval it awaits (with the command that gives it) or the soak, why
newer commits are not eligible, and the last verified commit (what downstream targets may take)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.wave_progress import SOAKING, SUSPENDED, RolloutProgress, rollouts_from_json
from reconciler.ui.html import short
from reconciler.ui.render import render

# Keys of a target's status JSON that promotion writes (`loop/store/state.py`: `promotion`, `approval` of a
# promoted target, `verified` of one that others promote from).
PROMOTION_KEYS = ("promotion", "approval", "verified")


@dataclass
class TargetView:
    """One target as the pages see it: its name, where its state lives, and `status -o json`'s document."""

    name: str
    namespace: str
    status: dict[str, Any]
    # sha -> {"subject", "author"} of the commits the pages name, when Git could tell.
    commits: dict[str, dict[str, str]] = field(default_factory=dict)
    error: str = ""  # why the state could not be read
    # (label, device map key) of the target's own cluster; ("", "") in the controller's
    cluster: tuple[str, str] = ("", "")


def pass_outcome(attempted: Mapping[str, Any] | None) -> str:
    """How the last attempt's pass ended (as `AttemptRecord.pass_outcome`): its rollback's result wins."""
    if not attempted:
        return ""
    if attempted.get("rolledBack") is False:
        return "rollback-failed"
    if attempted.get("rolledBack"):
        return "rolled-back"
    return str(attempted.get("outcome") or "")


_GOOD = frozenset({"applied", "unchanged", "drift-corrected", "resumed"})
_BAD = frozenset(
    {
        "denied",
        "dry-run-failed",
        "apply-failed",
        "verify-failed",
        "rolled-back",
        "rollback-failed",
        "unverified",
        "source-error",
        "invalid",
        "aborted",
    }
)
# Sync status (as Argo CD names them where they mean the same) -> its symbol.
SYNC_SYMBOLS = {
    "Synced": "✓",
    "OutOfSync": "≠",
    "Progressing": "↻",
    "Degraded": "✗",
    "Suspended": "‖",
    "Awaiting approval": "‖",
}


@dataclass
class RolloutView:
    """A driver upgrade in waves under way, as the pages show it: the DaemonSet, `wave N of M (phase)`,
    nodes done of all, the failed nodes with their evidence, and the end of the soak that comes next."""

    daemonset: str
    driver: str
    wave: str
    done: int
    nodes: int
    failed: list[tuple[str, str]]
    soak_until: str | None
    since: str

    @classmethod
    def of(cls, progress: RolloutProgress) -> RolloutView:
        soak = progress.soak_until if progress.phase in (SOAKING, SUSPENDED) else None
        return cls(
            daemonset=f"DaemonSet/{progress.namespace}/{progress.daemonset}",
            driver=progress.driver,
            wave=f"wave {progress.wave} of {progress.of} ({progress.phase})",
            done=len(progress.done),
            nodes=progress.nodes,
            failed=sorted(progress.failed_nodes.items()),
            soak_until=soak,
            since=progress.since,
        )


def rollouts_of(status: Mapping[str, Any]) -> list[RolloutView]:
    """The driver rollouts in waves of the target's in-progress delivery (`inProgress.rollout`: one
    object, or a list of them), in the order the state keeps them; what does not read as one is left out."""
    return [RolloutView.of(p) for p in rollouts_from_json((status.get("inProgress") or {}).get("rollout"))]


@dataclass
class TargetRow:
    """One line of the Targets page: what an on-call reader asks first."""

    view: TargetView
    sync: str = "Synced"
    reason: str = ""
    outcome: str = ""
    attempted: Mapping[str, Any] = field(default_factory=dict)
    live: str | None = None
    live_unknown: bool = False
    flags: list[tuple[str, str]] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    rollouts: list[RolloutView] = field(default_factory=list)

    @property
    def symbol(self) -> str:
        return SYNC_SYMBOLS.get(self.sync, "•")


def _newest_record(status: Mapping[str, Any], sha: str | None) -> Mapping[str, Any]:
    return next((r for r in status.get("history") or [] if sha and r.get("sha") == sha), {})


def sync_row(view: TargetView) -> TargetRow:
    """The target's sync status, the reason in one line, and the commands that act on it."""
    status = view.status
    attempted = status.get("lastAttempted") or {}
    row = TargetRow(view, attempted=attempted, outcome=pass_outcome(attempted))
    row.live = status.get("lastGood")
    row.live_unknown = row.outcome == "rollback-failed"
    base = f"dra-gitops {{verb}} --target {view.name}"
    if view.namespace != "dra-gitops":
        base += f" --state-namespace {view.namespace}"
    act = [base.format(verb="history")]
    approval = status.get("approval") or {}
    progress = status.get("inProgress")
    if progress:
        row.rollouts = rollouts_of(status)
    if status.get("suspended"):
        s = status["suspended"]
        row.sync, row.reason = "Suspended", f"suspended since {s.get('at')} by {s.get('by')}"
        act.insert(0, base.format(verb="resume"))
        if row.rollouts:  # an apply paused between waves: `abort` reverts it without `resume`
            act.insert(1, base.format(verb="abort"))
    elif progress:
        row.sync = "Progressing"
        row.reason = f"{progress.get('operation') or '?'} {short(progress.get('sha'))} at stage {progress.get('stage') or '-'} since {progress.get('since') or '?'}"
        act.insert(0, base.format(verb="abort"))
    elif approval and not approval.get("approvedBy"):
        sha = str(approval.get("sha") or "")
        row.sync, row.reason = (
            "Awaiting approval",
            f"{short(sha)} awaits approval since {approval.get('since') or '?'}",
        )
        act.insert(0, f"{base.format(verb='approve')} {sha[:12]}")
    elif row.outcome in _BAD:
        row.sync = "Degraded"
        message = str(_newest_record(status, attempted.get("sha")).get("message") or row.outcome)
        row.reason = message.strip().splitlines()[0] if message.strip() else row.outcome
        act[:0] = [base.format(verb="retry"), f"{base.format(verb='diagnose')}"]
        if row.live_unknown and status.get("lastGood"):
            act.insert(0, f"{base.format(verb='rollback')} {str(status['lastGood'])[:12]}")
    elif attempted.get("sha") and attempted.get("sha") != status.get("lastGood"):
        row.sync, row.reason = "OutOfSync", f"{short(attempted.get('sha'))} is not the last good commit"
        act.insert(0, base.format(verb="reconcile"))
    else:
        act.insert(0, base.format(verb="reconcile"))
    if row.sync != "Suspended":
        act.append(base.format(verb="suspend"))
    row.commands = [c for c in act if "diagnose" not in c]
    if status.get("hold"):
        row.flags.append(("warn", f"‖ holding {short(status['hold'])}"))
    if status.get("retry"):
        row.flags.append(("", f"↻ retry {short(status['retry'])}"))
    if status.get("request"):
        r = status["request"]
        row.flags.append(("", f"requested: {r.get('verb')} {r.get('revision')} by {r.get('by')}"))
    source = status.get("source")
    if source and not source.get("ok", True):
        row.flags.append(("bad", f"✗ source failing since {source.get('since')}: {source.get('error')}"))
    return row


def targets_page(targets: Sequence[TargetView]) -> str:
    promotion = any(any(t.status.get(k) not in (None, "", [], {}) for k in PROMOTION_KEYS) for t in targets)
    rows = [sync_row(t) for t in targets]
    return render("targets.html", title="Targets", current="targets", rows=rows, promotion=promotion)
