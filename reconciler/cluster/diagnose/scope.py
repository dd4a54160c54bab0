"""The classifier's base: the snapshot indexed once, the claims in scope, the evidence every mode shares.

`Subject` is one claim in scope (possibly not created yet) with the pods that use it; `ClassifierBase`
finds them (`subjects`) and writes the event and driver-pod lines the modes cite. The modes build on it:
per claim in `claim_modes.py`, cluster-wide in `classify.py`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.diagnose.evidence import events_for, pod_claim_refs
from reconciler.cluster.diagnose.types import Diagnosis, Snapshot
from reconciler.cluster.drivers import driver_pods_of
from reconciler.cluster.objects import meta, name_of, namespace_of, nsname, pod_health, pod_phase
from reconciler.dra.allocator import Inventory
from reconciler.dra.extended import class_mapping, is_extended_claim, pending_extended_claim
from reconciler.dra.noderesources import node_allocatable
from reconciler.model import dra
from reconciler.model.readers import as_dict

_LOG_LINES = 5


@dataclass
class Subject:
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

    @property
    def extended(self) -> bool:
        """The claim the scheduler will make for the pod's extended resources (not created yet)."""
        return self.claim is None and self.template is not None and is_extended_claim(self.template)


class ClassifierBase:
    """The snapshot indexed once, the subjects in scope, the evidence lines every mode shares."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.class_by_name = {name_of(c): c for c in snap.classes}
        self.device_classes = [c for c in snap.classes if c.get("kind", "DeviceClass") == "DeviceClass"]
        self.claims = {(namespace_of(c), name_of(c)): c for c in snap.claims}
        self.templates = {(namespace_of(t), name_of(t)): t for t in snap.templates}
        self.nodes = {name_of(n): n for n in snap.nodes}
        self.slice_drivers = {dra.slice_driver(s) for s in snap.slices}
        self.inv = Inventory(snap.slices, self.device_classes, snap.claims, snap.taint_rules)
        self.extended = class_mapping(self.device_classes)  # extended resources DRA backs -> class
        self.advertised = {r for n in snap.nodes for r, q in node_allocatable(n).items() if q > 0}
        self.driver_pods = driver_pods_of(snap.driver_workloads, snap.driver_pods, snap.driver_rollout)
        self.out: list[Diagnosis] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, d: Diagnosis) -> None:
        key = (d.mode, d.ref)
        if key not in self._seen:
            self._seen.add(key)
            self.out.append(d)

    # -- scope

    def subjects(self) -> list[Subject]:
        by_key: dict[tuple[str, str], Subject] = {}
        out: list[Subject] = []
        for pod in self.snap.pods:
            if pod_phase(pod) == "Succeeded":
                continue
            ns = namespace_of(pod)
            for _pcname, cname, tname in pod_claim_refs(pod):
                template = self.templates.get((ns, tname)) if tname else None
                if cname is None:
                    out.append(Subject(ns, None, None, template, tname, [pod]))
                    continue
                key = (ns, cname)
                if key in by_key:
                    by_key[key].pods.append(pod)
                    continue
                subject = Subject(ns, cname, self.claims.get(key), template, tname, [pod])
                by_key[key] = subject
                out.append(subject)
            if not as_dict(pod.get("spec")).get("nodeName"):
                owed = pending_extended_claim(pod, self.extended, self.advertised)
                if owed is not None:
                    out.append(Subject(ns, None, None, owed, None, [pod]))
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
            subject = Subject(ns, name, claim, None, None, users)
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
            pnode = as_dict(pod.get("spec")).get("nodeName")
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
