"""One observation of the workloads being verified: their live objects, the pods of their current
template, and the claims, templates, classes, events and driver pods those pods depend on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cluster.diagnose import pod_claim_refs
from reconciler.cluster.drivers import driver_pods_of, list_driver_pods, list_driver_workloads
from reconciler.cluster.objects import labels_match, meta, name_of, namespace_of, workload_selector
from reconciler.cluster.readiness import current_pods, rollout_context
from reconciler.dra.extended import class_mapping, device_requests
from reconciler.model import dra
from reconciler.model.dra import DRA_GROUP
from reconciler.model.readers import as_dict

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient


_GROUPS = {"Pod": "", "Job": "batch"}


@dataclass
class Observation:
    """What one poll of `verify_workloads` read (keys: `workload_key`)."""

    pods: dict[str, list[dict[str, Any]]]  # workload key -> pods
    live: dict[str, dict[str, Any] | None]  # workload key -> live object
    claims: dict[tuple[str, str], dict[str, Any]]
    templates: dict[tuple[str, str], dict[str, Any]]
    classes: set[str]
    class_drivers: dict[str, str | None]
    events: list[dict[str, Any]]
    driver_pods: list[tuple[dict[str, Any], str | None, dict[str, Any]]]
    extended: dict[str, str] = field(default_factory=dict)  # extended resource -> the DeviceClass backing it


def workload_key(wl: Mapping[str, Any]) -> str:
    ns = namespace_of(wl) or "default"
    return f"{wl.get('kind')}/{ns}/{name_of(wl)}"


def _pods_of(wl: Mapping[str, Any], pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    ns = namespace_of(wl) or "default"
    if wl.get("kind") == "Pod":
        return [p for p in pods if namespace_of(p) == ns and name_of(p) == name_of(wl)]
    selector = workload_selector(wl)
    return [
        p
        for p in pods
        if namespace_of(p) == ns
        and labels_match(selector, as_dict(meta(p).get("labels")))
        and not meta(p).get("deletionTimestamp")
    ]


def observe(client: ClusterClient, workloads: Sequence[Mapping[str, Any]]) -> Observation:
    namespaces = sorted({namespace_of(w) or "default" for w in workloads})
    pods: list[dict[str, Any]] = []
    claims: dict[tuple[str, str], dict[str, Any]] = {}
    templates: dict[tuple[str, str], dict[str, Any]] = {}
    events: list[dict[str, Any]] = []
    for ns in namespaces:
        pods += client.list_kind("", "Pod", ns)
        claims.update({(ns, name_of(c)): c for c in client.list_kind(DRA_GROUP, "ResourceClaim", ns)})
        templates.update(
            {(ns, name_of(t)): t for t in client.list_kind(DRA_GROUP, "ResourceClaimTemplate", ns)}
        )
        events += client.list_kind("", "Event", ns)
    live: dict[str, dict[str, Any] | None] = {}
    by_workload: dict[str, list[dict[str, Any]]] = {}
    for wl in workloads:
        key = workload_key(wl)
        resource = client.find_kind(_GROUPS.get(str(wl.get("kind")), "apps"), str(wl.get("kind")))
        live[key] = client.get(resource, namespace_of(wl) or "default", name_of(wl)) if resource else None
    # Only the pods of each workload's current template are judged: a rollout keeps old ones for a while.
    context = rollout_context(client, [w for w in live.values() if w is not None], pods)
    for wl in workloads:
        key = workload_key(wl)
        current = live[key]
        if wl.get("kind") == "Pod" or current is None:
            by_workload[key] = _pods_of(wl, pods)
        else:
            by_workload[key] = current_pods(current, pods, context)
    classes = client.list_kind(DRA_GROUP, "DeviceClass") + client.list_kind(DRA_GROUP, "ResourceClass")
    extended = class_mapping(c for c in classes if c.get("kind", "DeviceClass") == "DeviceClass")
    uses_claims = (
        any(pod_claim_refs(p) for ps in by_workload.values() for p in ps)
        or any(dra.pod_claims(dra.pod_spec_of(dict(w))) for w in workloads)
        or any(device_requests(as_dict(dra.pod_spec_of(dict(w))), extended) for w in workloads)
    )
    driver_pods: list[tuple[dict[str, Any], str | None, dict[str, Any]]] = []
    if uses_claims:
        dws = list_driver_workloads(client)
        dpods = list_driver_pods(client, dws)
        driver_pods = driver_pods_of(dws, dpods, rollout_context(client, dws, dpods))
    return Observation(
        pods=by_workload,
        live=live,
        claims=claims,
        templates=templates,
        classes={name_of(c) for c in classes},
        class_drivers={name_of(c): dra.class_driver(c) for c in classes},
        events=events,
        driver_pods=driver_pods,
        extended=extended,
    )
