"""The *before* items: versions and served APIs, driver health, classes and slices, capacity, the last
attempt's dry-run and the rollback target. Pure: facts in, (id, title, status, evidence) out.
"""

from __future__ import annotations

from typing import Any

from reconciler.checklist.common import (
    CHECKED,
    DRA_GROUP,
    NOT_APPLICABLE,
    NOT_CHECKED,
    Built,
    attempt_record,
    good_record,
    make_item,
    no_state,
    short,
    status_of,
)
from reconciler.checklist.facts import ChecklistFacts, DriverFact, StateFact
from reconciler.loop.store.records import HistoryRecord
from reconciler.outcome import Outcome


def api_item(f: ChecklistFacts) -> Built:
    title = "Kubernetes version and served resource.k8s.io versions"
    if not f.served:
        return make_item(
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
    return make_item("api", title, status_of(bool(missing)), summary, details)


def _no_driver_workloads(f: ChecklistFacts, item_id: str, title: str) -> Built:
    publishing = sorted(d.name for d in f.drivers if d.slices)
    if publishing:
        return make_item(
            item_id,
            title,
            NOT_APPLICABLE,
            "no driver workload recognised (label app.kubernetes.io/component=kubelet-plugin or annotation "
            f"dra-gitops.io/driver); ResourceSlices come from {', '.join(publishing)}",
        )
    return make_item(
        item_id, title, NOT_CHECKED, "no DRA driver workload found and no ResourceSlices published"
    )


def driver_rollout_item(f: ChecklistFacts) -> Built:
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
    return make_item("driver-rollout", title, status_of(bool(bad)), summary, details)


def driver_pods_item(f: ChecklistFacts) -> Built:
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
    return make_item("driver-pods", title, status_of(failed), summary, details)


def _drivers(f: ChecklistFacts) -> dict[str, DriverFact]:
    return {d.name: d for d in f.drivers}


def classes_item(f: ChecklistFacts) -> Built:
    title = "DeviceClasses present, each with a driver publishing ResourceSlices"
    if not f.served:
        return make_item("classes", title, NOT_CHECKED, "resource.k8s.io is not served")
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
        return make_item(
            "classes",
            title,
            NOT_CHECKED,
            "no DeviceClass in the cluster: claims have nothing to request",
            problems,
        )
    listed = ", ".join(f"{c.name} → {c.driver or '?'}" for c in sorted(f.classes, key=lambda c: c.name))
    summary = f"{len(f.classes)} class(es): {listed}"
    return make_item("classes", title, status_of(bool(problems)), summary, problems + notes)


def slices_item(f: ChecklistFacts) -> Built:
    title = "ResourceSlices published for every driver and node"
    if not f.served:
        return make_item("slices", title, NOT_CHECKED, "resource.k8s.io is not served")
    drivers = _drivers(f)
    wanted = (
        set(drivers)
        | {w.driver for w in f.driver_workloads if w.driver}
        | {c.driver for c in f.classes if c.driver}
    )
    if not wanted:
        return make_item("slices", title, NOT_CHECKED, "no ResourceSlices published and no driver found")
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
    return make_item("slices", title, status_of(bool(problems)), summary, problems + details)


def capacity_item(f: ChecklistFacts) -> Built:
    title = "Device capacity per class and driver"
    if not f.served:
        return make_item("capacity", title, NOT_CHECKED, "resource.k8s.io is not served")
    total = sum(d.devices for d in f.drivers)
    allocated = sum(d.allocated for d in f.drivers)
    if not total:
        return make_item(
            "capacity", title, NOT_CHECKED, "no devices published: every claim would stay pending"
        )
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
    return make_item("capacity", title, status_of(bool(problems)), summary, problems + details)


def _where(decision: dict[str, Any]) -> str:
    """`path:line ` of a policy decision, when it has one."""
    if not decision.get("path"):
        return ""
    return f"{decision['path']}:{decision.get('line') or 1} "


def dry_run_item(f: ChecklistFacts) -> Built:
    title = "Server-side dry-run of the last attempted revision passed"
    state = f.state
    if not state.found:
        return make_item("dry-run", title, NOT_CHECKED, no_state(state, f.target))
    attempted = state.last_attempted
    if attempted is None or not attempted.sha:
        return make_item("dry-run", title, NOT_CHECKED, f"no revision attempted yet ({state.ref})")
    sha, outcome = attempted.sha, attempted.outcome
    record = attempt_record(state) or HistoryRecord()
    message = record.message or outcome
    decisions = record.decisions or []
    findings = [
        f"{d.get('severity')} {d.get('rule')} {_where(d)}{d.get('ref') or ''}: {d.get('msg')}".replace(
            "  ", " "
        )
        for d in decisions
    ]
    if outcome == Outcome.DENIED:
        denials = sum(1 for d in decisions if d.get("severity") == "deny")
        return make_item(
            "dry-run",
            title,
            NOT_CHECKED,
            f"{short(sha)}: denied by policy before the dry-run ({denials} denial(s)); nothing was written",
            findings,
        )
    if outcome == Outcome.UNVERIFIED:
        return make_item(
            "dry-run", title, NOT_CHECKED, f"{short(sha)}: refused before the dry-run: {message}"
        )
    if outcome == Outcome.DRY_RUN_FAILED:
        return make_item(
            "dry-run", title, NOT_CHECKED, f"{short(sha)}: server-side dry-run failed: {message}", findings
        )
    summary = record.summary
    if not summary or "not dry-run" in summary:
        return make_item(
            "dry-run", title, NOT_CHECKED, f"{short(sha)} ({outcome}): no dry-run result recorded"
        )
    at = f" at {record.at}" if record.at else ""
    return make_item(
        "dry-run", title, CHECKED, f"{short(sha)}: {summary} (server-side dry-run{at})", findings
    )


def rollback_target_item(f: ChecklistFacts) -> Built:
    title = "Rollback target recorded (last good revision)"
    state = f.state
    if not state.found:
        return make_item("rollback-target", title, NOT_CHECKED, no_state(state, f.target))
    if not state.last_good:
        return make_item(
            "rollback-target",
            title,
            NOT_CHECKED,
            "no last good revision: a failing pass would roll back to nothing (removing what it created)",
        )
    record = good_record(state)
    summary = f"lastGood {short(state.last_good)}"
    if record is not None:
        summary += f", {record.operation} verified at {record.at}"
    summary += f"; {len(state.inventory)} object(s) in its inventory"
    attempted = state.last_attempted
    details = []
    failed = False
    if attempted is not None and attempted.rolled_back is False:
        failed = True
        details.append(
            f"the rollback of {short(attempted.sha)} to {short(state.last_good)} failed: "
            "the cluster needs a human (`dra-gitops status`)"
        )
    elif attempted is not None and attempted.rolled_back:
        details.append(f"{short(attempted.sha)} ({attempted.outcome}) was rolled back to it")
    rehearsal_failed, rehearsal = _rehearsal_lines(state)
    failed = failed or rehearsal_failed
    details.extend(rehearsal)
    if state.hold:
        details.append(
            f"holding: {short(state.hold)} stays unapplied until a newer commit or `dra-gitops retry`"
        )
    if state.in_progress:
        p = state.in_progress
        details.append(
            f"{p.operation} of {short(p.sha)} in progress at stage {p.stage or '-'} since {p.since}"
        )
    return make_item("rollback-target", title, status_of(failed), summary, details)


def _rehearsal_lines(state: StateFact) -> tuple[bool, list[str]]:
    """Whether the rollback plan of the last good commit was tested: rehearsed here (`rehearseRollback`,
    each step verified) or upstream before it was promoted here (`requireRehearsal`). (failed, lines)."""
    record = next(
        (
            r
            for r in state.history
            if r.sha == state.last_good and r.operation == "apply" and r.outcome == Outcome.APPLIED
        ),
        None,
    )
    if record is None:
        return False, []
    lines = []
    rehearsal = record.rehearsal or {}
    steps = rehearsal.get("steps") or []
    if steps:
        done = "; ".join(
            f"{s.get('step')} to {short(s.get('sha'))} {s.get('outcome')} in {s.get('seconds')}s "
            f"({s.get('verified') or s.get('message')})"
            for s in steps
        )
        verdict = "rollback rehearsed" if rehearsal.get("ok") else "the rollback rehearsal FAILED"
        lines.append(f"{verdict} at {steps[-1].get('at')}: {done}")
    promoted = record.promoted or {}
    if promoted.get("rehearsed"):
        lines.append(f"its rollback was rehearsed in {promoted.get('from')} before it was promoted here")
    return bool(steps) and not rehearsal.get("ok"), lines
