"""Pod-by-pod, node-by-node placement of pods with ResourceClaims, as kube-scheduler does it (pure).

One model for the simulated scheduler and for ``check --cluster``'s capacity prediction. Pods are taken
in the scheduler's queue order (priority, then creation); each pod is tried on every node in turn:
node filters first (unschedulable, taints, readiness, nodeSelector / required node affinity, extended
resources against node allocatable: :mod:`reconciler.dra.noderesources`), then its claims. Claims
already allocated pin the pod to their allocation's nodeSelector; the others are allocated together
from the devices reachable from that node (:mod:`reconciler.dra.allocator`), all of them or none
(asked once per class of interchangeable nodes: :mod:`reconciler.dra.nodeclasses`). The nodes that pass
are scored as kube-scheduler scores them (:mod:`reconciler.dra.scoring`); those left with the best
score are the pod's ties (``PodResult.ties``), and ``choose`` picks one (the simulated scheduler: at
random, as the real one in effect does; the prediction: each in turn, :mod:`reconciler.dra.ties`). A pod
that cannot be placed takes nothing. A selector that fails at run time on a node (on any node that
passes the filters, as kube-scheduler filters them all) is an error for the pod: outcome "error".
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from reconciler.dra.allocator import CANNOT_ALLOCATE, AllocationOutcome, Inventory
from reconciler.dra.devices import claim_spec
from reconciler.dra.explain import explain_node
from reconciler.dra.extended import class_mapping
from reconciler.dra.nodeclasses import NodeClasses, pod_texts
from reconciler.dra.nodematch import node_selector_matches, pod_selects_node, tolerates, untolerated_taint
from reconciler.dra.noderesources import extended_requests, insufficient
from reconciler.dra.podinfo import (
    AFFINITY,
    CLAIM_IN_USE,
    EXTENDED_CLAIM,
    MAX_RESERVED,
    NOT_AVAILABLE_ON_NODE,
    NOT_READY,
    UNSCHEDULABLE,
    NodeInfo,
    PodClaim,
    PodInfo,
    PodResult,
    Rejection,
    pod_priority,
)
from reconciler.dra.scoring import Held, dra_score, node_scores, pod_requests
from reconciler.model.readers import as_dict, as_list

__all__ = [
    "AFFINITY",
    "CLAIM_IN_USE",
    "NOT_AVAILABLE_ON_NODE",
    "UNSCHEDULABLE",
    "NodeInfo",
    "Placement",
    "PodClaim",
    "PodInfo",
    "PodResult",
    "Rejection",
    "pod_priority",
    "queue_order",
]


def _unmodelled(spec: Mapping[str, Any], inv: Inventory, extended_claimed: bool = False) -> str | None:
    """Pod features the model does not decide (extended resources backed by DRA are decided once the
    pod carries the claim the scheduler would make for them: `extended_claimed`)."""
    affinity = as_dict(spec.get("affinity"))
    if affinity.get("podAffinity") or affinity.get("podAntiAffinity"):
        return "inter-pod affinity"
    if spec.get("topologySpreadConstraints"):
        return "topology spread constraints"
    if spec.get("nodeName"):
        return "spec.nodeName is set: the pod bypasses the scheduler"
    extended = {
        str(as_dict(c.get("spec")).get("extendedResourceName") or "") for c in inv.classes.values()
    } - {""}
    for container in (
        [] if extended_claimed else [*as_list(spec.get("containers")), *as_list(spec.get("initContainers"))]
    ):
        limits = as_dict(as_dict(as_dict(container).get("resources")).get("limits"))
        for name in limits:
            if name in extended or str(name).startswith("deviceclass.resource.kubernetes.io/"):
                return f"extended resource {name}"
    return None


class Placement:
    """The cluster as the scheduler sees it while it places pods one at a time."""

    def __init__(
        self,
        inventory: Inventory,
        nodes: Sequence[NodeInfo],
        pods_per_node: Mapping[str, int] | None = None,
        *,
        explain: bool = False,
        node_requests: Mapping[str, Mapping[str, Fraction]] | None = None,
        bound_pods: Iterable[Mapping[str, Any]] = (),
        choose: Callable[[list[str]], str] | None = None,
    ) -> None:
        """``node_requests``: the extended resources the pods bound to each node request;
        ``bound_pods``: those pods (cpu and memory, labels: what scoring weighs); ``choose``: which of
        the nodes that tie for the best score the pod goes to (default: the first by name)."""
        self.inv = inventory
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.usage = inventory.usage.copy()
        self.load: Counter[str] = Counter(pods_per_node or {})
        self.requested: dict[str, dict[str, Fraction]] = {
            n: dict(r) for n, r in (node_requests or {}).items()
        }
        self.held: dict[str, Held] = {}
        self.pods_on: dict[str, Counter[tuple[str, frozenset[tuple[str, str]]]]] = {}
        for body in bound_pods:
            md, spec = as_dict(body.get("metadata")), as_dict(body.get("spec"))
            labels = {str(k): str(v) for k, v in as_dict(md.get("labels")).items()}
            self._hold(str(spec.get("nodeName")), str(md.get("namespace", "")), labels, spec)
        # the extended resources DeviceClasses back (implicit and explicit names): DRA's on a node that
        # does not advertise them
        self.dra_resources = set(class_mapping(inventory.classes.values()))
        self.explain = explain
        self.choose = choose
        self.classes = NodeClasses(inventory, self.nodes)
        # (id(pod spec), node) -> (the spec, kept alive so its id stays its own; the spec-only rejection)
        self._spec_filter: dict[tuple[int, str], tuple[Mapping[str, Any], Rejection | None]] = {}
        self._dynamic: dict[str, Any] = {}
        self.allocations: dict[tuple[str, str], dict[str, Any]] = {}
        self.allocated_on: dict[tuple[str, str], str] = {}  # claims this model allocated: on which node
        self.shared_claims: set[tuple[str, str]] = set()  # claims of more than one pod to place
        self.reserved: Counter[tuple[str, str]] = Counter()
        for c in inventory.claims:
            md = as_dict(c.get("metadata"))
            key = (str(md.get("namespace", "")), str(md.get("name", "")))
            status = as_dict(c.get("status"))
            if status.get("allocation"):
                self.allocations[key] = as_dict(status.get("allocation"))
            self.reserved[key] = len(as_list(status.get("reservedFor")))

    def clone(self) -> Placement:
        """An independent copy of what is held (the inventory and the classes are shared)."""
        other = copy.copy(self)
        other.usage = self.usage.copy()
        other.load = Counter(self.load)
        other.requested = {n: dict(r) for n, r in self.requested.items()}
        other.held = dict(self.held)
        other.pods_on = {n: Counter(c) for n, c in self.pods_on.items()}
        other._dynamic = dict(self._dynamic)
        other.allocations = dict(self.allocations)
        other.allocated_on = dict(self.allocated_on)
        other.reserved = Counter(self.reserved)
        return other

    def _hold(self, node: str, namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any]) -> None:
        nz, actual = pod_requests(spec, nonzero=True), pod_requests(spec, nonzero=False)
        h = self.held.get(node, (0, 0, 0, 0))
        self.held[node] = (h[0] + nz[0], h[1] + nz[1], h[2] + actual[0], h[3] + actual[1])
        self.pods_on.setdefault(node, Counter())[(namespace, frozenset(labels.items()))] += 1

    def dynamic(self, node: str) -> Any:
        """What is held on ``node`` (its devices, resources and pods), for its class."""
        sig = self._dynamic.get(node)
        if sig is None:
            sig = self._dynamic[node] = self.classes.dynamic(
                node, self.usage, self.held, self.requested, self.pods_on
            )
        return sig

    def state_key(self) -> Any:
        """What is held, nodes of one class taken as interchangeable: equal keys, equal futures."""
        node_keys = {n.name: self.classes.key(n.name, self.dynamic(n.name), ties=True) for n in self.nodes}
        remote = tuple(sorted(k for k in self.usage.used if k not in self._local_keys()))
        # Only claims another pod may still use matter: where they went, how often they are reserved.
        claims = tuple(
            sorted(
                (key, repr(node_keys.get(node)))
                for key, node in self.allocated_on.items()
                if key in self.shared_claims
            )
        )
        return (
            tuple(sorted(repr(k) for k in node_keys.values())),
            remote,
            tuple(sorted((repr(k), repr(sorted(v.items()))) for k, v in self.usage.shared.items())),
            claims,
            tuple(sorted((k, n) for k, n in self.reserved.items() if k in self.shared_claims)),
        )

    def _local_keys(self) -> set[Any]:
        local = getattr(self, "_local_cache", None)
        if local is None:
            local = {d.key for devices in self.classes.local.values() for d in devices}
            self._local_cache = local
        return local

    # ------------------------------------------------------------------ one pod

    def attempt(self, pod: PodInfo) -> PodResult:
        """Where the pod would go and what it would take, without taking it."""
        result = PodResult(pod, "does-not-fit")
        split = self._prefilter(pod, result)
        if split is None:
            return result
        pinned, to_allocate = split
        claims = [pc.claim for pc in to_allocate if pc.claim is not None]
        passed: list[NodeInfo] = []
        wanted = extended_requests(pod.spec)
        for node in self.nodes:
            rejection = self._filter(pod, node, pinned, wanted)
            if rejection is not None:
                result.rejections.append(rejection)
            else:
                passed.append(node)
        # Interchangeable nodes pass or fail alike and score alike: one of each class is asked.
        groups: dict[Any, list[NodeInfo]] = {}
        for node in passed:
            groups.setdefault(self.classes.key(node.name, self.dynamic(node.name), ties=True), []).append(
                node
            )
        feasible: list[list[NodeInfo]] = []
        outcomes_of: dict[str, list[AllocationOutcome]] = {}
        unknown: str | None = None
        failed: list[list[NodeInfo]] = []
        for members in groups.values():
            rep = members[0]
            if claims:
                devices = self.inv.devices_on_node(rep.name, rep.labels)
                outcomes = self.inv.allocate_on(claims, rep.name, devices, self.usage)
                if outcomes[0].error:
                    result.error = outcomes[0]
                    result.outcome = "error"
                    return result
                if not outcomes[0].ok:
                    unknown = unknown or outcomes[0].unknown_reason
                    failed.append(members)
                    continue
                outcomes_of[rep.name] = outcomes
            feasible.append(members)
        if not feasible:
            self._reject(result, failed, to_allocate, claims)
            # Devices the model could not judge might have made it fit: unknown, never a false alarm.
            result.unknown = unknown
            result.outcome = "unknown" if unknown else "does-not-fit"
            return result
        self._choose(result, pod, feasible, claims, outcomes_of)
        result.allocations = {
            pc.key: o for pc, o in zip(to_allocate, outcomes_of.get(result.node or "", []), strict=False)
        }
        if claims and result.node not in outcomes_of:
            result.allocations = self._allocate(to_allocate, claims, result.node or "")
        # What the model does not weigh could still keep the pod off every node: unknown, never "fits".
        claimed = any(pc.name == EXTENDED_CLAIM for pc in pod.claims)
        result.unknown = _unmodelled(pod.spec, self.inv, claimed)
        result.outcome = "unknown" if result.unknown else "fits"
        return result

    def _choose(
        self,
        result: PodResult,
        pod: PodInfo,
        feasible: list[list[NodeInfo]],
        claims: list[Mapping[str, Any]],
        outcomes_of: Mapping[str, list[AllocationOutcome]],
    ) -> None:
        """The best-scoring classes are the ties; the pod goes to the chosen node among them."""
        reps = [members[0] for members in feasible]
        dra = {}
        if any(dra_score(claims, o) for o in outcomes_of.values()):
            dra = {name: dra_score(claims, o) for name, o in outcomes_of.items()}
        every = [n for members in feasible for n in members]
        scores = node_scores(pod, reps, every, self.nodes, self.held, self.pods_on, dra)
        best = max(scores.values())
        tied = [members for members in feasible if scores[members[0].name] == best]
        result.ties = sorted(([n.name for n in members] for members in tied), key=lambda c: c[0])
        names = sorted(n for c in result.ties for n in c)
        result.node = self.choose(names) if self.choose is not None else result.ties[0][0]

    def _allocate(
        self, to_allocate: list[PodClaim], claims: list[Mapping[str, Any]], node: str
    ) -> dict[tuple[str, str], AllocationOutcome]:
        info = next(n for n in self.nodes if n.name == node)
        devices = self.inv.devices_on_node(node, info.labels)
        outcomes = self.inv.allocate_on(claims, node, devices, self.usage)
        return {pc.key: o for pc, o in zip(to_allocate, outcomes, strict=True)}

    def on_node(self, result: PodResult, node: str) -> PodResult:
        """``result`` with the pod sent to ``node`` (another of its ties) instead."""
        if node == result.node:
            return result
        to_allocate: list[PodClaim] = []
        for pc in result.pod.claims:  # in the pod's order, each claim once (as the prefilter takes them)
            if pc.key in result.allocations and all(pc.key != other.key for other in to_allocate):
                to_allocate.append(pc)
        claims = [pc.claim for pc in to_allocate if pc.claim is not None]
        moved = dataclasses.replace(result, node=node)
        moved.allocations = self._allocate(to_allocate, claims, node) if claims else {}
        return moved

    def _reject(
        self, result: PodResult, failed: list[list[NodeInfo]], to_allocate: list[PodClaim], claims: list[Any]
    ) -> None:
        """Every node the claims did not fit on says why (in numbers when explaining; alike in a class)."""
        for members in failed:
            detail = CANNOT_ALLOCATE
            if self.explain:
                rep = members[0]
                devices = self.inv.devices_on_node(rep.name, rep.labels)
                named = [(pc.name, c) for pc, c in zip(to_allocate, claims, strict=True)]
                detail = explain_node(self.inv, named, rep.name, devices, self.usage)
            result.rejections.extend(Rejection(node.name, CANNOT_ALLOCATE, detail) for node in members)
        order = {n.name: i for i, n in enumerate(self.nodes)}
        result.rejections.sort(key=lambda r: order[r.node])

    def _prefilter(
        self, pod: PodInfo, result: PodResult
    ) -> tuple[list[tuple[PodClaim, dict[str, Any]]], list[PodClaim]] | None:
        """The pod's claims, allocated ones (with their allocation) apart from those to allocate; None
        (``result`` says why) when a claim does not exist, is reserved too often, or names no class."""
        seen: set[tuple[str, str]] = set()
        pinned: list[tuple[PodClaim, dict[str, Any]]] = []
        to_allocate: list[PodClaim] = []
        for pc in pod.claims:
            if pc.key in seen:
                continue
            seen.add(pc.key)
            if pc.claim is None:
                absent = (
                    f"ResourceClaimTemplate {pc.key[0]}/{pc.template}"
                    if pc.template
                    else f"ResourceClaim {pc.key[0]}/{pc.key[1]}"
                )
                result.parked = f"claim {pc.name}: {absent} does not exist"
                return None
            allocation = self.allocations.get(pc.key)
            if allocation is not None:
                pinned.append((pc, allocation))
            else:
                to_allocate.append(pc)
        for pc, _ in pinned:
            if self.reserved[pc.key] >= MAX_RESERVED:
                result.prefilter = CLAIM_IN_USE
                return None
        for pc in to_allocate:
            assert pc.claim is not None
            missing = self.inv.missing_class(claim_spec(pc.claim))
            if missing is not None:
                result.prefilter = f"request {missing[0]}: device class {missing[1]} does not exist"
                return None
        return pinned, to_allocate

    def _filter(
        self,
        pod: PodInfo,
        node: NodeInfo,
        pinned: list[tuple[PodClaim, dict[str, Any]]],
        wanted: Mapping[str, Fraction],
    ) -> Rejection | None:
        rejection = self._spec_rejection(pod, node)
        if rejection is not None:
            return rejection
        if wanted:
            short = insufficient(
                wanted, node.allocatable, self.requested.get(node.name, {}), self.dra_resources
            )
            if short is not None:
                return Rejection(node.name, f"Insufficient {short[0]}", short[1])
        for pc, allocation in pinned:
            if not node_selector_matches(
                as_dict(allocation.get("nodeSelector")) or None, node.name, node.labels
            ):
                return Rejection(
                    node.name, NOT_AVAILABLE_ON_NODE, f"claim {pc.name} is allocated on another node"
                )
        return None

    def _spec_rejection(self, pod: PodInfo, node: NodeInfo) -> Rejection | None:
        """What only the pod spec and the node decide, asked once per spec (a workload's replicas share it)."""
        key = (id(pod.spec), node.name)
        cached = self._spec_filter.get(key)
        if cached is None:
            cached = self._spec_filter[key] = (pod.spec, _spec_filter(pod.spec, node))
        return cached[1]

    def passes_spec_filters(self, pod: PodInfo, node: NodeInfo) -> bool:
        """Whether the node passes the filters that only the pod spec and the node decide."""
        return self._spec_rejection(pod, node) is None

    def commit(self, result: PodResult) -> None:
        """The pod is bound: its claims hold their devices, its shared claims are reserved."""
        if result.node is None:
            return
        for key, outcome in result.allocations.items():
            for device_key, consumed in outcome.taken:
                self.usage.take(self.inv.by_key.get(device_key), device_key, consumed)
            self.allocations[key] = dict(outcome.allocation or {})
            self.allocated_on[key] = result.node
        for key in {pc.key for pc in result.pod.claims}:
            self.reserved[key] += 1
        self.load[result.node] += 1
        held = self.requested.setdefault(result.node, {})
        for name, q in extended_requests(result.pod.spec).items():
            held[name] = held.get(name, Fraction(0)) + q
        pod = result.pod
        self._hold(result.node, pod.namespace, pod.labels, pod.spec)
        self._dynamic.pop(result.node, None)

    def place(self, pods: Iterable[PodInfo]) -> list[PodResult]:
        """Every pod in the scheduler's order, each bound (and holding its devices) when it fits."""
        ordered = queue_order(pods)
        self.classes.focus(pod_texts(ordered))
        out = []
        for pod in ordered:
            result = self.attempt(pod)
            self.commit(result)
            out.append(result)
        return out


def _spec_filter(spec: Mapping[str, Any], node: NodeInfo) -> Rejection | None:
    """The filters only the pod spec and the node decide: cordon, taints and readiness, node selection."""
    tolerations = as_list(spec.get("tolerations"))
    if node.unschedulable and not any(
        tolerates(as_dict(t), {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
        for t in tolerations
    ):
        return Rejection(node.name, UNSCHEDULABLE, "node is cordoned (unschedulable)")
    taint = untolerated_taint(node.taints, tolerations)
    if taint is None and not node.ready:
        not_ready = {"key": NOT_READY, "value": "", "effect": "NoSchedule"}
        if not any(tolerates(as_dict(t), not_ready) for t in tolerations):
            taint = not_ready
    if taint is not None:
        words = f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
        return Rejection(node.name, words, f"untolerated node taint {taint.get('key')}")
    if not pod_selects_node(spec, node.name, node.labels):
        return Rejection(node.name, AFFINITY, "does not match the pod's nodeSelector/affinity")
    return None


def queue_order(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """The scheduling queue: higher priority first, then creation order."""
    return sorted(pods, key=lambda p: (-p.priority, p.seq))
