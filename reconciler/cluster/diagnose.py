"""Diagnosis (`dra-gitops diagnose`, and every failed verification): symptom -> failure mode -> recovery.

`classify(snapshot)` is pure: it looks at a `Snapshot` (the pods and claims in scope plus the cluster's
classes, slices, nodes, events, driver pods and their last log lines) and returns one `Diagnosis` per
problem found, each with evidence lines and concrete recovery steps. `collect_snapshot(client, ...)` is
the edge that reads those objects; `diagnose(client, ...)` is both; `render_diagnoses` prints them.

Failure modes: driver-not-installed, exhaustion, node-failure, version-mismatch, missing-class,
prepare-failure, and pending (nothing conclusive yet).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cluster.inventory import list_driver_pods, list_driver_workloads
from reconciler.cluster.objects import (
    DRA_GROUP,
    _dict,
    _list,
    driver_pods_of,
    meta,
    name_of,
    namespace_of,
    node_ready,
    nsname,
    pod_health,
    pod_phase,
    pod_ready,
    require_dra,
)
from reconciler.cluster.rollout import RolloutContext, rollout_context
from reconciler.dra.allocator import CANNOT_ALLOCATE, Inventory, claim_spec, normalise_requests
from reconciler.errors import UserError
from reconciler.model import dra

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

MODES = (
    "missing-class",
    "version-mismatch",
    "driver-not-installed",
    "node-failure",
    "prepare-failure",
    "exhaustion",
    "pending",
)
FAILED_SCHEDULING = "FailedScheduling"
FAILED_PREPARE = "FailedPrepareDynamicResources"
_MISSING_CLASS_RE = re.compile(r"device class (?P<cls>[A-Za-z0-9.\-]+) does not exist")
_VERSION_IN_LOG_RE = re.compile(r"resource\.k8s\.io/(?P<v>v1(?:alpha\d+|beta\d+)?)\b")
_LOG_LINES = 5
# Driver images known to need one resource.k8s.io version (DRA.md section 9).
_IMAGE_VERSIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"dra-example-driver:v0\.1\."), "v1beta1"),
    (re.compile(r"dra-example-driver:v0\.2\.0$"), "v1beta1"),
    (re.compile(r"k8s-dra-driver(?:-gpu)?:v25\.3\."), "v1beta1"),
    (re.compile(r"k8s-dra-driver:v0\.1\."), "v1alpha2"),
)


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


# ---- small helpers -----------------------------------------------------------------------------------


def _event_count(event: Mapping[str, Any]) -> int:
    count = event.get("count")
    if isinstance(count, int) and count > 0:
        return count
    series = _dict(event.get("series")).get("count")
    return series if isinstance(series, int) and series > 0 else 1


def event_line(event: Mapping[str, Any]) -> str:
    inv = _dict(event.get("involvedObject") or event.get("regarding"))
    obj = (
        f"{inv.get('kind')}/{inv.get('namespace')}/{inv.get('name')}"
        if inv.get("namespace")
        else f"{inv.get('kind')}/{inv.get('name')}"
    )
    source = _dict(event.get("source")).get("component") or event.get("reportingComponent") or ""
    src = f" from {source}" if source else ""
    message = str(event.get("message") or event.get("note") or "").strip()
    return f"event {event.get('reason')} (x{_event_count(event)}){src} on {obj}: {message}"


def events_for(
    events: Iterable[Mapping[str, Any]], kind: str, namespace: str, name: str, uid: str | None = None
) -> list[dict[str, Any]]:
    out = []
    for ev in events:
        inv = _dict(ev.get("involvedObject") or ev.get("regarding"))
        if inv.get("kind") != kind or inv.get("name") != name:
            continue
        if namespace and (inv.get("namespace") or namespace_of(ev)) != namespace:
            continue
        if uid and inv.get("uid") and inv.get("uid") != uid:
            continue
        out.append(dict(ev))
    return sorted(out, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))


def pod_claim_refs(pod: Mapping[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """(pod claim name, ResourceClaim name or None when not generated yet, template name or None)."""
    statuses = {
        _dict(s).get("name"): _dict(s).get("resourceClaimName")
        for s in _list(_dict(pod.get("status")).get("resourceClaimStatuses"))
    }
    out: list[tuple[str, str | None, str | None]] = []
    for pc in dra.pod_claims(_dict(pod.get("spec"))):
        if pc.claim:
            out.append((pc.name, pc.claim, None))
        else:
            generated = statuses.get(pc.name)
            out.append((pc.name, str(generated) if generated else None, pc.template))
    return out


def claim_status_line(claim: Mapping[str, Any]) -> str:
    alloc = dra.claim_allocation(dict(claim))
    ref = nsname(claim)
    prefix = "deleted," if meta(claim).get("deletionTimestamp") else ""
    if not alloc["allocated"]:
        return f"claim {ref}: {prefix}pending (no status.allocation)"
    devices = (
        ", ".join(f"{d['driver']}/{d['pool']}/{d['device']}" for d in alloc["devices"]) or "(classic handle)"
    )
    reserved = alloc["reserved_for"]
    state = f"{prefix}allocated" + (",reserved" if reserved else "")
    where = f" on node {alloc['node']}" if alloc["node"] else ""
    by = f", reserved for {', '.join(reserved)}" if reserved else ""
    return f"claim {ref}: {state} {devices}{where}{by}"


def _first_request_bodies(spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(class, request body) of the first alternative of each request (v1 shape)."""
    out = []
    for req in normalise_requests(spec):
        if "exactly" in req:
            body = _dict(req.get("exactly"))
        else:
            alts = [_dict(a) for a in _list(req.get("firstAvailable"))]
            body = alts[0] if alts else {}
        out.append((str(body.get("deviceClassName") or ""), body))
    return out


