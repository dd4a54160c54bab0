"""Environment inventory (`dra-gitops inventory`): what a cluster offers for Dynamic Resource Allocation.

`collect_inventory(client)` reads the cluster once (discovery, nodes, driver workloads and their pods,
DeviceClasses / ResourceClasses, ResourceSlices, ResourceClaims, DeviceTaintRules) and returns an
`Inventory`; `render_inventory(inventory, fmt)` is pure and prints it as text, JSON or Markdown.
A cluster that does not serve resource.k8s.io at all is an `EnvironmentProblem` (exit 4) whose message
says which Kubernetes versions serve which DRA API and with which flags.

The small pure helpers at the top (pod health, node readiness, deprecated versions, driver pods) are shared
with `diagnose.py` and `verify.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reconciler.cluster.canary import idle_canary_reason
from reconciler.cluster.health import condition
from reconciler.cluster.rollout import RolloutContext, current_pods
from reconciler.dra.allocator import allocated_devices
from reconciler.dra.simulate import simulate
from reconciler.errors import EnvironmentProblem
from reconciler.model import dra

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

DRA_GROUP = dra.DRA_GROUP
APPS = "apps"
DRIVER_WORKLOAD_KINDS = ("DaemonSet", "Deployment", "StatefulSet")

NOT_SERVED_EXPLANATION = (
    "the cluster does not serve the Dynamic Resource Allocation API (no resource.k8s.io group in discovery). "
    "Which Kubernetes versions serve it: "
    "1.34 and later serve resource.k8s.io/v1 by default (nothing to enable); "
    "1.32/1.33 need the feature gate DynamicResourceAllocation=true on kube-apiserver, kube-scheduler, "
    "kube-controller-manager and kubelet plus --runtime-config=resource.k8s.io/v1beta1=true "
    "(1.33 also offers v1beta2=true); "
    "1.31 needs the gate plus --runtime-config=resource.k8s.io/v1alpha3=true; "
    "1.27-1.30 need the gate plus --runtime-config=resource.k8s.io/v1alpha2=true (classic DRA); "
    "1.26 needs the gate plus --runtime-config=resource.k8s.io/v1alpha1=true. "
    "Upgrade to Kubernetes >= 1.34 or enable the API with those flags."
)


# ---- pure helpers shared with diagnose.py and verify.py ------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return _dict(obj.get("metadata"))


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def nsname(obj: Mapping[str, Any]) -> str:
    ns = namespace_of(obj)
    return f"{ns}/{name_of(obj)}" if ns else name_of(obj)


def node_ready(node: Mapping[str, Any]) -> bool:
    cond = condition(node, "Ready")
    return cond is not None and cond.get("status") == "True"


def pod_phase(pod: Mapping[str, Any]) -> str:
    return str(_dict(pod.get("status")).get("phase") or "Pending")


def pod_ready(pod: Mapping[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return pod_phase(pod) == "Running" and cond is not None and cond.get("status") == "True"


@dataclass(frozen=True)
class PodHealth:
    phase: str
    ready: bool
    restarts: int
    crash_loop: bool
    waiting: str  # reason of a waiting container ("" when none)

    def describe(self) -> str:
        parts = [self.phase, "ready" if self.ready else "not ready", f"{self.restarts} restart(s)"]
        if self.crash_loop:
            parts.append("CrashLoopBackOff")
        elif self.waiting:
            parts.append(self.waiting)
        return ", ".join(parts)


def pod_health(pod: Mapping[str, Any]) -> PodHealth:
    status = _dict(pod.get("status"))
    restarts = 0
    crash = False
    waiting = ""
    for cs in _list(status.get("initContainerStatuses")) + _list(status.get("containerStatuses")):
        cs = _dict(cs)
        count = cs.get("restartCount")
        restarts += count if isinstance(count, int) else 0
        reason = str(_dict(_dict(cs.get("state")).get("waiting")).get("reason") or "")
        if reason == "CrashLoopBackOff":
            crash = True
        if reason and not waiting:
            waiting = reason
    return PodHealth(pod_phase(pod), pod_ready(pod), restarts, crash, waiting)


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def age_seconds(obj: Mapping[str, Any], now: datetime) -> float | None:
    created = parse_time(meta(obj).get("creationTimestamp"))
    return None if created is None else max(0.0, (now - created).total_seconds())


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def kube_minor(server_version: str) -> int | None:
    """The minor version of a gitVersion such as "v1.36.2" or "v1.33.1-gke.100"; None when unknown."""
    m = re.match(r"v?(\d+)\.(\d+)", server_version or "")
    return int(m.group(2)) if m and m.group(1) == "1" else None


def deprecated_versions(served: Sequence[str], server_version: str) -> dict[str, str]:
    """Served resource.k8s.io versions that are deprecated on this server, with the reason."""
    minor = kube_minor(server_version)
    out: dict[str, str] = {}
    for version in served:
        if version.startswith("v1alpha") and "v1" in served:
            out[version] = "alpha API; resource.k8s.io/v1 is served"
        elif version == "v1beta1" and (("v1" in served) or (minor is not None and minor >= 35)):
            out[version] = "deprecated in v1.35+, unavailable in v1.38+; use resource.k8s.io/v1"
        elif version == "v1beta2" and minor is not None and minor >= 36:
            out[version] = "deprecated in v1.36+, unavailable in v1.39+; use resource.k8s.io/v1"
    return out


def require_dra(served: Sequence[str], server_version: str) -> None:
    if not served:
        raise EnvironmentProblem(
            f"Kubernetes {server_version}: {NOT_SERVED_EXPLANATION}", where="resource.k8s.io"
        )


def selector_string(match_labels: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


def workload_selector(workload: Mapping[str, Any]) -> dict[str, str]:
    """matchLabels of a workload's selector, else its pod template's labels."""
    spec = _dict(workload.get("spec"))
    labels = _dict(_dict(spec.get("selector")).get("matchLabels"))
    if not labels:
        labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
    return {str(k): str(v) for k, v in labels.items()}


def labels_match(selector: Mapping[str, str], labels: Mapping[str, Any]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def owned_by(pod: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    uid = meta(workload).get("uid")
    return bool(uid) and any(_dict(r).get("uid") == uid for r in _list(meta(pod).get("ownerReferences")))


def driver_pods_of(
    workloads: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    current: RolloutContext | None = None,
) -> list[tuple[dict[str, Any], str | None, dict[str, Any]]]:
    """(workload, driver name, pod) for every pod of a driver workload (selected by labels).

    With `current` (a rollout context), only the pods of each workload's current template: what fail-fast
    signals and diagnoses judge. Without it, every pod (the inventory lists what runs).
    """
    pods = list(pods)
    out: list[tuple[dict[str, Any], str | None, dict[str, Any]]] = []
    for wl in workloads:
        wl = dict(wl)
        if not dra.is_driver_workload(wl):
            continue
        driver = dra.workload_driver(wl)
        if current is not None:
            out.extend((wl, driver, pod) for pod in current_pods(wl, pods, current))
            continue
        selector = workload_selector(wl)
        for pod in pods:
            if namespace_of(pod) != namespace_of(wl):
                continue
            if labels_match(selector, _dict(meta(pod).get("labels"))):
                out.append((wl, driver, dict(pod)))
    return out


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
            f"{_dict(t).get('key')}:{_dict(t).get('effect')}"
            for t in _list(_dict(node.get("spec")).get("taints"))
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
                node=_dict(pod.get("spec")).get("nodeName"),
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
        idle = idle_canary_reason(workload, nodes)
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


def list_driver_workloads(client: ClusterClient) -> list[dict[str, Any]]:
    """Every DaemonSet/Deployment/StatefulSet of the cluster that runs a DRA kubelet plugin."""
    out: list[dict[str, Any]] = []
    for kind in DRIVER_WORKLOAD_KINDS:
        out.extend(w for w in client.list_kind(APPS, kind) if dra.is_driver_workload(w))
    return out


def list_driver_pods(client: ClusterClient, workloads: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pods of the driver workloads (one label-selected LIST per workload)."""
    pods: list[dict[str, Any]] = []
    seen: set[str] = set()
    for wl in workloads:
        selector = workload_selector(wl)
        if not selector:
            continue
        for pod in client.list_kind(
            "", "Pod", namespace_of(wl) or None, label_selector=selector_string(selector)
        ):
            key = nsname(pod)
            if key not in seen:
                seen.add(key)
                pods.append(pod)
    return pods


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


