"""Small pure helpers on Kubernetes objects, shared by the cluster edge and the checklist.

Object access (`meta`, `name_of`, `namespace_of`, `nsname`, `condition`), pod and node state (`pod_phase`,
`pod_ready`, `pod_health`, `node_ready`), ages, served/deprecated resource.k8s.io versions
(`deprecated_versions`, `require_dra`) and which pods a workload selects (`workload_selector`,
`labels_match`, `owned_by`). No I/O: the edges that read the objects are `drivers.py`, `inventory/`,
`diagnose/`, `verify/` and `checklist/gather.py`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.errors import EnvironmentProblem
from reconciler.model.readers import as_dict, as_list, parse_time

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


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return as_dict(obj.get("metadata"))


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def nsname(obj: Mapping[str, Any]) -> str:
    ns = namespace_of(obj)
    return f"{ns}/{name_of(obj)}" if ns else name_of(obj)


def condition(obj: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in as_dict(obj.get("status")).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def node_ready(node: Mapping[str, Any]) -> bool:
    cond = condition(node, "Ready")
    return cond is not None and cond.get("status") == "True"


def pod_phase(pod: Mapping[str, Any]) -> str:
    return str(as_dict(pod.get("status")).get("phase") or "Pending")


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
    status = as_dict(pod.get("status"))
    restarts = 0
    crash = False
    waiting = ""
    for cs in as_list(status.get("initContainerStatuses")) + as_list(status.get("containerStatuses")):
        cs = as_dict(cs)
        count = cs.get("restartCount")
        restarts += count if isinstance(count, int) else 0
        reason = str(as_dict(as_dict(cs.get("state")).get("waiting")).get("reason") or "")
        if reason == "CrashLoopBackOff":
            crash = True
        if reason and not waiting:
            waiting = reason
    return PodHealth(pod_phase(pod), pod_ready(pod), restarts, crash, waiting)


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
    spec = as_dict(workload.get("spec"))
    labels = as_dict(as_dict(spec.get("selector")).get("matchLabels"))
    if not labels:
        labels = as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))
    return {str(k): str(v) for k, v in labels.items()}


def labels_match(selector: Mapping[str, str], labels: Mapping[str, Any]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def owned_by(pod: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    uid = meta(workload).get("uid")
    return bool(uid) and any(as_dict(r).get("uid") == uid for r in as_list(meta(pod).get("ownerReferences")))


__all__ = [
    "NOT_SERVED_EXPLANATION",
    "PodHealth",
    "age_seconds",
    "condition",
    "deprecated_versions",
    "format_age",
    "kube_minor",
    "labels_match",
    "meta",
    "name_of",
    "namespace_of",
    "node_ready",
    "nsname",
    "owned_by",
    "pod_health",
    "pod_phase",
    "pod_ready",
    "require_dra",
    "selector_string",
    "workload_selector",
]
