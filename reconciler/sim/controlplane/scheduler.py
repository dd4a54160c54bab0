"""The simulated kube-scheduler: binds pods to Ready nodes, allocating their ResourceClaims.

Messages follow kube-scheduler (v1.36) word for word: the FitError
``0/N nodes are available: <sorted per-node reasons>. <DRA PostFilter>, preemption: 0/N nodes are
available: N Preemption is not helpful for scheduling.`` The DynamicResources PostFilter says
``still not schedulable`` when the pod's claims got past PreFilter, ``no new claims to deallocate`` when
PreFilter rejected it (e.g. a missing DeviceClass). Claims not created yet, missing, being deleted or
not owned by the pod park the pod silently (PreEnqueue: no event), as the real scheduler does.

The resource-claim controller part of kube-controller-manager lives here too: reservedFor entries of
pods that are gone or finished are dropped, and a claim left with no consumer is deallocated and loses
its ``resource.kubernetes.io/delete-protection`` finalizer.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from reconciler.dra.allocator import CANNOT_ALLOCATE, Inventory
from reconciler.sim.controlplane.base import (
    CLAIM_FINALIZER,
    RESOURCE,
    SCHEDULER_NAME,
    Component,
    Obj,
    condition,
    controller_of,
    is_terminating,
    md,
    node_ready,
    node_selector_matches,
    now,
    pod_done,
    pod_fits_node_selection,
    set_condition,
    untolerated_taint,
)

NOT_AVAILABLE_ON_NODE = "resourceclaim not available on the node"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE = "node(s) were unschedulable"
NOT_HELPFUL = "Preemption is not helpful for scheduling."


def fit_error(num_nodes: int, reasons: list[str], prefilter: str | None, post: str) -> str:
    """kube-scheduler's FitError text plus the PostFilter (DRA, then preemption) messages."""
    if num_nodes == 0:
        return "no nodes available to schedule pods"
    msg = f"0/{num_nodes} nodes are available:"
    if prefilter:
        msg += f" {prefilter}."
    else:
        hist = Counter(reasons)
        msg += " " + ", ".join(sorted(f"{n} {r}" for r, n in hist.items())) + "."
    preemption = f"preemption: 0/{num_nodes} nodes are available: {num_nodes} {NOT_HELPFUL}"
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
        if not pending:
            return
        pending.sort(key=lambda p: (md(p).get("creationTimestamp") or "", md(p).get("name")))
        nodes = sorted(self.store.list("", "nodes"), key=lambda n: md(n)["name"])
        claims = self.store.list(RESOURCE, "resourceclaims")
        inv = Inventory(
            self.store.list(RESOURCE, "resourceslices"), self.store.list(RESOURCE, "deviceclasses"), claims
        )
        claim_index = {(md(c)["namespace"], md(c)["name"]): c for c in claims}
        load = Counter(
            (p.get("spec") or {}).get("nodeName") for p in pods if (p.get("spec") or {}).get("nodeName")
        )
        for pod in pending:
            try:
                self.schedule(pod, nodes, inv, claim_index, load)
            except Exception:  # noqa: BLE001
                self.errors += 1

    # ------------------------------------------------------------------ one pod

    def schedule(
        self,
        pod: Obj,
        nodes: list[Obj],
        inv: Inventory,
        claim_index: dict[tuple[str, str], Obj],
        load: Counter,
    ) -> None:
        ns, pname, puid = md(pod)["namespace"], md(pod)["name"], md(pod).get("uid")
        # PreEnqueue: every claim must exist, not be deleting, and (generated) be owned by the pod
        claims: list[Obj] = []
        for _, cname, generated in pod_claim_names(pod):
            if cname is None:
                return
            claim = claim_index.get((ns, cname))
            if claim is None or is_terminating(claim):
                return
            if generated and (controller_of(claim) or {}).get("uid") != puid:
                return
            claims.append(claim)
        spec = pod.get("spec") or {}
        to_allocate = [c for c in claims if not (c.get("status") or {}).get("allocation")]
        allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
        # PreFilter: reservedFor full, missing classes
        for c in allocated:
            reserved = (c.get("status") or {}).get("reservedFor") or []
            if len(reserved) >= 256 and not any(r.get("uid") == puid for r in reserved):
                self.unschedulable(
                    pod, fit_error(len(nodes), [], "resourceclaim in use", "still not schedulable")
                )
                return
        for c in to_allocate:
            missing = inv.missing_class(_spec(c))
            if missing is not None:
                msg = f"request {missing[0]}: device class {missing[1]} does not exist"
                self.unschedulable(pod, fit_error(len(nodes), [], msg, "no new claims to deallocate"))
                return
        reasons: list[str] = []
        feasible: list[tuple[Obj, list[Any]]] = []
        for node in nodes:
            nname = md(node)["name"]
            if (node.get("spec") or {}).get("unschedulable") and not _tolerates_unschedulable(spec):
                reasons.append(UNSCHEDULABLE)
                continue
            taint = untolerated_taint(spec, node)
            if taint is None and not node_ready(node):
                taint = {"key": "node.kubernetes.io/not-ready", "value": ""}
                if any(
                    t.get("key") == "node.kubernetes.io/not-ready" and t.get("operator") == "Exists"
                    for t in spec.get("tolerations") or []
                ):
                    taint = None
            if taint is not None:
                reasons.append(
                    f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
                )
                continue
            if spec.get("nodeName") and spec["nodeName"] != nname:
                continue
            if not pod_fits_node_selection(spec, node):
                reasons.append(AFFINITY)
                continue
            if any(
                not node_selector_matches(
                    (c.get("status") or {}).get("allocation", {}).get("nodeSelector"), node
                )
                for c in allocated
            ):
                reasons.append(NOT_AVAILABLE_ON_NODE)
                continue
            if to_allocate:
                outcomes = inv.allocate_many(to_allocate, nname, md(node).get("labels") or {})
                if not all(o.ok for o in outcomes):
                    reasons.append(CANNOT_ALLOCATE)
                    continue
                feasible.append((node, outcomes))
            else:
                feasible.append((node, []))
        if not feasible:
            self.unschedulable(
                pod,
                fit_error(
                    len(nodes),
                    reasons,
                    None,
                    "still not schedulable" if claims else "no new claims to deallocate",
                ),
            )
            return
        node, outcomes = min(feasible, key=lambda f: (load[md(f[0])["name"]], md(f[0])["name"]))
        nname = md(node)["name"]
        # Reserve + PreBind: finalizer, allocation, reservedFor
        ref = {"resource": "pods", "name": pname, "uid": puid}
        for claim, outcome in zip(to_allocate, outcomes, strict=True):
            allocation = dict(outcome.allocation or {})
            allocation["allocationTimestamp"] = now()
            if not self._add_finalizer(claim):
                return
            ok = self.try_mutate(
                RESOURCE, "resourceclaims", ns, md(claim)["name"], _allocate_fn(allocation, ref), status=True
            )
            if ok is None:
                return
            inv.used |= {k for k in outcome.devices}
            claim_index[(ns, md(claim)["name"])] = ok
            inv.claims.append(ok)
        for claim in allocated:
            ok = self.try_mutate(
                RESOURCE, "resourceclaims", ns, md(claim)["name"], _reserve_fn(ref), status=True
            )
            if ok is not None:
                claim_index[(ns, md(claim)["name"])] = ok

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
        load[nname] += 1
        self.emit_event(
            pod,
            "Scheduled",
            f"Successfully assigned {ns}/{pname} to {nname}",
            type_="Normal",
            component=SCHEDULER_NAME,
            action="Binding",
        )

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


def _spec(claim: Obj) -> dict[str, Any]:
    return claim.get("spec") or {}


def _tolerates_unschedulable(spec: dict[str, Any]) -> bool:
    return any(
        t.get("key") == "node.kubernetes.io/unschedulable" and t.get("operator") == "Exists"
        for t in spec.get("tolerations") or []
    )


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
