"""What the operational checklist is judged from: plain values read from the cluster and the state.

PURE: dataclasses only. `reconciler/checklist/gather.py` fills them from a live cluster; tests build them
by hand. History records are kept as the dicts the state ConfigMap holds (`evidence.evidence_record`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from reconciler.loop.store.records import AttemptRecord, HistoryRecord, InProgress


@dataclass(frozen=True)
class NodeFact:
    name: str
    ready: bool


@dataclass(frozen=True)
class DriverWorkloadFact:
    """One DRA driver workload (DaemonSet, Deployment or StatefulSet running a kubelet plugin)."""

    ref: str  # DaemonSet/ns/name
    driver: str | None
    state: str  # kstatus of the live object: current | in-progress | failed
    message: str
    desired: int  # pods its controller wants
    current_pods: int  # pods of its current template (not being deleted)
    ready_pods: int  # of those, Ready
    crash_looping: tuple[str, ...] = ()  # current pods in CrashLoopBackOff ("ns/name (N restarts)")
    not_ready: tuple[str, ...] = ()  # other current pods not Ready ("ns/name: phase, why")
    old_pods: int = 0  # pods of an older template still present
    nodes: tuple[str, ...] = ()  # nodes running its current pods
    canary_for: str | None = None
    idle_reason: str | None = None  # a driver DaemonSet (canary or main) that runs on no node


@dataclass(frozen=True)
class DriverFact:
    """What one driver publishes: its ResourceSlices and their devices."""

    name: str
    slices: int
    slice_nodes: tuple[str, ...]  # nodes with a node-local slice of this driver
    devices: int
    allocated: int
    pools: int


@dataclass(frozen=True)
class ClassFact:
    name: str
    kind: str  # DeviceClass | ResourceClass
    driver: str | None
    devices: int  # published devices the class's selectors match
    allocated: int
    unknown: bool = False  # a selector could not be evaluated: the counts are a lower bound


@dataclass(frozen=True)
class ClaimFact:
    ref: str  # ns/name
    allocated: bool
    devices: tuple[str, ...] = ()  # driver/pool/device
    node: str | None = None
    reserved_for: tuple[str, ...] = ()  # pod names of status.reservedFor
    users: tuple[str, ...] = ()  # pods (ns/name) whose spec references the claim
    deleting: bool = False


@dataclass(frozen=True)
class ChainFact:
    """One claim of one pod, as `verify.chain_of` sees it (claim -> allocated -> reserved -> node -> Ready)."""

    claim: str  # ns/name ("ns/(not created)" for a template claim not generated yet)
    devices: tuple[str, ...]
    node: str | None
    allocated: bool
    reserved: bool
    problem: str  # "" when the chain holds


@dataclass(frozen=True)
class PodFact:
    """A pod that uses DRA claims."""

    ref: str  # ns/name
    phase: str
    ready: bool
    node: str | None
    chains: tuple[ChainFact, ...] = ()


@dataclass(frozen=True)
class EventFact:
    """A Warning Event about a Pod or ResourceClaim."""

    involved: str  # Pod/ns/name | ResourceClaim/ns/name
    reason: str
    message: str
    count: int
    last_seen: datetime | None
    # What became of the object since: "healthy" (pod Ready or done, claim allocated), "unhealthy", "gone".
    now: str


@dataclass(frozen=True)
class StateFact:
    """The target's state ConfigMap (`reconciler/loop/store/state.py`), as read."""

    ref: str  # ConfigMap/ns/dra-gitops-<target>
    found: bool
    last_good: str | None = None
    last_attempted: AttemptRecord | None = None
    in_progress: InProgress | None = None
    hold: str | None = None
    inventory: tuple[str, ...] = ()  # "apiVersion Kind/ns/name" applied by last good
    history: tuple[HistoryRecord, ...] = ()  # newest first
    other_targets: tuple[str, ...] = ()  # targets with a state in the same namespace (a hint when not found)


@dataclass(frozen=True)
class ChecklistFacts:
    target: str
    cluster: str  # the API server address
    now: datetime
    server_version: str
    served: tuple[str, ...]  # resource.k8s.io versions served
    preferred: str = ""
    deprecated: dict[str, str] = field(default_factory=dict)  # served version -> why it is deprecated
    nodes: tuple[NodeFact, ...] = ()
    driver_workloads: tuple[DriverWorkloadFact, ...] = ()
    drivers: tuple[DriverFact, ...] = ()
    classes: tuple[ClassFact, ...] = ()
    claims: tuple[ClaimFact, ...] = ()
    pods: tuple[PodFact, ...] = ()
    events: tuple[EventFact, ...] = ()
    # Namespaces the checks of claims, pods and events look at; () = every namespace.
    namespaces: tuple[str, ...] = ()
    state: StateFact = field(default_factory=lambda: StateFact(ref="", found=False))


__all__ = [
    "ChainFact",
    "ChecklistFacts",
    "ClaimFact",
    "ClassFact",
    "DriverFact",
    "DriverWorkloadFact",
    "EventFact",
    "NodeFact",
    "PodFact",
    "StateFact",
]
