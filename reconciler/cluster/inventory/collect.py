"""Environment inventory (`dra-gitops inventory`): what a cluster offers for Dynamic Resource Allocation.

`collect_inventory(client)` reads the cluster once (discovery, nodes, driver workloads and their pods,
DeviceClasses / ResourceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules) and returns an
`Inventory` (types.py); `render_inventory(inventory, fmt)` (render.py) is pure and prints it as text, JSON or
Markdown. A cluster that does not serve resource.k8s.io at all is an `EnvironmentProblem` (exit 4) whose
message says which Kubernetes versions serve which DRA API and with which flags.

The small pure helpers on objects (pod health, node readiness, deprecated versions, driver pods) live in
`objects.py`, the driver workloads and their pods in `drivers.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reconciler.cluster.drivers import driver_pods_of, list_driver_pods, list_driver_workloads
from reconciler.cluster.inventory.types import (
    ClassInfo,
    DriverPod,
    DriverSummary,
    Inventory,
    NodeInfo,
    PendingClaim,
    SliceInfo,
)
from reconciler.cluster.objects import (
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
from reconciler.model.dra import DRA_GROUP
from reconciler.model.readers import as_dict, as_list

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient


def _nodes(nodes: Sequence[Mapping[str, Any]]) -> list[NodeInfo]:
    out = []
    for node in sorted(nodes, key=name_of):
        ready = condition(node, "Ready") or {}
        taints = [
            f"{as_dict(t).get('key')}:{as_dict(t).get('effect')}"
            for t in as_list(as_dict(node.get("spec")).get("taints"))
        ]
        out.append(NodeInfo(name_of(node), node_ready(node), str(ready.get("message") or ""), taints))
    return out


def _driver_pods(
    workloads: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> list[DriverPod]:
    out = []
    for wl, driver, pod in driver_pods_of(workloads, pods):
        h = pod_health(pod)
        out.append(
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
    out.sort(key=lambda p: (p.driver or "", p.namespace, p.name))
    return out


def _classes(classes: Sequence[Mapping[str, Any]]) -> list[ClassInfo]:
    return [
        ClassInfo(
            name_of(c), str(c.get("kind") or ""), str(c.get("apiVersion") or ""), dra.class_driver(dict(c))
        )
        for c in sorted(classes, key=name_of)
    ]


def _slices(slices: Sequence[Mapping[str, Any]]) -> list[SliceInfo]:
    return [
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


def _drivers(
    slices: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    slice_infos: Sequence[SliceInfo],
    class_infos: Sequence[ClassInfo],
    dpods: Sequence[DriverPod],
) -> dict[str, DriverSummary]:
    """Devices, allocations, pools, slices, classes and pods per driver."""
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
    return drivers


def _pending_claims(claims: Sequence[Mapping[str, Any]], now: datetime) -> tuple[int, list[PendingClaim]]:
    """(allocated claims, the pending ones oldest first)."""
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
    return allocated, pending


def _warnings(
    deprecated: Mapping[str, str],
    class_infos: Sequence[ClassInfo],
    drivers: Mapping[str, DriverSummary],
    dpods: Sequence[DriverPod],
    node_infos: Sequence[NodeInfo],
    workloads: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
) -> list[str]:
    warnings = []
    for version, why in sorted(deprecated.items()):
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
    return warnings


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
    node_infos = _nodes(nodes)
    dpods = _driver_pods(workloads, pods)
    class_infos = _classes(classes)
    slice_infos = _slices(slices)
    drivers = _drivers(slices, classes, claims, slice_infos, class_infos, dpods)
    allocated, pending = _pending_claims(claims, now)
    deprecated = deprecated_versions(served, server_version)
    return Inventory(
        server_version=server_version,
        served_versions=list(served),
        preferred_version=preferred,
        deprecated_versions=deprecated,
        nodes=node_infos,
        driver_pods=dpods,
        classes=class_infos,
        slices=slice_infos,
        drivers=drivers,
        claims=len(claims),
        allocated_claims=allocated,
        pending_claims=pending,
        taint_rules=sorted(name_of(t) for t in taint_rules),
        warnings=_warnings(deprecated, class_infos, drivers, dpods, node_infos, workloads, nodes),
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


__all__ = ["build_inventory", "collect_inventory"]
