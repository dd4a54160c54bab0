"""The simulated control plane: controller-manager, scheduler, DRA driver(s) and kubelet as threads.

``install(cluster, ...)`` creates the Nodes and starts the components on a ``SimCluster`` (anything
with ``.store`` and ``add_component(obj)``; a bare ``Store`` works too, the components then run until
``ControlPlane.stop()``). The returned :class:`ControlPlane` exposes the fault switches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.sim.controlplane.base import Component
from reconciler.sim.controlplane.controllers import ControllerManager
from reconciler.sim.controlplane.driver import Driver, DriverConfig, workload_driver
from reconciler.sim.controlplane.heartbeat import NODE_NOT_READY_MESSAGE
from reconciler.sim.controlplane.kubelet import Kubelet
from reconciler.sim.controlplane.objects import md, now, set_condition
from reconciler.sim.controlplane.scheduler import Scheduler, fit_error

__all__ = [
    "COMPONENTS",
    "ControlPlane",
    "ControllerManager",
    "Driver",
    "DriverConfig",
    "Kubelet",
    "Scheduler",
    "fit_error",
    "install",
    "make_node",
    "workload_driver",
]

COMPONENTS = ("controller-manager", "scheduler", "driver", "kubelet")
KUBE_VERSION = "v1.36.2"


def make_node(name: str, index: int = 0, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    node_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }
    node_labels.update(labels or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]},
        "status": _node_status(index, True),
    }


def _node_status(index: int, ready: bool) -> dict[str, Any]:
    ts = now()
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    status: dict[str, Any] = {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "addresses": [
            {"type": "InternalIP", "address": f"10.0.0.{10 + index}"},
            {"type": "Hostname", "address": f"sim-node-{index}"},
        ],
        "nodeInfo": {
            "kubeletVersion": KUBE_VERSION,
            "kubeProxyVersion": KUBE_VERSION,
            "containerRuntimeVersion": "containerd://2.1.0",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "osImage": "dra-gitops simulated node",
            "kernelVersion": "6.8.0",
            "machineID": f"sim{index:029d}",
            "systemUUID": f"00000000-0000-0000-0000-{index:012d}",
            "bootID": f"00000000-0000-0000-0000-{index:012d}",
        },
        "conditions": [],
    }
    for ctype, reason, msg in (
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ):
        status["conditions"].append(
            {
                "type": ctype,
                "status": "False",
                "reason": reason,
                "message": msg,
                "lastHeartbeatTime": ts,
                "lastTransitionTime": ts,
            }
        )
    status["conditions"].append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "container runtime network not ready",
            "lastHeartbeatTime": ts,
            "lastTransitionTime": ts,
        }
    )
    return status


class ControlPlane:
    """Handle on the installed components, with the fault-injection switches."""

    def __init__(self, store: Any, components: dict[str, Component], nodes: list[str]) -> None:
        self.store = store
        self.components = components
        self.nodes = nodes
        self._own_stop: threading.Event | None = None

    @property
    def driver(self) -> Driver | None:
        c = self.components.get("driver")
        return c if isinstance(c, Driver) else None

    @property
    def kubelet(self) -> Kubelet | None:
        c = self.components.get("kubelet")
        return c if isinstance(c, Kubelet) else None

    def kick(self) -> None:
        for c in self.components.values():
            c.kick()

    # ------------------------------------------------------------------ faults

    def crash_driver(self, name: str) -> None:
        """The driver's plugin pods go CrashLoopBackOff and its slices are withdrawn."""
        if self.driver is None:
            raise RuntimeError("the driver component is not installed")
        self.driver.crash(name)
        self.kick()

    def restore_driver(self, name: str) -> None:
        if self.driver is not None:
            self.driver.restore(name)
        self.kick()

    def fail_pods(self, selector: Any, mode: str = "Failed", namespace: str | None = None) -> None:
        """Pods matching ``selector`` (labels dict, LabelSelector, "k=v" string or predicate) fail."""
        if self.kubelet is None:
            raise RuntimeError("the kubelet component is not installed")
        self.kubelet.fail_pods(selector, mode, namespace)

    def clear_pod_faults(self) -> None:
        if self.kubelet is not None:
            self.kubelet.clear_faults()

    def set_node_ready(self, name: str, ready: bool) -> None:
        """The node's kubelet reports Ready True / False, and the node-lifecycle controller adds or
        removes the not-ready NoSchedule and NoExecute taints: both done when this returns."""
        if self.kubelet is not None:
            self.kubelet.set_ready(name, ready)

        def fn(obj: dict[str, Any]) -> None:
            st = obj.setdefault("status", {})
            if ready:
                set_condition(st, "Ready", "True", "KubeletReady", "kubelet is posting ready status")
            else:
                set_condition(st, "Ready", "False", "KubeletNotReady", NODE_NOT_READY_MESSAGE)
            for c in st.get("conditions") or []:
                c.pop("lastProbeTime", None)
                c["lastHeartbeatTime"] = now()

        self.store.mutate("", "nodes", "", name, fn, status=True)
        _observe_nodes(self.components.get("controller-manager"), self.store)
        self.kick()

    def set_node_heartbeat(self, name: str, alive: bool) -> None:
        """Stop (``alive=False``) or resume the node's kubelet: no Lease renewal, no status, no pod
        sync. After ``node_monitor_grace_period`` the node goes Ready=Unknown and gets the
        unreachable taints; its pods are evicted once their toleration runs out."""
        if self.kubelet is None:
            raise RuntimeError("the kubelet component is not installed")
        self.kubelet.set_heartbeat(name, alive)
        self.kick()

    def crash_image(self, substring: str) -> None:
        """Containers whose image contains ``substring`` crash-loop (CrashLoopBackOff with back-off)."""
        if self.kubelet is None:
            raise RuntimeError("the kubelet component is not installed")
        self.kubelet.crash_image(substring)
        self.kick()

    def restore_image(self, substring: str) -> None:
        if self.kubelet is not None:
            self.kubelet.restore_image(substring)
        self.kick()

    def add_node(self, name: str | None = None, labels: Mapping[str, str] | None = None) -> str:
        index = len(self.nodes)
        name = name or f"sim-node-{index}"
        _create_node(self.store, make_node(name, index, labels))
        self.nodes.append(name)
        _observe_nodes(self.components.get("controller-manager"), self.store)
        self.kick()
        return name

    def stop(self) -> None:
        for c in self.components.values():
            c.stop()
        if self._own_stop is not None:
            self._own_stop.set()


