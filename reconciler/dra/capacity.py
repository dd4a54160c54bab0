"""The `capacity` part of the policy input: will the pods a change adds get their devices? (pure)

The change's pods (a Pod, or one pod per replica of a workload; a DaemonSet one per node it runs on)
join the pods already waiting in the cluster, and the placement model (:mod:`reconciler.dra.placement`,
the one the simulated scheduler uses) places them one at a time in the scheduler's order against the
published devices minus what allocated claims hold (a claim whose pods are being deleted is releasing
its devices: the scheduler hands them to the next pod within the pods' grace period). The answer is per
pod and per claim: "fits" (node and devices), "does-not-fit" (why, node by node) or "unknown" (what the
model could not decide). The `capacity` Rego rule turns the pods that do not fit into warnings or, with
a param, denials; "unknown" never becomes a finding. A Deployment rollout that keeps its old pods until
new ones run (maxUnavailable 0) adds its first new pods too (:func:`reconciler.model.rollouts.rollout_surge`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from reconciler.dra.allocator import Inventory
from reconciler.dra.capacity_render import ORDER_NOTE, render_capacity
from reconciler.dra.capacity_selectors import selector_errors
from reconciler.dra.nodematch import node_selector_for, pod_selects_node, untolerated_taint
from reconciler.dra.noderesources import extended_requests
from reconciler.dra.placement import NodeInfo, Placement, PodClaim, PodInfo, PodResult, pod_priority
from reconciler.dra.simulate import simulate
from reconciler.model import dra
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan
from reconciler.model.readers import as_dict, as_list
from reconciler.model.rollouts import rollout_surge

__all__ = ["ORDER_NOTE", "capacity_input", "releasing_claims", "render_capacity"]

ADVICE = "free devices, add nodes with devices, or lower the request"


@dataclass
class _Source:
    """Where a predicted pod comes from."""

    manifest: Manifest | None  # the object of the change (None: a pod already waiting in the cluster)
    pods: int  # how many pods that object adds
    rollout: str = ""  # set when the pods are a rollout's first new-template pods: why they need devices


def _replicas(body: dict[str, Any]) -> int:
    """How many pods a (non-DaemonSet) workload runs."""
    kind = body.get("kind")
    spec = as_dict(body.get("spec"))
    if kind == "Job":
        value = spec.get("parallelism")
        return int(value) if isinstance(value, int) else 1
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        value = spec.get("replicas")
        return int(value) if isinstance(value, int) else 1
    return 1


def _pod_done(pod: dict[str, Any] | None) -> bool:
    """A pod whose claims the resourceclaim controller releases: deleted, being deleted, or finished."""
    if pod is None:
        return True
    if as_dict(pod.get("metadata")).get("deletionTimestamp"):
        return True
    return as_dict(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def releasing_claims(live: Sequence[Manifest]) -> set[tuple[str, str]]:
    """Allocated claims that will give their devices back without anyone acting.

    A claim generated for a pod that is being deleted or has finished, and a claim being deleted whose
    every reserving pod is gone or going. An owner pod missing from the live list is not taken as gone
    (it may have been created between the LISTs) unless the claim itself is being deleted.
    """
    pods = {(m.ref.namespace, m.ref.name): m.body for m in live if m.kind == "Pod"}
    out: set[tuple[str, str]] = set()
    for m in live:
        if m.kind != "ResourceClaim" or not dra.is_dra_group(m.api_version):
            continue
        status = as_dict(m.body.get("status"))
        if not status.get("allocation"):
            continue
        meta = as_dict(m.body.get("metadata"))
        ns = m.ref.namespace
        owner = next(
            (
                as_dict(o)
                for o in as_list(meta.get("ownerReferences"))
                if as_dict(o).get("kind") == "Pod" and as_dict(o).get("controller")
            ),
            None,
        )
        if owner is not None:
            pod = pods.get((ns, str(owner.get("name"))))
            if pod is not None and _pod_done(pod):
                out.add((ns, m.ref.name))
                continue
        if meta.get("deletionTimestamp"):
            users = [as_dict(r) for r in as_list(status.get("reservedFor"))]
            if all(
                _pod_done(pods.get((ns, str(r.get("name"))))) for r in users if r.get("resource") == "pods"
            ):
                out.add((ns, m.ref.name))
    return out


def _daemon_nodes(pod_spec: dict[str, Any], nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
    """Nodes a DaemonSet runs a pod on: those its selection matches and whose taints it tolerates."""
    out = []
    for node in nodes:
        if not pod_selects_node(pod_spec, node.name, node.labels):
            continue
        if untolerated_taint(node.taints, pod_spec.get("tolerations")) is not None:
            continue
        out.append(node)
    return out


def _pinned(pod_spec: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod spec with the required node affinity the DaemonSet controller gives each pod."""
    spec = dict(pod_spec)
    affinity = dict(as_dict(spec.get("affinity")))
    node_affinity = dict(as_dict(affinity.get("nodeAffinity")))
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = node_selector_for(node)
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity
    return spec


