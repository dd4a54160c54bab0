"""What diagnosis works on and produces: the `Snapshot` classify() looks at, the `Diagnosis` it returns.

`MODES` orders the failure modes, most specific first (classify() sorts by it); the event reasons are
shared with `verify/`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from reconciler.cluster.readiness import RolloutContext

MODES = (
    "missing-class",
    "selector-error",
    "version-mismatch",
    "driver-not-installed",
    "node-failure",
    "prepare-failure",
    "device-taint",
    "exhaustion",
    "pending",
)
FAILED_SCHEDULING = "FailedScheduling"
FAILED_PREPARE = "FailedPrepareDynamicResources"


@dataclass
class Diagnosis:
    mode: str
    ref: str  # ResourceClaim/ns/name, Pod/ns/name, DeviceClass/name, Kind/ns/name
    summary: str
    evidence: list[str] = field(default_factory=list)
    recovery: list[str] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Snapshot:
    """What classify() looks at. `pods` are the pods in scope; claims/classes/slices/nodes are cluster-wide."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    taint_rules: list[dict[str, Any]] = field(default_factory=list)  # DeviceTaintRules
    nodes: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    driver_workloads: list[dict[str, Any]] = field(default_factory=list)
    driver_pods: list[dict[str, Any]] = field(default_factory=list)
    # decides which driver pods are of their workload's current template (the only ones judged)
    driver_rollout: RolloutContext = field(default_factory=RolloutContext)
    driver_logs: dict[str, str] = field(default_factory=dict)  # "ns/pod" -> last log lines
    served_versions: list[str] = field(default_factory=list)
    server_version: str = ""
    # (ref, apiVersion) of the manifests being applied (optional): version-mismatch of the commit itself.
    manifest_versions: list[tuple[str, str]] = field(default_factory=list)
    # claims in scope ("ns/name") besides those of `pods`; None = every claim of the snapshot
    scope_claims: list[str] | None = None
    # report every class without slices, not only those the scope's claims use
    all_classes: bool = False
