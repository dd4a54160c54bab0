"""`input.capacity.selector_errors`: selectors of the change's pods that fail at run time (pure).

Every class and request selector the change's pods use is evaluated, the way kube-scheduler's allocator
does (class selectors, then the request's), on every published device. A selector that fails on a
device (reading a key it does not have: "no such key: productName") stops kube-scheduler with
SchedulerError for every pod whose search reaches that device, and the pod stays Pending while the
devices are free. When no device matches without failing (``every``), every pod using it is stuck once
tried: the `capacity` rule denies. When some devices match, whether a pod is stuck depends on the order
the devices are reached: the rule warns, naming the failing devices and the pods the placement predicts
to fail. Each entry names the selector, its expression, the missing key and the guard that fixes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.dra.allocator import Inventory
from reconciler.dra.devices import claim_spec, normalise_requests, selector_exprs
from reconciler.dra.placement import PodInfo, PodResult
from reconciler.dra.selectors import SelectorError
from reconciler.model.objects import Manifest
from reconciler.model.readers import as_dict, as_list

__all__ = ["selector_errors"]

_SHOWN = 5


def _alternatives(spec: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(request, class, the request's own CEL selectors) of every request and alternative."""
    out = []
    for req in normalise_requests(spec):
        name = str(req.get("name", ""))
        if "exactly" in req:
            bodies = [("", as_dict(req.get("exactly")))]
        else:
            bodies = [
                (str(as_dict(s).get("name", "")), as_dict(s)) for s in as_list(req.get("firstAvailable"))
            ]
        for sub, body in bodies:
            exprs = selector_exprs(body.get("selectors"))
            if exprs is not None:
                out.append((f"{name}/{sub}" if sub else name, str(body.get("deviceClassName") or ""), exprs))
    return out


def _where(manifest: Manifest) -> dict[str, Any]:
    return {"ref": str(manifest.ref), "path": manifest.path, "line": manifest.line}


def _listed(labels: Sequence[str]) -> str:
    return ", ".join(labels[:_SHOWN]) + (f" and {len(labels) - _SHOWN} more" if len(labels) > _SHOWN else "")


def selector_errors(
    inv: Inventory,
    pods: Sequence[tuple[PodInfo, PodResult, Manifest]],
    class_manifests: Mapping[str, Manifest],
) -> list[dict[str, Any]]:
    """One entry per failing selector the change's pods use (the object of the change, its pods)."""
    found: dict[tuple[str | None, int, str, str], dict[str, Any]] = {}
    for pod, result, manifest in pods:
        for pc in pod.claims:
            if pc.claim is None:
                continue
            for request, cls, exprs in _alternatives(claim_spec(pc.claim)):
                if cls not in inv.classes:
                    continue
                m = inv.matching_detail(cls, exprs, inv.devices)
                by_error: dict[SelectorError, list[str]] = {}
                for device_key, err in m.errors.items():  # in device order
                    by_error.setdefault(err, []).append(inv.by_key[device_key].label)
                for error, devices in by_error.items():
                    owner = error.owner(f"{pc.key[0]}/{pc.key[1]}")
                    scope = cls if error.class_name is not None else f"{manifest.ref}/{pc.name}/{request}"
                    key = (error.class_name, error.index, error.expression, scope)
                    entry = found.get(key)
                    if entry is None:
                        where = class_manifests.get(cls) if error.class_name is not None else None
                        entry = found[key] = {
                            **_where(where or manifest),
                            "owner": owner
                            if error.class_name is not None
                            else f"claim {pc.name} request {request}",
                            "class": error.class_name,
                            "selector": error.index,
                            "expression": error.expression,
                            "error": error.error,
                            "key": error.key,
                            "guard": error.guard,
                            "guarded": error.guarded,
                            "devices": devices,
                            "matching": len(m.matched),
                            "every": not m.matched,
                            "pods": [],
                            "stuck": [],
                        }
                    if pod.label not in entry["pods"]:
                        entry["pods"].append(pod.label)
                    if result.outcome == "error" and pod.label not in entry["stuck"]:
                        entry["stuck"].append(pod.label)
    out = []
    for entry in found.values():
        entry["message"] = _message(entry)
        out.append(entry)
    return out


def _message(e: Mapping[str, Any]) -> str:
    """What the `capacity` rule says (after the object's ref)."""
    head = f"{e['owner']} selector #{e['selector']} ({e['expression']}) fails at run time ({e['error']})"
    devices = f"{len(e['devices'])} device(s) ({_listed(e['devices'])})"
    if e["every"]:
        text = (
            f"{head} on {devices} and matches none: pods {_listed(e['pods'])} would stay Pending with "
            "kube-scheduler's SchedulerError while every device is free"
        )
    else:
        text = (
            f"{head} on {devices}, matching {e['matching']} other(s): a pod whose search reaches one of them "
            "stays Pending with kube-scheduler's SchedulerError"
        )
        if e["stuck"]:
            text += f" (predicted for {_listed(e['stuck'])})"
    fix = f"guard it: {e['guarded']}" if e["guarded"] else 'guard it with has(...) or "key" in map'
    return f"{text}; {fix}"
