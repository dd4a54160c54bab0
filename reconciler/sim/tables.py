"""Server-side printing (``meta.k8s.io/v1`` Table) for ``kubectl get``, with the columns a real server uses.

kubectl asks for a Table and otherwise shows only NAME and AGE; the DRA demo needs STATE of claims,
STATUS of pods and so on. Kinds without their own columns get NAME and AGE, as custom resources do.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Column = tuple[str, str, Callable[[Obj], Any]]  # (name, type, cell)


def human_age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    try:
        secs = int(time.time() - calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return "<unknown>"
    secs = max(secs, 0)
    if secs < 120:
        return f"{secs}s"
    mins = secs // 60
    if mins < 10:
        return f"{mins}m{secs % 60}s" if secs % 60 else f"{mins}m"
    if mins < 180:
        return f"{mins}m"
    hours = mins // 60
    if hours < 8:
        return f"{hours}h{mins % 60}m" if mins % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _md(o: Obj) -> Obj:
    return o.get("metadata") or {}


def _status(o: Obj) -> Obj:
    return o.get("status") or {}


def _name(o: Obj) -> str:
    return str(_md(o).get("name", ""))


def _age(o: Obj) -> str:
    return human_age(_md(o).get("creationTimestamp"))


def _claim_state(o: Obj) -> str:
    states = []
    deleted = bool(_md(o).get("deletionTimestamp"))
    if deleted:
        states.append("deleted")
    st = _status(o)
    if not st.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if st.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _pod_ready(o: Obj) -> str:
    statuses = _status(o).get("containerStatuses") or []
    total = len((o.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for c in statuses if c.get('ready'))}/{total}"


def _pod_status(o: Obj) -> str:
    if _md(o).get("deletionTimestamp"):
        return "Terminating"
    st = _status(o)
    for c in st.get("containerStatuses") or []:
        waiting = (c.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"])
    return str(st.get("reason") or st.get("phase") or "Pending")


def _restarts(o: Obj) -> int:
    return sum(int(c.get("restartCount") or 0) for c in _status(o).get("containerStatuses") or [])


def _node_status(o: Obj) -> str:
    ready = next((c for c in _status(o).get("conditions") or [] if c.get("type") == "Ready"), None)
    out = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (o.get("spec") or {}).get("unschedulable"):
        out += ",SchedulingDisabled"
    return out


def _node_roles(o: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in (_md(o).get("labels") or {}) if k.startswith(prefix))
    return ",".join(roles) or "<none>"


NAME: Column = ("Name", "string", _name)
AGE: Column = ("Age", "string", _age)
COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("resource.k8s.io", "resourceclaims"): [NAME, ("State", "string", _claim_state), AGE],
    ("resource.k8s.io", "resourceslices"): [
        NAME,
        ("Node", "string", lambda o: (o.get("spec") or {}).get("nodeName", "")),
        ("Driver", "string", lambda o: (o.get("spec") or {}).get("driver", "")),
        ("Pool", "string", lambda o: ((o.get("spec") or {}).get("pool") or {}).get("name", "")),
        AGE,
    ],
    ("", "pods"): [
        NAME,
        ("Ready", "string", _pod_ready),
        ("Status", "string", _pod_status),
        ("Restarts", "string", lambda o: str(_restarts(o))),
        AGE,
    ],
    ("", "nodes"): [
        NAME,
        ("Status", "string", _node_status),
        ("Roles", "string", _node_roles),
        AGE,
        ("Version", "string", lambda o: (_status(o).get("nodeInfo") or {}).get("kubeletVersion", "")),
    ],
    ("", "namespaces"): [NAME, ("Status", "string", lambda o: _status(o).get("phase", "Active")), AGE],
    ("apps", "deployments"): [
        NAME,
        (
            "Ready",
            "string",
            lambda o: f"{_status(o).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 1)}",
        ),
        ("Up-to-date", "integer", lambda o: _status(o).get("updatedReplicas", 0)),
        ("Available", "integer", lambda o: _status(o).get("availableReplicas", 0)),
        AGE,
    ],
    ("apps", "daemonsets"): [
        NAME,
        ("Desired", "integer", lambda o: _status(o).get("desiredNumberScheduled", 0)),
        ("Current", "integer", lambda o: _status(o).get("currentNumberScheduled", 0)),
        ("Ready", "integer", lambda o: _status(o).get("numberReady", 0)),
        ("Up-to-date", "integer", lambda o: _status(o).get("updatedNumberScheduled", 0)),
        ("Available", "integer", lambda o: _status(o).get("numberAvailable", 0)),
        AGE,
    ],
}


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def table(group: str, plural: str, objects: list[Obj], resource_version: str) -> Obj:
    columns = COLUMNS.get((group, plural), [NAME, AGE])
    rows = []
    for o in objects:
        md = {k: v for k, v in _md(o).items() if k != "managedFields"}
        rows.append(
            {
                "cells": [cell(o) for _, _, cell in columns],
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": md},
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": name,
                "type": typ,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": 0,
            }
            for name, typ, _ in columns
        ],
        "rows": rows,
    }
