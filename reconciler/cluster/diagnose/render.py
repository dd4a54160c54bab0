"""Diagnoses as text (the CLI default), JSON or Markdown (pure)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from reconciler.cluster.diagnose.types import Diagnosis


def render_diagnoses(diagnoses: Sequence[Diagnosis], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps([d.to_json() for d in diagnoses], indent=2, sort_keys=True, default=str)
    if fmt == "markdown":
        if not diagnoses:
            return "No DRA problems found.\n"
        lines: list[str] = []
        for d in diagnoses:
            lines += [f"### `{d.mode}`: {d.ref}", "", d.summary, ""]
            if d.numbers:
                lines += [
                    "Numbers: " + ", ".join(f"{k}={v}" for k, v in d.numbers.items() if k != "classes"),
                    "",
                ]
            if d.evidence:
                lines += ["Evidence:", "", *[f"* `{e.strip()}`" for e in d.evidence], ""]
            if d.recovery:
                lines += ["Recovery:", "", *[f"{i}. {r}" for i, r in enumerate(d.recovery, 1)], ""]
        return "\n".join(lines)
    if fmt != "text":
        raise ValueError(f"unknown diagnosis format {fmt!r} (text, json, markdown)")
    if not diagnoses:
        return "No DRA problems found.\n"
    lines = []
    for d in diagnoses:
        lines.append(f"[{d.mode}] {d.ref}: {d.summary}")
        if d.numbers:
            nums = ", ".join(
                f"{k} {v}"
                for k, v in d.numbers.items()
                if k in ("needed", "free", "total", "class", "claim", "selector", "key", "node")
            )
            if nums:
                lines.append(f"  numbers: {nums}")
        for e in d.evidence:
            lines.append(f"  evidence: {e}")
        for i, r in enumerate(d.recovery, 1):
            lines.append(f"  fix {i}: {r}")
    return "\n".join(lines) + "\n"
