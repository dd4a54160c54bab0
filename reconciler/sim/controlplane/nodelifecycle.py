"""Node lifecycle and taint eviction, as kube-controller-manager's node-lifecycle controller does them.

* Health: a node whose kubelet heartbeat (its kube-node-lease Lease ``renewTime`` or its Ready
  condition's ``lastHeartbeatTime``) has not changed for ``node_monitor_grace_period`` seconds (real
  default 40) gets every condition ``Unknown`` (reason ``NodeStatusUnknown``, "Kubelet stopped posting
  node status."), and its pods lose their Ready condition.
* Taints follow the Ready condition: False → ``node.kubernetes.io/not-ready``, Unknown →
  ``node.kubernetes.io/unreachable``, each NoSchedule and NoExecute (NoExecute with ``timeAdded``);
  they go when the node is Ready again. A node without a Ready condition keeps the not-ready NoSchedule
  taint the API server's admission gave it. Pressure conditions True map to their NoSchedule taints.
* Eviction: a pod bound to a node with a NoExecute taint it does not tolerate is deleted at once; one it
  tolerates for ``tolerationSeconds`` is deleted that long after the taint appeared.
"""

from __future__ import annotations

import time
from typing import Any

from reconciler.dra.nodematch import tolerates
from reconciler.sim.controlplane.base import Component
from reconciler.sim.controlplane.objects import condition, is_terminating, md, now, pod_done, set_condition
from reconciler.sim.storebase import Obj

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
# condition type → status → NoSchedule taint key (nodeConditionToTaintKeyStatusMap)
CONDITION_TAINTS = {
    "Ready": {"False": NOT_READY, "Unknown": UNREACHABLE},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
}
CONDITION_TAINT_KEYS = {key for by_status in CONDITION_TAINTS.values() for key in by_status.values()}
NODE_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
STOPPED_POSTING = "Kubelet stopped posting node status."
NEVER_POSTED = "Kubelet never posted node status."
EVICTION_COMPONENT = "taint-eviction-controller"


