"""The capacity section of the policy input as text (``check -v``), pure."""

from __future__ import annotations

from typing import Any

__all__ = ["ORDER_NOTE", "render_capacity"]

ORDER_NOTE = (
    "pods are placed one at a time in the scheduler's order (priority, then creation); the real "
    "scheduler's queue order and node scoring can change which of several competing pods fails"
)


def render_capacity(capacity: dict[str, Any] | None) -> str:
    """The capacity section as text (``check -v``)."""
    if not capacity or not (capacity.get("pods") or capacity.get("claims")):
        return ""
    lines = ["capacity (predicted placement):"]
    for pod in capacity.get("pods") or []:
        where = f" on {pod['node']}" if pod.get("node") else ""
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
    lines.append(f"  note: {capacity.get('note') or ORDER_NOTE}")
    return "\n".join(lines) + "\n"
