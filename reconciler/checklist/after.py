"""The *during* items (claim states, Warning Events) and the *after* items (pods Ready, claims allocated,
the last attempt verified, devices seen in the container). Pure: facts in, (id, title, status, evidence) out.
"""

from __future__ import annotations

from typing import Any

from reconciler.checklist.common import (
    CHECKED,
    NOT_APPLICABLE,
    NOT_CHECKED,
    Built,
    attempt_record,
    event_window_start,
    good_record,
    iso,
    make_item,
    no_state,
    scope_text,
    short,
    status_of,
)
from reconciler.checklist.facts import ChecklistFacts, ClaimFact, EventFact
from reconciler.loop.store.records import HistoryRecord
from reconciler.outcome import Outcome

# ---- during ------------------------------------------------------------------------------------------


def _claim_line(c: ClaimFact) -> str:
    devices = ", ".join(c.devices) or "-"
    where = f" on {c.node}" if c.node else ""
    reserved = f", reserved for {', '.join(c.reserved_for)}" if c.reserved_for else ", reserved for no pod"
    return f"{c.ref}: allocated {devices}{where}{reserved}"


def claims_item(f: ChecklistFacts) -> Built:
    title = "ResourceClaims allocated, none pending for a pod"
    if not f.served:
        return make_item("claims", title, NOT_CHECKED, "resource.k8s.io is not served")
    if not f.claims:
        return make_item("claims", title, NOT_APPLICABLE, f"no ResourceClaim in {scope_text(f)}")
    allocated = [c for c in f.claims if c.allocated]
    reserved = [c for c in allocated if c.reserved_for]
    pending = [c for c in f.claims if not c.allocated and not c.deleting]
    waiting = [c for c in pending if c.users]
    details = [f"{c.ref}: pending, wanted by {', '.join(c.users)}" for c in waiting]
    details += [
        f"{c.ref}: pending, no pod uses it yet (allocated when one does)" for c in pending if not c.users
    ]
    details += [f"{c.ref}: being deleted" for c in f.claims if c.deleting]
    details += [_claim_line(c) for c in allocated]
    summary = (
        f"{len(f.claims)} claim(s) in {scope_text(f)}: {len(allocated)} allocated, {len(reserved)} reserved, "
        f"{len(pending)} pending"
    )
    return make_item("claims", title, status_of(bool(waiting)), summary, details)


def _event_line(e: EventFact) -> str:
    seen = f" at {iso(e.last_seen)}" if e.last_seen else ""
    return f"{e.involved} {e.reason} (x{e.count}){seen}: {e.message.strip()} [{e.now} now]"


def events_item(f: ChecklistFacts) -> Built:
    title = "No unresolved Warning Events on pods and claims"
    start = event_window_start(f)
    recent = [e for e in f.events if e.last_seen is None or e.last_seen >= start]
    since = f"since {iso(start)}" + (" (start of the last attempt)" if attempt_record(f.state) else "")
    if not recent:
        return make_item(
            "events", title, CHECKED, f"no Warning Event on pods or claims in {scope_text(f)} {since}"
        )
    unresolved = [e for e in recent if e.now != "healthy"]
    ordered = sorted(recent, key=lambda e: (e.now == "healthy", e.involved, e.reason))
    summary = f"{len(recent)} Warning Event(s) {since}: {len(unresolved)} unresolved"
    return make_item("events", title, status_of(bool(unresolved)), summary, [_event_line(e) for e in ordered])


# ---- after -------------------------------------------------------------------------------------------


def pods_ready_item(f: ChecklistFacts) -> Built:
    title = "Pods using claims Ready"
    if not f.pods:
        return make_item(
            "pods-ready", title, NOT_APPLICABLE, f"no pod uses a ResourceClaim in {scope_text(f)}"
        )
    good = [p for p in f.pods if p.ready or p.phase == "Succeeded"]
    bad = [p for p in f.pods if p not in good]
    details = [
        f"{p.ref}: {p.phase}, not Ready" + (f" on {p.node}" if p.node else ", not scheduled") for p in bad
    ]
    details += [f"{p.ref}: {'Ready' if p.ready else p.phase} on {p.node or '-'}" for p in good]
    summary = f"{len(good)}/{len(f.pods)} pod(s) using claims Ready (or finished) in {scope_text(f)}"
    return make_item("pods-ready", title, status_of(bool(bad)), summary, details)