class NodeLifecycleControl(Component):
    """Mixed into the controller-manager; ``node_monitor_grace_period`` is set by its constructor."""

    node_monitor_grace_period = 40.0

    def _lifecycle_state(self) -> tuple[dict[str, tuple[Any, float]], dict[tuple[str, str], float]]:
        if not hasattr(self, "_probes"):
            self._probes: dict[str, tuple[Any, float]] = {}  # node → (last heartbeat seen, when)
            self._taint_seen: dict[tuple[str, str], float] = {}  # (node, NoExecute key) → since
        return self._probes, self._taint_seen

    def node_lifecycle(self, pods: list[Obj]) -> None:
        probes, taint_seen = self._lifecycle_state()
        leases = {
            md(lease).get("name"): lease
            for lease in self.store.list("coordination.k8s.io", "leases", "kube-node-lease")
        }
        nodes = self.store.list("", "nodes")
        clock = time.monotonic()
        for node in nodes:
            name = md(node)["name"]
            ready = condition(node, "Ready")
            beat = (
                (ready or {}).get("lastHeartbeatTime"),
                ((leases.get(name) or {}).get("spec") or {}).get("renewTime"),
            )
            seen = probes.get(name)
            if seen is None or seen[0] != beat:
                probes[name] = (beat, clock)
            elif clock - seen[1] > self.node_monitor_grace_period:
                node = self._mark_unknown(node) or node
            self._sync_taints(node)
        for gone in set(probes) - {md(n)["name"] for n in nodes}:
            probes.pop(gone, None)
        self._evict(pods, {md(n)["name"]: n for n in self.store.list("", "nodes")}, taint_seen, clock)

    # ------------------------------------------------------------------ health

    def _mark_unknown(self, node: Obj) -> Obj | None:
        ready = condition(node, "Ready")
        if ready is not None and ready.get("status") == "Unknown":
            return None
        never = ready is None
        created = md(node).get("creationTimestamp") or now()

        def fn(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            conds = {c.get("type"): c for c in st.get("conditions") or []}
            for ctype in NODE_CONDITIONS:
                if ctype not in conds and not never:
                    continue
                reason, message = (
                    ("NodeStatusNeverUpdated", NEVER_POSTED)
                    if never
                    else (
                        "NodeStatusUnknown",
                        STOPPED_POSTING,
                    )
                )
                set_condition(st, ctype, "Unknown", reason, message)
            for c in st.get("conditions") or []:
                c.pop("lastProbeTime", None)
                c.setdefault("lastHeartbeatTime", created)

        updated = self.try_mutate("", "nodes", "", md(node)["name"], fn, status=True)
        if updated is not None:
            self._mark_pods_not_ready(md(node)["name"])
        return updated

    def _mark_pods_not_ready(self, node_name: str) -> None:
        for pod in self.store.list("", "pods"):
            if (pod.get("spec") or {}).get("nodeName") != node_name or pod_done(pod):
                continue
            ready = condition(pod, "Ready")
            if ready is None or ready.get("status") != "True":
                continue

            def fn(obj: Obj) -> None:
                for c in (obj.get("status") or {}).get("conditions") or []:
                    if c.get("type") == "Ready":
                        c["status"] = "False"
                        c["lastTransitionTime"] = now()

            self.try_mutate("", "pods", md(pod)["namespace"], md(pod)["name"], fn, status=True)

    # ------------------------------------------------------------------ taints

    def _sync_taints(self, node: Obj) -> None:
        conds = {
            c.get("type"): str(c.get("status")) for c in (node.get("status") or {}).get("conditions") or []
        }
        no_schedule = {
            key
            for ctype, by_status in CONDITION_TAINTS.items()
            if (key := by_status.get(conds.get(ctype, "")))
        }
        if "Ready" not in conds:
            no_schedule.add(NOT_READY)  # admission's taint stays until the kubelet reports Ready
        no_execute = {k for k in no_schedule if k in (NOT_READY, UNREACHABLE)} if "Ready" in conds else set()
        current = list((node.get("spec") or {}).get("taints") or [])
        kept = [
            t
            for t in current
            if t.get("key") not in CONDITION_TAINT_KEYS
            or (t.get("effect") == "NoSchedule" and t.get("key") in no_schedule)
            or (t.get("effect") == "NoExecute" and t.get("key") in no_execute)
        ]
        have = {(t.get("key"), t.get("effect")) for t in kept}
        added = [
            {"key": k, "effect": "NoSchedule"} for k in sorted(no_schedule) if (k, "NoSchedule") not in have
        ]
        added += [
            {"key": k, "effect": "NoExecute", "timeAdded": now()}
            for k in sorted(no_execute)
            if (k, "NoExecute") not in have
        ]
        if not added and len(kept) == len(current):
            return
        taints = kept + added

        def fn(obj: Obj) -> None:
            spec = obj.setdefault("spec", {})
            if taints:
                spec["taints"] = taints
            else:
                spec.pop("taints", None)

        self.try_mutate("", "nodes", "", md(node)["name"], fn)

    # ------------------------------------------------------------------ eviction

    def _evict(
        self, pods: list[Obj], nodes: dict[str, Obj], taint_seen: dict[tuple[str, str], float], clock: float
    ) -> None:
        active: set[tuple[str, str]] = set()
        for name, node in nodes.items():
            for t in (node.get("spec") or {}).get("taints") or []:
                if t.get("effect") == "NoExecute":
                    key = (name, str(t.get("key")))
                    active.add(key)
                    taint_seen.setdefault(key, clock)
        for key in set(taint_seen) - active:
            taint_seen.pop(key, None)
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            bound = nodes.get(str(node_name)) if node_name else None
            if bound is None or is_terminating(pod) or pod_done(pod):
                continue
            taints = [
                t for t in (bound.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"
            ]
            if taints and self._eviction_due(pod, str(node_name), taints, taint_seen, clock):
                self._evict_pod(pod)

    @staticmethod
    def _eviction_due(
        pod: Obj, node: str, taints: list[Obj], taint_seen: dict[tuple[str, str], float], clock: float
    ) -> bool:
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        for taint in taints:
            matching = [t for t in tolerations if tolerates(t, taint)]
            if not matching:
                return True
            seconds = [
                float(t["tolerationSeconds"]) for t in matching if t.get("tolerationSeconds") is not None
            ]
            if seconds and clock - taint_seen.get((node, str(taint.get("key"))), clock) >= max(
                0.0, min(seconds)
            ):
                return True
        return False

    def _evict_pod(self, pod: Obj) -> None:
        ns, name = md(pod)["namespace"], md(pod)["name"]

        def fn(obj: Obj) -> None:
            set_condition(
                obj.setdefault("status", {}),
                "DisruptionTarget",
                "True",
                "DeletionByTaintManager",
                "Taint manager: deleting due to NoExecute taint",
            )

        self.try_mutate("", "pods", ns, name, fn, status=True)
        self.emit_event(
            pod,
            "TaintManagerEviction",
            f"Marking for deletion Pod {ns}/{name}",
            type_="Normal",
            component=EVICTION_COMPONENT,
        )
        self.try_delete("", "pods", ns, name)
