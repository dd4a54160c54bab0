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
# Changed objects a record keeps, the changed lines of each (each cut to DIFF_LINE characters): at most
# about 25 kB a record, within the history's byte budget (state.HISTORY_BYTES).
DIFF_OBJECTS = 20
DIFF_LINES = 8
DIFF_LINE = 160


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


def changed_objects(delivery: Delivery) -> list[dict[str, object]]:
    """The objects the dry-run found changed (or refused), each with its changed lines (as `diff`
    prints them), bounded: what the dashboard's commit page shows per object."""
    results = delivery.dry_run.results if delivery.dry_run is not None else []
    out: list[dict[str, object]] = []
    for r in results:
        if r.op == "unchanged" and not r.error:
            continue
        lines = [
            line[:DIFF_LINE]
            for line in r.diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        entry: dict[str, object] = {"ref": r.ref, "op": r.op, "fields": lines[:DIFF_LINES]}
        if r.error:
            entry["error"] = r.error[: DIFF_LINE * 2]
        out.append(entry)
        if len(out) >= DIFF_OBJECTS:
            break
    return out


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
        diff={"summary": delivery.plan_line(), **delivery.counts(), "objects": changed_objects(delivery)},
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
        # The failure's diagnosis (mode, evidence, fixes) as the pass saw it: the dashboard shows it later.
        diagnoses=(data.get("diagnoses") or [])[:DIFF_OBJECTS] or None,
    )
