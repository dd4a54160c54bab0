"""Reads what the checklist judges: live DRA objects and the target's state ConfigMap (read-only).

The cluster edge of `dra-gitops checklist`: a handful of LISTs (nodes, driver workloads and their pods,
classes, slices, claims, pods and Warning Events of the target's namespaces) and one GET of the state,
turned into `ChecklistFacts`. The judging is in `items.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from reconciler.checklist.facts import (
    ChainFact,
    ChecklistFacts,
    ClaimFact,
    ClassFact,
    DriverFact,
    DriverWorkloadFact,
    EventFact,
    NodeFact,
    PodFact,
    StateFact,
)
from reconciler.cluster import applyset, objects
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.diagnose import pod_claim_refs
from reconciler.cluster.drivers import list_driver_pods, list_driver_workloads
from reconciler.cluster.objects import meta, name_of, namespace_of, nsname
from reconciler.cluster.readiness import (
    RolloutContext,
    current_pods,
    health_of,
    idle_driver_reason,
    rollout_context,
    selects,
)
from reconciler.cluster.verify import chain_of
from reconciler.dra.allocator import Inventory as DeviceInventory
from reconciler.dra.simulate import simulate
from reconciler.loop.store.state import TargetState
from reconciler.model import dra
from reconciler.model.dra import DRA_GROUP
from reconciler.model.readers import as_dict, parse_time

STATE_PREFIX = "dra-gitops-"


# ---- the state ---------------------------------------------------------------------------------------


def read_state(client: ClusterClient, target: str, namespace: str) -> StateFact:
    name = applyset.parent_name(target)
    ref = f"ConfigMap/{namespace}/{name}"
    configmaps = client.resource_for("v1", "ConfigMap")
    live = client.get(configmaps, namespace, name)
    if live is None or "lastGood" not in as_dict(live.get("data")):
        others = sorted(
            name_of(cm)[len(STATE_PREFIX) :]
            for cm in client.list(configmaps, namespace)
            if name_of(cm).startswith(STATE_PREFIX) and "lastGood" in as_dict(cm.get("data"))
        )
        return StateFact(ref=ref, found=False, other_targets=tuple(others))
    state = TargetState.from_data(as_dict(live.get("data")))
    return StateFact(
        ref=ref,
        found=True,
        last_good=state.last_good,
        last_attempted=state.last_attempted,
        in_progress=state.in_progress,
        hold=state.hold,
        inventory=tuple(state.inventory),
        history=tuple(state.history),
    )


def scope_namespaces(state: StateFact) -> tuple[str, ...]:
    """The namespaces of what the last good revision applied (its Namespaces and namespaced objects)."""
    found: set[str] = set()
    for entry in state.inventory:
        _, _, ref = entry.partition(" ")
        parts = ref.split("/")
        if len(parts) == 3 or len(parts) == 2 and parts[0] == "Namespace":
            found.add(parts[1])
    return tuple(sorted(found))


# ---- drivers, classes, slices ------------------------------------------------------------------------


def _desired_pods(workload: Mapping[str, Any]) -> int:
    if workload.get("kind") == "DaemonSet":
        desired = as_dict(workload.get("status")).get("desiredNumberScheduled")
        return desired if isinstance(desired, int) else 0
    replicas = as_dict(workload.get("spec")).get("replicas", 1)
    return replicas if isinstance(replicas, int) else 1


def driver_workload_fact(
    workload: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    context: RolloutContext,
    nodes: Sequence[Mapping[str, Any]],
) -> DriverWorkloadFact:
    body = dict(workload)
    health = health_of(body)
    current = current_pods(body, pods, context)
    mine = [p for p in pods if selects(body, p) and not meta(p).get("deletionTimestamp")]
    crash: list[str] = []
    not_ready: list[str] = []
    for pod in current:
        h = objects.pod_health(pod)
        if h.crash_loop:
            crash.append(f"{nsname(pod)} ({h.restarts} restarts)")
        elif not h.ready:
            not_ready.append(f"{nsname(pod)}: {h.describe()}")
    return DriverWorkloadFact(
        ref=f"{workload.get('kind')}/{nsname(workload)}",
        driver=dra.workload_driver(body),
        state=health.state,
        message=health.message,
        desired=_desired_pods(workload),
        current_pods=len(current),
        ready_pods=sum(1 for p in current if objects.pod_ready(p)),
        crash_looping=tuple(crash),
        not_ready=tuple(not_ready),
        old_pods=max(0, len(mine) - len(current)),
        nodes=tuple(
            sorted(
                {
                    str(as_dict(p.get("spec")).get("nodeName"))
                    for p in current
                    if as_dict(p.get("spec")).get("nodeName")
                }
            )
        ),
        canary_for=dra.canary_for(body),
        idle_reason=idle_driver_reason(workload, nodes),
    )


def driver_facts(
    slices: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
) -> list[DriverFact]:
    totals = simulate(slices, [c for c in classes if c.get("kind") == "DeviceClass"], claims, []).drivers
    counted: dict[str, list[Mapping[str, Any]]] = {}
    for s in slices:
        driver = dra.slice_driver(dict(s))
        if driver:
            counted.setdefault(driver, []).append(s)
    out = []
    for name in sorted(set(totals) | set(counted)):
        t = totals.get(name)
        mine = counted.get(name, [])
        slice_nodes = sorted({n for s in mine if (n := dra.slice_node(dict(s)))})
        out.append(
            DriverFact(
                name=name,
                slices=len(mine),
                slice_nodes=tuple(slice_nodes),
                devices=t.devices if t else 0,
                allocated=t.allocated if t else 0,
                pools=t.pools if t else 0,
            )
        )
    return out


def class_facts(
    slices: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    drivers: Sequence[DriverFact],
) -> list[ClassFact]:
    device_classes = [c for c in classes if c.get("kind") == "DeviceClass"]
    inventory = DeviceInventory(slices, device_classes, claims)
    by_driver = {d.name: d for d in drivers}
    out = []
    for c in sorted(classes, key=name_of):
        driver = dra.class_driver(dict(c))
        if c.get("kind") == "DeviceClass":
            matched, unknown = inventory.matching(name_of(c), [], inventory.devices)
            devices, allocated = len(matched), sum(1 for d in matched if d.key in inventory.used)
        else:  # a classic ResourceClass: the devices of its driver
            d = by_driver.get(driver or "")
            devices, allocated, unknown = (d.devices, d.allocated, False) if d else (0, 0, False)
        out.append(ClassFact(name_of(c), str(c.get("kind") or ""), driver, devices, allocated, unknown))
    return out


# ---- claims, pods, events ----------------------------------------------------------------------------


def _in_scope(obj: Mapping[str, Any], namespaces: Sequence[str]) -> bool:
    return not namespaces or namespace_of(obj) in namespaces


def claim_facts(claims: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> list[ClaimFact]:
    users: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        for _pc, claim_name, _template in pod_claim_refs(pod):
            if claim_name:
                users.setdefault((namespace_of(pod), claim_name), []).append(nsname(pod))
    out = []
    for claim in sorted(claims, key=nsname):
        alloc = dra.claim_allocation(dict(claim))
        out.append(
            ClaimFact(
                ref=nsname(claim),
                allocated=bool(alloc["allocated"]),
                devices=tuple(f"{d['driver']}/{d['pool']}/{d['device']}" for d in alloc["devices"]),
                node=alloc["node"],
                reserved_for=tuple(str(r) for r in alloc["reserved_for"]),
                users=tuple(sorted(users.get((namespace_of(claim), name_of(claim)), []))),
                deleting=bool(meta(claim).get("deletionTimestamp")),
            )
        )
    return out


def pod_facts(pods: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]]) -> list[PodFact]:
    by_name = {(namespace_of(c), name_of(c)): c for c in claims}
    out = []
    for pod in sorted(pods, key=nsname):
        if not pod_claim_refs(pod) or meta(pod).get("deletionTimestamp"):
            continue
        chains = tuple(
            ChainFact(e.claim, tuple(e.devices), e.node, e.allocated, e.reserved, e.problem)
            for e in chain_of(pod, by_name)
        )
        out.append(
            PodFact(
                ref=nsname(pod),
                phase=objects.pod_phase(pod),
                ready=objects.pod_ready(pod),
                node=as_dict(pod.get("spec")).get("nodeName") or None,
                chains=chains,
            )
        )
    return out


def _event_time(event: Mapping[str, Any]) -> datetime | None:
    series = as_dict(event.get("series"))
    for value in (
        event.get("lastTimestamp"),
        series.get("lastObservedTime"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        meta(event).get("creationTimestamp"),
    ):
        when = parse_time(value)
        if when is not None:
            return when if when.tzinfo else when.replace(tzinfo=UTC)
    return None


def event_facts(
    events: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
) -> list[EventFact]:
    live_pods = {(namespace_of(p), name_of(p)): p for p in pods}
    live_claims = {(namespace_of(c), name_of(c)): c for c in claims}
    out = []
    for event in events:
        involved = as_dict(event.get("involvedObject") or event.get("regarding"))
        kind = involved.get("kind")
        if event.get("type") != "Warning" or kind not in ("Pod", "ResourceClaim"):
            continue
        key = (str(involved.get("namespace") or namespace_of(event)), str(involved.get("name") or ""))
        live = (live_pods if kind == "Pod" else live_claims).get(key)
        uid = involved.get("uid")
        if live is None or (uid and meta(live).get("uid") and meta(live).get("uid") != uid):
            now = "gone"
        elif kind == "Pod":
            now = (
                "healthy"
                if objects.pod_ready(live) or objects.pod_phase(live) == "Succeeded"
                else "unhealthy"
            )
        else:
            now = "healthy" if dra.claim_allocation(dict(live))["allocated"] else "unhealthy"
        count = event.get("count") or as_dict(event.get("series")).get("count") or 1
        out.append(
            EventFact(
                involved=f"{kind}/{key[0]}/{key[1]}",
                reason=str(event.get("reason") or ""),
                message=str(event.get("message") or event.get("note") or ""),
                count=count if isinstance(count, int) else 1,
                last_seen=_event_time(event),
                now=now,
            )
        )
    return out


def _list_in(client: ClusterClient, group: str, kind: str, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    if not namespaces:
        return client.list_kind(group, kind)
    found: list[dict[str, Any]] = []
    for namespace in namespaces:
        found += client.list_kind(group, kind, namespace)
    return found


# ---- all of it ---------------------------------------------------------------------------------------


def gather_facts(
    client: ClusterClient, target: str, namespace: str, *, now: datetime | None = None
) -> ChecklistFacts:
    """Everything the checklist judges, read from the cluster (read-only)."""
    server_version = client.server_version()
    served = client.served_versions(DRA_GROUP)
    preferred = client.groups()[DRA_GROUP].preferred if served else ""
    state = read_state(client, target, namespace)
    namespaces = scope_namespaces(state)
    nodes = client.list_kind("", "Node")
    workloads = list_driver_workloads(client)
    driver_pods = list_driver_pods(client, workloads)
    context = rollout_context(client, workloads, driver_pods)
    classes: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    all_claims: list[dict[str, Any]] = []
    if served:
        classes = client.list_kind(DRA_GROUP, "DeviceClass") + client.list_kind(DRA_GROUP, "ResourceClass")
        slices = client.list_kind(DRA_GROUP, "ResourceSlice")
        all_claims = client.list_kind(DRA_GROUP, "ResourceClaim")
    drivers = driver_facts(slices, classes, all_claims)
    claims = [c for c in all_claims if _in_scope(c, namespaces)]
    pods = _list_in(client, "", "Pod", namespaces)
    events = _list_in(client, "", "Event", namespaces)
    return ChecklistFacts(
        target=target,
        cluster=client.host,
        now=now or datetime.now(UTC),
        server_version=server_version,
        served=tuple(served),
        preferred=preferred,
        deprecated=objects.deprecated_versions(served, server_version),
        nodes=tuple(NodeFact(name_of(n), objects.node_ready(n)) for n in sorted(nodes, key=name_of)),
        driver_workloads=tuple(
            driver_workload_fact(w, driver_pods, context, nodes) for w in sorted(workloads, key=nsname)
        ),
        drivers=tuple(drivers),
        classes=tuple(class_facts(slices, classes, all_claims, drivers)),
        claims=tuple(claim_facts(claims, pods)),
        pods=tuple(pod_facts(pods, claims)),
        events=tuple(event_facts(events, pods, claims)),
        namespaces=namespaces,
        state=state,
    )


__all__ = [
    "class_facts",
    "claim_facts",
    "driver_facts",
    "driver_workload_fact",
    "event_facts",
    "gather_facts",
    "pod_facts",
    "read_state",
    "scope_namespaces",
]
