"""The simulated DRA driver(s): publish one ResourceSlice per node that has hardware and a running plugin.

A node's slice for driver D is published when D is pre-installed, or when a Running+Ready pod of D's
kubelet-plugin DaemonSet runs there (a DaemonSet is D's when its ``dra-gitops.io/driver`` annotation,
a container arg ``--driver-name=D`` / ``--driver-name D``, or a container env value names D). It is
withdrawn when that pod goes away or stops being ready, when a pod of D crash-loops on the node (even
for a pre-installed driver: the plugin that would serve the node is down), or when the driver is crashed
(fault injection: the kubelet then crash-loops D's plugin pods the same way).
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.sim.controlplane.base import Component
from reconciler.sim.controlplane.objects import RESOURCE, controller_of, is_terminating, md, pod_ready
from reconciler.sim.storebase import Obj

DRIVER_ANNOTATION = "dra-gitops.io/driver"


@dataclass
class DriverConfig:
    """One simulated driver: which nodes have its hardware and what the devices look like."""

    name: str
    nodes: list[str] | None = None  # None: every node
    devices_per_node: int = 2
    device_prefix: str = "gpu"
    attributes: dict[str, Any] = field(default_factory=lambda: {"model": {"string": "LATEST-GPU-MODEL"}})
    capacity: dict[str, Any] = field(default_factory=lambda: {"memory": {"value": "80Gi"}})
    driver_version: str = "1.0.0"
    preinstalled: bool = False

    @classmethod
    def coerce(cls, value: Any, devices_per_node: int, preinstalled: bool) -> DriverConfig:
        if isinstance(value, DriverConfig):
            return value
        if isinstance(value, str):
            return cls(name=value, devices_per_node=devices_per_node, preinstalled=preinstalled)
        if isinstance(value, Mapping):
            data = dict(value)
            data.setdefault("devices_per_node", devices_per_node)
            data.setdefault("preinstalled", preinstalled)
            return cls(**data)
        raise TypeError(f"bad driver config: {value!r}")

    def device(self, node: str, index: int) -> dict[str, Any]:
        seed = hashlib.sha256(f"{self.name}/{node}/{index}".encode()).digest()[:16]
        attrs: dict[str, Any] = {
            "index": {"int": index},
            "uuid": {"string": f"{self.device_prefix}-{uuid.UUID(bytes=seed)}"},
            "driverVersion": {"version": self.driver_version},
        }
        attrs.update(self.attributes)
        dev: dict[str, Any] = {"name": f"{self.device_prefix}-{index}", "attributes": attrs}
        if self.capacity:
            dev["capacity"] = {
                k: (v if isinstance(v, Mapping) else {"value": str(v)}) for k, v in self.capacity.items()
            }
        return dev


def workload_driver(workload: Mapping[str, Any], drivers: set[str]) -> str | None:
    """Which of ``drivers`` a DaemonSet (or pod template) belongs to, if any."""
    ann = (md(workload).get("annotations") or {}).get(DRIVER_ANNOTATION)
    if ann in drivers:
        return str(ann)
    spec = workload.get("spec") or {}
    tmpl = spec.get("template") or workload
    tann = (md(tmpl).get("annotations") or {}).get(DRIVER_ANNOTATION)
    if tann in drivers:
        return str(tann)
    pspec = tmpl.get("spec") or {}
    for c in list(pspec.get("containers") or []) + list(pspec.get("initContainers") or []):
        args = [str(a) for a in list(c.get("args") or []) + list(c.get("command") or [])]
        for i, a in enumerate(args):
            for d in drivers:
                if a in (f"--driver-name={d}", f"-driver-name={d}", f"--driver={d}"):
                    return d
                if a in ("--driver-name", "--driver") and i + 1 < len(args) and args[i + 1] == d:
                    return d
        for env in c.get("env") or []:
            if env.get("value") in drivers:
                return str(env["value"])
    return None


def is_crash_looping(pod: Mapping[str, Any]) -> bool:
    """A container of the pod waits in CrashLoopBackOff."""
    return any(
        ((c.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
        for c in (pod.get("status") or {}).get("containerStatuses") or []
    )


class Driver(Component):
    name = "driver"
    watches = frozenset({("", "pods"), ("", "nodes"), ("apps", "daemonsets"), (RESOURCE, "resourceslices")})

    def __init__(self, configs: list[DriverConfig]) -> None:
        super().__init__()
        self.configs = {c.name: c for c in configs}
        self.crashed: set[str] = set()
        self._lock = threading.Lock()

    def crash(self, name: str) -> None:
        with self._lock:
            self.crashed.add(name)
        self.kick()

    def restore(self, name: str) -> None:
        with self._lock:
            self.crashed.discard(name)
        self.kick()

    def driver_of_pod(self, pod: Obj, daemonsets: dict[str, Obj] | None = None) -> str | None:
        owner = controller_of(pod)
        names = set(self.configs)
        if owner is None or owner.get("kind") != "DaemonSet":
            return None
        ds = None
        if daemonsets is not None:
            ds = daemonsets.get(str(owner.get("uid")))
        elif self.store is not None:
            ds = self.store.get("apps", "daemonsets", md(pod).get("namespace", ""), str(owner.get("name")))
        if ds is not None:
            return workload_driver(ds, names)
        return workload_driver(pod, names)

    def desired_nodes(self) -> dict[str, set[str]]:
        nodes = {md(n)["name"] for n in self.store.list("", "nodes") if not is_terminating(n)}
        with self._lock:
            crashed = set(self.crashed)
        out: dict[str, set[str]] = {name: set() for name in self.configs}
        daemonsets = {str(md(d).get("uid")): d for d in self.store.list("apps", "daemonsets")}
        running: dict[str, set[str]] = {name: set() for name in self.configs}
        crash_looping: dict[str, set[str]] = {name: set() for name in self.configs}
        for pod in self.store.list("", "pods"):
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or is_terminating(pod):
                continue
            drv = self.driver_of_pod(pod, daemonsets)
            if drv is None:
                continue
            if pod_ready(pod):
                running[drv].add(str(node))
            elif is_crash_looping(pod):
                crash_looping[drv].add(str(node))
        for name, cfg in self.configs.items():
            if name in crashed:
                continue
            hw = nodes if cfg.nodes is None else nodes & set(cfg.nodes)
            serving = set(hw) if cfg.preinstalled else hw & running[name]
            out[name] = serving - (crash_looping[name] - running[name])
        return out

    def reconcile(self) -> None:
        desired = self.desired_nodes()
        slices = self.store.list(RESOURCE, "resourceslices")
        nodes = {md(n)["name"]: n for n in self.store.list("", "nodes")}
        have: dict[tuple[str, str], list[Obj]] = {}
        for s in slices:
            spec = s.get("spec") or {}
            if spec.get("driver") in self.configs and spec.get("nodeName"):
                have.setdefault((str(spec["driver"]), str(spec["nodeName"])), []).append(s)
        for (drv, node), objs in have.items():
            if node not in desired.get(drv, set()):
                for s in objs:
                    self.try_delete(RESOURCE, "resourceslices", "", md(s)["name"])
        for drv, want in desired.items():
            cfg = self.configs[drv]
            for node in sorted(want):
                if (drv, node) in have or node not in nodes:
                    continue
                created = self.try_create(RESOURCE, "resourceslices", self.slice_for(cfg, nodes[node]))
                if created is not None:
                    self._log_published(drv, node, cfg.devices_per_node, md(created)["name"])

    def _log_published(self, driver: str, node: str, devices: int, slice_name: str) -> None:
        """What a real kubelet plugin logs on start: registration and the slice it published."""
        for pod in self.store.list("", "pods"):
            if (pod.get("spec") or {}).get("nodeName") != node or self.driver_of_pod(pod) != driver:
                continue
            for c in (pod.get("spec") or {}).get("containers") or []:
                for line in (
                    f"registered DRA plugin {driver} with the kubelet",
                    f"published ResourceSlice {slice_name} for node {node} with {devices} device(s)",
                ):
                    self.store.append_log(
                        md(pod).get("namespace", ""), md(pod)["name"], str(c.get("name")), line
                    )

    def slice_for(self, cfg: DriverConfig, node: Obj) -> Obj:
        nname = md(node)["name"]
        return {
            "apiVersion": f"{RESOURCE}/v1",
            "kind": "ResourceSlice",
            "metadata": {
                "generateName": f"{nname}-{cfg.name}-",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": nname,
                        "uid": md(node).get("uid"),
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "driver": cfg.name,
                "nodeName": nname,
                "pool": {"name": nname, "generation": 1, "resourceSliceCount": 1},
                "devices": [cfg.device(nname, i) for i in range(cfg.devices_per_node)],
            },
        }
