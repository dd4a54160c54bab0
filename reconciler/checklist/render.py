"""The checklist as Markdown (task-list boxes to paste into a ticket), JSON or plain text. Pure."""

from __future__ import annotations

import json

from reconciler.checklist.items import CHECKED, NOT_APPLICABLE, NOT_CHECKED, SECTIONS, Checklist, Item, short

FORMATS = ("markdown", "json", "text")
SECTION_TITLES = {
    "before": "Before the change",
    "during": "During the change",
    "after": "After the change",
}


def _attempt(checklist: Checklist) -> str:
    attempted = checklist.last_attempted
    if attempted is None or not attempted.sha:
        return "(none)"
    rolled = " (rolled back)" if attempted.rolled_back else ""
    return f"{short(attempted.sha)} {attempted.outcome}{rolled}"


def _tally(checklist: Checklist) -> str:
    counts = checklist.counts()
    applicable = counts[CHECKED] + counts[NOT_CHECKED]
    return (
        f"{counts[CHECKED]}/{applicable} applicable item(s) checked, {counts[NOT_CHECKED]} not checked, "
        f"{counts[NOT_APPLICABLE]} not applicable"
    )


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _md_item(item: Item) -> list[str]:
    summary, *details = item.evidence or ("",)
    if item.status == NOT_APPLICABLE:
        head = f"- [x] ~~{item.title}~~ — not applicable: {_md_escape(summary)}"
    else:
        box = "x" if item.status == CHECKED else " "
        head = f"- [{box}] **{item.title}** — {_md_escape(summary)}"
    return [head, *[f"  - {_md_escape(d)}" for d in details]]


def render_markdown(checklist: Checklist) -> str:
    lines = [
        f"## DRA deployment checklist: target `{checklist.target}`",
        "",
        f"* Cluster: {checklist.cluster}",
        f"* State: `{checklist.state_ref}`; last good `{short(checklist.last_good)}`; "
        f"last attempt `{_attempt(checklist)}`",
        f"* Generated: {checklist.generated} by `dra-gitops checklist`",
        f"* **{_tally(checklist)}**",
    ]
    for section in SECTIONS:
        lines += ["", f"### {SECTION_TITLES[section]}", ""]
        for item in checklist.section(section):
            lines += _md_item(item)
    return "\n".join(lines) + "\n"


_TEXT_MARK = {CHECKED: "[x]", NOT_CHECKED: "[ ]", NOT_APPLICABLE: "[-]"}


def render_text(checklist: Checklist) -> str:
    lines = [
        f"DRA deployment checklist: target {checklist.target}",
        f"cluster {checklist.cluster}; state {checklist.state_ref}; last good {short(checklist.last_good)}; "
        f"last attempt {_attempt(checklist)}; at {checklist.generated}",
    ]
    for section in SECTIONS:
        lines.append(f"{SECTION_TITLES[section]}:")
        for item in checklist.section(section):
            summary, *details = item.evidence or ("",)
            label = "n/a: " if item.status == NOT_APPLICABLE else ""
            lines.append(f"  {_TEXT_MARK[item.status]} {item.title}: {label}{summary}")
            lines += [f"        {d}" for d in details]
    lines.append(_tally(checklist))
    return "\n".join(lines) + "\n"


def to_json(checklist: Checklist) -> dict[str, object]:
    return {
        "target": checklist.target,
        "cluster": checklist.cluster,
        "generated": checklist.generated,
        "state": checklist.state_ref,
        "lastGood": checklist.last_good,
        "lastAttempted": checklist.last_attempted.to_json() if checklist.last_attempted else None,
        "ok": checklist.ok,
        "counts": checklist.counts(),
        "items": [item.to_json() for item in checklist.items],
    }


def render_json(checklist: Checklist) -> str:
    return json.dumps(to_json(checklist), indent=2) + "\n"


def render(checklist: Checklist, fmt: str = "markdown") -> str:
    if fmt == "markdown":
        return render_markdown(checklist)
    if fmt == "json":
        return render_json(checklist)
    if fmt == "text":
        return render_text(checklist)
    raise ValueError(f"unknown checklist format {fmt!r} ({', '.join(FORMATS)})")


__all__ = ["FORMATS", "render", "render_json", "render_markdown", "render_text", "to_json"]
