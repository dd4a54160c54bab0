"""Verification of the DRA chain of the workloads a plan applied (fail fast on terminal DRA signals).

For every workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, Pod) its pods are found (label
selector, or the Pod itself) and, for every claim a pod uses, the chain is checked: claim created ->
allocated -> reserved for the pod (status.reservedFor uid) -> pod scheduled on the allocated node -> pod
Ready. `verify_workloads` polls until the whole chain holds for every pod and every workload is rolled
out, or a terminal signal appears, or the timeout passes. Terminal signals (DESIGN.md): a claim naming a
DeviceClass that does not exist; a selector failing at run time (kube-scheduler's SchedulerError
`... selector #<i>: CEL runtime error: ...`, at once: it never heals by waiting); FailedScheduling
"cannot allocate all claims" persisting past `grace` (measured from when verify first saw it);
FailedPrepareDynamicResources; a driver pod in CrashLoopBackOff; a workload pod that failed
(CrashLoopBackOff, image pull, phase Failed). On failure the diagnoses of `diagnose.classify` are
attached. The result types and their rendering are in `result.py`.

Optional: annotation `dra-gitops.io/verify-exec: "<command>"` on a workload runs the command in the first
container of each of its pods through the exec API once the chain holds; an error fails verification.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler.cluster.diagnose import (
    FAILED_PREPARE,
    FAILED_SCHEDULING,
    Diagnosis,
    classify,
    collect_snapshot,
    events_for,
    pod_claim_refs,
    selector_failure_in,
)
from reconciler.cluster.drivers import driver_pods_of, list_driver_pods, list_driver_workloads
from reconciler.cluster.objects import (
    DRA_GROUP,
    condition,
    labels_match,
    meta,
    name_of,
    namespace_of,
    nsname,
    pod_health,
    pod_phase,
    pod_ready,
    workload_selector,
)
from reconciler.cluster.readiness import current_pods, health_of, pod_failure, rollout_context
from reconciler.cluster.verify.result import (
    ClaimEvidence,
    ExecResult,
    VerifyResult,
)
from reconciler.dra.allocator import CANNOT_ALLOCATE
from reconciler.errors import DraGitopsError
from reconciler.model import dra
from reconciler.model.fields import as_dict, as_list

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

VERIFY_EXEC_ANNOTATION = "dra-gitops.io/verify-exec"
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod"})
_GROUPS = {"Pod": "", "Job": "batch"}


# ---- one observation ---------------------------------------------------------------------------------


@dataclass
class _Observation:
    pods: dict[str, list[dict[str, Any]]]  # workload key -> pods
    live: dict[str, dict[str, Any] | None]  # workload key -> live object
    claims: dict[tuple[str, str], dict[str, Any]]
    templates: dict[tuple[str, str], dict[str, Any]]
    classes: set[str]
    class_drivers: dict[str, str | None]
    events: list[dict[str, Any]]
    driver_pods: list[tuple[dict[str, Any], str | None, dict[str, Any]]]


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


def _observe(client: ClusterClient, workloads: Sequence[Mapping[str, Any]]) -> _Observation:
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
    uses_claims = any(pod_claim_refs(p) for ps in by_workload.values() for p in ps) or any(
        dra.pod_claims(dra.pod_spec_of(dict(w))) for w in workloads
    )
    driver_pods: list[tuple[dict[str, Any], str | None, dict[str, Any]]] = []
    if uses_claims:
        dws = list_driver_workloads(client)
        dpods = list_driver_pods(client, dws)
        driver_pods = driver_pods_of(dws, dpods, rollout_context(client, dws, dpods))
    return _Observation(
        pods=by_workload,
        live=live,
        claims=claims,
        templates=templates,
        classes={name_of(c) for c in classes},
        class_drivers={name_of(c): dra.class_driver(c) for c in classes},
        events=events,
        driver_pods=driver_pods,
    )


# ---- the chain ---------------------------------------------------------------------------------------


def chain_of(
    pod: Mapping[str, Any], claims: Mapping[tuple[str, str], Mapping[str, Any]]
) -> list[ClaimEvidence]:
    """Evidence for every claim of one pod (pure)."""
    ns = namespace_of(pod)
    uid = meta(pod).get("uid")
    pod_node = as_dict(pod.get("spec")).get("nodeName") or None
    done = pod_phase(pod) == "Succeeded"
    ready = pod_ready(pod)
    out: list[ClaimEvidence] = []
    refs = pod_claim_refs(pod)
    if not refs:
        problem = "" if ready or done else ("pod not scheduled" if not pod_node else "pod not Ready")
        return [
            ClaimEvidence(nsname(pod), "", [], pod_node, False, ready, problem=problem, pod_node=pod_node)
        ]
    for pcname, cname, template in refs:
        if cname is None:
            out.append(
                ClaimEvidence(
                    nsname(pod),
                    f"{ns}/(not created)",
                    [],
                    None,
                    False,
                    ready,
                    pod_node=pod_node,
                    problem=f"claim {pcname} from template {template} not created yet",
                )
            )
            continue
        claim = claims.get((ns, cname))
        if claim is None:
            out.append(
                ClaimEvidence(
                    nsname(pod),
                    f"{ns}/{cname}",
                    [],
                    None,
                    False,
                    ready,
                    pod_node=pod_node,
                    problem=f"claim {ns}/{cname} does not exist",
                )
            )
            continue
        alloc = dra.claim_allocation(dict(claim))
        reserved = any(
            as_dict(r).get("uid") == uid for r in as_list(as_dict(claim.get("status")).get("reservedFor"))
        )
        devices = [f"{d['driver']}/{d['pool']}/{d['device']}" for d in alloc["devices"]]
        node = alloc["node"] or pod_node
        problem = ""
        if done:
            problem = ""  # a finished pod released its claim; its run is the evidence
        elif not alloc["allocated"]:
            problem = "claim not allocated"
        elif not reserved:
            problem = "claim not reserved for the pod"
        elif not pod_node:
            problem = "pod not scheduled"
        elif alloc["node"] and alloc["node"] != pod_node:
            problem = f"pod on node {pod_node} but claim allocated on {alloc['node']}"
        elif not ready:
            problem = "pod not Ready"
        out.append(
            ClaimEvidence(
                nsname(pod),
                f"{ns}/{cname}",
                devices,
                node,
                reserved,
                ready,
                allocated=bool(alloc["allocated"]),
                pod_node=pod_node,
                problem=problem,
            )
        )
    return out


def _requested_classes(
    pod: Mapping[str, Any], obs: _Observation
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
    return out


def _allocation_picture(obs: _Observation) -> frozenset[tuple[str, ...]]:
    """Which claims exist and which are allocated, and which pods exist: what changes when devices move."""
    claims = {
        (ns, name, "allocated" if as_dict(claim.get("status")).get("allocation") else "pending")
        for (ns, name), claim in obs.claims.items()
    }
    pods = {("pod", str(meta(pod).get("uid"))) for group in obs.pods.values() for pod in group}
    return frozenset(claims | pods)


def _terminal(obs: _Observation, now: float, grace: float, first_seen: dict[str, float]) -> str | None:
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


def _workload_done(wl: Mapping[str, Any], obs: _Observation) -> tuple[bool, str]:
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


# ---- the wait ----------------------------------------------------------------------------------------


def verify_workloads(
    client: ClusterClient,
    workloads: Sequence[Mapping[str, Any]],
    *,
    timeout: float = 300.0,
    grace: float = 60.0,
    poll: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[str], None] | None = None,
) -> VerifyResult:
    """Wait until the DRA chain of every pod of `workloads` holds; fail fast on terminal signals."""
    workloads = [
        w for w in workloads if w.get("kind") in WORKLOAD_KINDS and dra.pod_spec_of(dict(w)) is not None
    ]
    start = clock()
    first_seen: dict[str, float] = {}
    last_status = ""
    last_picture: frozenset[tuple[str, ...]] = frozenset()
    while True:
        obs = _observe(client, workloads)
        now = clock()
        # The grace period runs while nothing moves: a claim released or allocated (a rolling update's old
        # pod giving its device to the new one) restarts it, so only a standing shortage is terminal.
        picture = _allocation_picture(obs)
        if picture != last_picture:
            first_seen.clear()
            last_picture = picture
        evidence = [e for pods in obs.pods.values() for pod in pods for e in chain_of(pod, obs.claims)]
        terminal = _terminal(obs, now, grace, first_seen)
        if terminal is not None:
            return _failed(client, obs, evidence, f"verification failed: {terminal}", now - start, terminal)
        waiting = [f"{e.pod}: {e.problem}" for e in evidence if e.problem]
        for wl in workloads:
            done, why = _workload_done(wl, obs)
            if not done:
                waiting.append(why)
        if not waiting:
            exec_results = _run_exec(client, workloads, obs)
            failed = [x for x in exec_results if not x.ok]
            message = (
                f"verified {len(workloads)} workload(s), {len([e for e in evidence if e.claim])} claim(s)"
            )
            if failed:
                message = (
                    f"verification failed: verify-exec in {failed[0].pod}: {failed[0].output.strip()[:300]}"
                )
            return VerifyResult(not failed, evidence, [], message, exec_results, clock() - start)
        if progress is not None and waiting[0] != last_status:
            last_status = waiting[0]
            progress(f"waiting: {last_status}")
        if now - start >= timeout:
            return _failed(
                client,
                obs,
                evidence,
                f"verification timed out after {timeout:g}s: {'; '.join(waiting[:3])}",
                now - start,
                "",
            )
        sleep(max(0.0, min(poll, timeout - (now - start))))


def _failed(
    client: ClusterClient,
    obs: _Observation,
    evidence: list[ClaimEvidence],
    message: str,
    elapsed: float,
    terminal: str,
) -> VerifyResult:
    pods = [p for ps in obs.pods.values() for p in ps]
    try:
        snapshot = collect_snapshot(client, pods=pods)
        diagnoses = classify(snapshot)
    except DraGitopsError as exc:
        diagnoses = [Diagnosis("pending", "cluster", f"diagnosis unavailable: {exc}")]
    return VerifyResult(False, evidence, diagnoses, message, [], elapsed, terminal)


def _run_exec(
    client: ClusterClient, workloads: Sequence[Mapping[str, Any]], obs: _Observation
) -> list[ExecResult]:
    out: list[ExecResult] = []
    for wl in workloads:
        command = as_dict(meta(wl).get("annotations")).get(VERIFY_EXEC_ANNOTATION)
        if not isinstance(command, str) or not command.strip():
            continue
        argv = shlex.split(command)
        for pod in obs.pods.get(workload_key(wl), []):
            if pod_phase(pod) != "Running":
                continue
            containers = as_list(as_dict(pod.get("spec")).get("containers"))
            container = str(as_dict(containers[0]).get("name")) if containers else None
            try:
                output = client.exec(namespace_of(pod), name_of(pod), argv, container=container)
                out.append(ExecResult(nsname(pod), container, command, True, output))
            except DraGitopsError as exc:
                out.append(ExecResult(nsname(pod), container, command, False, exc.detail))
    return out


__all__ = ["VERIFY_EXEC_ANNOTATION", "chain_of", "verify_workloads"]
