"""The node half of the simulated kubelet: heartbeats (kube-node-lease Lease) and node conditions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from reconciler.sim.controlplane.base import Component
from reconciler.sim.controlplane.objects import condition, md, now, set_condition
from reconciler.sim.storebase import Obj

LEASE_NAMESPACE = "kube-node-lease"
NODE_NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)


class NodeHeartbeat(Component):
    """Renews the served nodes' Leases and posts their conditions; ``silent`` nodes are cut off."""

    nodes: list[str] | None
    heartbeat_interval: float
    silent: set[str]
    not_ready: set[str]
    _renewed: dict[str, float]
    _lock: threading.Lock

    # ------------------------------------------------------------------ node heartbeat

    def heartbeat(self, nodes: dict[str, Obj], silent: set[str]) -> None:
        """Renew each served node's Lease; post its conditions when they differ from what it reports."""
        clock = time.monotonic()
        with self._lock:
            not_ready = set(self.not_ready)
        for name, node in nodes.items():
            if name in silent or (self.nodes is not None and name not in self.nodes):
                continue
            if clock - self._renewed.get(name, float("-inf")) >= self.heartbeat_interval:
                self._renew_lease(node)
                self._renewed[name] = clock
            ready = condition(node, "Ready")
            want = "False" if name in not_ready else "True"
            if ready is None or ready.get("status") != want:
                self.try_mutate("", "nodes", "", name, _conditions_poster(want), status=True)

    def _renew_lease(self, node: Obj) -> None:
        name = md(node)["name"]
        stamp = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1e6) % 1000000:06d}Z"
        )

        def renew(obj: Obj) -> None:
            obj.setdefault("spec", {}).update({"holderIdentity": name, "renewTime": stamp})

        if self.try_mutate("coordination.k8s.io", "leases", LEASE_NAMESPACE, name, renew) is None:
            self.try_create(
                "coordination.k8s.io",
                "leases",
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": name,
                        "namespace": LEASE_NAMESPACE,
                        "ownerReferences": [
                            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": md(node).get("uid")}
                        ],
                    },
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": stamp},
                },
            )


def _conditions_poster(ready: str) -> Callable[[Obj], None]:
    return lambda node: _post_conditions(node, ready)


def _post_conditions(node: Obj, ready: str) -> None:
    """The conditions a kubelet posts: no pressure, Ready True or False, with a fresh heartbeat."""
    st = node.setdefault("status", {})
    for ctype, reason, message in (
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ):
        set_condition(st, ctype, "False", reason, message)
    if ready == "True":
        set_condition(st, "Ready", "True", "KubeletReady", "kubelet is posting ready status")
    else:
        set_condition(st, "Ready", "False", "KubeletNotReady", NODE_NOT_READY_MESSAGE)
    stamp = now()
    for c in st.get("conditions") or []:
        c.pop("lastProbeTime", None)
        c["lastHeartbeatTime"] = stamp
