"""`dra-gitops status` as text: last good, last attempt, what is in progress, and the history."""

from __future__ import annotations

from reconciler.loop.records import HistoryRecord
from reconciler.loop.state import TargetState


def render_status(target: str, state: TargetState, history_count: int) -> str:
    attempted = state.last_attempted
    lines = [
        f"target:        {target}",
        f"last good:     {state.last_good or '(none)'}",
        f"last attempt:  {(attempted and attempted.sha) or '(none)'} {(attempted and attempted.outcome) or ''}"
        + (" (rolled back)" if attempted and attempted.rolled_back else ""),
    ]
    if state.in_progress:
        p = state.in_progress
        lines.append(f"in progress:   {p.operation} of {p.sha} at stage {p.stage or '-'} since {p.since}")
    else:
        lines.append("in progress:   (nothing)")
    if state.hold:
        lines.append(
            f"holding:       {state.hold} stays unapplied until a newer commit or `dra-gitops retry`"
        )
    if state.retry:
        lines.append(f"retry:         {state.retry} will be tried again on the next pass")
    if state.request:
        r = state.request
        lines.append(
            f"requested:     {r.verb} {r.revision}{' --force' if r.force else ''} by {r.by} at {r.at}"
            " (waiting for the controller)"
        )
    lines.append("history (newest first):")
    for record in state.history[: max(0, history_count)]:
        lines.extend(_record_lines(record))
    return "\n".join(lines) + "\n"


def _record_lines(record: HistoryRecord) -> list[str]:
    sha = (record.sha or "(none)")[:12]
    extra = ""
    if record.rolled_back:
        extra = f" → rolled back to {(record.rolled_back_to or '(nothing)')[:12]} ({record.rollback})"
    # The id first (what `rollback ID` takes), as `argocd app history` shows it; none in older records.
    ident = f"{record.id:>3}  " if record.id is not None else ""
    lines = [f"  {ident}{record.at}  {record.operation:8} {sha}  {record.outcome}{extra}"]
    # Records from before ids said only "dra-gitops rollback" there, naming nobody: left as they were shown.
    if record.requested_by and record.id is not None:
        forced = f" with --force ({'; '.join(record.forced)})" if record.forced else ""
        lines.append(f"      requested by {record.requested_by}{forced}")
    if record.summary:
        lines.append(f"      {record.summary}")
    if record.message:
        lines.append(f"      {record.message}")
    for device in (record.devices or [])[:10]:
        lines.append(
            f"      {device.get('claim')} → {', '.join(device.get('devices') or []) or '-'} on {device.get('node') or '-'}"
        )
    return lines
