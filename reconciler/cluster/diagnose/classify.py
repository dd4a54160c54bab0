"""`classify(snapshot)`: every problem visible in a `Snapshot`, most specific mode first (pure).

The cluster-wide modes live here (version-mismatch of manifests and drivers, driver-not-installed per
class, node-failure of pods without claims); the per-claim modes come from `claim_modes.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.cluster.diagnose.claim_modes import ClaimModes
from reconciler.cluster.diagnose.evidence import pod_claim_refs
from reconciler.cluster.diagnose.types import MODES, Diagnosis, Snapshot
from reconciler.cluster.objects import (
    name_of,
    namespace_of,
    node_ready,
    nsname,
    pod_health,
    pod_phase,
    pod_ready,
)
from reconciler.model import dra
from reconciler.model.readers import as_dict, as_list

_VERSION_IN_LOG_RE = re.compile(r"resource\.k8s\.io/(?P<v>v1(?:alpha\d+|beta\d+)?)\b")
# Driver images known to need one resource.k8s.io version (dra-example-driver v0.1.x and v0.2.0 create their
# DeviceClasses as v1beta1; from v0.2.1 they pick the newest served version).
_IMAGE_VERSIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"dra-example-driver:v0\.1\."), "v1beta1"),
    (re.compile(r"dra-example-driver:v0\.2\.0$"), "v1beta1"),
    (re.compile(r"k8s-dra-driver(?:-gpu)?:v25\.3\."), "v1beta1"),
    (re.compile(r"k8s-dra-driver:v0\.1\."), "v1alpha2"),
)


class _Classifier(ClaimModes):
    """Runs every mode over the snapshot; `add` keeps the first diagnosis per (mode, ref)."""

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
            for c in as_list(as_dict(dra.pod_spec_of(wl)).get("containers")):
                image = str(as_dict(c).get("image") or "")
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

    def pod_without_claims(self, pod: Mapping[str, Any]) -> None:
        """Pods with no claims that are stuck: reported only when they sit on a failed node."""
        if pod_claim_refs(pod) or pod_ready(pod) or pod_phase(pod) == "Succeeded":
            return
        node_name = as_dict(pod.get("spec")).get("nodeName")
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