# ---- rendering (pure) --------------------------------------------------------------------------------


def render_inventory(inv: Inventory, fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(inv.to_json(), indent=2, sort_keys=True)
    if fmt == "markdown":
        return _markdown(inv)
    if fmt == "text":
        return _text(inv)
    raise ValueError(f"unknown inventory format {fmt!r} (text, json, markdown)")


def _served_line(inv: Inventory) -> str:
    parts = []
    for v in inv.served_versions:
        tags = []
        if v == inv.preferred_version:
            tags.append("preferred")
        if v in inv.deprecated_versions:
            tags.append("deprecated")
        parts.append(f"{v} ({', '.join(tags)})" if tags else v)
    return ", ".join(parts)


def _text(inv: Inventory) -> str:
    lines = [
        f"Kubernetes {inv.server_version}",
        f"resource.k8s.io: {_served_line(inv)}",
        "",
        f"Nodes ({len(inv.nodes)}):",
    ]
    for n in inv.nodes:
        lines.append(
            f"  {n.name}  {'Ready' if n.ready else 'NotReady'}" + ("" if n.ready else f"  {n.message}")
        )
    lines.append(f"Driver pods ({len(inv.driver_pods)}):")
    for p in inv.driver_pods:
        state = "CrashLoopBackOff" if p.crash_loop else ("Ready" if p.ready else p.phase)
        lines.append(
            f"  {p.namespace}/{p.name}  driver {p.driver or '?'}  node {p.node or '-'}  {state}  restarts {p.restarts}"
        )
    lines.append(f"Device classes ({len(inv.classes)}):")
    for c in inv.classes:
        lines.append(f"  {c.name}  ({c.kind} {c.api_version})  driver {c.driver or '?'}")
    lines.append(f"ResourceSlices ({len(inv.slices)}):")
    for s in inv.slices:
        lines.append(
            f"  {s.driver or '?'}  pool {s.pool or '-'}  node {s.node or '-'}  {s.devices} device(s)  {s.name}"
        )
    lines.append("Devices per driver:")
    for name, d in sorted(inv.drivers.items()):
        lines.append(
            f"  {name}: {d.devices} device(s), {d.allocated} allocated, {d.free} free; "
            f"{d.slices} slice(s), {d.pools} pool(s); pods {d.healthy_pods}/{d.pods} healthy"
        )
    lines.append(
        f"Claims: {inv.claims} ({inv.allocated_claims} allocated, {len(inv.pending_claims)} pending)"
    )
    for pc in inv.pending_claims:
        lines.append(
            f"  pending {pc.namespace}/{pc.name}  age {format_age(pc.age_seconds)}  classes {', '.join(pc.classes) or '-'}"
        )
    if inv.taint_rules:
        lines.append(f"DeviceTaintRules: {', '.join(inv.taint_rules)}")
    if inv.warnings:
        lines.append("Warnings:")
        lines.extend(f"  ! {w}" for w in inv.warnings)
    return "\n".join(lines) + "\n"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    return out


def _markdown(inv: Inventory) -> str:
    lines = [
        "## DRA inventory",
        "",
        f"* Kubernetes **{inv.server_version}**",
        f"* resource.k8s.io: {_served_line(inv)}",
        f"* Devices: {inv.devices} total, {inv.allocated_devices} allocated, "
        f"{inv.devices - inv.allocated_devices} free",
        f"* Claims: {inv.claims} ({inv.allocated_claims} allocated, {len(inv.pending_claims)} pending)",
        "",
        "### Nodes",
        "",
        *_md_table(
            ["node", "ready", "message"],
            [(n.name, "yes" if n.ready else "**no**", n.message) for n in inv.nodes],
        ),
        "",
        "### Drivers",
        "",
        *_md_table(
            ["driver", "devices", "allocated", "free", "slices", "pools", "classes", "pods healthy"],
            [
                (
                    k,
                    d.devices,
                    d.allocated,
                    d.free,
                    d.slices,
                    d.pools,
                    ", ".join(d.classes),
                    f"{d.healthy_pods}/{d.pods}",
                )
                for k, d in sorted(inv.drivers.items())
            ],
        ),
        "",
        "### Driver pods",
        "",
        *_md_table(
            ["pod", "driver", "node", "phase", "ready", "restarts", "crash loop"],
            [
                (
                    f"{p.namespace}/{p.name}",
                    p.driver or "?",
                    p.node or "-",
                    p.phase,
                    p.ready,
                    p.restarts,
                    p.crash_loop,
                )
                for p in inv.driver_pods
            ],
        ),
        "",
        "### Device classes",
        "",
        *_md_table(
            ["class", "kind", "apiVersion", "driver"],
            [(c.name, c.kind, c.api_version, c.driver or "?") for c in inv.classes],
        ),
        "",
        "### ResourceSlices",
        "",
        *_md_table(
            ["driver", "pool", "node", "devices", "slice"],
            [(s.driver or "?", s.pool or "-", s.node or "-", s.devices, s.name) for s in inv.slices],
        ),
        "",
        "### Pending claims",
        "",
        *_md_table(
            ["claim", "age", "classes"],
            [
                (f"{c.namespace}/{c.name}", format_age(c.age_seconds), ", ".join(c.classes))
                for c in inv.pending_claims
            ],
        ),
    ]
    if inv.warnings:
        lines += ["", "### Warnings", "", *[f"* {w}" for w in inv.warnings]]
    return "\n".join(lines) + "\n"


__all__ = [
    "ClassInfo",
    "DriverPod",
    "DriverSummary",
    "Inventory",
    "NodeInfo",
    "PendingClaim",
    "PodHealth",
    "SliceInfo",
    "build_inventory",
    "collect_inventory",
    "deprecated_versions",
    "list_driver_pods",
    "list_driver_workloads",
    "pod_health",
    "render_inventory",
]
