"""The capacity section of the policy input as text (``check -v``), pure."""

from __future__ import annotations

from typing import Any

__all__ = ["ORDER_NOTE", "render_capacity"]

ORDER_NOTE = (
    "pods are placed one at a time in the scheduler's order (priority, then creation), on the nodes that "
    "score best; among nodes that score equal the scheduler's choice cannot be predicted, so every "
    "placement those ties allow is followed (past a budget, a seeded sample): fits in all, in none, or "
    "at-risk; the real scheduler's queue order can still change which of several competing pods fails"
)


def render_capacity(capacity: dict[str, Any] | None) -> str:
    """The capacity section as text (``check -v``)."""
    if not capacity or not (capacity.get("pods") or capacity.get("claims")):
        return ""
    lines = ["capacity (predicted placement):"]
    pending = capacity.get("pending") or {}
    if pending.get("summary"):
        lines.append(f"  {pending['summary']}")
    for pod in capacity.get("pods") or []:
        nodes = pod.get("nodes") or []
        where = f" on {pod['node']}" if pod.get("node") else ""
        if len(nodes) > 1:
            where = f" on one of {', '.join(nodes)} (equal scores decide)"
        if pod["outcome"] == "at-risk":
            where = f" (where it fits: on {', '.join(nodes) or pod.get('node')})"
        live = " (waiting in the cluster)" if pod.get("live") else ""
        lines.append(f"  pod {pod['pod']}{live}: {pod['outcome']}{where}")
        if pod.get("reason"):
            lines.append(f"    {pod['reason']}")
    for claim in capacity.get("claims") or []:
        devices = f" [{', '.join(claim['devices'])}]" if claim.get("devices") else ""
        where = f" on {claim['node']}" if claim.get("node") else ""
        lines.append(f"  claim {claim['claim']}: {claim['outcome']}{where}{devices}")
        if claim.get("pod") is None and claim.get("reason"):
            lines.append(f"    {claim['reason']}")
    for e in capacity.get("selector_errors") or []:
        lines.append(
            f"  selector error ({'every device' if e.get('every') else 'some devices'}): {e['message']}"
        )
    releasing = capacity.get("releasing") or []
    if releasing:
        lines.append(f"  counted as free (their pods are being deleted or finished): {', '.join(releasing)}")
    search = capacity.get("search") or {}
    if search:
        how = "exact" if search.get("mode") == "exact" else f"sampled (seed {search.get('seed')})"
        cut = ", cut by the budget" if search.get("cut_by_budget") else ""
        lines.append(
            f"  placements explored: {search.get('placements')} {how}{cut}; "
            f"{search.get('pods_searched')} pods needed a search"
        )
    lines.append(f"  note: {capacity.get('note') or ORDER_NOTE}")
    return "\n".join(lines) + "\n"
