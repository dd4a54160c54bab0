"""The `capacity` part of the policy input: will the pods a change adds get their devices? (pure)

The change's pods (a Pod, or one pod per replica of a workload; a DaemonSet one per node it runs on:
:mod:`reconciler.dra.capacity_pods`) join the pods already waiting in the cluster, and the placement model (:mod:`reconciler.dra.placement`,
the one the simulated scheduler uses) places them one at a time in the scheduler's order against the
published devices minus what allocated claims hold (a claim whose pods are being deleted is releasing
its devices: the scheduler hands them to the next pod within the pods' grace period), along every
placement the scheduler's ties between equal node scores allow (:mod:`reconciler.dra.ties`). The answer
is per pod and per claim: "fits" (in every placement: node and devices), "does-not-fit" (in none: why,
node by node), "at-risk" (in some: the share, the earlier pods whose node decides it, what removes the
risk) or "unknown" (what the model could not decide); and for the change, the range of its pods that may
stay Pending. The `capacity` Rego rule turns the pods that do not fit, and those at risk, into warnings
or, with params, denials; "unknown" never becomes a finding. A Deployment rollout that keeps its old pods until
new ones run (maxUnavailable 0) adds its first new pods too (:func:`reconciler.model.rollouts.rollout_surge`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from reconciler.dra.allocator import Inventory
from reconciler.dra.capacity_pods import PodBuilder, PodSource, pod_done, releasing_claims
from reconciler.dra.capacity_render import ORDER_NOTE, render_capacity
from reconciler.dra.capacity_selectors import selector_errors
from reconciler.dra.capacity_verdicts import at_risk_advice, fraction_text, pending_range
from reconciler.dra.nodematch import BLOCKING_EFFECTS
from reconciler.dra.noderesources import extended_requests
from reconciler.dra.placement import NodeInfo, Placement, PodClaim, PodInfo, PodResult
from reconciler.dra.simulate import simulate
from reconciler.dra.ties import PodVerdict, explore
from reconciler.model import dra
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan
from reconciler.model.readers import as_dict, as_list

__all__ = ["ORDER_NOTE", "capacity_input", "releasing_claims", "render_capacity"]

ADVICE = "free devices, add nodes with devices, or lower the request"


def _devices(result: PodResult, key: tuple[str, str], allocation: dict[str, Any] | None) -> list[str]:
    outcome = result.allocations.get(key)
    alloc = (outcome.allocation if outcome is not None else None) or allocation or {}
    return [
        f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
        for r in as_list(as_dict(alloc.get("devices")).get("results"))
        if isinstance(r, dict)
    ]


def _taint_rules(plan: Plan, head: Sequence[Manifest], live: Sequence[Manifest]) -> list[dict[str, Any]]:
    """The DeviceTaintRules as the scheduler will see them once the change is in: the head's (added or
    changed), the live ones the change leaves alone, none that it deletes."""
    deleted = {c.ref for c in plan.changes if c.op == "delete"}
    in_head = {m.ref: m.body for m in head if m.kind == "DeviceTaintRule"}
    kept = [
        m.body for m in live if m.kind == "DeviceTaintRule" and m.ref not in in_head and m.ref not in deleted
    ]
    return [*kept, *in_head.values()]


def capacity_input(plan: Plan, head: Sequence[Manifest], live: Sequence[Manifest]) -> dict[str, Any]:
    """`input.capacity`: every pod and claim of the change with its predicted outcome."""
    classes = {
        m.ref.name: m.body
        for m in [*live, *head]
        if m.kind == "DeviceClass" and dra.is_dra_group(m.api_version)
    }
    slices = [m.body for m in live if m.kind == "ResourceSlice"]
    releasing = releasing_claims(live)
    live_claims = [
        m.body for m in live if m.kind == "ResourceClaim" and (m.ref.namespace, m.ref.name) not in releasing
    ]
    nodes = [NodeInfo.from_node(m.body) for m in live if m.kind == "Node"]
    builder = PodBuilder(plan, head, live)
    builder.waiting_pods()
    builder.change_pods(nodes)
    if not builder.pods and not builder.new_claims:
        return {
            "pods": [],
            "claims": [],
            "failures": [],
            "pending": {"min": 0, "max": 0, "of": 0, "summary": ""},
            "selector_errors": [],
            "releasing": [],
            "totals": {},
            "note": ORDER_NOTE,
        }
    inv = Inventory(slices, classes, live_claims, _taint_rules(plan, head, live))
    placement = Placement(
        inv,
        nodes,
        _pods_per_node(live),
        explain=True,
        node_requests=_bound_requests(live),
        bound_pods=_bound_pods(live),
    )
    probe = placement.clone()  # before any pod of the change holds anything
    in_change = {
        id(pod) for pod, source in zip(builder.pods, builder.sources, strict=True) if source.manifest
    }
    exploration = explore(placement, builder.pods, counted=lambda pod: id(pod) in in_change)
    by_pod = {id(v.pod): v for v in exploration.verdicts}
    report = _Report(placement, classes, _installing(head, slices))
    # A rollout stalls only when none of its first new pods fits; once one runs, an old pod goes.
    rolling_on = {
        id(source)
        for pod, source in zip(builder.pods, builder.sources, strict=True)
        if source.rollout and by_pod[id(pod)].verdict == "fits"
    }
    for pod, source in zip(builder.pods, builder.sources, strict=True):
        report.add(pod, source, by_pod[id(pod)], id(source) in rolling_on)
    for key, manifest in builder.new_claims:
        if key not in report.claimed:
            report.claims.append(_unused_claim(probe, key, manifest, nodes))
    class_manifests = {
        m.ref.name: m for m in head if m.kind == "DeviceClass" and dra.is_dra_group(m.api_version)
    }
    changed = [
        (pod, by_pod[id(pod)].result, source.manifest)
        for pod, source in zip(builder.pods, builder.sources, strict=True)
        if source.manifest is not None
    ]
    return {
        "pods": report.pods,
        "claims": report.claims,
        "failures": report.failure_list(),
        "selector_errors": selector_errors(inv, changed, class_manifests),
        "releasing": [f"{ns}/{name}" for ns, name in sorted(releasing)],
        "totals": simulate(slices, classes, live_claims).to_dict()["totals"],
        "note": ORDER_NOTE,
        "pending": pending_range(exploration, len(in_change)),
        "search": exploration.to_dict(),
    }


def _bound_pods(live: Sequence[Manifest]) -> list[dict[str, Any]]:
    """The pods bound to nodes and running there (what the scheduler's scoring counts)."""
    return [
        m.body
        for m in live
        if m.kind == "Pod" and as_dict(m.body.get("spec")).get("nodeName") and not pod_done(m.body)
    ]


def _pods_per_node(live: Sequence[Manifest]) -> Counter[str]:
    """Pods bound to each node: the scheduler's spreading weighs them."""
    return Counter(
        str(as_dict(m.body.get("spec")).get("nodeName"))
        for m in live
        if m.kind == "Pod" and as_dict(m.body.get("spec")).get("nodeName")
    )


def _bound_requests(live: Sequence[Manifest]) -> dict[str, dict[str, Fraction]]:
    """The extended resources the running pods bound to each node request."""
    requested: dict[str, dict[str, Fraction]] = {}
    for m in live:
        spec = as_dict(m.body.get("spec"))
        if m.kind == "Pod" and spec.get("nodeName") and not pod_done(m.body):
            held = requested.setdefault(str(spec["nodeName"]), {})
            for name, q in extended_requests(spec).items():
                held[name] = held.get(name, Fraction(0)) + q
    return requested


def _installing(head: Sequence[Manifest], slices: Sequence[dict[str, Any]]) -> set[str]:
    """Drivers the change installs that publish nothing yet: their pods cannot be judged, not "0 free".

    A driver that already publishes slices is judged on them, even when its workload is in the change.
    """
    publishing = {as_dict(s.get("spec")).get("driver") or s.get("driverName") for s in slices}
    drivers = [dra.workload_driver(m.body) for m in head if dra.is_driver_workload(m.body)]
    installing = set(drivers) - {None}
    if None in drivers:  # a driver workload whose name only its DeviceClass tells (no flag names it)
        classes = [m for m in head if m.kind == "DeviceClass" and dra.is_dra_group(m.api_version)]
        installing |= {dra.class_driver(m.body) for m in classes} - {None}
    return {str(d) for d in installing - publishing}


class _Report:
    """The pods, claims and failures of `input.capacity`, pod by pod from the placement's results."""

    def __init__(
        self, placement: Placement, classes: dict[str, dict[str, Any]], installing: set[str]
    ) -> None:
        self.placement = placement
        self.classes = classes
        self.installing = installing
        self.pods: list[dict[str, Any]] = []
        self.claims: list[dict[str, Any]] = []
        self.claimed: set[tuple[str, str]] = set()
        self.failures: dict[tuple[str, str], dict[str, Any]] = {}

    def judge(
        self, pod: PodInfo, source: PodSource, verdict: PodVerdict, rolling_on: bool
    ) -> tuple[str, str, str | None]:
        """(outcome, reason, unknown) of one pod, the exploration's verdict read in the change's context."""
        result = verdict.result
        outcome, reason, unknown = verdict.verdict, "", result.unknown
        if outcome in ("does-not-fit", "at-risk") and rolling_on:
            outcome = "unknown"
            unknown = "waits for the devices of the old pods the rollout replaces"
        if outcome == "error":
            reason = result.scheduler_error or result.reason()
        elif outcome == "at-risk":
            reason = f"{fraction_text(verdict)}; where it does not: {result.reason()}"
        elif outcome != "fits":
            reason = result.reason() if outcome == "does-not-fit" else f"unknown: {unknown}"
        if outcome in ("does-not-fit", "at-risk") and source.rollout:
            reason = f"{reason}; {source.rollout}"
        if outcome in ("does-not-fit", "at-risk") and self.installing:
            drivers = {
                dra.class_driver(dict(self.classes.get(c) or {}))
                for pc in pod.claims
                if pc.claim is not None
                for c in dra.requested_classes(dict(pc.claim))
            }
            pending = sorted(d for d in drivers & self.installing if d)
            if pending:
                outcome = "unknown"
                unknown = f"driver {', '.join(pending)} is installed by this change; no devices published yet"
                reason = f"unknown: {unknown}"
        return outcome, reason, unknown

    def add(self, pod: PodInfo, source: PodSource, verdict: PodVerdict, rolling_on: bool) -> None:
        outcome, reason, unknown = self.judge(pod, source, verdict, rolling_on)
        result = verdict.fit if outcome in ("fits", "at-risk") and verdict.fit else verdict.result
        where = _where(source.manifest)
        if source.manifest is None:
            where["ref"] = f"Pod/{pod.namespace}/{pod.name}"
        self.pods.append(
            {
                **where,
                "pod": pod.label,
                "live": source.manifest is None,
                "outcome": outcome,
                "node": result.node,
                "ties": [n for c in result.ties for n in c],
                "nodes": sorted(verdict.nodes),
                "reason": reason,
                "unknown": unknown,
                "claims": [pc.name for pc in pod.claims],
                "fits_in": {
                    "share": float(verdict.fits),
                    "fraction": f"{verdict.fits.numerator}/{verdict.fits.denominator}",
                },
                "decided_by": list(verdict.deciders),
                "searched": verdict.searched,
                "explored": {
                    "mode": "sampled" if verdict.samples else "exact",
                    "placements": verdict.placements,
                },
            }
        )
        if source.manifest is None:
            return
        if outcome in ("does-not-fit", "at-risk"):
            risk = outcome == "at-risk"
            advice = at_risk_advice(verdict) if risk else _advice(result, reason, self.placement.inv)
            group = self.failures.setdefault(
                (where["ref"], reason),
                {**where, "pods": [], "of": source.pods, "reason": reason, "advice": advice, "at_risk": risk},
            )
            group["pods"].append(pod.label)
        for pc in pod.claims:
            if pc.key in self.claimed:
                continue
            self.claimed.add(pc.key)
            fits = outcome != "does-not-fit"
            self.claims.append(
                {
                    **where,
                    "claim": f"{pc.key[0]}/{pc.key[1]}",
                    "pod": pod.label,
                    "outcome": outcome,
                    "node": result.node if fits else None,
                    "devices": _devices(result, pc.key, self.placement.allocations.get(pc.key))
                    if fits
                    else [],
                    "reason": reason,
                    "unknown": unknown,
                }
            )

    def failure_list(self) -> list[dict[str, Any]]:
        """The pods that do not fit, grouped by object and reason; then claims no pod uses that do not fit."""
        out = []
        for group in self.failures.values():
            group["subject"] = _subject(group["pods"], group["of"])
            out.append(group)
        for entry in self.claims:
            if entry["pod"] is None and entry["outcome"] == "does-not-fit":
                out.append(
                    {
                        **_pick_where(entry),
                        "pods": [],
                        "of": 0,
                        "reason": entry["reason"],
                        "subject": f"a pod using claim {entry['claim']}",
                        "advice": ADVICE,
                    }
                )
        return out


def _advice(result: PodResult, reason: str, inv: Inventory) -> str:
    """What to do about a pod that does not fit (the `capacity` rule's last words)."""
    parked = result.parked or ""
    if ": ResourceClaimTemplate " in parked:
        return "create the ResourceClaimTemplate or fix the pod's resourceClaims"
    if ": ResourceClaim " in parked:
        return "create the ResourceClaim or fix the pod's resourceClaims"
    if "no matching device" in reason and "free" not in reason:
        # Nothing published matches at all: more nodes of the same kind would not either.
        return "no published device matches: check the DeviceClass selector and the request's own selectors"
    if "tainted" in reason:
        taints = sorted(
            {d.taint_label(t) for d in inv.devices for t in d.taints if t.get("effect") in BLOCKING_EFFECTS}
        )
        shown = "; ".join(taints[:3]) + (f" and {len(taints) - 3} more" if len(taints) > 3 else "")
        return f"devices are tainted ({shown}): remove or narrow the taint, tolerate it in the request, or {ADVICE}"
    return ADVICE


def _where(manifest: Manifest | None) -> dict[str, Any]:
    if manifest is None:
        return {"ref": "", "path": "", "line": 0}
    return {"ref": str(manifest.ref), "path": manifest.path, "line": manifest.line}


def _pick_where(entry: dict[str, Any]) -> dict[str, Any]:
    return {"ref": entry["ref"], "path": entry["path"], "line": entry["line"]}


def _subject(pods: list[str], of: int) -> str:
    if len(pods) == 1:
        return f"pod {pods[0]}" + (f" (1 of {of})" if of > 1 else "")
    shown = ", ".join(pods[:3]) + (f" and {len(pods) - 3} more" if len(pods) > 3 else "")
    return f"{len(pods)} of {of} pods ({shown})"


def _unused_claim(
    placement: Placement, key: tuple[str, str], manifest: Manifest, nodes: Sequence[NodeInfo]
) -> dict[str, Any]:
    """A ResourceClaim no pod uses yet: allocated with its first pod; would it fit one now?"""
    probe = PodInfo(key[0], f"(first user of {key[1]})", {}, [PodClaim(key[1], key, manifest.body)])
    result = placement.attempt(probe)
    outcome = result.outcome
    reason = "no pod uses it yet: allocated when the first pod using it is scheduled"
    if outcome == "does-not-fit":
        reason = result.reason()
    elif outcome == "unknown":
        reason = f"unknown: {result.unknown}"
    return {
        **_where(manifest),
        "claim": f"{key[0]}/{key[1]}",
        "pod": None,
        "outcome": outcome,
        "node": result.node,
        "devices": _devices(result, key, None) if result.node else [],
        "reason": reason,
        "unknown": result.unknown,
    }
