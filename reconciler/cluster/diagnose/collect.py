"""Diagnosis (`dra-gitops diagnose`, and every failed verification): symptom -> failure mode -> recovery.

`classify(snapshot)` is pure: it looks at a `Snapshot` (the pods and claims in scope plus the cluster's
classes, slices, nodes, events, driver pods and their last log lines) and returns one `Diagnosis` per
problem found, each with evidence lines and concrete recovery steps. `collect_snapshot(client, ...)` is
the edge that reads those objects; `diagnose(client, ...)` is both; `render_diagnoses` prints them.

Failure modes: driver-not-installed, exhaustion, node-failure, version-mismatch, missing-class,
selector-error (a selector failing at run time: kube-scheduler's SchedulerError), prepare-failure, and
pending (nothing conclusive yet, or a free count the model cannot know).

This module is the edge: it reads the `Snapshot` (`types.py`) that `classify` (`classify.py`) judges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reconciler.cluster.diagnose.classify import classify
from reconciler.cluster.diagnose.evidence import (
    pod_claim_refs,
)
from reconciler.cluster.diagnose.types import FAILED_PREPARE, Diagnosis, Snapshot
from reconciler.cluster.drivers import list_driver_pods, list_driver_workloads
from reconciler.cluster.objects import name_of, namespace_of, nsname, pod_health, pod_ready, require_dra
from reconciler.cluster.readiness import rollout_context
from reconciler.errors import UserError
from reconciler.model.dra import DRA_GROUP
from reconciler.model.readers import as_dict

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient


# ---- the edge ----------------------------------------------------------------------------------------


def _split_ref(ref: str, namespace: str | None) -> tuple[str, str]:
    if "/" in ref:
        ns, _, name = ref.rpartition("/")
        return ns.split("/")[-1], name
    return namespace or "default", ref


def _pods_in_scope(
    client: ClusterClient,
    namespace: str | None,
    pod: str | None,
    claim: str | None,
    pods: Sequence[Mapping[str, Any]] | None,
) -> tuple[list[dict[str, Any]], list[str] | None, bool]:
    """(pods in scope, claims in scope besides theirs or None for every claim, report every class)."""
    if pods is not None:
        return [dict(p) for p in pods], [], False
    if pod is not None:
        ns, name = _split_ref(pod, namespace)
        resource = client.find_kind("", "Pod")
        found = client.get(resource, ns, name) if resource else None
        if found is None:
            raise UserError("pod not found", where=f"Pod/{ns}/{name}")
        return [found], [], False
    if claim is not None:
        ns, name = _split_ref(claim, namespace)
        users = [
            p for p in client.list_kind("", "Pod", ns) if any(c == name for _, c, _ in pod_claim_refs(p))
        ]
        return users, [f"{ns}/{name}"], False
    return [p for p in client.list_kind("", "Pod", namespace) if not pod_ready(p)], None, namespace is None


def _events(
    client: ClusterClient,
    scope_pods: Sequence[Mapping[str, Any]],
    scope_claims: Sequence[str] | None,
    namespace: str | None,
    narrowed: bool,
) -> list[dict[str, Any]]:
    """The events of the namespaces in scope (`narrowed`: a pod, a claim or pods were named), or all."""
    if not narrowed and namespace is None:
        return client.list_kind("", "Event")
    event_namespaces = sorted(
        {namespace_of(p) for p in scope_pods} | {r.split("/", 1)[0] for r in scope_claims or []}
    )
    if namespace is not None and not narrowed:
        event_namespaces = [namespace]
    events: list[dict[str, Any]] = []
    for ns in event_namespaces:
        events += client.list_kind("", "Event", ns)
    return events


def _driver_logs(
    client: ClusterClient,
    driver_pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    lines: int,
) -> dict[str, str]:
    """The last log lines of every driver pod that is not Ready, crash-loops, or sits on a node where
    preparing devices failed."""
    logs: dict[str, str] = {}
    failed_nodes = {
        str(as_dict(e.get("source")).get("host"))
        for e in events
        if e.get("reason") == FAILED_PREPARE and as_dict(e.get("source")).get("host")
    }
    for dp in driver_pods:
        h = pod_health(dp)
        if not h.ready or h.crash_loop or as_dict(dp.get("spec")).get("nodeName") in failed_nodes:
            logs[nsname(dp)] = client.pod_logs(namespace_of(dp), name_of(dp), tail_lines=lines)
    return logs


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
    scope_pods, scope_claims, all_classes = _pods_in_scope(client, namespace, pod, claim, pods)
    claims = client.list_kind(DRA_GROUP, "ResourceClaim")
    if scope_claims is None and namespace is not None:
        scope_claims = [nsname(c) for c in claims if namespace_of(c) == namespace]
    narrowed = pods is not None or pod is not None or claim is not None
    events = _events(client, scope_pods, scope_claims, namespace, narrowed)
    workloads = list_driver_workloads(client)
    driver_pods = list_driver_pods(client, workloads)
    logs = _driver_logs(client, driver_pods, events, log_lines)
    return Snapshot(
        pods=scope_pods,
        claims=claims,
        templates=client.list_kind(DRA_GROUP, "ResourceClaimTemplate"),
        classes=client.list_kind(DRA_GROUP, "DeviceClass") + client.list_kind(DRA_GROUP, "ResourceClass"),
        slices=client.list_kind(DRA_GROUP, "ResourceSlice"),
        taint_rules=client.list_kind(DRA_GROUP, "DeviceTaintRule"),
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


__all__ = ["collect_snapshot", "diagnose"]
