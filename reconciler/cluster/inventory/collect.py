"""Environment inventory (`dra-gitops inventory`): what a cluster offers for Dynamic Resource Allocation.

`collect_inventory(client)` reads the cluster once (discovery, nodes, driver workloads and their pods,
DeviceClasses / ResourceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules) and returns an
`Inventory`; `render_inventory(inventory, fmt)` (render.py) is pure and prints it as text, JSON or
Markdown. A cluster that does not serve resource.k8s.io at all is an `EnvironmentProblem` (exit 4) whose
message says which Kubernetes versions serve which DRA API and with which flags.

The small pure helpers on objects (pod health, node readiness, deprecated versions, driver pods) live in
`objects.py`, the driver workloads and their pods in `drivers.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reconciler.cluster.drivers import driver_pods_of, list_driver_pods, list_driver_workloads
from reconciler.cluster.objects import (
    DRA_GROUP,
    age_seconds,
    condition,
    deprecated_versions,
    meta,
    name_of,
    namespace_of,
    node_ready,
    nsname,
    pod_health,
    require_dra,
)
from reconciler.cluster.readiness import idle_driver_reason
from reconciler.dra.allocator import allocated_devices
from reconciler.dra.simulate import simulate
from reconciler.model import dra
from reconciler.model.fields import as_dict, as_list

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient


# ---- the inventory -----------------------------------------------------------------------------------


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


def build_inventory(
    *,
    server_version: str,
    served: Sequence[str],
    preferred: str,
    nodes: Sequence[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    taint_rules: Sequence[Mapping[str, Any]] = (),
    now: datetime | None = None,
) -> Inventory:
    """The inventory from objects already read (pure)."""
    now = now or datetime.now(UTC)
    node_infos = []
    for node in sorted(nodes, key=name_of):
        ready = condition(node, "Ready") or {}
        taints = [
            f"{as_dict(t).get('key')}:{as_dict(t).get('effect')}"
            for t in as_list(as_dict(node.get("spec")).get("taints"))
        ]
        node_infos.append(NodeInfo(name_of(node), node_ready(node), str(ready.get("message") or ""), taints))

    dpods = []
    for wl, driver, pod in driver_pods_of(workloads, pods):
        h = pod_health(pod)
        dpods.append(
            DriverPod(
                namespace=namespace_of(pod),
                name=name_of(pod),
                workload=f"{wl.get('kind')}/{nsname(wl)}",
                driver=driver,
                node=as_dict(pod.get("spec")).get("nodeName"),
                phase=h.phase,
                ready=h.ready,
                restarts=h.restarts,
                crash_loop=h.crash_loop,
            )
        )
    dpods.sort(key=lambda p: (p.driver or "", p.namespace, p.name))

    class_infos = [
        ClassInfo(
            name_of(c), str(c.get("kind") or ""), str(c.get("apiVersion") or ""), dra.class_driver(dict(c))
        )
        for c in sorted(classes, key=name_of)
    ]
    slice_infos = [
        SliceInfo(
            name_of(s),
            dra.slice_driver(dict(s)),
            dra.slice_pool(dict(s)),
            dra.slice_node(dict(s)),
            len(dra.slice_devices(dict(s))),
        )
        for s in sorted(
            slices, key=lambda s: (dra.slice_driver(dict(s)) or "", dra.slice_pool(dict(s)) or "", name_of(s))
        )
    ]

    device_classes = [c for c in classes if c.get("kind") == "DeviceClass"]
    sim = simulate(slices, device_classes, claims)
    drivers: dict[str, DriverSummary] = {}
    for drv, totals in sim.drivers.items():
        drivers[drv] = DriverSummary(
            driver=drv,
            devices=totals.devices,
            allocated=totals.allocated,
            pools=totals.pools,
            nodes=list(totals.nodes),
        )
    # Allocations of drivers whose slices are gone still count as allocated devices of that driver.
    for drv, _pool, _dev in allocated_devices(claims):
        drivers.setdefault(drv, DriverSummary(drv))
    for s in slice_infos:
        if s.driver:
            drivers.setdefault(s.driver, DriverSummary(s.driver)).slices += 1
    for c in class_infos:
        if c.driver:
            drivers.setdefault(c.driver, DriverSummary(c.driver)).classes.append(c.name)
    for p in dpods:
        if p.driver:
            summary = drivers.setdefault(p.driver, DriverSummary(p.driver))
            summary.pods += 1
            summary.healthy_pods += int(p.healthy)

    allocated = 0
    pending = []
    for claim in claims:
        if dra.claim_allocation(dict(claim))["allocated"]:
            allocated += 1
        elif not meta(claim).get("deletionTimestamp"):
            pending.append(
                PendingClaim(
                    namespace_of(claim),
                    name_of(claim),
                    age_seconds(claim, now),
                    dra.requested_classes(dict(claim)),
                )
            )
    pending.sort(key=lambda c: (-(c.age_seconds or 0), c.namespace, c.name))

    warnings = []
    for version, why in sorted(deprecated_versions(served, server_version).items()):
        warnings.append(f"resource.k8s.io/{version} is served but {why}")
    for c in class_infos:
        if c.driver and not drivers[c.driver].slices:
            warnings.append(f"{c.kind} {c.name} selects driver {c.driver}, which publishes no ResourceSlices")
    for p in dpods:
        if p.crash_loop:
            warnings.append(
                f"driver pod {p.namespace}/{p.name} is in CrashLoopBackOff ({p.restarts} restarts)"
            )
        elif not p.ready:
            warnings.append(f"driver pod {p.namespace}/{p.name} is not ready ({p.phase})")
    for n in node_infos:
        if not n.ready:
            warnings.append(f"node {n.name} is NotReady: {n.message}")
    for workload in workloads:
        idle = idle_driver_reason(workload, nodes)
        if idle is not None:
            warnings.append(idle)

    return Inventory(
        server_version=server_version,
        served_versions=list(served),
        preferred_version=preferred,
        deprecated_versions=deprecated_versions(served, server_version),
        nodes=node_infos,
        driver_pods=dpods,
        classes=class_infos,
        slices=slice_infos,
        drivers=drivers,
        claims=len(claims),
        allocated_claims=allocated,
        pending_claims=pending,
        taint_rules=sorted(name_of(t) for t in taint_rules),
        warnings=warnings,
    )


def collect_inventory(client: ClusterClient, *, now: datetime | None = None) -> Inventory:
    """Read the cluster and build its DRA inventory; EnvironmentProblem when resource.k8s.io is not served."""
    server_version = client.server_version()
    served = client.served_versions(DRA_GROUP)
    require_dra(served, server_version)
    preferred = client.groups()[DRA_GROUP].preferred
    nodes = client.list_kind("", "Node")
    workloads = list_driver_workloads(client)
    pods = list_driver_pods(client, workloads)
    classes = client.list_kind(DRA_GROUP, "DeviceClass") + client.list_kind(DRA_GROUP, "ResourceClass")
    slices = client.list_kind(DRA_GROUP, "ResourceSlice")
    claims = client.list_kind(DRA_GROUP, "ResourceClaim")
    taint_rules = client.list_kind(DRA_GROUP, "DeviceTaintRule")
    return build_inventory(
        server_version=server_version,
        served=served,
        preferred=preferred,
        nodes=nodes,
        workloads=workloads,
        pods=pods,
        classes=classes,
        slices=slices,
        claims=claims,
        taint_rules=taint_rules,
        now=now,
    )


__all__ = [
    "ClassInfo",
    "DriverPod",
    "DriverSummary",
    "Inventory",
    "NodeInfo",
    "PendingClaim",
    "SliceInfo",
    "build_inventory",
    "collect_inventory",
]
