"""What the environment inventory holds (`dra-gitops inventory`): nodes, driver pods, classes, slices,
devices per driver and claims, and its JSON form. `collect.py` builds it, `render.py` prints it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class NodeInfo:
    name: str
    ready: bool
    message: str = ""
    taints: list[str] = field(default_factory=list)


@dataclass
class DriverPod:
    namespace: str
    name: str
    workload: str  # Kind/ns/name
    driver: str | None
    node: str | None
    phase: str
    ready: bool
    restarts: int
    crash_loop: bool

    @property
    def healthy(self) -> bool:
        return self.ready and not self.crash_loop


@dataclass
class ClassInfo:
    name: str
    kind: str  # DeviceClass | ResourceClass
    api_version: str
    driver: str | None


@dataclass
class SliceInfo:
    name: str
    driver: str | None
    pool: str | None
    node: str | None
    devices: int


@dataclass
class DriverSummary:
    driver: str
    devices: int = 0
    allocated: int = 0
    pools: int = 0
    slices: int = 0
    nodes: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)
    pods: int = 0
    healthy_pods: int = 0

    @property
    def free(self) -> int:
        return self.devices - self.allocated


@dataclass
class PendingClaim:
    namespace: str
    name: str
    age_seconds: float | None
    classes: list[str]


@dataclass
class Inventory:
    server_version: str
    served_versions: list[str]
    preferred_version: str
    deprecated_versions: dict[str, str]
    nodes: list[NodeInfo]
    driver_pods: list[DriverPod]
    classes: list[ClassInfo]
    slices: list[SliceInfo]
    drivers: dict[str, DriverSummary]
    claims: int
    allocated_claims: int
    pending_claims: list[PendingClaim]
    taint_rules: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def devices(self) -> int:
        return sum(d.devices for d in self.drivers.values())

    @property
    def allocated_devices(self) -> int:
        return sum(d.allocated for d in self.drivers.values())

    def to_json(self) -> dict[str, Any]:
        drivers = {}
        for name, summary in sorted(self.drivers.items()):
            entry = asdict(summary)
            entry["free"] = summary.free
            drivers[name] = entry
        return {
            "server_version": self.server_version,
            "resource_api": {
                "served": list(self.served_versions),
                "preferred": self.preferred_version,
                "deprecated": dict(self.deprecated_versions),
            },
            "nodes": [asdict(n) for n in self.nodes],
            "driver_pods": [dict(asdict(p), healthy=p.healthy) for p in self.driver_pods],
            "classes": [asdict(c) for c in self.classes],
            "slices": [asdict(s) for s in self.slices],
            "drivers": drivers,
            "totals": {
                "devices": self.devices,
                "allocated": self.allocated_devices,
                "free": self.devices - self.allocated_devices,
                "claims": self.claims,
                "allocated_claims": self.allocated_claims,
                "pending_claims": len(self.pending_claims),
            },
            "pending_claims": [asdict(c) for c in self.pending_claims],
            "taint_rules": list(self.taint_rules),
            "warnings": list(self.warnings),
        }
