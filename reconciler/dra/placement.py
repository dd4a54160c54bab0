"""Pod-by-pod, node-by-node placement of pods with ResourceClaims, as kube-scheduler does it (pure).

One model for the simulated scheduler and for ``check --cluster``'s capacity prediction. Pods are taken
in the scheduler's queue order (priority, then creation); each pod is tried on every node in turn:
node filters first (unschedulable, taints, readiness, nodeSelector / required node affinity, extended
resources against node allocatable: :mod:`reconciler.dra.noderesources`), then its claims. Claims
already allocated pin the pod to their allocation's nodeSelector; the others are allocated together
from the devices reachable from that node (:mod:`reconciler.dra.allocator`), all of them or none. Among
the nodes that pass, the one running the fewest pods wins (then by name). A pod that cannot be placed
takes nothing. A selector that fails at run time on a node (on any node that passes the filters, as
kube-scheduler filters them all) is an error for the pod: outcome "error", no node.

The real scheduler's order can differ (pods are queued as they arrive, retried after back-off) and its
node scoring is richer, so which of several competing pods fails can differ from this model; whether
the devices suffice for all of them does not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.dra.allocator import CANNOT_ALLOCATE, AllocationOutcome, Inventory
from reconciler.dra.devices import Device, claim_spec
from reconciler.dra.explain import explain_node
from reconciler.dra.nodematch import node_selector_matches, pod_selects_node, tolerates, untolerated_taint
from reconciler.dra.noderesources import extended_requests, insufficient, node_allocatable
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
]

NOT_AVAILABLE_ON_NODE = "resourceclaim not available on the node"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE = "node(s) were unschedulable"
CLAIM_IN_USE = "resourceclaim in use"
MAX_RESERVED = 256
NOT_READY = "node.kubernetes.io/not-ready"


@dataclass
class NodeInfo:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)
    unschedulable: bool = False
    ready: bool = True
    allocatable: dict[str, Fraction] = field(default_factory=dict)  # extended resources

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> NodeInfo:
        md, spec = as_dict(node.get("metadata")), as_dict(node.get("spec"))
        conditions = as_list(as_dict(node.get("status")).get("conditions"))
        ready = any(
            as_dict(c).get("type") == "Ready" and as_dict(c).get("status") == "True" for c in conditions
        )
        return cls(
            name=str(md.get("name", "")),
            labels={str(k): str(v) for k, v in as_dict(md.get("labels")).items()},
            taints=[t for t in as_list(spec.get("taints")) if isinstance(t, dict)],
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready,
            allocatable=node_allocatable(node),
        )


@dataclass
class PodClaim:
    name: str  # the pod's name for it (pod.spec.resourceClaims[].name)
    key: tuple[str, str]  # (namespace, ResourceClaim name): the same key means a shared claim
    claim: Mapping[str, Any] | None  # None: the ResourceClaim (or its template) does not exist
    template: str | None = None  # the ResourceClaimTemplate it is generated from, when it is missing


@dataclass
class PodInfo:
    namespace: str
    name: str
    spec: Mapping[str, Any]
    claims: list[PodClaim]
    priority: int = 0
    seq: int = 0  # creation order
    uid: str | None = None

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Rejection:
    node: str
    reason: str  # kube-scheduler's words (the FitError histogram)
    detail: str  # why, in numbers


@dataclass
class PodResult:
    pod: PodInfo
    outcome: str  # "fits" | "does-not-fit" | "unknown" | "error"
    node: str | None = None
    allocations: dict[tuple[str, str], AllocationOutcome] = field(default_factory=dict)  # claims it allocates
    rejections: list[Rejection] = field(default_factory=list)
    prefilter: str | None = None  # a reason that rejects the pod before any node (scheduler wording)
    parked: str | None = None  # the scheduler does not try the pod at all (a claim is missing)
    unknown: str | None = None  # what the model could not decide
    error: AllocationOutcome | None = None  # a selector failed at run time (outcome "error")

    @property
    def ok(self) -> bool:
        return self.node is not None

    @property
    def scheduler_error(self) -> str | None:
        """The pod's PodScheduled message when scheduling fails with an error (reason SchedulerError)."""
        if self.error is None or self.error.error is None:
            return None
        return f'running "DynamicResources" filter plugin: {self.error.error}'

    def reason(self, max_nodes: int = 3) -> str:
        """Why the pod does not fit, short: nodes grouped by the same detail."""
        if self.error is not None and self.error.error:
            return self.error.error
        if self.parked:
            return self.parked
        if self.prefilter:
            return self.prefilter
        if not self.rejections:
            return "no node in the cluster"
        by_detail: dict[str, list[str]] = {}
        for r in self.rejections:
            by_detail.setdefault(r.detail, []).append(r.node)
        parts = []
        for detail, nodes in by_detail.items():
            shown = ", ".join(nodes[:max_nodes])
            if len(nodes) > max_nodes:
                shown += f" and {len(nodes) - max_nodes} more nodes"
            parts.append(f"{shown}: {detail}")
        return "; ".join(parts)


