"""`dra-gitops status` as text: last good, last attempt, what is in progress, and the history."""

from __future__ import annotations

from typing import Any


def render_status(target: str, state: Any, history_count: int) -> str:
    attempted = state.last_attempted or {}
    lines = [
        f"target:        {target}",
        f"last good:     {state.last_good or '(none)'}",
        f"last attempt:  {attempted.get('sha') or '(none)'} {attempted.get('outcome') or ''}"
        + (" (rolled back)" if attempted.get("rolledBack") else ""),
    ]
    if state.in_progress:
        p = state.in_progress
        lines.append(
            f"in progress:   {p.get('operation')} of {p.get('sha')} at stage {p.get('stage') or '-'} since {p.get('since')}"
        )
    else:
        lines.append("in progress:   (nothing)")
    if state.hold:
        lines.append(
            f"holding:       {state.hold} stays unapplied until a newer commit or `dra-gitops retry`"
        )
    if state.retry:
        lines.append(f"retry:         {state.retry} will be tried again on the next pass")
    lines.append("history (newest first):")
    for record in state.history[: max(0, history_count)]:
        sha = str(record.get("sha") or "(none)")[:12]
        extra = ""
        if record.get("rolledBackTo") is not None or "rolledBackTo" in record:
            extra = f" → rolled back to {str(record.get('rolledBackTo') or '(nothing)')[:12]} ({record.get('rollback')})"
        summary = (record.get("diff") or {}).get("summary", "")
        lines.append(
            f"  {record.get('at', '')}  {record.get('operation', ''):8} {sha}  {record.get('outcome')}{extra}"
        )
        if summary:
            lines.append(f"      {summary}")
        if record.get("message"):
            lines.append(f"      {record['message']}")
        for device in (record.get("devices") or [])[:10]:
            lines.append(
                f"      {device.get('claim')} → {', '.join(device.get('devices') or []) or '-'} on {device.get('node') or '-'}"
            )
    return "\n".join(lines) + "\n"
