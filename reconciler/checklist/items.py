"""The operational checklist of a DRA deployment, built from facts (`facts.py`): pure, no I/O.

Three sections, as an operator walks a change: *before* (versions and served APIs, driver health, classes
and slices, capacity, the last dry-run, the rollback target), *during* (claim states, Warning Events) and
*after* (pods Ready, claims allocated, the last revision verified, devices seen in the container). Every
item is checked, not checked or not applicable, and carries its evidence: numbers, names, shas.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.checklist.facts import ChecklistFacts, ClaimFact, DriverFact, EventFact, StateFact

CHECKED = "checked"
NOT_CHECKED = "not-checked"
NOT_APPLICABLE = "not-applicable"
SECTIONS = ("before", "during", "after")
# Without a recorded attempt, Warning Events of this long ago count as recent.
DEFAULT_EVENT_WINDOW = timedelta(minutes=15)
# Evidence lines per item beyond the summary; the rest is counted.
MAX_DETAILS = 12
DRA_GROUP = "resource.k8s.io"


@dataclass(frozen=True)
class Item:
    id: str
    section: str
    title: str
    status: str
    evidence: tuple[str, ...]  # the summary first, then details

    @property
    def failed(self) -> bool:
        return self.status == NOT_CHECKED

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "section": self.section,
            "title": self.title,
            "status": self.status,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True)
class Checklist:
    target: str
    cluster: str
    generated: str
    state_ref: str
    last_good: str | None
    last_attempted: dict[str, Any] | None
    items: tuple[Item, ...]

    @property
    def ok(self) -> bool:
        """Every applicable item checked."""
        return not any(item.failed for item in self.items)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def counts(self) -> dict[str, int]:
        return {
            s: sum(1 for i in self.items if i.status == s) for s in (CHECKED, NOT_CHECKED, NOT_APPLICABLE)
        }

    def section(self, name: str) -> list[Item]:
        return [i for i in self.items if i.section == name]

    def item(self, item_id: str) -> Item:
        for i in self.items:
            if i.id == item_id:
                return i
        raise KeyError(item_id)


def short(sha: Any) -> str:
    return str(sha)[:12] if sha else "(none)"


def _details(lines: Iterable[str]) -> list[str]:
    lines = list(lines)
    if len(lines) > MAX_DETAILS:
        return [*lines[:MAX_DETAILS], f"... and {len(lines) - MAX_DETAILS} more"]
    return lines


def _item(
    item_id: str, title: str, status: str, summary: str, details: Iterable[str] = ()
) -> tuple[str, str, str, tuple[str, ...]]:
    return item_id, title, status, (summary, *_details(details))


def _status(failed: bool) -> str:
    return NOT_CHECKED if failed else CHECKED


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _scope(f: ChecklistFacts) -> str:
    return f"namespace(s) {', '.join(f.namespaces)}" if f.namespaces else "all namespaces"


def _no_state(state: StateFact, target: str) -> str:
    where = state.ref or f"ConfigMap dra-gitops-{target}"
    hint = f"; targets with a state there: {', '.join(state.other_targets)}" if state.other_targets else ""
    return f"no reconcile recorded for target {target} ({where} not found){hint}"


# ---- reading the state history -----------------------------------------------------------------------


def attempt_record(state: StateFact) -> dict[str, Any] | None:
    """The evidence record of the last attempted revision (its newest `apply` record)."""
    attempted = state.last_attempted or {}
    sha = attempted.get("sha")
    if not sha:
        return None
    records = [r for r in state.history if r.get("sha") == sha and r.get("operation") == "apply"]
    same = [r for r in records if r.get("outcome") == attempted.get("outcome")]
    found = same or records
    return found[0] if found else None


def good_record(state: StateFact) -> dict[str, Any] | None:
    """The newest record of a pass that put the cluster on the last good revision and verified it."""
    for record in state.history:
        if (
            state.last_good
            and record.get("sha") == state.last_good
            and record.get("outcome") == "applied"
            and record.get("operation") in ("apply", "rollback", "drift")
        ):
            return record
    return None


def _duration(record: dict[str, Any]) -> float:
    timings = record.get("timings") or {}
    return sum(float(v) for v in timings.values() if isinstance(v, int | float))


def event_window_start(f: ChecklistFacts) -> datetime:
    """From when Events count as recent: the start of the last attempt, else DEFAULT_EVENT_WINDOW ago."""
    record = attempt_record(f.state)
    at = _parse_iso((record or {}).get("at"))
    if at is None:
        return f.now - DEFAULT_EVENT_WINDOW
    # `at` (when the record was written) is cut to the second, and so are event times: whole seconds back
    # from it never miss an event of the attempt.
    return at - timedelta(seconds=math.ceil(_duration(record or {})))


# ---- before ------------------------------------------------------------------------------------------


def _api(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Kubernetes version and served resource.k8s.io versions"
    if not f.served:
        return _item(
            "api",
            title,
            NOT_CHECKED,
            f"Kubernetes {f.server_version}: resource.k8s.io is not served (DRA is off; Kubernetes 1.34+ "
            "serves resource.k8s.io/v1 by default)",
        )
    served = ", ".join(
        f"{v} (preferred)" if v == f.preferred else f"{v} (deprecated)" if v in f.deprecated else v
        for v in f.served
    )
    details = [f"resource.k8s.io/{v} is served but {why}" for v, why in sorted(f.deprecated.items())]
    used: dict[str, list[str]] = {}
    for entry in f.state.inventory:
        api_version, _, ref = entry.partition(" ")
        if api_version.startswith(DRA_GROUP + "/"):
            used.setdefault(api_version.split("/", 1)[1], []).append(ref)
    missing = {v: refs for v, refs in used.items() if v not in f.served}
    for version, refs in sorted(missing.items()):
        details.insert(
            0,
            f"last good {short(f.state.last_good)} uses resource.k8s.io/{version}, which is not served: "
            f"{', '.join(refs[:5])}",
        )
    if used and not missing:
        versions = ", ".join(f"resource.k8s.io/{v}" for v in sorted(used))
        details.append(f"last good {short(f.state.last_good)} uses {versions} (served)")
    summary = f"Kubernetes {f.server_version}; resource.k8s.io served: {served}"
    return _item("api", title, _status(bool(missing)), summary, details)


def _no_driver_workloads(
    f: ChecklistFacts, item_id: str, title: str
) -> tuple[str, str, str, tuple[str, ...]]:
    publishing = sorted(d.name for d in f.drivers if d.slices)
    if publishing:
        return _item(
            item_id,
            title,
            NOT_APPLICABLE,
            "no driver workload recognised (label app.kubernetes.io/component=kubelet-plugin or annotation "
            f"dra-gitops.io/driver); ResourceSlices come from {', '.join(publishing)}",
        )
    return _item(item_id, title, NOT_CHECKED, "no DRA driver workload found and no ResourceSlices published")


def _driver_rollout(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "DRA driver workloads rolled out"
    if not f.driver_workloads:
        return _no_driver_workloads(f, "driver-rollout", title)
    bad = [w for w in f.driver_workloads if w.state != "current"]
    details = []
    for w in sorted(f.driver_workloads, key=lambda w: (w.state == "current", w.ref)):
        canary = f", canary for {w.canary_for}" if w.canary_for else ""
        details.append(f"{w.ref} (driver {w.driver or '?'}{canary}): {w.state}: {w.message}")
    details += [f"note: {w.idle_reason}" for w in f.driver_workloads if w.idle_reason]
    n = len(f.driver_workloads)
    summary = f"{n - len(bad)}/{n} driver workload(s) rolled out"
    return _item("driver-rollout", title, _status(bool(bad)), summary, details)


def _driver_pods(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Driver pods of the current template Ready, none crash-looping"
    if not f.driver_workloads:
        return _no_driver_workloads(f, "driver-pods", title)
    desired = sum(w.desired for w in f.driver_workloads)
    ready = sum(w.ready_pods for w in f.driver_workloads)
    crash = [p for w in f.driver_workloads for p in w.crash_looping]
    failed = bool(crash)
    details: list[str] = []
    for w in f.driver_workloads:
        short_of = w.ready_pods < w.desired or w.current_pods < w.desired
        failed = failed or short_of or bool(w.not_ready)
        nodes = f" on {', '.join(w.nodes)}" if w.nodes else ""
        line = f"{w.ref}: {w.ready_pods}/{w.desired} Ready{nodes}"
        if w.old_pods:
            line += f"; {w.old_pods} pod(s) of an older template still present"
        details.append(line)
        details += [f"{p}: CrashLoopBackOff" for p in w.crash_looping]
        details += list(w.not_ready)
    summary = f"{ready}/{desired} driver pod(s) of the current template Ready"
    if crash:
        summary += f", {len(crash)} in CrashLoopBackOff"
    return _item("driver-pods", title, _status(failed), summary, details)


def _drivers(f: ChecklistFacts) -> dict[str, DriverFact]:
    return {d.name: d for d in f.drivers}


def _classes(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "DeviceClasses present, each with a driver publishing ResourceSlices"
    if not f.served:
        return _item("classes", title, NOT_CHECKED, "resource.k8s.io is not served")
    drivers = _drivers(f)
    names = {c.name for c in f.classes}
    problems: list[str] = []
    for entry in f.state.inventory:
        _, _, ref = entry.partition(" ")
        kind, _, name = ref.partition("/")
        if kind in ("DeviceClass", "ResourceClass") and name not in names:
            problems.append(f"{kind} {name} of last good {short(f.state.last_good)} is missing")
    notes: list[str] = []
    for c in f.classes:
        if c.driver is None:
            notes.append(f"{c.kind} {c.name}: its selectors name no single driver")
        elif not (drivers.get(c.driver) and drivers[c.driver].slices):
            problems.append(f"{c.kind} {c.name} selects driver {c.driver}, which publishes no ResourceSlices")
    if not f.classes:
        return _item(
            "classes",
            title,
            NOT_CHECKED,
            "no DeviceClass in the cluster: claims have nothing to request",
            problems,
        )
    listed = ", ".join(f"{c.name} → {c.driver or '?'}" for c in sorted(f.classes, key=lambda c: c.name))
    summary = f"{len(f.classes)} class(es): {listed}"
    return _item("classes", title, _status(bool(problems)), summary, problems + notes)


def _slices(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "ResourceSlices published for every driver and node"
    if not f.served:
        return _item("slices", title, NOT_CHECKED, "resource.k8s.io is not served")
    drivers = _drivers(f)
    wanted = (
        set(drivers)
        | {w.driver for w in f.driver_workloads if w.driver}
        | {c.driver for c in f.classes if c.driver}
    )
    if not wanted:
        return _item("slices", title, NOT_CHECKED, "no ResourceSlices published and no driver found")
    problems: list[str] = []
    details: list[str] = []
    for name in sorted(wanted):
        d = drivers.get(name)
        if d is None or not d.slices:
            problems.append(f"driver {name} publishes no ResourceSlices")
            continue
        where = f"on {', '.join(d.slice_nodes)}" if d.slice_nodes else "not node-local"
        details.append(f"{name}: {d.slices} slice(s), {d.devices} device(s) in {d.pools} pool(s) {where}")
        if not d.slice_nodes:
            continue
        running = sorted({n for w in f.driver_workloads if w.driver == name for n in w.nodes})
        for node in running:
            if node not in d.slice_nodes:
                problems.append(f"driver {name} runs on {node} but publishes no ResourceSlice for it")
    total = sum(d.slices for d in f.drivers)
    summary = f"{total} ResourceSlice(s) from {len([d for d in f.drivers if d.slices])} driver(s)"
    return _item("slices", title, _status(bool(problems)), summary, problems + details)


def _capacity(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Device capacity per class and driver"
    if not f.served:
        return _item("capacity", title, NOT_CHECKED, "resource.k8s.io is not served")
    total = sum(d.devices for d in f.drivers)
    allocated = sum(d.allocated for d in f.drivers)
    if not total:
        return _item("capacity", title, NOT_CHECKED, "no devices published: every claim would stay pending")
    problems: list[str] = []
    details: list[str] = []
    for d in sorted(f.drivers, key=lambda d: d.name):
        details.append(
            f"driver {d.name}: {d.devices} device(s), {d.allocated} allocated, {d.devices - d.allocated} free"
        )
    for c in sorted(f.classes, key=lambda c: c.name):
        more = " or more (a selector could not be evaluated)" if c.unknown else ""
        line = (
            f"class {c.name}: {c.devices}{more} device(s) match, {c.allocated} allocated, "
            f"{c.devices - c.allocated} free"
        )
        if c.devices == 0 and not c.unknown:
            problems.append(f"class {c.name} matches no published device")
        else:
            details.append(line)
    summary = f"{total} device(s), {allocated} allocated, {total - allocated} free"
    return _item("capacity", title, _status(bool(problems)), summary, problems + details)


def _dry_run(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Server-side dry-run of the last attempted revision passed"
    state = f.state
    if not state.found:
        return _item("dry-run", title, NOT_CHECKED, _no_state(state, f.target))
    attempted = state.last_attempted or {}
    sha = attempted.get("sha")
    if not sha:
        return _item("dry-run", title, NOT_CHECKED, f"no revision attempted yet ({state.ref})")
    record = attempt_record(state) or {}
    outcome = attempted.get("outcome")
    message = record.get("message") or outcome
    decisions = record.get("decisions") or []
    findings = [
        f"{d.get('severity')} {d.get('rule')} {d.get('ref') or ''}: {d.get('msg')}".replace("  ", " ")
        for d in decisions
    ]
    if outcome == "denied":
        return _item(
            "dry-run",
            title,
            NOT_CHECKED,
            f"{short(sha)}: denied by policy before the dry-run: {message}",
            findings,
        )
    if outcome == "unverified":
        return _item("dry-run", title, NOT_CHECKED, f"{short(sha)}: refused before the dry-run: {message}")
    if outcome == "dry-run-failed":
        return _item(
            "dry-run", title, NOT_CHECKED, f"{short(sha)}: server-side dry-run failed: {message}", findings
        )
    summary = str((record.get("diff") or {}).get("summary") or "")
    if not summary or "not dry-run" in summary:
        return _item("dry-run", title, NOT_CHECKED, f"{short(sha)} ({outcome}): no dry-run result recorded")
    at = f" at {record['at']}" if record.get("at") else ""
    return _item("dry-run", title, CHECKED, f"{short(sha)}: {summary} (server-side dry-run{at})", findings)


def _rollback_target(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Rollback target recorded (last good revision)"
    state = f.state
    if not state.found:
        return _item("rollback-target", title, NOT_CHECKED, _no_state(state, f.target))
    if not state.last_good:
        return _item(
            "rollback-target",
            title,
            NOT_CHECKED,
            "no last good revision: a failing pass would roll back to nothing (removing what it created)",
        )
    record = good_record(state)
    summary = f"lastGood {short(state.last_good)}"
    if record is not None:
        summary += f", {record.get('operation')} verified at {record.get('at')}"
    summary += f"; {len(state.inventory)} object(s) in its inventory"
    attempted = state.last_attempted or {}
    details = []
    failed = False
    if attempted.get("rolledBack") is False:
        failed = True
        details.append(
            f"the rollback of {short(attempted.get('sha'))} to {short(state.last_good)} failed: "
            "the cluster needs a human (`dra-gitops status`)"
        )
    elif attempted.get("rolledBack"):
        details.append(f"{short(attempted.get('sha'))} ({attempted.get('outcome')}) was rolled back to it")
    if state.hold:
        details.append(
            f"holding: {short(state.hold)} stays unapplied until a newer commit or `dra-gitops retry`"
        )
    if state.in_progress:
        p = state.in_progress
        details.append(
            f"{p.get('operation')} of {short(p.get('sha'))} in progress at stage {p.get('stage') or '-'} "
            f"since {p.get('since')}"
        )
    return _item("rollback-target", title, _status(failed), summary, details)


# ---- during ------------------------------------------------------------------------------------------


def _claim_line(c: ClaimFact) -> str:
    devices = ", ".join(c.devices) or "-"
    where = f" on {c.node}" if c.node else ""
    reserved = f", reserved for {', '.join(c.reserved_for)}" if c.reserved_for else ", reserved for no pod"
    return f"{c.ref}: allocated {devices}{where}{reserved}"


def _claims(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "ResourceClaims allocated, none pending for a pod"
    if not f.served:
        return _item("claims", title, NOT_CHECKED, "resource.k8s.io is not served")
    if not f.claims:
        return _item("claims", title, NOT_APPLICABLE, f"no ResourceClaim in {_scope(f)}")
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
        f"{len(f.claims)} claim(s) in {_scope(f)}: {len(allocated)} allocated, {len(reserved)} reserved, "
        f"{len(pending)} pending"
    )
    return _item("claims", title, _status(bool(waiting)), summary, details)


def _event_line(e: EventFact) -> str:
    seen = f" at {_iso(e.last_seen)}" if e.last_seen else ""
    return f"{e.involved} {e.reason} (x{e.count}){seen}: {e.message.strip()} [{e.now} now]"


def _events(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "No unresolved Warning Events on pods and claims"
    start = event_window_start(f)
    recent = [e for e in f.events if e.last_seen is None or e.last_seen >= start]
    since = f"since {_iso(start)}" + (" (start of the last attempt)" if attempt_record(f.state) else "")
    if not recent:
        return _item("events", title, CHECKED, f"no Warning Event on pods or claims in {_scope(f)} {since}")
    unresolved = [e for e in recent if e.now != "healthy"]
    ordered = sorted(recent, key=lambda e: (e.now == "healthy", e.involved, e.reason))
    summary = f"{len(recent)} Warning Event(s) {since}: {len(unresolved)} unresolved"
    return _item("events", title, _status(bool(unresolved)), summary, [_event_line(e) for e in ordered])


# ---- after -------------------------------------------------------------------------------------------


def _pods_ready(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Pods using claims Ready"
    if not f.pods:
        return _item("pods-ready", title, NOT_APPLICABLE, f"no pod uses a ResourceClaim in {_scope(f)}")
    good = [p for p in f.pods if p.ready or p.phase == "Succeeded"]
    bad = [p for p in f.pods if p not in good]
    details = [
        f"{p.ref}: {p.phase}, not Ready" + (f" on {p.node}" if p.node else ", not scheduled") for p in bad
    ]
    details += [f"{p.ref}: {'Ready' if p.ready else p.phase} on {p.node or '-'}" for p in good]
    summary = f"{len(good)}/{len(f.pods)} pod(s) using claims Ready (or finished) in {_scope(f)}"
    return _item("pods-ready", title, _status(bool(bad)), summary, details)


def _claims_allocated(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Every claim of those pods allocated, reserved for the pod, on its node"
    if not f.pods:
        return _item("claims-allocated", title, NOT_APPLICABLE, f"no pod uses a ResourceClaim in {_scope(f)}")
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
    return _item("claims-allocated", title, _status(bool(broken)), summary, details)


def _device_lines(record: dict[str, Any]) -> list[str]:
    return [
        f"{d.get('claim')} → {', '.join(d.get('devices') or []) or '-'} on {d.get('node') or '-'} (pod {d.get('pod')})"
        for d in record.get("devices") or []
    ]


def _verified(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Last attempted revision applied and verified"
    state = f.state
    if not state.found:
        return _item("verified", title, NOT_CHECKED, _no_state(state, f.target))
    if state.in_progress:
        p = state.in_progress
        return _item(
            "verified",
            title,
            NOT_CHECKED,
            f"a pass is in progress: {p.get('operation')} of {short(p.get('sha'))} at stage "
            f"{p.get('stage') or '-'} since {p.get('since')}",
        )
    attempted = state.last_attempted or {}
    sha = attempted.get("sha")
    if not sha:
        return _item("verified", title, NOT_CHECKED, f"no revision attempted yet ({state.ref})")
    record = attempt_record(state) or {}
    outcome = attempted.get("outcome")
    if outcome == "applied":
        diff = (record.get("diff") or {}).get("summary")
        summary = f"{short(sha)} applied and verified at {attempted.get('at')}" + (
            f": {diff}" if diff else ""
        )
        return _item("verified", title, CHECKED, summary, _device_lines(record))
    summary = f"{short(sha)} {outcome}: {record.get('message') or outcome}"
    if attempted.get("rolledBack") is True:
        summary += f"; rolled back to {short(state.last_good)} and verified"
    elif attempted.get("rolledBack") is False:
        summary += f"; the rollback to {short(state.last_good)} failed"
    return _item("verified", title, NOT_CHECKED, summary, _device_lines(record))


def _exec_line(x: dict[str, Any]) -> str:
    output = " | ".join(line.strip() for line in str(x.get("output") or "").strip().splitlines()[:3])
    status = "ok" if x.get("ok") else "FAILED"
    return f"{x.get('pod')} [{x.get('container') or '-'}] {x.get('command')!r}: {status}" + (
        f": {output}" if output else ""
    )


def _devices_in_container(f: ChecklistFacts) -> tuple[str, str, str, tuple[str, ...]]:
    title = "Devices seen in the container (verify-exec)"
    if not f.state.found:
        return _item("devices-in-container", title, NOT_APPLICABLE, _no_state(f.state, f.target))
    for record in (attempt_record(f.state), good_record(f.state)):
        executed = (record or {}).get("exec") or []
        if not record or not executed:
            continue
        failed = [x for x in executed if not x.get("ok")]
        ok = len(executed) - len(failed)
        summary = (
            f"verify-exec of {short(record.get('sha'))} ({record.get('operation')}, {record.get('at')}): "
            f"{ok}/{len(executed)} container(s) ok"
        )
        ordered = failed + [x for x in executed if x.get("ok")]
        return _item("devices-in-container", title, _status(bool(failed)), summary, map(_exec_line, ordered))
    return _item(
        "devices-in-container",
        title,
        NOT_APPLICABLE,
        "no verify-exec ran: no workload of the last reconcile has the dra-gitops.io/verify-exec annotation",
    )


# ---- the checklist -----------------------------------------------------------------------------------

_BUILDERS: Sequence[tuple[str, Callable[[ChecklistFacts], tuple[str, str, str, tuple[str, ...]]]]] = (
    ("before", _api),
    ("before", _driver_rollout),
    ("before", _driver_pods),
    ("before", _classes),
    ("before", _slices),
    ("before", _capacity),
    ("before", _dry_run),
    ("before", _rollback_target),
    ("during", _claims),
    ("during", _events),
    ("after", _pods_ready),
    ("after", _claims_allocated),
    ("after", _verified),
    ("after", _devices_in_container),
)

ITEM_IDS = (
    "api",
    "driver-rollout",
    "driver-pods",
    "classes",
    "slices",
    "capacity",
    "dry-run",
    "rollback-target",
    "claims",
    "events",
    "pods-ready",
    "claims-allocated",
    "verified",
    "devices-in-container",
)


def build_checklist(f: ChecklistFacts) -> Checklist:
    items = []
    for section, build in _BUILDERS:
        item_id, title, status, evidence = build(f)
        items.append(Item(item_id, section, title, status, evidence))
    return Checklist(
        target=f.target,
        cluster=f.cluster,
        generated=_iso(f.now),
        state_ref=f.state.ref,
        last_good=f.state.last_good,
        last_attempted=f.state.last_attempted,
        items=tuple(items),
    )


__all__ = [
    "CHECKED",
    "ITEM_IDS",
    "NOT_APPLICABLE",
    "NOT_CHECKED",
    "SECTIONS",
    "Checklist",
    "Item",
    "attempt_record",
    "build_checklist",
    "event_window_start",
    "good_record",
]