def pod_priority(spec: Mapping[str, Any], priority_classes: Iterable[Mapping[str, Any]] = ()) -> int:
    """spec.priority, else the value of its PriorityClass (or the global default class), else 0."""
    if isinstance(spec.get("priority"), int):
        return int(spec["priority"])
    classes = list(priority_classes)
    wanted = spec.get("priorityClassName")
    for pc in classes:
        name = as_dict(pc.get("metadata")).get("name")
        if (wanted and name == wanted) or (not wanted and pc.get("globalDefault")):
            value = pc.get("value")
            return int(value) if isinstance(value, int) else 0
    return 0


def _unmodelled(spec: Mapping[str, Any], inv: Inventory) -> str | None:
    """Pod features the model does not decide."""
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
    for container in [*as_list(spec.get("containers")), *as_list(spec.get("initContainers"))]:
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
    ) -> None:
        """``node_requests``: the extended resources the pods bound to each node request."""
        self.inv = inventory
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.usage = inventory.usage.copy()
        self.load: Counter[str] = Counter(pods_per_node or {})
        self.requested: dict[str, dict[str, Fraction]] = {
            n: dict(r) for n, r in (node_requests or {}).items()
        }
        self.dra_resources = {
            str(as_dict(c.get("spec")).get("extendedResourceName") or "") for c in inventory.classes.values()
        } - {""}
        self.explain = explain
        self.allocations: dict[tuple[str, str], dict[str, Any]] = {}
        self.reserved: Counter[tuple[str, str]] = Counter()
        for c in inventory.claims:
            md = as_dict(c.get("metadata"))
            key = (str(md.get("namespace", "")), str(md.get("name", "")))
            status = as_dict(c.get("status"))
            if status.get("allocation"):
                self.allocations[key] = as_dict(status.get("allocation"))
            self.reserved[key] = len(as_list(status.get("reservedFor")))

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
        # Nodes in score order (fewest pods, then name): the first where the claims fit is the choice,
        # so the others need no allocation unless the pod fits nowhere (then every node says why).
        passed.sort(key=lambda n: (self.load[n.name], n.name))
        feasible: list[tuple[NodeInfo, list[AllocationOutcome]]] = []
        unknown: str | None = None
        failed: list[tuple[NodeInfo, list[Device]]] = []
        # kube-scheduler filters every node: after the choice, a node can still fail the pod, but only
        # where one of its selectors fails on a device.
        may_fail = bool(claims) and self.inv.may_fail(claims, self.inv.devices, self.usage)
        for node in passed:
            if not claims:
                feasible.append((node, []))
                break
            if feasible and not may_fail:
                break
            devices = self.inv.devices_on_node(node.name, node.labels)
            if feasible and not self.inv.may_fail(claims, devices, self.usage):
                continue
            outcomes = self.inv.allocate_on(claims, node.name, devices, self.usage)
            if outcomes[0].error:
                result.error = outcomes[0]
                result.outcome = "error"
                return result
            if outcomes[0].ok:
                feasible = feasible or [(node, outcomes)]
                continue
            unknown = unknown or outcomes[0].unknown_reason
            failed.append((node, devices))
        if not feasible:
            for node, devices in failed:
                detail = CANNOT_ALLOCATE
                if self.explain:
                    named = [(pc.name, c) for pc, c in zip(to_allocate, claims, strict=True)]
                    detail = explain_node(self.inv, named, node.name, devices, self.usage)
                result.rejections.append(Rejection(node.name, CANNOT_ALLOCATE, detail))
            order = {n.name: i for i, n in enumerate(self.nodes)}
            result.rejections.sort(key=lambda r: order[r.node])
        if not feasible:
            # Devices the model could not judge might have made it fit: unknown, never a false alarm.
            result.unknown = unknown
            result.outcome = "unknown" if unknown else "does-not-fit"
            return result
        node, outcomes = feasible[0]
        result.node = node.name
        result.allocations = {pc.key: o for pc, o in zip(to_allocate, outcomes, strict=True)}
        # What the model does not weigh could still keep the pod off every node: unknown, never "fits".
        result.unknown = _unmodelled(pod.spec, self.inv)
        result.outcome = "unknown" if result.unknown else "fits"
        return result

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
        spec = pod.spec
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

    def commit(self, result: PodResult) -> None:
        """The pod is bound: its claims hold their devices, its shared claims are reserved."""
        if result.node is None:
            return
        for key, outcome in result.allocations.items():
            for device_key, consumed in outcome.taken:
                self.usage.take(self.inv.by_key.get(device_key), device_key, consumed)
            self.allocations[key] = dict(outcome.allocation or {})
        for key in {pc.key for pc in result.pod.claims}:
            self.reserved[key] += 1
        self.load[result.node] += 1
        held = self.requested.setdefault(result.node, {})
        for name, q in extended_requests(result.pod.spec).items():
            held[name] = held.get(name, Fraction(0)) + q

    def place(self, pods: Iterable[PodInfo]) -> list[PodResult]:
        """Every pod in the scheduler's order, each bound (and holding its devices) when it fits."""
        out = []
        for pod in sorted(pods, key=lambda p: (-p.priority, p.seq)):
            result = self.attempt(pod)
            self.commit(result)
            out.append(result)
        return out
