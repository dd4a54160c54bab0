"""What the placement model works on (pure): nodes, pods and their claims, and each pod's result.

:class:`NodeInfo` (a Node as the scheduler sees it), :class:`PodInfo` with its :class:`PodClaim` entries,
and :class:`PodResult` (the node, the allocations, or why every node rejected the pod, in kube-scheduler's
words and in numbers). Used by :mod:`reconciler.dra.placement` and its callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.dra.allocator import AllocationOutcome
from reconciler.dra.noderesources import node_allocatable
from reconciler.dra.quantity import quantity_or_none
from reconciler.model.readers import as_dict, as_list

__all__ = [
    "AFFINITY",
    "CLAIM_IN_USE",
    "MAX_RESERVED",
    "NOT_AVAILABLE_ON_NODE",
    "NOT_READY",
    "UNSCHEDULABLE",
    "NodeInfo",
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
    cpu: int = 0  # status.allocatable cpu, in millicores (scoring)
    memory: int = 0  # status.allocatable memory, in bytes (scoring)

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
            cpu=_allocatable(node, "cpu", 1000),
            memory=_allocatable(node, "memory", 1),
        )


def _allocatable(node: Mapping[str, Any], name: str, scale: int) -> int:
    q = quantity_or_none(as_dict(as_dict(node.get("status")).get("allocatable")).get(name))
    return int(q * scale) if q is not None else 0


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
    labels: dict[str, str] = field(default_factory=dict)
    # the selector of the default topology spreading (the owning ReplicaSet's, StatefulSet's or
    # ReplicationController's); None: the pod is not spread
    spread: Mapping[str, Any] | None = None

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
    # the nodes that scored equal best (the scheduler takes any of them), grouped into classes of
    # nodes that are interchangeable for every pod still to come; ``node`` is the first of them
    ties: list[list[str]] = field(default_factory=list)

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