def _create_node(store: Any, node: dict[str, Any]) -> None:
    status = node.get("status")
    existing = store.get("", "nodes", "", node["metadata"]["name"])
    if existing is None:
        store.create("", "nodes", node)

    def fn(obj: dict[str, Any]) -> None:
        obj["status"] = status

    store.mutate("", "nodes", "", node["metadata"]["name"], fn, status=True)


def _observe_nodes(manager: Any, store: Any) -> None:
    """One node-lifecycle pass right away, so nodes that registered Ready lose admission's not-ready
    taint before anything is scheduled (as a running controller-manager would do within moments)."""
    if isinstance(manager, ControllerManager):
        manager.store = manager.store or store
        manager.node_lifecycle([])


def _labels_for(node_labels: Any, name: str, index: int) -> dict[str, str]:
    if not node_labels:
        return {}
    if isinstance(node_labels, Mapping):
        if all(isinstance(v, Mapping) for v in node_labels.values()):
            return dict(node_labels.get(name) or node_labels.get(str(index)) or {})
        return {str(k): str(v) for k, v in node_labels.items()}
    if isinstance(node_labels, Sequence) and index < len(node_labels):
        return dict(node_labels[index] or {})
    return {}


def install(
    cluster: Any,
    nodes: int = 1,
    devices_per_node: int = 2,
    drivers: Iterable[Any] = ("gpu.example.com",),
    driver_preinstalled: bool = False,
    node_labels: Any = None,
    components: Iterable[str] = COMPONENTS,
    complete_jobs: bool = True,
    crash_images: Iterable[str] = (),
    time_scale: float = 1.0,
    node_monitor_grace_period: float = 40.0,
    scheduler_seed: int | None = None,
) -> ControlPlane:
    """Create Nodes ``sim-node-0..`` and start the chosen components on ``cluster``.

    ``drivers``: names, or dicts/DriverConfig (name, nodes, devices_per_node, device_prefix, attributes,
    capacity, driver_version, preinstalled). ``node_labels``: one label dict for every node, a dict
    per node name, or a list per node index. ``crash_images``: image substrings whose containers the
    kubelet runs as crash-looping. ``time_scale`` multiplies the kubelet's restart back-off (10 s
    doubling to 300 s); ``node_monitor_grace_period`` is how long a node may go without a heartbeat
    before it turns Ready=Unknown (the kubelet heartbeats every quarter of it, at most every 10 s).
    ``scheduler_seed`` seeds the scheduler's random choice among nodes that score equal best (None:
    unpredictable, as a real scheduler's).
    """
    store = getattr(cluster, "store", cluster)
    wanted = list(components)
    unknown = [c for c in wanted if c not in COMPONENTS]
    if unknown:
        raise ValueError(f"unknown components: {', '.join(unknown)} (known: {', '.join(COMPONENTS)})")
    names = []
    for i in range(nodes):
        name = f"sim-node-{i}"
        _create_node(store, make_node(name, i, _labels_for(node_labels, name, i)))
        names.append(name)
    configs = [DriverConfig.coerce(d, devices_per_node, driver_preinstalled) for d in drivers]
    built: dict[str, Component] = {}
    driver: Driver | None = None
    if "controller-manager" in wanted:
        built["controller-manager"] = ControllerManager(node_monitor_grace_period)
    if "scheduler" in wanted:
        built["scheduler"] = Scheduler(scheduler_seed)
    if "driver" in wanted:
        driver = Driver(configs)
        built["driver"] = driver
    if "kubelet" in wanted:

        def crashed(pod: dict[str, Any], d: Driver | None = driver) -> bool:
            if d is None or not d.crashed:
                return False
            drv = d.driver_of_pod(pod)
            return drv is not None and drv in d.crashed

        built["kubelet"] = Kubelet(
            complete_jobs=complete_jobs,
            crashed_driver_of=crashed,
            crash_images=crash_images,
            time_scale=time_scale,
            nodes=names,
            heartbeat_interval=min(10.0, node_monitor_grace_period / 4),
        )
    cp = ControlPlane(store, built, names)
    _observe_nodes(built.get("controller-manager"), store)
    add = getattr(cluster, "add_component", None)
    if callable(add):
        for c in built.values():
            add(c)
    else:
        cp._own_stop = threading.Event()
        for c in built.values():
            c.start(store, cp._own_stop)
    _ = md
    return cp
