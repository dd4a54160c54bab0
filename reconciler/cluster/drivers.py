"""The DRA driver workloads of a cluster and their pods: read, and paired with their driver.

`list_driver_workloads` and `list_driver_pods` read them (one LIST per workload kind, one label-selected
LIST per workload); `driver_pods_of` pairs every pod with its workload and driver name (pure). The
inventory, diagnosis, verification and the checklist all look at drivers this way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reconciler.cluster.objects import (
    labels_match,
    meta,
    namespace_of,
    nsname,
    selector_string,
    workload_selector,
)
from reconciler.cluster.readiness import RolloutContext, current_pods
from reconciler.model import dra
from reconciler.model.readers import as_dict

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

APPS = "apps"
DRIVER_WORKLOAD_KINDS = ("DaemonSet", "Deployment", "StatefulSet")


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
            if labels_match(selector, as_dict(meta(pod).get("labels"))):
                out.append((wl, driver, dict(pod)))
    return out
