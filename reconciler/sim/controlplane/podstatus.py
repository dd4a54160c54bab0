"""The pod status a kubelet writes (pure): running, crash-looping, stopped, finished.

Edits of a pod's ``status`` dict in the shape a real kubelet reports it (phase, IPs, conditions,
``containerStatuses`` with their states), for the simulated kubelet (:mod:`reconciler.sim.controlplane.kubelet`),
which decides when each applies.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.sim.controlplane.objects import md, now, set_condition
from reconciler.sim.storebase import Obj

__all__ = [
    "CrashLoop",
    "crash_loop_status",
    "finish",
    "node_ip",
    "pod_ip",
    "set_not_ready",
    "set_running",
    "stop_containers",
]


@dataclass
class CrashLoop:
    """One crash-looping container: restarts so far, and when the current back-off ends."""

    restarts: int
    backoff: float  # seconds (unscaled), as the kubelet reports it
    next_restart: float  # time.monotonic()
    finished_at: str


def crash_loop_status(pod: Obj, container: Mapping[str, Any], loop: CrashLoop) -> dict[str, Any]:
    """The containerStatus of a crash-looping container: waiting in CrashLoopBackOff, last exit 1."""
    uid, pname, ns = str(md(pod).get("uid")), md(pod)["name"], md(pod)["namespace"]
    cname = str(container.get("name"))
    container_id = f"containerd://{_sha(f'{uid}/{cname}/{loop.restarts}')}"
    return {
        "name": cname,
        "image": container.get("image"),
        "imageID": f"{container.get('image')}@sha256:{_sha(str(container.get('image')))}",
        "containerID": container_id,
        "ready": False,
        "started": False,
        "restartCount": loop.restarts,
        "state": {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {loop.backoff:.0f}s restarting failed container={cname} "
                f"pod={pname}_{ns}({uid})",
            }
        },
        "lastState": {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "startedAt": loop.finished_at,
                "finishedAt": loop.finished_at,
                "containerID": container_id,
            }
        },
    }


def set_running(pod: Obj, node: Obj, st: dict[str, Any], crashed: dict[str, dict[str, Any]]) -> None:
    """The pod Running on ``node``: IPs, conditions, a running status per container (``crashed``: the
    statuses of crash-looping containers, which keep the pod not Ready)."""
    ip = pod_ip(str(md(pod).get("uid")))
    host_ip = node_ip(node)
    st["phase"] = "Running"
    st.setdefault("startTime", now())
    st["hostIP"] = host_ip
    st["hostIPs"] = [{"ip": host_ip}]
    st["podIP"] = ip
    st["podIPs"] = [{"ip": ip}]
    st.setdefault("qosClass", "BestEffort")
    for ctype in ("PodReadyToStartContainers", "Initialized", "PodScheduled"):
        set_condition(st, ctype, "True")
    if crashed:
        unready = f"containers with unready status: [{' '.join(crashed)}]"
        for ctype in ("Ready", "ContainersReady"):
            set_condition(st, ctype, "False", "ContainersNotReady", unready)
    else:
        for ctype in ("Ready", "ContainersReady"):
            set_condition(st, ctype, "True")
    old = {c.get("name"): c for c in st.get("containerStatuses") or []}
    statuses = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") in crashed:
            statuses.append(crashed[str(c.get("name"))])
            continue
        prev = old.get(c.get("name")) or {}
        started = ((prev.get("state") or {}).get("running") or {}).get("startedAt") or now()
        statuses.append(
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": f"{c.get('image')}@sha256:{_sha(str(c.get('image')))}",
                "containerID": f"containerd://{_sha(str(md(pod).get('uid')) + str(c.get('name')))}",
                "ready": True,
                "started": True,
                "restartCount": int(prev.get("restartCount") or 0),
                "state": {"running": {"startedAt": started}},
                **({"lastState": prev["lastState"]} if prev.get("lastState") else {"lastState": {}}),
            }
        )
    st["containerStatuses"] = statuses


def stop_containers(pod: Obj, st: dict[str, Any]) -> None:
    """A deleted pod's containers stopped: not Ready, each terminated (Completed)."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    unready = f"containers with unready status: [{' '.join(names)}]"
    set_condition(st, "Ready", "False", "ContainersNotReady", unready)
    set_condition(st, "ContainersReady", "False", "ContainersNotReady", unready)
    for status in st.get("containerStatuses") or []:
        state = status.get("state") or {}
        if "terminated" in state:
            continue
        started = (state.get("running") or {}).get("startedAt")
        status["ready"] = False
        status["started"] = False
        status["state"] = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                **({"startedAt": started} if started else {}),
                "finishedAt": now(),
            }
        }


def set_not_ready(st: dict[str, Any], reason: str) -> None:
    """Ready and ContainersReady False for ``reason``."""
    set_condition(st, "Ready", "False", reason)
    set_condition(st, "ContainersReady", "False", reason)


def finish(
    pod: Obj,
    st: dict[str, Any],
    phase: str,
    condition_reason: str,
    exit_code: int,
    terminated_reason: str,
    *,
    keep_restarts: bool,
) -> None:
    """Every container terminated with `exit_code`; the pod in its final phase, not Ready."""
    old = {c.get("name"): c for c in st.get("containerStatuses") or []}
    st["phase"] = phase
    set_not_ready(st, condition_reason)
    st["containerStatuses"] = [
        {
            "name": c.get("name"),
            "image": c.get("image"),
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": int((old.get(c.get("name")) or {}).get("restartCount") or 0)
            if keep_restarts
            else 0,
            "state": {
                "terminated": {"exitCode": exit_code, "reason": terminated_reason, "finishedAt": now()}
            },
        }
        for c in (pod.get("spec") or {}).get("containers") or []
    ]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def pod_ip(uid: str) -> str:
    h = hashlib.sha256(uid.encode()).digest()
    return f"10.244.{h[0]}.{max(2, h[1])}"


def node_ip(node: Obj) -> str:
    for a in (node.get("status") or {}).get("addresses") or []:
        if a.get("type") == "InternalIP":
            return str(a.get("address"))
    return "10.0.0.1"
