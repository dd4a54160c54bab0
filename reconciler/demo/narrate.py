"""What the demo says about each pass: read from the controller's result and the live cluster."""

from __future__ import annotations

from typing import Any

from reconciler.demo.story import Step
from reconciler.loop.store.records import HistoryRecord
from reconciler.outcome import Outcome

DRIVER_NAMESPACE = "gpu-system"


def describe_result(client: Any, step: Step, result: Any) -> tuple[bool, list[str]]:
    """(did the step end as the story needs, lines to print: the verdict first, then its evidence)."""
    record = result.records[0] if result.records else HistoryRecord()
    if result.outcome != step.expect:
        return False, [
            f"expected {step.expect}, got {result.outcome}: {result.message or record.message or ''}"
        ]
    if step.expect == Outcome.APPLIED:
        lines = [f"applied and verified: {record.summary}"]
        lines += _device_lines(record)
        lines += _exec_lines(record)
        if any(edit.path.startswith("10-driver/") for edit in step.edits):
            lines += _driver_pod_lines(client)
        return True, lines
    if step.expect == Outcome.DENIED:
        return _denied(result, record)
    return _rolled_back(step, result, record)


def _denied(result: Any, record: HistoryRecord) -> tuple[bool, list[str]]:
    delivery = result.delivery
    if delivery is not None and delivery.wrote:
        return False, ["denied, but objects were written before the denial"]
    lines = ["denied by policy; nothing written to the cluster"]
    for decision in record.decisions or []:
        if decision.get("severity") == "deny":
            lines.append(f"{decision.get('rule')}: {decision.get('msg')}")
    return True, lines


def _rolled_back(step: Step, result: Any, record: HistoryRecord) -> tuple[bool, list[str]]:
    diagnoses = []
    verified = getattr(result.delivery, "verified", None)
    if verified is not None:
        diagnoses = [(d.mode, d.summary, list(d.evidence)) for d in verified.diagnoses]
    # A stage that failed before verification (a driver wave halted) has its diagnosis in the record.
    known = {mode for mode, _, _ in diagnoses}
    for raw in record.diagnoses or []:
        if raw.get("mode") not in known:
            diagnoses.append((str(raw.get("mode")), str(raw.get("summary")), list(raw.get("evidence") or [])))
    modes = [mode for mode, _, _ in diagnoses]
    rollback = result.records[1] if len(result.records) > 1 else HistoryRecord()
    lines = [
        f"rolled back to {(record.rolled_back_to or '(nothing)')[:12]} and verified",
        f"applied: {record.summary}",
    ]
    # What the policies foresaw (a warning does not stop a delivery unless capacity_deny is set).
    for decision in record.decisions or []:
        if decision.get("severity") == "warn":
            lines.append(f"warned before applying: {decision.get('rule')}: {decision.get('msg')}")
    lines.append(f"verification failed: {_first_line(result.message).removeprefix('verification failed: ')}")
    for mode, summary, evidence in diagnoses[:3]:
        lines.append(f"diagnosis {mode}: {summary}")
        if mode == "driver-wave-failed":  # the wave, the node and what was seen there
            lines += [f"  evidence: {line}" for line in evidence[:3]]
    lines.append(f"rollback: {rollback.summary}")
    lines += _device_lines(rollback)
    if step.expect_diagnosis and step.expect_diagnosis not in modes:
        lines[0] = (
            f"rolled back, but the diagnosis was {', '.join(modes) or 'none'}, not {step.expect_diagnosis}"
        )
        return False, lines
    return True, lines


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _device_lines(record: HistoryRecord) -> list[str]:
    lines = []
    for entry in record.devices or []:
        devices = ", ".join(entry.get("devices") or []) or "-"
        lines.append(
            f"claim {entry.get('claim')} (pod {entry.get('pod')}) → {devices} on {entry.get('node')}"
        )
    return lines


def _exec_lines(record: HistoryRecord) -> list[str]:
    """What verify-exec saw inside the containers."""
    lines = []
    for x in record.executed or []:
        seen = " | ".join(line.strip() for line in str(x.get("output") or "").strip().splitlines()[:2])
        verdict = "" if x.get("ok") else "FAILED: "
        lines.append(f"inside pod {x.get('pod')}: {x.get('command')} → {verdict}{seen or '(no output)'}")
    return lines


def _driver_pod_lines(client: Any) -> list[str]:
    lines = []
    pods = client.list_kind("", "Pod", DRIVER_NAMESPACE)
    for pod in sorted(pods, key=lambda p: (p["spec"].get("nodeName") or "", p["metadata"]["name"])):
        if pod["metadata"].get("deletionTimestamp"):
            continue
        image = (pod["spec"].get("containers") or [{}])[0].get("image", "")
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
        lines.append(
            f"driver pod {pod['metadata']['name']} on {pod['spec'].get('nodeName') or '-'}: "
            f"{image.rsplit(':', 1)[-1]}, {'ready' if ready else 'not ready'}"
        )
    return lines


def history_table(client: Any, target: str) -> str:
    """`dra-gitops status`'s text for the target: last good, last attempt and the history of passes."""
    from reconciler.loop.store.state import StateStore
    from reconciler.loop.store.statusview import render_status

    state = StateStore(client, target).load()
    return render_status(target, state, history_count=20).rstrip("\n")
