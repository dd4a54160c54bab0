"""What a reconcile pass records: its evidence record in the state's history, and summaries of it.

The record is bounded (``RECORD_ITEMS`` of each list, ``EXEC_OUTPUT`` characters of a verify-exec's
output); the operational checklist reads the last ones back (``checklist/``).
"""

from __future__ import annotations

from reconciler.delivery.result import Delivery
from reconciler.loop.store.records import HistoryRecord
from reconciler.loop.store.state import RECORD_ITEMS, now_iso

# Characters of a verify-exec's output an evidence record keeps.
EXEC_OUTPUT = 500


def drift_text(refs: dict[str, list[str]]) -> str:
    parts = [f"{len(v)} {k}" for k, v in refs.items() if v]
    return ", ".join(parts)


def count_violations(delivery: Delivery) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    if delivery.check is None:
        return counts
    for finding in delivery.check.result.findings:
        key = (finding.rule, finding.severity)
        counts[key] = counts.get(key, 0) + 1
    return counts


def evidence_record(delivery: Delivery, sha: str | None, operation: str) -> HistoryRecord:
    """One bounded history entry: decisions, diff summary, timings, claim → device → node, outcome."""
    data = delivery.to_json()
    findings = data.get("findings") or []
    evidence = data.get("evidence") or []
    executed = data.get("exec") or []
    return HistoryRecord(
        sha=sha,
        operation=operation,
        outcome=delivery.outcome,
        at=now_iso(),
        diff={"summary": delivery.plan_line(), **delivery.counts()},
        decisions=[
            {k: f.get(k) for k in ("rule", "severity", "ref", "msg", "path", "line")}
            for f in findings[:RECORD_ITEMS]
        ],
        timings=data.get("timings") or {},
        devices=[
            {"claim": e.get("claim"), "pod": e.get("pod"), "devices": e.get("devices"), "node": e.get("node")}
            for e in evidence[:RECORD_ITEMS]
            if e.get("claim")
        ],
        # What verify-exec saw in the containers (e.g. the devices `nvidia-smi -L` lists), kept short.
        executed=[
            {
                **{k: x.get(k) for k in ("pod", "container", "command", "ok")},
                "output": str(x.get("output") or "")[:EXEC_OUTPUT],
            }
            for x in executed[:RECORD_ITEMS]
        ]
        or None,
        decisions_omitted=len(findings) - RECORD_ITEMS if len(findings) > RECORD_ITEMS else None,
        message=delivery.failure_message() or None,
    )
