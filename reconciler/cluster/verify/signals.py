"""What one observation says: a terminal signal that ends the wait at once, whether a workload is rolled
out, and the picture of allocations whose change restarts the grace period (pure).

Terminal signals: a claim naming a DeviceClass that does not exist; a selector failing at run time
(kube-scheduler's SchedulerError, at once: it never heals by waiting); FailedScheduling "cannot allocate
all claims" persisting past the grace period; FailedPrepareDynamicResources; a driver pod in
CrashLoopBackOff; a workload pod that failed (CrashLoopBackOff, image pull, phase Failed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.cluster.diagnose import (
    FAILED_PREPARE,
    FAILED_SCHEDULING,
    events_for,
    pod_claim_refs,
    selector_failure_in,
)
from reconciler.cluster.objects import (
    condition,
    meta,
    name_of,
    namespace_of,
    nsname,
    pod_health,
    pod_phase,
    pod_ready,
)
from reconciler.cluster.readiness import health_of, pod_failure
from reconciler.cluster.verify.observe import Observation, workload_key
from reconciler.dra.allocator import CANNOT_ALLOCATE
from reconciler.dra.extended import IMPLICIT_PREFIX, container_requests
from reconciler.model import dra
from reconciler.model.readers import as_dict, as_list


def _requested_classes(
    pod: Mapping[str, Any], obs: Observation
) -> list[tuple[str, str]]:  # (holder ref, class)
    ns = namespace_of(pod)
    out: list[tuple[str, str]] = []
    for _pc, cname, template in pod_claim_refs(pod):
        source: Mapping[str, Any] | None = obs.claims.get((ns, cname)) if cname else None
        holder = f"ResourceClaim/{ns}/{cname}"
        if source is None and template:
            source = obs.templates.get((ns, template))
            holder = f"ResourceClaimTemplate/{ns}/{template}"
        if source is not None:
            out += [(holder, c) for c in dra.requested_classes(dict(source))]
    # extended resources backed by DRA: the classes they map to, and the implicit names of missing classes
    spec = as_dict(pod.get("spec"))
    for resource in sorted({r for c in _containers(spec) for r in container_requests(c)}):
        cls = obs.extended.get(resource)
        if cls is None and resource.startswith(IMPLICIT_PREFIX):
            cls = resource.removeprefix(IMPLICIT_PREFIX)
        if cls is not None:
            out.append((f"extended resource {resource}", cls))
    return out


def _containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [as_dict(c) for c in [*as_list(spec.get("initContainers")), *as_list(spec.get("containers"))]]


def allocation_picture(obs: Observation) -> frozenset[tuple[str, ...]]:
    """Which claims exist and which are allocated, and which pods exist: what changes when devices move."""
    claims = {
        (ns, name, "allocated" if as_dict(claim.get("status")).get("allocation") else "pending")
        for (ns, name), claim in obs.claims.items()
    }
    pods = {("pod", str(meta(pod).get("uid"))) for group in obs.pods.values() for pod in group}
    return frozenset(claims | pods)


def terminal_signal(obs: Observation, now: float, grace: float, first_seen: dict[str, float]) -> str | None:
    """The first terminal signal among the observed pods, or None."""
    used_drivers: set[str | None] = set()
    for pods in obs.pods.values():
        for pod in pods:
            if pod_ready(pod) or pod_phase(pod) == "Succeeded":
                first_seen.pop(str(meta(pod).get("uid")), None)
                continue
            ref = nsname(pod)
            uid = str(meta(pod).get("uid"))
            for holder, cls in _requested_classes(pod, obs):
                if cls not in obs.classes:
                    return f"{holder} requests DeviceClass {cls}, which does not exist (pod {ref})"
                used_drivers.add(obs.class_drivers.get(cls))
            events = events_for(obs.events, "Pod", namespace_of(pod), name_of(pod), uid)
            scheduled = condition(pod, "PodScheduled") or {}
            messages = [str(e.get("message") or "") for e in events if e.get("reason") == FAILED_SCHEDULING]
            if scheduled.get("status") == "False":
                messages.append(str(scheduled.get("message") or ""))
            for msg in messages:
                if "device class" in msg and "does not exist" in msg:
                    return f"pod {ref}: {msg}"
            # kube-scheduler's SchedulerError from a selector failing at run time: no grace, it never heals
            failing = selector_failure_in(messages)
            if failing is not None:
                return f"pod {ref}: selector error: {failing.group(0)}"
            unscheduled = not as_dict(pod.get("spec")).get("nodeName")
            if unscheduled and any(CANNOT_ALLOCATE in m for m in messages):
                seen = first_seen.setdefault(uid, now)
                if now - seen >= grace:
                    return f"pod {ref}: FailedScheduling '{CANNOT_ALLOCATE}' for {now - seen:.0f}s (grace {grace:g}s)"
            elif not unscheduled:
                first_seen.pop(uid, None)
            for e in events:
                if e.get("reason") == FAILED_PREPARE:
                    return f"pod {ref}: {FAILED_PREPARE}: {e.get('message')}"
            failure = pod_failure(dict(pod))
            if failure is not None:
                return f"pod {ref}: {failure}"
    if used_drivers:
        for wl, drv, dpod in obs.driver_pods:
            if None in used_drivers or drv in used_drivers or drv is None:
                h = pod_health(dpod)
                if h.crash_loop:
                    return (
                        f"driver pod {nsname(dpod)} ({wl.get('kind')}/{name_of(wl)}, driver {drv or '?'}) "
                        f"is in CrashLoopBackOff ({h.restarts} restarts)"
                    )
    return None


def workload_done(wl: Mapping[str, Any], obs: Observation) -> tuple[bool, str]:
    key = workload_key(wl)
    live = obs.live.get(key)
    if live is None:
        return False, f"{key} not found"
    health = health_of(dict(live))
    if not health.current:
        return False, f"{key}: {health.message}"
    expected = _expected_pods(live)
    if wl.get("kind") != "Pod" and expected > 0:
        pods = obs.pods.get(key) or []
        if not pods:
            return False, f"{key}: no pods of its current template yet"
        ready = sum(1 for p in pods if pod_ready(p) or pod_phase(p) == "Succeeded")
        if ready < expected and live.get("kind") != "Job":
            return False, f"{key}: {ready}/{expected} pods of its current template ready"
    return True, ""


def _expected_pods(live: Mapping[str, Any]) -> int:
    spec = as_dict(live.get("spec"))
    kind = live.get("kind")
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        replicas = spec.get("replicas", 1)
        return replicas if isinstance(replicas, int) else 1
    if kind == "DaemonSet":
        desired = as_dict(live.get("status")).get("desiredNumberScheduled")
        return desired if isinstance(desired, int) else 0
    return 1