class _Builder:
    """Turns the change and the live pods into the pods to place."""

    def __init__(self, plan: Plan, head: Sequence[Manifest], live: Sequence[Manifest]) -> None:
        self.templates = {
            (m.ref.namespace, m.ref.name): m.body
            for m in [*live, *head]  # the head version of a template wins over the live one
            if m.kind == "ResourceClaimTemplate" and dra.is_dra_group(m.api_version)
        }
        self.claims: dict[tuple[str, str], dict[str, Any]] = {
            (m.ref.namespace, m.ref.name): m.body
            for m in live
            if m.kind == "ResourceClaim" and dra.is_dra_group(m.api_version)
        }
        self.priority_classes = [m.body for m in [*live, *head] if m.kind == "PriorityClass"]
        self.plan = plan
        self.live = live
        self.pods: list[PodInfo] = []
        self.sources: list[_Source] = []  # per pod
        self.new_claims: list[tuple[tuple[str, str], Manifest]] = []  # ResourceClaims the change creates

    def claim_for(self, ns: str, pod_name: str, pc: dra.PodClaim, statuses: dict[str, str]) -> PodClaim:
        if pc.claim:
            return PodClaim(pc.name, (ns, pc.claim), self.claims.get((ns, pc.claim)))
        generated = statuses.get(pc.name)
        if generated and (ns, generated) in self.claims:
            return PodClaim(pc.name, (ns, generated), self.claims[(ns, generated)])
        template = self.templates.get((ns, pc.template or ""))
        name = f"{pod_name}-{pc.name}"
        claim = None
        if template is not None:
            claim = {
                "apiVersion": template.get("apiVersion"),
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": ns},
                "spec": dra.claim_spec_of(template) or {},
            }
        return PodClaim(pc.name, (ns, name), claim, None if claim is not None else pc.template)

    def add(
        self, ns: str, name: str, spec: dict[str, Any], source: _Source, statuses: dict[str, str]
    ) -> None:
        claims = [self.claim_for(ns, name, pc, statuses) for pc in dra.pod_claims(spec)]
        priority = pod_priority(spec, self.priority_classes)
        self.pods.append(PodInfo(ns, name, spec, claims, priority, seq=len(self.pods)))
        self.sources.append(source)

    def waiting_pods(self) -> None:
        """Pods already waiting for the scheduler come first (created earlier)."""
        waiting = [
            m
            for m in self.live
            if m.kind == "Pod"
            and not as_dict(m.body.get("spec")).get("nodeName")
            and as_dict(m.body.get("status")).get("phase") in (None, "Pending")
            and not as_dict(m.body.get("metadata")).get("deletionTimestamp")
            and dra.pod_claims(as_dict(m.body.get("spec")))
        ]
        waiting.sort(
            key=lambda m: (str(as_dict(m.body.get("metadata")).get("creationTimestamp") or ""), m.ref.name)
        )
        for m in waiting:
            statuses = {
                str(as_dict(s).get("name")): str(as_dict(s).get("resourceClaimName"))
                for s in as_list(as_dict(m.body.get("status")).get("resourceClaimStatuses"))
                if as_dict(s).get("resourceClaimName")
            }
            self.add(m.ref.namespace, m.ref.name, as_dict(m.body.get("spec")), _Source(None, 1), statuses)

    def change_pods(self, nodes: Sequence[NodeInfo]) -> None:
        live_by_ref = {m.ref: m for m in self.live}
        for change in self.plan.changes:
            new = change.new
            if new is None or change.op == "delete":
                continue
            running = live_by_ref.get(new.ref) or change.old
            if new.kind == "ResourceClaim" and dra.is_dra_group(new.api_version):
                key = (new.ref.namespace, new.ref.name)
                if running is None:
                    self.claims[key] = new.body
                    self.new_claims.append((key, new))
                continue
            pod_spec = dra.pod_spec_of(new.body)
            if pod_spec is None or not dra.pod_claims(pod_spec):
                continue
            ns, name = new.ref.namespace, new.ref.name
            if new.kind == "DaemonSet":
                targets = _daemon_nodes(pod_spec, nodes)
                if running is not None:
                    continue  # the DaemonSet runs already: its pods have their devices
                source = _Source(new, len(targets))
                for node in targets:
                    self.add(ns, f"{name}-{node.name}", _pinned(pod_spec, node.name), source, {})
                continue
            count = _replicas(new.body)
            rollout = ""
            if running is not None:
                # Only pods added by the change need new devices, and the pods a rollout starts before
                # any old pod gives its devices back.
                count = max(0, count - _replicas(running.body))
                old = change.old.body if change.old is not None else None
                surge = rollout_surge(new.body, old, running.body)
                if surge is not None and surge[0] > count:
                    count, rollout = surge
            source = _Source(new, count, rollout)
            for index in range(count):
                pod_name = name if new.kind == "Pod" else f"{name}-{index}"
                self.add(ns, pod_name, pod_spec, source, {})