def claims_allocated_item(f: ChecklistFacts) -> Built:
    title = "Every claim of those pods allocated, reserved for the pod, on its node"
    if not f.pods:
        return make_item(
            "claims-allocated", title, NOT_APPLICABLE, f"no pod uses a ResourceClaim in {scope_text(f)}"
        )
    chains = [(p, c) for p in f.pods for c in p.chains]
    broken = [(p, c) for p, c in chains if c.problem and c.problem != "pod not Ready"]
    details = [f"{p.ref}: claim {c.claim}: {c.problem}" for p, c in broken]
    for p, c in chains:
        if (p, c) not in broken:
            reserved = "reserved" if c.reserved else "released (pod finished)"
            details.append(
                f"{p.ref}: claim {c.claim} → {', '.join(c.devices) or '-'} on {c.node or '-'}, {reserved}"
            )
    summary = (
        f"{len(chains) - len(broken)}/{len(chains)} claim(s) of {len(f.pods)} pod(s) allocated and reserved"
    )
    return make_item("claims-allocated", title, status_of(bool(broken)), summary, details)


def _device_lines(record: HistoryRecord) -> list[str]:
    return [
        f"{d.get('claim')} → {', '.join(d.get('devices') or []) or '-'} on {d.get('node') or '-'} (pod {d.get('pod')})"
        for d in record.devices or []
    ]


def verified_item(f: ChecklistFacts) -> Built:
    title = "Last attempted revision applied and verified"
    state = f.state
    if not state.found:
        return make_item("verified", title, NOT_CHECKED, no_state(state, f.target))
    if state.in_progress:
        p = state.in_progress
        return make_item(
            "verified",
            title,
            NOT_CHECKED,
            f"a pass is in progress: {p.operation} of {short(p.sha)} at stage "
            f"{p.stage or '-'} since {p.since}",
        )
    attempted = state.last_attempted
    if attempted is None or not attempted.sha:
        return make_item("verified", title, NOT_CHECKED, f"no revision attempted yet ({state.ref})")
    sha, outcome = attempted.sha, attempted.outcome
    record = attempt_record(state) or HistoryRecord()
    if outcome == Outcome.APPLIED:
        diff = record.summary
        summary = f"{short(sha)} applied and verified at {attempted.at}" + (f": {diff}" if diff else "")
        return make_item("verified", title, CHECKED, summary, _device_lines(record))
    summary = f"{short(sha)} {outcome}: {record.message or outcome}"
    if attempted.rolled_back is True:
        summary += f"; rolled back to {short(state.last_good)} and verified"
    elif attempted.rolled_back is False:
        summary += f"; the rollback to {short(state.last_good)} failed"
    return make_item("verified", title, NOT_CHECKED, summary, _device_lines(record))


def _exec_line(x: dict[str, Any]) -> str:
    output = " | ".join(line.strip() for line in str(x.get("output") or "").strip().splitlines()[:3])
    status = "ok" if x.get("ok") else "FAILED"
    return f"{x.get('pod')} [{x.get('container') or '-'}] {x.get('command')!r}: {status}" + (
        f": {output}" if output else ""
    )


def devices_in_container_item(f: ChecklistFacts) -> Built:
    title = "Devices seen in the container (verify-exec)"
    if not f.state.found:
        return make_item("devices-in-container", title, NOT_APPLICABLE, no_state(f.state, f.target))
    for record in (attempt_record(f.state), good_record(f.state)):
        executed = (record.executed if record else None) or []
        if not record or not executed:
            continue
        failed = [x for x in executed if not x.get("ok")]
        ok = len(executed) - len(failed)
        summary = (
            f"verify-exec of {short(record.sha)} ({record.operation}, {record.at}): "
            f"{ok}/{len(executed)} container(s) ok"
        )
        ordered = failed + [x for x in executed if x.get("ok")]
        return make_item(
            "devices-in-container", title, status_of(bool(failed)), summary, map(_exec_line, ordered)
        )
    return make_item(
        "devices-in-container",
        title,
        NOT_APPLICABLE,
        "no verify-exec ran: no workload of the last reconcile has the dra-gitops.io/verify-exec annotation",
    )
