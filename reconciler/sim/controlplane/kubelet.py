"""The simulated kubelet (all nodes): starts bound pods once their claims are allocated and reserved.

A pod on a Ready node whose ResourceClaims are all allocated and reserved for it, and whose drivers
have published a slice on the node (i.e. are "registered"), becomes Running and Ready. Otherwise it
stays Pending (ContainerCreating), with a ``FailedPrepareDynamicResources`` event when a driver is not
registered. Fault switches: ``fail_pods`` (phase Failed or CrashLoopBackOff), crashed drivers' plugin
pods go CrashLoopBackOff, and pods on a NotReady node lose their Ready condition.

Crash loops follow the real kubelet: a container whose image contains one of ``crash_images`` (or that
a fault makes crash) exits 1 and is restarted with a back-off of 10 s doubling up to 300 s (times
``time_scale``), ``restartCount`` growing, ``lastState.terminated`` (exitCode 1, reason Error) and
``state.waiting`` CrashLoopBackOff in between, the pod not Ready, and a Warning ``BackOff`` event on
each crash; in a pod with ``restartPolicy: Never`` it exits 1 once and stays terminated (every container
so: the pod Failed). It also heartbeats the nodes it serves (kube-node-lease Lease, Ready condition), unless a
node is cut off with ``set_heartbeat(name, False)``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.dra.extended import extended_claim_name
from reconciler.sim.controlplane.heartbeat import NodeHeartbeat
from reconciler.sim.controlplane.objects import (
    RESOURCE,
    controller_of,
    is_terminating,
    labels_match,
    md,
    node_ready,
    now,
    pod_done,
    pod_phase,
)
from reconciler.sim.controlplane.podstatus import (
    CrashLoop,
    crash_loop_status,
    finish,
    set_not_ready,
    set_running,
    stop_containers,
)
from reconciler.sim.controlplane.scheduler import pod_claim_names
from reconciler.sim.storebase import Obj, clone

PodPredicate = Callable[[Obj], bool]
TERMINATION_DELAY = 0.1  # seconds from a pod's deletionTimestamp to its removal by the sim's kubelet
BACKOFF_INITIAL = 10.0  # the kubelet's container restart back-off: 10 s, doubling, capped at 300 s
BACKOFF_MAX = 300.0


@dataclass
class PodFault:
    match: PodPredicate
    mode: str  # "Failed" | "CrashLoopBackOff"


def selector_predicate(selector: Any, namespace: str | None = None) -> PodPredicate:
    """A pod predicate from a label dict, a LabelSelector dict, a "k=v,k2=v2" string, or a callable."""
    if callable(selector):
        return selector
    if isinstance(selector, str):
        pairs = dict(p.split("=", 1) for p in selector.split(",") if "=" in p)
        sel: Mapping[str, Any] = {"matchLabels": pairs}
    elif isinstance(selector, Mapping) and ("matchLabels" in selector or "matchExpressions" in selector):
        sel = selector
    else:
        sel = {"matchLabels": dict(selector or {})}

    def pred(pod: Obj) -> bool:
        if namespace is not None and md(pod).get("namespace") != namespace:
            return False
        return labels_match(sel, md(pod).get("labels") or {})

    return pred


class Kubelet(NodeHeartbeat):
    name = "kubelet"
    watches = frozenset(
        {("", "pods"), ("", "nodes"), (RESOURCE, "resourceclaims"), (RESOURCE, "resourceslices")}
    )

    def __init__(
        self,
        complete_jobs: bool = True,
        crashed_driver_of: Callable[[Obj], bool] | None = None,
        termination_delay: float = TERMINATION_DELAY,
        *,
        crash_images: Iterable[str] = (),
        time_scale: float = 1.0,
        nodes: list[str] | None = None,
        heartbeat_interval: float = 10.0,
    ) -> None:
        super().__init__()
        # how long stopping a deleted pod's containers takes here (a real kubelet: up to the grace period)
        self.termination_delay = termination_delay
        self._terminating_since: dict[str, float] = {}
        self.complete_jobs = complete_jobs
        self.faults: list[PodFault] = []
        self.crashed_driver_of = crashed_driver_of
        self.crash_images: set[str] = {i for i in crash_images if i}
        self.time_scale = time_scale
        self.nodes = nodes  # the nodes this kubelet serves (None: every node)
        self.heartbeat_interval = heartbeat_interval
        self.silent: set[str] = set()  # nodes whose kubelet stopped posting status
        self.not_ready: set[str] = set()  # nodes whose kubelet reports Ready=False
        self._renewed: dict[str, float] = {}
        self._crashes: dict[tuple[str, str], CrashLoop] = {}
        self._lock = threading.Lock()
        self._prepare_warned: set[tuple[str, str]] = set()

    def crash_image(self, substring: str) -> None:
        """Containers whose image contains ``substring`` crash-loop from now on."""
        with self._lock:
            self.crash_images.add(substring)
        self.kick()

    def restore_image(self, substring: str) -> None:
        with self._lock:
            self.crash_images.discard(substring)
        self.kick()

    def set_heartbeat(self, node: str, alive: bool) -> None:
        """Stop (or resume) this node's kubelet: no Lease renewal, no status, no pod sync."""
        with self._lock:
            (self.silent.discard if alive else self.silent.add)(node)
        self.kick()

    def set_ready(self, node: str, ready: bool) -> None:
        """What the node's kubelet reports as its Ready condition."""
        with self._lock:
            (self.not_ready.discard if ready else self.not_ready.add)(node)
        self.kick()

    def fail_pods(self, selector: Any, mode: str = "Failed", namespace: str | None = None) -> None:
        if mode not in ("Failed", "CrashLoopBackOff"):
            raise ValueError("mode must be Failed or CrashLoopBackOff")
        with self._lock:
            self.faults.append(PodFault(selector_predicate(selector, namespace), mode))
        self.kick()

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()
        self.kick()

    def _fault_for(self, pod: Obj) -> str | None:
        if self.crashed_driver_of is not None and self.crashed_driver_of(pod):
            return "CrashLoopBackOff"
        with self._lock:
            faults = list(self.faults)
        for f in faults:
            try:
                if f.match(pod):
                    return f.mode
            except Exception:  # noqa: BLE001
                continue
        return None

    def reconcile(self) -> None:
        nodes = {md(n)["name"]: n for n in self.store.list("", "nodes")}
        with self._lock:
            silent = set(self.silent)
        self.heartbeat(nodes, silent)
        claims = {(md(c)["namespace"], md(c)["name"]): c for c in self.store.list(RESOURCE, "resourceclaims")}
        registered = {
            (str((s.get("spec") or {}).get("driver")), str((s.get("spec") or {}).get("nodeName")))
            for s in self.store.list(RESOURCE, "resourceslices")
        }
        pods = self.store.list("", "pods")
        seen = {str(md(p).get("uid")) for p in pods}
        for uid in [u for u in self._terminating_since if u not in seen]:
            del self._terminating_since[uid]
        for key in [k for k in self._crashes if k[0] not in seen]:
            del self._crashes[key]
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name or node_name in silent:
                continue
            node = nodes.get(node_name)
            if node is None or (self.nodes is not None and node_name not in self.nodes):
                continue
            try:
                if is_terminating(pod):
                    if node_ready(node):  # a NotReady node's kubelet is not there to stop anything
                        self.terminate(pod)
                elif not pod_done(pod):
                    self.sync_pod(pod, node, claims, registered)
            except Exception:  # noqa: BLE001
                self.errors += 1

    def terminate(self, pod: Obj) -> None:
        """Stop a deleted pod's containers (Ready goes False), then confirm the deletion (grace 0)."""
        uid = str(md(pod).get("uid"))
        since = self._terminating_since.setdefault(uid, time.monotonic())
        self._write(pod, lambda st: stop_containers(pod, st))
        if time.monotonic() - since < self.termination_delay:
            return  # the next periodic pass finishes it
        self.store.delete(
            "", "pods", md(pod)["namespace"], md(pod)["name"], grace_period=0, precondition_uid=uid
        )

    def sync_pod(
        self, pod: Obj, node: Obj, claims: dict[tuple[str, str], Obj], registered: set[tuple[str, str]]
    ) -> None:
        ns, uid = md(pod)["namespace"], md(pod).get("uid")
        nname = md(node)["name"]
        running = pod_phase(pod) == "Running"
        if not node_ready(node):
            if running:
                self._write(pod, lambda st: set_not_ready(st, "NodeNotReady"))
            return
        fault = self._fault_for(pod)
        if fault == "Failed" and running:
            self._write(pod, lambda st: self._fail(pod, st))
            return
        if not running:
            # all claims allocated + reserved for this pod, drivers registered on the node
            # the pod's claims and, as the kubelet adds it, the claim for its extended resources
            names = [cname for _, cname, _ in pod_claim_names(pod)]
            if extended_claim_name(pod):
                names.append(extended_claim_name(pod))
            for cname in names:
                claim = claims.get((ns, cname)) if cname else None
                if claim is None:
                    return
                st = claim.get("status") or {}
                if not st.get("allocation") or not any(
                    r.get("uid") == uid for r in st.get("reservedFor") or []
                ):
                    return
                for r in (st["allocation"].get("devices") or {}).get("results") or []:
                    drv = str(r.get("driver"))
                    if (drv, nname) not in registered:
                        if (uid, drv) not in self._prepare_warned:
                            self._prepare_warned.add((str(uid), drv))
                            self.emit_event(
                                pod,
                                "FailedPrepareDynamicResources",
                                f"Failed to prepare dynamic resources: DRA driver {drv} is not registered",
                                component="kubelet",
                                host=nname,
                            )
                        return
            if fault == "Failed":
                self._write(pod, lambda st: self._fail(pod, st))
                return
        crashing = self._crashing_containers(pod, fault)
        if crashing and (pod.get("spec") or {}).get("restartPolicy") == "Never":
            # never restarted: the container stays terminated (exit 1); all of them: the pod Failed
            self._write(pod, lambda st: self._exit_for_good(pod, node, st, crashing))
            return
        crashed = self._crash_statuses(pod, node, crashing)
        if running and not crashed and self._is_job_pod(pod) and self.complete_jobs:
            self._write(pod, lambda st: self._complete(pod, st))
            return
        # start it, keep it crash-looping, or (recovered from a fault / node back) make it ready again
        self._write(pod, lambda st: self._start(pod, node, st, crashed))

    def _crashing_containers(self, pod: Obj, fault: str | None) -> list[str]:
        containers = (pod.get("spec") or {}).get("containers") or []
        if fault == "CrashLoopBackOff":
            return [str(c.get("name")) for c in containers]
        with self._lock:
            images = set(self.crash_images)
        return [str(c.get("name")) for c in containers if any(i in str(c.get("image") or "") for i in images)]

    def _crash_statuses(self, pod: Obj, node: Obj, crashing: list[str]) -> dict[str, dict[str, Any]]:
        """Advance the crash loops of ``crashing`` containers; their containerStatuses, by name."""
        uid, pname, ns = str(md(pod).get("uid")), md(pod)["name"], md(pod)["namespace"]
        old = {c.get("name"): c for c in (pod.get("status") or {}).get("containerStatuses") or []}
        for c in (pod.get("spec") or {}).get("containers") or []:
            if str(c.get("name")) not in crashing:
                self._crashes.pop((uid, str(c.get("name"))), None)
        out: dict[str, dict[str, Any]] = {}
        clock = time.monotonic()
        for c in (pod.get("spec") or {}).get("containers") or []:
            cname = str(c.get("name"))
            if cname not in crashing:
                continue
            prev = old.get(cname) or {}
            loop = self._crashes.get((uid, cname))
            if loop is None or clock >= loop.next_restart:
                # (re)started and exited 1: the first restart is immediate, then back-off doubles
                restarts = int(prev.get("restartCount") or 0) + 1 if loop is None else loop.restarts + 1
                backoff = min(BACKOFF_MAX, BACKOFF_INITIAL * 2 ** max(0, restarts - 1))
                loop = CrashLoop(restarts, backoff, clock + backoff * self.time_scale, now())
                self._crashes[(uid, cname)] = loop
                self.store.append_log(ns, pname, cname, "fatal: exited with code 1 (simulated crash)")
                self.emit_event(
                    pod,
                    "BackOff",
                    f"Back-off restarting failed container {cname} in pod {pname}_{ns}({uid})",
                    component="kubelet",
                    host=md(node)["name"],
                )
            out[cname] = crash_loop_status(pod, c, loop)
        return out

    # ------------------------------------------------------------------ status writers

    def _write(self, pod: Obj, edit: Callable[[dict[str, Any]], None]) -> None:
        trial = clone(pod.get("status") or {})
        self._trial = True  # the edit runs twice (trial, then for real): log only the real run
        try:
            edit(trial)
        finally:
            self._trial = False
        if trial == (pod.get("status") or {}):
            return

        def fn(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            edit(st)

        self.try_mutate("", "pods", md(pod)["namespace"], md(pod)["name"], fn, status=True)

    @staticmethod
    def _is_job_pod(pod: Obj) -> bool:
        owner = controller_of(pod)
        return owner is not None and owner.get("kind") == "Job"

    _trial = False

    def _log(self, pod: Obj, container: dict[str, Any], line: str) -> None:
        if not self._trial:
            self.store.append_log(
                md(pod).get("namespace", ""), md(pod)["name"], str(container.get("name")), line
            )

    def _start(
        self, pod: Obj, node: Obj, st: dict[str, Any], crashed: dict[str, dict[str, Any]] | None = None
    ) -> None:
        if st.get("phase") != "Running":
            for c in (pod.get("spec") or {}).get("containers") or []:
                self._log(
                    pod,
                    c,
                    f"started container {c.get('name')} (image {c.get('image')}) on node {md(node)['name']}",
                )
        set_running(pod, node, st, crashed or {})

    def _exit_for_good(self, pod: Obj, node: Obj, st: dict[str, Any], crashing: list[str]) -> None:
        """`restartPolicy: Never`: the crashing containers exited 1 and stay so; when none runs, the pod
        failed (phase Failed), as the real kubelet reports it."""
        containers = (pod.get("spec") or {}).get("containers") or []
        old = {c.get("name"): c for c in st.get("containerStatuses") or []}
        for c in containers:
            if c.get("name") in crashing and "terminated" not in (
                (old.get(c.get("name")) or {}).get("state") or {}
            ):
                self._log(pod, c, "fatal: exited with code 1 (simulated crash)")
        if {str(c.get("name")) for c in containers} <= set(crashing):
            finish(pod, st, "Failed", "PodFailed", 1, "Error", keep_restarts=False)
            return
        crashed = {}
        for c in containers:
            name = str(c.get("name"))
            if name in crashing:
                prev = old.get(name) or {}
                if "terminated" in (prev.get("state") or {}):
                    crashed[name] = prev
                else:
                    crashed[name] = {
                        "name": name,
                        "image": c.get("image"),
                        "imageID": "",
                        "ready": False,
                        "started": False,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": now()}},
                    }
        set_running(pod, node, st, crashed)

    def _fail(self, pod: Obj, st: dict[str, Any]) -> None:
        finish(pod, st, "Failed", "PodFailed", 1, "Error", keep_restarts=True)

    def _complete(self, pod: Obj, st: dict[str, Any]) -> None:
        finish(pod, st, "Succeeded", "PodCompleted", 0, "Completed", keep_restarts=False)
