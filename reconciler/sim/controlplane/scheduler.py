"""The simulated kube-scheduler: binds pods to Ready nodes, allocating their ResourceClaims.

Messages follow kube-scheduler (v1.36) word for word: the FitError
``0/N nodes are available: <sorted per-node reasons>. <DRA PostFilter>, preemption: 0/N nodes are
available: N Preemption is not helpful for scheduling.`` The DynamicResources PostFilter says
``still not schedulable`` when the pod's claims got past PreFilter, ``no new claims to deallocate`` when
PreFilter rejected it (e.g. a missing DeviceClass). Claims not created yet, missing, being deleted or
not owned by the pod park the pod silently (PreEnqueue: no event), as the real scheduler does. A
selector failing at run time on any node is a scheduling error, not unschedulable: condition reason
``SchedulerError``, message ``running "DynamicResources" filter plugin: <error>``, and the
FailedScheduling event again on every retry (back-off 1 s doubling to 10 s, as kube-scheduler's).

Among the nodes that score equal best the scheduler takes one at random (``seed``: reproducibly): the
real one takes whichever its score heap yields first, which depends on where its cycle started and on
the order parallel filtering finished, unpredictable from outside.

The resource-claim controller part of kube-controller-manager lives here too: reservedFor entries of
pods that are gone or finished are dropped, and a claim left with no consumer is deallocated and loses
its ``resource.kubernetes.io/delete-protection`` finalizer.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from fractions import Fraction
from typing import Any

from reconciler.dra.allocator import Inventory
from reconciler.dra.noderesources import extended_requests
from reconciler.dra.placement import CLAIM_IN_USE, NodeInfo, Placement, PodClaim, PodInfo, pod_priority
from reconciler.dra.podinfo import PodResult
from reconciler.dra.scoring import default_spread
from reconciler.sim.controlplane.base import Component
from reconciler.sim.controlplane.extended import ExtendedResources, creatable, mappings_fn
from reconciler.sim.controlplane.objects import (
    CLAIM_FINALIZER,
    RESOURCE,
    SCHEDULER_NAME,
    condition,
    controller_of,
    is_terminating,
    md,
    now,
    pod_done,
    set_condition,
)
from reconciler.sim.storebase import Obj

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
SCHEDULER_ERROR = "SchedulerError"
RETRY_BACKOFF = (1.0, 10.0)  # kube-scheduler's podInitialBackoffSeconds, podMaxBackoffSeconds


def _histogram(reasons: list[str]) -> str:
    return ", ".join(sorted(f"{n} {r}" for r, n in Counter(reasons).items()))


def fit_error(num_nodes: int, reasons: list[str], prefilter: str | None, post: str) -> str:
    """kube-scheduler's FitError text plus the PostFilter (DRA, then preemption) messages.

    Preemption could help only on nodes short of a resource (``Insufficient ...``); with nothing to
    preempt there it finds no victims. Every other rejection cannot be resolved by preemption.
    """
    if num_nodes == 0:
        return "no nodes available to schedule pods"
    msg = f"0/{num_nodes} nodes are available:"
    if prefilter:
        msg += f" {prefilter}."
        verdicts = [NOT_HELPFUL] * num_nodes
    else:
        msg += f" {_histogram(reasons)}."
        verdicts = [NO_VICTIMS if r.startswith("Insufficient ") else NOT_HELPFUL for r in reasons]
    preemption = f"preemption: 0/{num_nodes} nodes are available: {_histogram(verdicts)}."
    return f"{msg} {post}, {preemption}"


def pod_claim_names(pod: Obj) -> list[tuple[str, str | None, bool]]:
    """(pod claim name, ResourceClaim name or None when not generated yet, generated?) per entry."""
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out: list[tuple[str, str | None, bool]] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = str(entry.get("name"))
        if entry.get("resourceClaimName"):
            out.append((name, str(entry["resourceClaimName"]), False))
        elif entry.get("resourceClaimTemplateName"):
            out.append((name, statuses.get(name), True))
    return out


class Scheduler(Component):
    name = "scheduler"
    watches = frozenset(
        {
            ("", "pods"),
            ("", "nodes"),
            (RESOURCE, "resourceclaims"),
            (RESOURCE, "resourceslices"),
            (RESOURCE, "deviceclasses"),
        }
    )

    def __init__(self, seed: int | None = None) -> None:
        super().__init__()
        self._retries: dict[str, tuple[float, float]] = {}  # pod uid -> (next retry, its back-off)
        self.rng = random.Random(seed)  # breaks ties between nodes that score equal best

    def reconcile(self) -> None:
        pods = self.store.list("", "pods")
        claims = self.store.list(RESOURCE, "resourceclaims")
        self.release_claims(pods, claims)
        pending = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("spec") or {}).get("schedulerName", SCHEDULER_NAME) in (SCHEDULER_NAME, "", None)
            and not is_terminating(p)
            and not pod_done(p)
        ]
        waiting = {str(md(p).get("uid")) for p in pending}
        self._retries = {uid: v for uid, v in self._retries.items() if uid in waiting}
        if not pending:
            return
        priority_classes = self.store.list("scheduling.k8s.io", "priorityclasses")
        # The scheduling queue: higher priority first, then the order pods were created in.
        pending.sort(
            key=lambda p: (
                -pod_priority(p.get("spec") or {}, priority_classes),
                md(p).get("creationTimestamp") or "",
                md(p).get("name"),
            )
        )
        nodes = [NodeInfo.from_node(n) for n in self.store.list("", "nodes")]
        claims = self.store.list(RESOURCE, "resourceclaims")
        inv = Inventory(
            self.store.list(RESOURCE, "resourceslices"),
            self.store.list(RESOURCE, "deviceclasses"),
            claims,
            self.store.list(RESOURCE, "devicetaintrules"),
        )
        claim_index = {(md(c)["namespace"], md(c)["name"]): c for c in claims}
        load = Counter(
            str((p.get("spec") or {}).get("nodeName")) for p in pods if (p.get("spec") or {}).get("nodeName")
        )
        bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") and not pod_done(p)]
        placement = Placement(
            inv,
            nodes,
            load,
            node_requests=_node_requests(pods),
            bound_pods=[p for p in bound if not is_terminating(p)],
            choose=self.rng.choice,
        )
        # nodes told apart only by what the pending pods and their claims may read are interchangeable
        placement.classes.focus([*(p.get("spec") or {} for p in pending), *claims])
        owners = self._owner_selectors()
        extended = ExtendedResources.of(placement.inv.classes.values(), nodes, claims)
        for pod in pending:
            try:
                self.schedule(pod, placement, claim_index, owners, extended)
            except Exception:  # noqa: BLE001
                self.errors += 1

    # ------------------------------------------------------------------ one pod

    def _owner_selectors(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """The selectors of the controllers whose pods are spread by default: (ns, kind, name) -> selector;
        and the Services' selectors: (ns, "Service", "") -> {"selectors": [...]}."""
        out: dict[tuple[str, str, str], dict[str, Any]] = {}
        for svc in self.store.list_ref("", "services")[0]:
            selector = (svc.get("spec") or {}).get("selector")
            if selector:
                entry = out.setdefault((md(svc)["namespace"], "Service", ""), {"selectors": []})
                entry["selectors"].append(selector)
        for group, plural, kind in (
            ("apps", "replicasets", "ReplicaSet"),
            ("apps", "statefulsets", "StatefulSet"),
        ):
            for obj in self.store.list_ref(group, plural)[0]:
                selector = (obj.get("spec") or {}).get("selector") or {}
                if selector.get("matchLabels") or selector.get("matchExpressions"):
                    out[(md(obj)["namespace"], kind, md(obj)["name"])] = selector
        return out

    def schedule(
        self,
        pod: Obj,
        placement: Placement,
        claim_index: dict[tuple[str, str], Obj],
        owners: dict[tuple[str, str, str], dict[str, Any]] | None = None,
        extended: ExtendedResources | None = None,
    ) -> None:
        ns, pname, puid = md(pod)["namespace"], md(pod)["name"], md(pod).get("uid")
        # PreEnqueue: every claim must exist, not be deleting, and (generated) be owned by the pod
        pod_claims: list[PodClaim] = []
        for pcname, cname, generated in pod_claim_names(pod):
            if cname is None:
                return
            claim = claim_index.get((ns, cname))
            if claim is None or is_terminating(claim):
                return
            if generated and (controller_of(claim) or {}).get("uid") != puid:
                return
            pod_claims.append(PodClaim(pcname, (ns, cname), claim))
        ext = extended.claim_for(pod) if extended is not None else None
        if ext is not None and extended is not None:
            stale = extended.stale(pod)
            if stale is not None:  # PostFilter: an earlier cycle's claim goes, the pod is tried anew
                if not is_terminating(stale):
                    self.try_delete(RESOURCE, "resourceclaims", ns, md(stale)["name"])
                return
            pod_claims.append(ext)
        num_nodes = len(placement.nodes)
        result = placement.attempt(_pod_info(pod, pod_claims, owners or {}))
        if result.scheduler_error is not None:
            self.failed(pod, result.scheduler_error)
            return
        self._retries.pop(str(puid), None)
        if result.prefilter is not None:
            post = (
                "still not schedulable" if result.prefilter == CLAIM_IN_USE else "no new claims to deallocate"
            )
            self.unschedulable(pod, fit_error(num_nodes, [], result.prefilter, post))
            return
        if result.node is None:
            post = "still not schedulable" if pod_claims else "no new claims to deallocate"
            self.unschedulable(pod, fit_error(num_nodes, [r.reason for r in result.rejections], None, post))
            return
        nname = result.node
        if not self._prebind(pod, pod_claims, ext, result, claim_index):
            return
        placement.commit(result)

        # Bind
        def bind(obj: Obj) -> None:
            obj.setdefault("spec", {})["nodeName"] = nname

        if self.try_mutate("", "pods", ns, pname, bind) is None:
            return

        def scheduled(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            set_condition(st, "PodScheduled", "True")
            st.setdefault("phase", "Pending")

        self.try_mutate("", "pods", ns, pname, scheduled, status=True)
        self.emit_event(
            pod,
            "Scheduled",
            f"Successfully assigned {ns}/{pname} to {nname}",
            type_="Normal",
            component=SCHEDULER_NAME,
            action="Binding",
        )

    def _prebind(
        self,
        pod: Obj,
        pod_claims: list[PodClaim],
        ext: PodClaim | None,
        result: PodResult,
        claim_index: dict[tuple[str, str], Obj],
    ) -> bool:
        """Reserve + PreBind: the extended-resource claim created, then each claim's finalizer, allocation
        and reservedFor; the pod's extendedResourceClaimStatus. False when a write failed."""
        ns, pname, puid = md(pod)["namespace"], md(pod)["name"], md(pod).get("uid")
        ref = {"resource": "pods", "name": pname, "uid": puid}
        for pc in pod_claims:
            if pc is ext:
                made = self.try_create(RESOURCE, "resourceclaims", creatable(pc))
                if made is None:
                    return False
                claim_index[(ns, md(made)["name"])] = made
                result.allocations[(ns, md(made)["name"])] = result.allocations.pop(pc.key)
                ext = pc = PodClaim(pc.name, (ns, md(made)["name"]), made)
            claim = claim_index[pc.key]
            outcome = result.allocations.get(pc.key)
            if outcome is not None and not (claim.get("status") or {}).get("allocation"):
                allocation = dict(outcome.allocation or {})
                allocation["allocationTimestamp"] = now()
                if not self._add_finalizer(claim):
                    return False
                fn = _allocate_fn(allocation, ref)
            else:
                fn = _reserve_fn(ref)
            ok = self.try_mutate(RESOURCE, "resourceclaims", ns, pc.key[1], fn, status=True)
            if ok is None:
                return False
            claim_index[pc.key] = ok
        if ext is None:
            return True
        edit = mappings_fn(pod, claim_index[ext.key])
        return self.try_mutate("", "pods", ns, pname, edit, status=True) is not None

    def _add_finalizer(self, claim: Obj) -> bool:
        if CLAIM_FINALIZER in (md(claim).get("finalizers") or []):
            return True

        def fn(obj: Obj) -> None:
            fins = obj.setdefault("metadata", {}).setdefault("finalizers", [])
            if CLAIM_FINALIZER not in fins:
                fins.append(CLAIM_FINALIZER)

        return (
            self.try_mutate(RESOURCE, "resourceclaims", md(claim)["namespace"], md(claim)["name"], fn)
            is not None
        )

    def failed(self, pod: Obj, message: str) -> None:
        """Scheduling failed with an error: condition reason SchedulerError, an event on each retry."""
        uid = str(md(pod).get("uid"))
        clock = time.monotonic()
        due, backoff = self._retries.get(uid, (0.0, RETRY_BACKOFF[0]))
        cond = condition(pod, "PodScheduled")
        if cond is not None and cond.get("message") == message and clock < due:
            return  # still backing off: the pod is not retried yet

        def fn(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            st["phase"] = "Pending"
            set_condition(st, "PodScheduled", "False", SCHEDULER_ERROR, message)

        self.try_mutate("", "pods", md(pod)["namespace"], md(pod)["name"], fn, status=True)
        self.emit_event(pod, "FailedScheduling", message, component=SCHEDULER_NAME, action="Scheduling")
        self._retries[uid] = (clock + backoff, min(backoff * 2, RETRY_BACKOFF[1]))

    def unschedulable(self, pod: Obj, message: str) -> None:
        cond = condition(pod, "PodScheduled")
        if cond is not None and cond.get("status") == "False" and cond.get("message") == message:
            return

        def fn(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            st["phase"] = "Pending"
            set_condition(st, "PodScheduled", "False", "Unschedulable", message)

        self.try_mutate("", "pods", md(pod)["namespace"], md(pod)["name"], fn, status=True)
        self.emit_event(pod, "FailedScheduling", message, component=SCHEDULER_NAME, action="Scheduling")

    # ------------------------------------------------------------------ claim release (claim controller)

    def release_claims(self, pods: list[Obj], claims: list[Obj]) -> None:
        live = {md(p).get("uid"): p for p in pods}
        for claim in claims:
            st = claim.get("status") or {}
            reserved = st.get("reservedFor") or []
            keep = [
                r
                for r in reserved
                if r.get("resource") != "pods" or (r.get("uid") in live and not pod_done(live[r.get("uid")]))
            ]
            fins = md(claim).get("finalizers") or []
            ns, name = md(claim)["namespace"], md(claim)["name"]
            # Deallocate only what the control plane allocated (it carries the delete-protection finalizer)
            # or what just lost its last consumer: a real cluster leaves a status someone else wrote alone.
            if keep != reserved or (not keep and st.get("allocation") and CLAIM_FINALIZER in fins):

                def fn(obj: Obj, k: list[Any] = keep) -> None:
                    s = obj.setdefault("status", {})
                    if k:
                        s["reservedFor"] = k
                    else:
                        s.pop("reservedFor", None)
                        s.pop("allocation", None)
                        s.pop("devices", None)

                self.try_mutate(RESOURCE, "resourceclaims", ns, name, fn, status=True)
            if not keep and CLAIM_FINALIZER in fins:

                def drop(obj: Obj) -> None:
                    f = [x for x in obj["metadata"].get("finalizers") or [] if x != CLAIM_FINALIZER]
                    if f:
                        obj["metadata"]["finalizers"] = f
                    else:
                        obj["metadata"].pop("finalizers", None)

                self.try_mutate(RESOURCE, "resourceclaims", ns, name, drop)


def _pod_info(
    pod: Obj, claims: list[PodClaim], owners: dict[tuple[str, str, str], dict[str, Any]]
) -> PodInfo:
    """The pod as the placement model sees it; spread by default when a ReplicaSet or StatefulSet owns it."""
    owner = controller_of(pod) or {}
    ns = md(pod)["namespace"]
    labels = {str(k): str(v) for k, v in (md(pod).get("labels") or {}).items()}
    services = owners.get((ns, "Service", ""), {}).get("selectors") or []
    owned = owners.get((ns, str(owner.get("kind")), str(owner.get("name"))))
    return PodInfo(
        ns,
        md(pod)["name"],
        pod.get("spec") or {},
        claims,
        uid=md(pod).get("uid"),
        labels=labels,
        spread=default_spread(labels, services, owned),
    )


def _node_requests(pods: list[Obj]) -> dict[str, dict[str, Fraction]]:
    """The extended resources the pods bound to each node (and not finished) request."""
    out: dict[str, dict[str, Fraction]] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node or pod_done(p):
            continue
        held = out.setdefault(str(node), {})
        for name, q in extended_requests(p.get("spec") or {}).items():
            held[name] = held.get(name, Fraction(0)) + q
    return out


def _allocate_fn(allocation: dict[str, Any], ref: dict[str, Any]) -> Any:
    def fn(obj: Obj) -> None:
        st = obj.setdefault("status", {})
        st["allocation"] = allocation
        reserved = st.setdefault("reservedFor", [])
        if not any(r.get("uid") == ref["uid"] for r in reserved):
            reserved.append(dict(ref))

    return fn


def _reserve_fn(ref: dict[str, Any]) -> Any:
    def fn(obj: Obj) -> None:
        reserved = obj.setdefault("status", {}).setdefault("reservedFor", [])
        if not any(r.get("uid") == ref["uid"] for r in reserved):
            reserved.append(dict(ref))

    return fn