def _selectors(body: Mapping[str, Any]) -> list[str]:
    return [
        str(_dict(_dict(s).get("cel")).get("expression"))
        for s in _list(body.get("selectors"))
        if isinstance(_dict(_dict(s).get("cel")).get("expression"), str)
    ]


def class_counts(inv: Inventory, spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per requested class: needed / free / total devices; "unknown" where a CEL selector cannot be evaluated."""
    out: dict[str, dict[str, Any]] = {}
    for cls, body in _first_request_bodies(spec):
        if not cls or cls not in inv.classes:
            continue
        matched, unknown = inv.matching(cls, _selectors(body), inv.devices)
        if (body.get("allocationMode") or "ExactCount") == "All":
            needed = max(1, len(matched))
        else:
            raw = body.get("count")
            needed = raw if isinstance(raw, int) and raw > 0 else 1
        entry = out.setdefault(cls, {"needed": 0, "free": 0, "total": 0, "unknown": False, "_keys": set()})
        entry["needed"] += needed
        entry["_keys"] |= {d.key for d in matched}
        entry["unknown"] = entry["unknown"] or unknown
    for entry in out.values():
        keys = entry.pop("_keys")
        entry["total"] = len(keys)
        entry["free"] = len([k for k in keys if k not in inv.used])
        if entry["unknown"]:
            entry["free"] = f"{entry['free']} or more (unknown)" if entry["free"] else "unknown"
            entry["total"] = f"{entry['total']} or more (unknown)" if entry["total"] else "unknown"
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---- classify ----------------------------------------------------------------------------------------


@dataclass
class _Subject:
    """One claim in scope (possibly not created yet) with the pods that use it."""

    namespace: str
    name: str | None  # None: generated claim not created yet
    claim: dict[str, Any] | None
    template: dict[str, Any] | None
    template_name: str | None
    pods: list[dict[str, Any]]

    @property
    def ref(self) -> str:
        if self.name:
            return f"ResourceClaim/{self.namespace}/{self.name}"
        pod = self.pods[0] if self.pods else {}
        return f"Pod/{nsname(pod)}"

    @property
    def spec_source(self) -> dict[str, Any] | None:
        return self.claim if self.claim is not None else self.template


class _Classifier:
    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.class_by_name = {name_of(c): c for c in snap.classes}
        self.device_classes = [c for c in snap.classes if c.get("kind", "DeviceClass") == "DeviceClass"]
        self.claims = {(namespace_of(c), name_of(c)): c for c in snap.claims}
        self.templates = {(namespace_of(t), name_of(t)): t for t in snap.templates}
        self.nodes = {name_of(n): n for n in snap.nodes}
        self.slice_drivers = {dra.slice_driver(s) for s in snap.slices}
        self.inv = Inventory(snap.slices, self.device_classes, snap.claims)
        self.driver_pods = driver_pods_of(snap.driver_workloads, snap.driver_pods, snap.driver_rollout)
        self.out: list[Diagnosis] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, d: Diagnosis) -> None:
        key = (d.mode, d.ref)
        if key not in self._seen:
            self._seen.add(key)
            self.out.append(d)

    # -- scope

    def subjects(self) -> list[_Subject]:
        by_key: dict[tuple[str, str], _Subject] = {}
        out: list[_Subject] = []
        for pod in self.snap.pods:
            if pod_phase(pod) == "Succeeded":
                continue
            ns = namespace_of(pod)
            for _pcname, cname, tname in pod_claim_refs(pod):
                template = self.templates.get((ns, tname)) if tname else None
                if cname is None:
                    out.append(_Subject(ns, None, None, template, tname, [pod]))
                    continue
                key = (ns, cname)
                if key in by_key:
                    by_key[key].pods.append(pod)
                    continue
                subject = _Subject(ns, cname, self.claims.get(key), template, tname, [pod])
                by_key[key] = subject
                out.append(subject)
        extra = self.snap.scope_claims
        wanted = [nsname(c) for c in self.snap.claims] if extra is None else extra
        for ref in wanted:
            ns, _, name = ref.partition("/")
            if (ns, name) in by_key:
                continue
            claim = self.claims.get((ns, name))
            users = [
                p
                for p in self.snap.pods
                if namespace_of(p) == ns and any(c == name for _, c, _ in pod_claim_refs(p))
            ]
            subject = _Subject(ns, name, claim, None, None, users)
            by_key[(ns, name)] = subject
            out.append(subject)
        return out

    # -- evidence

    def pod_events(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        return events_for(self.snap.events, "Pod", namespace_of(pod), name_of(pod), meta(pod).get("uid"))

    def driver_evidence(self, driver: str | None, node: str | None = None) -> list[str]:
        lines = []
        for wl, drv, pod in self.driver_pods:
            if driver is not None and drv not in (driver, None):
                continue
            pnode = _dict(pod.get("spec")).get("nodeName")
            if node is not None and pnode not in (node, None):
                continue
            h = pod_health(pod)
            lines.append(
                f"driver pod {nsname(pod)} ({wl.get('kind')}/{name_of(wl)}, driver {drv or '?'}) on node {pnode or '-'}: {h.describe()}"
            )
            logs = self.snap.driver_logs.get(nsname(pod))
            if logs:
                for line in [ln for ln in logs.splitlines() if ln.strip()][-_LOG_LINES:]:
                    lines.append(f"  log: {line}")
        return lines

    def driver_workloads_for(self, driver: str | None) -> list[dict[str, Any]]:
        return [
            w
            for w in self.snap.driver_workloads
            if driver is None or dra.workload_driver(w) in (driver, None)
        ]

    # -- modes

    def run(self) -> list[Diagnosis]:
        self.version_mismatch()
        subjects = self.subjects()
        used_classes: set[str] = set()
        for s in subjects:
            source = s.spec_source
            if source is not None:
                used_classes.update(dra.requested_classes(source))
        self.drivers_missing(used_classes if not self.snap.all_classes else set(self.class_by_name))
        for s in subjects:
            self.subject(s)
        for pod in self.snap.pods:
            self.pod_without_claims(pod)
        order = {m: i for i, m in enumerate(MODES)}
        return sorted(self.out, key=lambda d: (order.get(d.mode, 99), d.ref))

    def version_mismatch(self) -> None:
        served = self.snap.served_versions
        if not served:
            return
        for ref, api_version in self.snap.manifest_versions:
            if dra.is_dra_group(api_version) and api_version.split("/", 1)[1] not in served:
                self.add(
                    Diagnosis(
                        "version-mismatch",
                        ref,
                        f"{ref} uses {api_version}, which the cluster (Kubernetes {self.snap.server_version or '?'}) does not serve",
                        evidence=[f"served resource.k8s.io versions: {', '.join(served)}"],
                        recovery=[
                            f"rewrite the manifest for resource.k8s.io/{served[0]} (the cluster's preferred version)",
                            "or enable the version on kube-apiserver with --runtime-config=resource.k8s.io/<version>=true "
                            "where that release still compiles it in",
                        ],
                    )
                )
        for wl in self.snap.driver_workloads:
            drv = dra.workload_driver(wl)
            wref = f"{wl.get('kind')}/{nsname(wl)}"
            needs: set[str] = set()
            evidence: list[str] = []
            for c in _list(_dict(dra.pod_spec_of(wl)).get("containers")):
                image = str(_dict(c).get("image") or "")
                for pattern, version in _IMAGE_VERSIONS:
                    if pattern.search(image) and version not in served:
                        needs.add(version)
                        evidence.append(f"image {image} uses resource.k8s.io/{version}")
            for wl2, _drv, pod in self.driver_pods:
                if wl2 is not wl and nsname(wl2) != nsname(wl):
                    continue
                for line in (self.snap.driver_logs.get(nsname(pod)) or "").splitlines():
                    for m in _VERSION_IN_LOG_RE.finditer(line):
                        if m.group("v") not in served:
                            needs.add(m.group("v"))
                            evidence.append(f"log of {nsname(pod)}: {line.strip()}")
            if needs:
                self.add(
                    Diagnosis(
                        "version-mismatch",
                        wref,
                        f"driver {drv or wref} uses resource.k8s.io/{', '.join(sorted(needs))}, which the cluster "
                        f"(Kubernetes {self.snap.server_version or '?'}) does not serve",
                        evidence=[*evidence[:8], f"served resource.k8s.io versions: {', '.join(served)}"],
                        recovery=[
                            f"upgrade the driver to a release that speaks resource.k8s.io/{served[0]}",
                            "or enable the version it needs on kube-apiserver with "
                            f"--runtime-config=resource.k8s.io/{sorted(needs)[0]}=true (if the release still has it)",
                        ],
                    )
                )

    def drivers_missing(self, classes: Iterable[str]) -> None:
        for cname in sorted(classes):
            cls = self.class_by_name.get(cname)
            if cls is None:
                continue
            driver = dra.class_driver(cls)
            crashing = [
                pod
                for _wl, drv, pod in self.driver_pods
                if drv in (driver, None) and pod_health(pod).crash_loop
            ]
            if driver is not None and driver in self.slice_drivers and not crashing:
                continue
            if driver is None:
                matched, unknown = self.inv.matching(cname, [], self.inv.devices)
                if matched or unknown or not self.device_classes:
                    continue
            workloads = self.driver_workloads_for(driver)
            who = driver or f"the driver of class {cname}"
            has_slices = driver is not None and driver in self.slice_drivers
            if crashing:
                summary = f"driver {who} is not running: {len(crashing)} pod(s) in CrashLoopBackOff"
                if not has_slices:
                    summary += " and it publishes no ResourceSlices"
            elif workloads:
                summary = f"class {cname} selects {who}, whose pods run but publish no ResourceSlices"
            else:
                summary = (
                    f"class {cname} exists but {who} is not installed: no ResourceSlices, no driver pods"
                )
            evidence = [f"DeviceClass {cname} selects driver {driver or '?'}"]
            evidence.append(
                f"ResourceSlices published by drivers: {', '.join(sorted(d for d in self.slice_drivers if d)) or 'none'}"
            )
            if workloads:
                evidence += [f"driver workload {w.get('kind')}/{nsname(w)}" for w in workloads]
            else:
                evidence.append("no DaemonSet/Deployment labelled as a DRA kubelet plugin for this driver")
            evidence += self.driver_evidence(driver)
            recovery = []
            if crashing:
                recovery.append(
                    f"read the driver pods' logs (kubectl logs -n {namespace_of(crashing[0])} {name_of(crashing[0])} "
                    "--previous) and fix the crash, or roll back the driver change"
                )
            recovery += [
                f"deploy the {who} kubelet-plugin DaemonSet (e.g. its Helm chart) and check its pods are Ready on "
                "the nodes with the hardware",
                f"check that ResourceSlices appear: kubectl get resourceslices --field-selector spec.driver={driver or '<driver>'}",
            ]
            self.add(Diagnosis("driver-not-installed", f"DeviceClass/{cname}", summary, evidence, recovery))

    def subject(self, s: _Subject) -> None:
        source = s.spec_source
        evidence: list[str] = []
        events: list[dict[str, Any]] = []
        for pod in s.pods:
            events += self.pod_events(pod)
        if s.claim is not None:
            evidence.append(claim_status_line(s.claim))
        elif s.name is not None:
            evidence.append(f"claim {s.namespace}/{s.name}: does not exist")
        else:
            pod = s.pods[0]
            evidence.append(
                f"pod {nsname(pod)}: claim from template {s.template_name} not created yet (no status.resourceClaimStatuses entry)"
            )
        for pod in s.pods:
            h = pod_health(pod)
            node = _dict(pod.get("spec")).get("nodeName")
            evidence.append(f"pod {nsname(pod)}: {h.describe()}, node {node or '(not scheduled)'}")
        ev_lines = [event_line(e) for e in events if e.get("type") != "Normal"]
        # 1. missing class (the object, or the scheduler's event)
        requested = dra.requested_classes(source) if source is not None else []
        missing = [c for c in requested if c not in self.class_by_name]
        for e in events:
            m = _MISSING_CLASS_RE.search(str(e.get("message") or ""))
            if m and m.group("cls") not in self.class_by_name and m.group("cls") not in missing:
                missing.append(m.group("cls"))
        if missing:
            holder = (
                f"ResourceClaimTemplate {s.namespace}/{s.template_name}"
                if s.claim is None and s.template_name
                else s.ref
            )
            self.add(
                Diagnosis(
                    "missing-class",
                    s.ref,
                    f"{holder} requests DeviceClass {', '.join(missing)}, which does not exist",
                    evidence=[
                        *evidence,
                        *ev_lines,
                        f"DeviceClasses in the cluster: {', '.join(sorted(self.class_by_name)) or 'none'}",
                    ],
                    recovery=[
                        f"create DeviceClass {', '.join(missing)} (apply the commit stage that defines it, or install the "
                        "driver chart that ships it)",
                        f"or fix deviceClassName in the claim/template to one of: {', '.join(sorted(self.class_by_name)) or '(none)'}",
                    ],
                )
            )
            return
        if source is None:
            if s.name is None and s.template_name and (s.namespace, s.template_name) not in self.templates:
                summary = f"ResourceClaimTemplate {s.namespace}/{s.template_name} does not exist, so no claim is generated"
                recovery = [
                    f"create ResourceClaimTemplate {s.namespace}/{s.template_name} or fix the pod's resourceClaims"
                ]
            elif s.name is not None and s.claim is None:
                summary = f"ResourceClaim {s.namespace}/{s.name} does not exist; the pod waits for it"
                recovery = [f"create ResourceClaim {s.namespace}/{s.name} or fix the pod's resourceClaims"]
            else:
                summary = "the claim has not been created yet"
                recovery = ["wait: kube-controller-manager creates the claim from the template"]
            self.add(Diagnosis("pending", s.ref, summary, [*evidence, *ev_lines], recovery))
            return
        alloc: dict[str, Any] = (
            dra.claim_allocation(s.claim) if s.claim is not None else {"allocated": False, "node": None}
        )
        found = False
        # 2. node failure
        nodes_of_claim = [alloc["node"]] if alloc.get("node") else []
        for pod in s.pods:
            n = _dict(pod.get("spec")).get("nodeName")
            if n and n not in nodes_of_claim:
                nodes_of_claim.append(n)
        for node_name in nodes_of_claim:
            node = self.nodes.get(node_name)
            if node is not None and node_ready(node):
                continue
            ready = _dict(
                next(
                    (
                        c
                        for c in _list(_dict(_dict(node).get("status")).get("conditions"))
                        if _dict(c).get("type") == "Ready"
                    ),
                    {},
                )
            )
            state = (
                "does not exist"
                if node is None
                else f"is NotReady ({ready.get('reason') or '?'}: {ready.get('message') or ''})"
            )
            self.add(
                Diagnosis(
                    "node-failure",
                    s.ref,
                    f"{s.ref} is allocated on node {node_name}, which {state}",
                    evidence=[*evidence, f"node {node_name} {state}", *ev_lines],
                    recovery=[
                        f"drain and repair or replace node {node_name} (kubectl drain {node_name} --ignore-daemonsets)",
                        "the claim is released when its pods are deleted; their controllers then recreate them "
                        "on a healthy node with free devices",
                    ],
                    numbers={"node": node_name},
                )
            )
            found = True
        # 3. prepare failure
        prepare = [e for e in events if e.get("reason") == FAILED_PREPARE]
        if prepare:
            node = _dict(prepare[-1].get("source")).get("host") or (alloc.get("node") if alloc else None)
            drivers = (
                sorted({d["driver"] for d in alloc.get("devices", []) if d.get("driver")}) if alloc else []
            )
            self.add(
                Diagnosis(
                    "prepare-failure",
                    s.ref,
                    f"kubelet could not prepare the devices of {s.ref} on node {node or '?'}: "
                    f"{str(prepare[-1].get('message') or '').strip()}",
                    evidence=[*evidence, *[event_line(e) for e in prepare]]
                    + self.driver_evidence(drivers[0] if len(drivers) == 1 else None, node),
                    recovery=[
                        f"check the driver's kubelet-plugin pod on node {node or '?'} (Ready, registered with kubelet, logs)",
                        "restart the plugin pod if it lost its registration socket; then delete the stuck pod so it is retried",
                    ],
                )
            )
            found = True
        # 4. exhaustion
        if not alloc.get("allocated") and source is not None:
            counts = class_counts(self.inv, claim_spec(source))
            cannot = [
                e
                for e in events
                if e.get("reason") == FAILED_SCHEDULING and CANNOT_ALLOCATE in str(e.get("message") or "")
            ]
            short = {
                c: n
                for c, n in counts.items()
                if _is_int(n["free"]) and _is_int(n["total"]) and n["total"] > 0 and n["free"] < n["needed"]
            }
            unknown = {c: n for c, n in counts.items() if not _is_int(n["free"])}
            if short or (cannot and unknown):
                classes = short or unknown
                cls, first = next(iter(classes.items()))
                numbers: dict[str, Any] = {k: first[k] for k in ("needed", "free", "total")}
                numbers["class"] = cls
                if len(counts) > 1:
                    numbers["classes"] = counts
                drivers = sorted({dra.class_driver(self.class_by_name[c]) or c for c in classes})
                per = "; ".join(
                    f"class {c}: needs {n['needed']}, {n['free']} free of {n['total']}"
                    for c, n in classes.items()
                )
                waiting = [
                    nsname(c)
                    for c in self.snap.claims
                    if not dra.claim_allocation(c)["allocated"]
                    and set(dra.requested_classes(c)) & set(classes)
                ]
                self.add(
                    Diagnosis(
                        "exhaustion",
                        s.ref,
                        f"all devices matching {s.ref} are allocated ({per})",
                        evidence=[
                            *evidence,
                            *ev_lines,
                            f"pending claims waiting for {', '.join(classes)}: {len(waiting)}",
                        ],
                        recovery=[
                            f"free devices by deleting or scaling down workloads that hold {', '.join(classes)} devices "
                            "(kubectl get resourceclaims -A shows which are allocated,reserved)",
                            f"add nodes with {', '.join(drivers)} devices",
                            "or lower the request's count / the number of replicas",
                        ],
                        numbers=numbers,
                    )
                )
                found = True
        if found:
            return
        if alloc.get("allocated") and all(pod_ready(p) or pod_phase(p) == "Succeeded" for p in s.pods):
            return  # healthy
        cannot = [e for e in events if e.get("reason") == FAILED_SCHEDULING]
        if alloc.get("allocated"):
            summary = f"{s.ref} is allocated; its pod is not Ready yet"
        elif cannot:
            summary = f"{s.ref} is not allocated: {str(cannot[-1].get('message') or '').strip()}"
        elif not s.pods:
            summary = (
                f"{s.ref} is not allocated: no pod uses it yet (allocation happens when a pod is scheduled)"
            )
        else:
            summary = f"{s.ref} is not allocated yet"
        counts = class_counts(self.inv, claim_spec(source))
        numbers = {c: {k: v for k, v in n.items() if k != "unknown"} for c, n in counts.items()}
        self.add(
            Diagnosis(
                "pending",
                s.ref,
                summary,
                [
                    *evidence,
                    *ev_lines,
                    *[
                        f"class {c}: needs {n['needed']}, {n['free']} free of {n['total']}"
                        for c, n in counts.items()
                    ],
                ],
                [
                    "nothing conclusive yet: wait, or run `dra-gitops diagnose` again; check events with kubectl describe pod"
                ],
                numbers={"classes": numbers} if numbers else {},
            )
        )

    def pod_without_claims(self, pod: Mapping[str, Any]) -> None:
        """Pods with no claims that are stuck: reported only when they sit on a failed node."""
        if pod_claim_refs(pod) or pod_ready(pod) or pod_phase(pod) == "Succeeded":
            return
        node_name = _dict(pod.get("spec")).get("nodeName")
        node = self.nodes.get(str(node_name)) if node_name else None
        if node_name and (node is None or not node_ready(node)):
            self.add(
                Diagnosis(
                    "node-failure",
                    f"Pod/{nsname(pod)}",
                    f"pod {nsname(pod)} runs on node {node_name}, which is NotReady or gone",
                    [f"pod {nsname(pod)}: {pod_health(pod).describe()}"],
                    [f"drain and repair or replace node {node_name}"],
                    {"node": node_name},
                )
            )


def classify(snapshot: Snapshot) -> list[Diagnosis]:
    """Every problem visible in the snapshot, most specific mode first (pure)."""
    return _Classifier(snapshot).run()


# ---- the edge ----------------------------------------------------------------------------------------


def _split_ref(ref: str, namespace: str | None) -> tuple[str, str]:
    if "/" in ref:
        ns, _, name = ref.rpartition("/")
        return ns.split("/")[-1], name
    return namespace or "default", ref


def collect_snapshot(
    client: ClusterClient,
    *,
    namespace: str | None = None,
    pod: str | None = None,
    claim: str | None = None,
    pods: Sequence[Mapping[str, Any]] | None = None,
    manifest_versions: Sequence[tuple[str, str]] = (),
    log_lines: int = 20,
) -> Snapshot:
    """Read what classify() needs. pod/claim are "ns/name" or a name in `namespace`; `pods` overrides scope."""
    server_version = client.server_version()
    served = client.served_versions(DRA_GROUP)
    require_dra(served, server_version)
    scope_claims: list[str] | None = None
    all_classes = False
    scope_pods: list[dict[str, Any]]
    if pods is not None:
        scope_pods = [dict(p) for p in pods]
        scope_claims = []
    elif pod is not None:
        ns, name = _split_ref(pod, namespace)
        resource = client.find_kind("", "Pod")
        found = client.get(resource, ns, name) if resource else None
        if found is None:
            raise UserError("pod not found", where=f"Pod/{ns}/{name}")
        scope_pods = [found]
        scope_claims = []
    elif claim is not None:
        ns, name = _split_ref(claim, namespace)
        scope_claims = [f"{ns}/{name}"]
        scope_pods = [
            p for p in client.list_kind("", "Pod", ns) if any(c == name for _, c, _ in pod_claim_refs(p))
        ]
    else:
        scope_pods = [p for p in client.list_kind("", "Pod", namespace) if not pod_ready(p)]
        all_classes = namespace is None
    claims = client.list_kind(DRA_GROUP, "ResourceClaim")
    if scope_claims is None and namespace is not None:
        scope_claims = [nsname(c) for c in claims if namespace_of(c) == namespace]
    event_namespaces = sorted(
        {namespace_of(p) for p in scope_pods} | {r.split("/", 1)[0] for r in scope_claims or []}
    )
    if namespace is not None and pod is None and claim is None and pods is None:
        event_namespaces = [namespace]
    events: list[dict[str, Any]] = []
    if pods is None and pod is None and claim is None and namespace is None:
        events = client.list_kind("", "Event")
    else:
        for ns in event_namespaces:
            events += client.list_kind("", "Event", ns)
    workloads = list_driver_workloads(client)
    driver_pods = list_driver_pods(client, workloads)
    logs: dict[str, str] = {}
    failed_nodes = {
        str(_dict(e.get("source")).get("host"))
        for e in events
        if e.get("reason") == FAILED_PREPARE and _dict(e.get("source")).get("host")
    }
    for dp in driver_pods:
        h = pod_health(dp)
        if not h.ready or h.crash_loop or _dict(dp.get("spec")).get("nodeName") in failed_nodes:
            logs[nsname(dp)] = client.pod_logs(namespace_of(dp), name_of(dp), tail_lines=log_lines)
    return Snapshot(
        pods=scope_pods,
        claims=claims,
        templates=client.list_kind(DRA_GROUP, "ResourceClaimTemplate"),
        classes=client.list_kind(DRA_GROUP, "DeviceClass") + client.list_kind(DRA_GROUP, "ResourceClass"),
        slices=client.list_kind(DRA_GROUP, "ResourceSlice"),
        nodes=client.list_kind("", "Node"),
        events=events,
        driver_workloads=workloads,
        driver_pods=driver_pods,
        driver_rollout=rollout_context(client, workloads, driver_pods),
        driver_logs=logs,
        served_versions=served,
        server_version=server_version,
        manifest_versions=list(manifest_versions),
        scope_claims=scope_claims,
        all_classes=all_classes,
    )


def diagnose(
    client: ClusterClient,
    target: str | None = None,
    *,
    namespace: str | None = None,
    manifest_versions: Sequence[tuple[str, str]] = (),
) -> list[Diagnosis]:
    """`dra-gitops diagnose [POD|CLAIM|--namespace NS]`: target is "pod/NAME", "claim/NAME", "ns/name" or a name.

    A bare name (or ns/name) is looked up as a pod first, then as a claim.
    """
    pod: str | None = None
    claim: str | None = None
    if target:
        kind, _, rest = target.partition("/")
        if kind.lower() in ("pod", "pods", "po") and rest:
            pod = rest
        elif kind.lower() in ("claim", "resourceclaim", "resourceclaims") and rest:
            claim = rest
        else:
            ns, name = _split_ref(target, namespace)
            resource = client.find_kind("", "Pod")
            if resource is not None and client.get(resource, ns, name) is not None:
                pod = f"{ns}/{name}"
            else:
                claim = f"{ns}/{name}"
    snap = collect_snapshot(
        client, namespace=namespace, pod=pod, claim=claim, manifest_versions=manifest_versions
    )
    return classify(snap)


# ---- rendering (pure) --------------------------------------------------------------------------------


def render_diagnoses(diagnoses: Sequence[Diagnosis], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps([d.to_json() for d in diagnoses], indent=2, sort_keys=True, default=str)
    if fmt == "markdown":
        if not diagnoses:
            return "No DRA problems found.\n"
        lines: list[str] = []
        for d in diagnoses:
            lines += [f"### `{d.mode}`: {d.ref}", "", d.summary, ""]
            if d.numbers:
                lines += [
                    "Numbers: " + ", ".join(f"{k}={v}" for k, v in d.numbers.items() if k != "classes"),
                    "",
                ]
            if d.evidence:
                lines += ["Evidence:", "", *[f"* `{e.strip()}`" for e in d.evidence], ""]
            if d.recovery:
                lines += ["Recovery:", "", *[f"{i}. {r}" for i, r in enumerate(d.recovery, 1)], ""]
        return "\n".join(lines)
    if fmt != "text":
        raise ValueError(f"unknown diagnosis format {fmt!r} (text, json, markdown)")
    if not diagnoses:
        return "No DRA problems found.\n"
    lines = []
    for d in diagnoses:
        lines.append(f"[{d.mode}] {d.ref}: {d.summary}")
        if d.numbers:
            nums = ", ".join(
                f"{k} {v}" for k, v in d.numbers.items() if k in ("needed", "free", "total", "class", "node")
            )
            if nums:
                lines.append(f"  numbers: {nums}")
        for e in d.evidence:
            lines.append(f"  evidence: {e}")
        for i, r in enumerate(d.recovery, 1):
            lines.append(f"  fix {i}: {r}")
    return "\n".join(lines) + "\n"


__all__ = [
    "MODES",
    "Diagnosis",
    "Snapshot",
    "classify",
    "collect_snapshot",
    "diagnose",
    "render_diagnoses",
]
