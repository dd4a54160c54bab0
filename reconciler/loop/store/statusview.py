"""`dra-gitops status`, `get` and `history` as text: last good, last attempt, what is in progress,
suspended, the source's health, and the history."""

from __future__ import annotations

from typing import Any

from reconciler.loop.store.records import HistoryRecord
from reconciler.loop.store.state import TargetState
from reconciler.model.wave_progress import current_rollout, rollouts_from_json


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
        for rollout in rollouts_from_json(p.rollout):  # one line per DaemonSet upgraded in waves
            lines.append(
                f"driver waves:  DaemonSet/{rollout.namespace}/{rollout.daemonset}: {rollout.line()}"
            )
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
    if state.suspended:
        s = state.suspended
        lines.append(f"suspended:     since {s.at} by {s.by}" + (f": {s.reason}" if s.reason else ""))
    if state.source and not state.source.ok:
        lines.append(f"source:        failing since {state.source.since}: {state.source.error}")
    if state.verified:  # what the targets promoting from this one may take
        v = state.verified[0]
        notes = [
            "rehearsed" if v.rehearsed else "rehearsal failed" if v.rehearsed is False else "",
            f"published as {v.published}" if v.published else "",
            f"withdrawn: {v.withdrawn}" if v.withdrawn else "",
        ]
        shown = ", ".join(n for n in notes if n)
        lines.append(f"verified:      {v.sha} since {v.at}" + (f" ({shown})" if shown else ""))
    lines.extend(_promotion_lines(target, state))
    lines.append("history (newest first):")
    for record in state.history[: max(0, history_count)]:
        lines.extend(_record_lines(record))
    return "\n".join(lines) + "\n"


def _promotion_lines(target: str, state: TargetState) -> list[str]:
    """A promoted target: what it may take from upstream, what waits, and why newer commits may not."""
    view = state.promotion
    if view is None:
        return []
    lines = [f"promotes from: {view.upstream}"]
    if view.error:
        lines.append(f"  upstream:    {view.error}")
    lines.append(f"  eligible:    {view.eligible or '(nothing newer than the last good commit)'}")
    approval = state.approval
    if approval is not None and approval.approved_by:
        lines.append(f"  approved:    {approval.sha} by {approval.approved_by} at {approval.approved_at}")
    elif approval is not None:
        lines.append(
            f"  awaiting:    approval of {approval.sha} since {approval.since}: "
            f"dra-gitops approve --target {target} {approval.sha[:12]}"
        )
    if view.waiting == "soak" and view.soak_until:
        lines.append(f"  soaking:     a newer commit is eligible at {view.soak_until}")
    for entry in view.not_eligible or []:
        lines.append(f"  not eligible {str(entry.get('sha'))[:12]}: {entry.get('why')}")
    return lines


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


def target_row(name: str, state: TargetState) -> dict[str, Any]:
    """One target of `get`, as `-o json` prints it."""
    attempted, progress, source = state.last_attempted, state.in_progress, state.source
    return {
        "target": name,
        "lastGood": state.last_good,
        "lastAttempt": attempted.sha if attempted else None,
        "outcome": str(attempted.pass_outcome()) if attempted else None,
        # The commit the target does not deliver on its own: a failed head, or one a rollback or sync holds.
        "held": state.hold
        or (attempted.sha if attempted and attempted.sha and state.failed(attempted.sha) else None),
        "inProgress": f"{progress.operation} {(progress.sha or '')[:12]} stage {progress.stage or '-'}"
        + _rollout_text(progress.rollout)
        if progress
        else None,
        # A driver upgrade in waves under way (`model/wave_progress.py`): wave N of M, nodes done, soak end;
        # `rollout` the newest (under way, or paused), `rollouts` each DaemonSet's of the delivery.
        "rollout": current.to_json(snapshot=False)
        if (current := current_rollout(progress and progress.rollout))
        else None,
        "rollouts": [r.to_json(snapshot=False) for r in rollouts_from_json(progress and progress.rollout)],
        "suspended": state.suspended.to_json() if state.suspended else None,
        "source": source.to_json() if source else None,
    }


def _rollout_text(raw: Any) -> str:
    rollouts = rollouts_from_json(raw)
    if len(rollouts) == 1:
        return f", {rollouts[0].line()}"
    return "".join(f", {r.daemonset}: {r.line()}" for r in rollouts)


def render_targets(rows: list[dict[str, Any]]) -> str:
    """`get` as a table, one line per target."""
    header = ("TARGET", "LAST GOOD", "LAST ATTEMPT", "OUTCOME", "HELD", "IN PROGRESS", "SUSPENDED", "SOURCE")
    table = [header]
    for row in rows:
        suspended = row["suspended"]
        source = row["source"]
        table.append(
            (
                row["target"],
                (row["lastGood"] or "-")[:12],
                (row["lastAttempt"] or "-")[:12],
                row["outcome"] or "-",
                (row["held"] or "-")[:12],
                row["inProgress"] or "-",
                f"since {suspended['at']} by {suspended['by']}" if suspended else "-",
                "ok"
                if not source or source.get("ok")
                else f"failing since {source.get('since')}: {source.get('error')}",
            )
        )
    if len(table) == 1:
        return "no targets\n"
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header) - 1)]
    return "".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=False))
        + f"  {line[-1]}\n"
        for line in table
    )


def render_history(records: list[HistoryRecord]) -> str:
    """`history`: one line per record, newest first, with who asked and the message."""
    lines = []
    for record in records:
        ident = str(record.id) if record.id is not None else "-"
        who = f"  by {record.requested_by}" if record.requested_by else ""
        message = f"  {record.message}" if record.message else ""
        lines.append(
            f"{ident:>4}  {record.at}  {record.operation:16} {(record.sha or '(none)')[:12]:12}  "
            f"{record.outcome}{who}{message}"
        )
    return "\n".join(lines) + "\n" if lines else "no history\n"