def _devices(result: PodResult, key: tuple[str, str], allocation: dict[str, Any] | None) -> list[str]:
    outcome = result.allocations.get(key)
    alloc = (outcome.allocation if outcome is not None else None) or allocation or {}
    return [
        f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
        for r in as_list(as_dict(alloc.get("devices")).get("results"))
        if isinstance(r, dict)
    ]


def capacity_input(plan: Plan, head: Sequence[Manifest], live: Sequence[Manifest]) -> dict[str, Any]:
    """`input.capacity`: every pod and claim of the change with its predicted outcome."""
    classes = {
        m.ref.name: m.body
        for m in [*live, *head]
        if m.kind == "DeviceClass" and dra.is_dra_group(m.api_version)
    }
    slices = [m.body for m in live if m.kind == "ResourceSlice"]
    taint_rules = [m.body for m in live if m.kind == "DeviceTaintRule"]
    releasing = releasing_claims(live)
    live_claims = [
        m.body for m in live if m.kind == "ResourceClaim" and (m.ref.namespace, m.ref.name) not in releasing
    ]
    nodes = [NodeInfo.from_node(m.body) for m in live if m.kind == "Node"]
    load = Counter(
        str(as_dict(m.body.get("spec")).get("nodeName"))
        for m in live
        if m.kind == "Pod" and as_dict(m.body.get("spec")).get("nodeName")
    )
    builder = _Builder(plan, head, live)
    builder.waiting_pods()
    builder.change_pods(nodes)
    if not builder.pods and not builder.new_claims:
        return {
            "pods": [],
            "claims": [],
            "failures": [],
            "selector_errors": [],
            "releasing": [],
            "totals": {},
            "note": ORDER_NOTE,
        }
    inv = Inventory(slices, classes, live_claims, taint_rules)
    requested: dict[str, dict[str, Fraction]] = {}
    for m in live:
        spec = as_dict(m.body.get("spec"))
        if m.kind == "Pod" and spec.get("nodeName") and not _pod_done(m.body):
            held = requested.setdefault(str(spec["nodeName"]), {})
            for name, q in extended_requests(spec).items():
                held[name] = held.get(name, Fraction(0)) + q
    placement = Placement(inv, nodes, load, explain=True, node_requests=requested)
    results = placement.place(builder.pods)
    by_pod = {id(r.pod): r for r in results}
    # A driver the change installs has published nothing yet: its pods cannot be judged, not "0 free".
    # A driver that already publishes slices is judged on them, even when its workload is in the change.
    publishing = {as_dict(s.get("spec")).get("driver") or s.get("driverName") for s in slices}
    installing = {dra.workload_driver(m.body) for m in head if dra.is_driver_workload(m.body)} - {None}
    installing -= publishing

    pods_out: list[dict[str, Any]] = []
    claims_out: list[dict[str, Any]] = []
    claimed: set[tuple[str, str]] = set()
    failures: dict[tuple[str, str], dict[str, Any]] = {}
    # A rollout stalls only when none of its first new pods fits; once one runs, an old pod goes.
    rolling_on = {
        id(source)
        for pod, source in zip(builder.pods, builder.sources, strict=True)
        if source.rollout and by_pod[id(pod)].outcome == "fits"
    }
    for pod, source in zip(builder.pods, builder.sources, strict=True):
        result = by_pod[id(pod)]
        outcome, reason, unknown = result.outcome, "", result.unknown
        if outcome == "does-not-fit" and id(source) in rolling_on:
            outcome = "unknown"
            unknown = "waits for the devices of the old pods the rollout replaces"
        if outcome == "error":
            reason = result.scheduler_error or result.reason()
        elif outcome != "fits":
            reason = result.reason() if outcome == "does-not-fit" else f"unknown: {unknown}"
        if outcome == "does-not-fit" and source.rollout:
            reason = f"{reason}; {source.rollout}"
        if outcome == "does-not-fit" and installing:
            drivers = {
                dra.class_driver(dict(classes.get(c) or {}))
                for pc in pod.claims
                if pc.claim is not None
                for c in dra.requested_classes(dict(pc.claim))
            }
            pending = sorted(d for d in drivers & installing if d)
            if pending:
                outcome = "unknown"
                unknown = f"driver {', '.join(pending)} is installed by this change; no devices published yet"
                reason = f"unknown: {unknown}"
        where = _where(source.manifest)
        if source.manifest is None:
            where["ref"] = f"Pod/{pod.namespace}/{pod.name}"
        pods_out.append(
            {
                **where,
                "pod": pod.label,
                "live": source.manifest is None,
                "outcome": outcome,
                "node": result.node,
                "reason": reason,
                "unknown": unknown,
                "claims": [pc.name for pc in pod.claims],
            }
        )
        if source.manifest is None:
            continue
        if outcome == "does-not-fit":
            group = failures.setdefault(
                (where["ref"], reason),
                {**where, "pods": [], "of": source.pods, "reason": reason, "advice": _advice(result)},
            )
            group["pods"].append(pod.label)
        for pc in pod.claims:
            if pc.key in claimed:
                continue
            claimed.add(pc.key)
            claims_out.append(
                {
                    **where,
                    "claim": f"{pc.key[0]}/{pc.key[1]}",
                    "pod": pod.label,
                    "outcome": outcome,
                    "node": result.node if outcome != "does-not-fit" else None,
                    "devices": _devices(result, pc.key, placement.allocations.get(pc.key))
                    if outcome != "does-not-fit"
                    else [],
                    "reason": reason,
                    "unknown": unknown,
                }
            )
    for key, manifest in builder.new_claims:
        if key in claimed:
            continue
        claims_out.append(_unused_claim(placement, key, manifest, nodes))
    failure_list = []
    for group in failures.values():
        group["subject"] = _subject(group["pods"], group["of"])
        failure_list.append(group)
    for entry in claims_out:
        if entry["pod"] is None and entry["outcome"] == "does-not-fit":
            subject = f"a pod using claim {entry['claim']}"
            failure_list.append(
                {
                    **_pick_where(entry),
                    "pods": [],
                    "of": 0,
                    "reason": entry["reason"],
                    "subject": subject,
                    "advice": ADVICE,
                }
            )
    totals = simulate(slices, classes, live_claims).to_dict()["totals"]
    class_manifests = {
        m.ref.name: m for m in head if m.kind == "DeviceClass" and dra.is_dra_group(m.api_version)
    }
    changed = [
        (pod, by_pod[id(pod)], source.manifest)
        for pod, source in zip(builder.pods, builder.sources, strict=True)
        if source.manifest is not None
    ]
    return {
        "pods": pods_out,
        "claims": claims_out,
        "failures": failure_list,
        "selector_errors": selector_errors(inv, changed, class_manifests),
        "releasing": [f"{ns}/{name}" for ns, name in sorted(releasing)],
        "totals": totals,
        "note": ORDER_NOTE,
    }


def _advice(result: PodResult) -> str:
    """What to do about a pod that does not fit (the `capacity` rule's last words)."""
    parked = result.parked or ""
    if ": ResourceClaimTemplate " in parked:
        return "create the ResourceClaimTemplate or fix the pod's resourceClaims"
    if ": ResourceClaim " in parked:
        return "create the ResourceClaim or fix the pod's resourceClaims"
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
