"""Compact YAML scenarios (nodes, slices, classes, claims, templates, pods) into real objects.

Shared by the table-driven capacity suite and the differential test against the simulated scheduler.
Shorthand: a device is a name or {name, attrs, caps, taints, consumes, multi}; a request without
`exactly`/`firstAvailable` uses {name, class, count, mode, selector, tolerations, admin, capacity}.
"""

from __future__ import annotations

from typing import Any

DEFAULT_DRIVER = "gpu.example.com"
DEFAULT_CLASSES = {"gpu": "gpu.example.com", "nic": "nic.example.com"}


def _typed(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def device(d: Any) -> dict[str, Any]:
    if isinstance(d, str):
        return {"name": d}
    out: dict[str, Any] = {"name": d["name"]}
    if "attrs" in d:
        out["attributes"] = {k: _typed(v) for k, v in d["attrs"].items()}
    if "caps" in d:
        out["capacity"] = {k: v if isinstance(v, dict) else {"value": str(v)} for k, v in d["caps"].items()}
    if "taints" in d:
        out["taints"] = d["taints"]
    if "consumes" in d:
        out["consumesCounters"] = [
            {"counterSet": cs, "counters": {k: {"value": str(v)} for k, v in counters.items()}}
            for cs, counters in d["consumes"].items()
        ]
    if d.get("multi"):
        out["allowMultipleAllocations"] = True
    for key in ("nodeName", "allNodes", "nodeSelector"):
        if key in d:
            out[key] = d[key]
    return out


def resource_slice(s: dict[str, Any], index: int) -> dict[str, Any]:
    driver = s.get("driver", DEFAULT_DRIVER)
    pool = s.get("pool") or s.get("node") or f"pool-{index}"
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {
            "name": pool,
            "generation": s.get("generation", 1),
            "resourceSliceCount": s.get("sliceCount", 1),
        },
        "devices": [device(d) for d in s.get("devices", [])],
    }
    if s.get("node"):
        spec["nodeName"] = s["node"]
    elif s.get("allNodes"):
        spec["allNodes"] = True
    elif s.get("nodeSelector"):
        spec["nodeSelector"] = s["nodeSelector"]
    elif s.get("perDevice"):
        spec["perDeviceNodeSelection"] = True
    if "counters" in s:
        spec["sharedCounters"] = [
            {"name": name, "counters": {k: {"value": str(v)} for k, v in counters.items()}}
            for name, counters in s["counters"].items()
        ]
    name = s.get("name") or f"{pool}-{driver}-{index}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def device_class(name: str, c: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if isinstance(c, str):
        spec["selectors"] = [{"cel": {"expression": f'device.driver == "{c}"'}}]
    else:
        exprs = [f'device.driver == "{c.get("driver", DEFAULT_DRIVER)}"']
        if c.get("selector"):
            exprs.append(c["selector"])
        spec["selectors"] = [{"cel": {"expression": e}} for e in exprs]
        if c.get("extendedResourceName"):
            spec["extendedResourceName"] = c["extendedResourceName"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def _body(r: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": r.get("class", "gpu")}
    if "count" in r:
        body["count"] = r["count"]
    if "mode" in r:
        body["allocationMode"] = r["mode"]
    if "selector" in r:
        body["selectors"] = [{"cel": {"expression": r["selector"]}}]
    if "tolerations" in r:
        body["tolerations"] = r["tolerations"]
    if r.get("admin"):
        body["adminAccess"] = True
    if "capacity" in r:
        body["capacity"] = {"requests": {k: str(v) for k, v in r["capacity"].items()}}
    return body


def request(r: dict[str, Any]) -> dict[str, Any]:
    if "exactly" in r or "firstAvailable" in r or "deviceClassName" in r:
        return r
    if "first" in r:
        return {"name": r["name"], "firstAvailable": [{"name": s["name"], **_body(s)} for s in r["first"]]}
    return {"name": r["name"], "exactly": _body(r)}


def claim_spec(c: dict[str, Any]) -> dict[str, Any]:
    requests = c.get("requests") or [{"name": "gpu"}]
    devices: dict[str, Any] = {"requests": [request(r) for r in requests]}
    if c.get("constraints"):
        devices["constraints"] = c["constraints"]
    return {"devices": devices}


def claim(c: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": c["name"], "namespace": namespace},
        "spec": claim_spec(c),
    }
    return body


def allocation_status(c: dict[str, Any]) -> dict[str, Any] | None:
    """A pre-existing allocation: {node, devices: [name or {device, pool, driver, request, admin}]}."""
    alloc = c.get("allocated")
    if not alloc:
        return None
    results = []
    for d in alloc.get("devices", []):
        d = {"device": d} if isinstance(d, str) else d
        r = {
            "request": d.get("request", "gpu"),
            "driver": d.get("driver", DEFAULT_DRIVER),
            "pool": d.get("pool", alloc.get("node")),
            "device": d["device"],
        }
        if d.get("admin"):
            r["adminAccess"] = True
        if d.get("consumed"):
            r["consumedCapacity"] = d["consumed"]
            r["shareID"] = "00000000-0000-0000-0000-000000000001"
        results.append(r)
    status: dict[str, Any] = {"allocation": {"devices": {"results": results}}}
    if alloc.get("node"):
        status["allocation"]["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [alloc["node"]]}]}
            ]
        }
    reserved = c.get("reserved", 0)
    if reserved:
        status["reservedFor"] = [
            {"resource": "pods", "name": f"other-{i}", "uid": f"u{i}"} for i in range(reserved)
        ]
    return status


def template(t: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": t["name"], "namespace": namespace},
        "spec": {"spec": claim_spec(t)},
    }


def node(n: Any) -> dict[str, Any]:
    n = {"name": n} if isinstance(n, str) else n
    spec: dict[str, Any] = {}
    if n.get("taints"):
        spec["taints"] = n["taints"]
    if n.get("unschedulable"):
        spec["unschedulable"] = True
    labels = {"kubernetes.io/hostname": n["name"], **n.get("labels", {})}
    ready = "False" if n.get("notReady") else "True"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": n["name"], "labels": labels},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def pod_claims(p: dict[str, Any]) -> list[dict[str, Any]]:
    """pod.spec.resourceClaims from {podClaimName: "template:NAME" | "claim:NAME"}."""
    out = []
    for name, ref in (p.get("claims") or {}).items():
        kind, _, target = str(ref).partition(":")
        key = "resourceClaimTemplateName" if kind == "template" else "resourceClaimName"
        out.append({"name": name, key: target})
    return out


def pod_spec(p: dict[str, Any]) -> dict[str, Any]:
    claims = pod_claims(p)
    container: dict[str, Any] = {"name": "main", "image": "busybox:1"}
    if claims:
        container["resources"] = {"claims": [{"name": c["name"]} for c in claims]}
    if p.get("limits"):
        container.setdefault("resources", {})["limits"] = p["limits"]
    if p.get("requests"):
        container.setdefault("resources", {})["requests"] = p["requests"]
    spec: dict[str, Any] = {"containers": [container]}
    if claims:
        spec["resourceClaims"] = claims
    for key in ("nodeSelector", "tolerations", "affinity", "priority", "priorityClassName"):
        if key in p:
            spec[key] = p[key]
    return spec


def taint_rule(r: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": r.get("name", f"rule-{index}")},
        "spec": {"deviceSelector": r.get("selector", {}), "taint": r["taint"]},
    }


def classes_of(case: dict[str, Any]) -> list[dict[str, Any]]:
    wanted = {**DEFAULT_CLASSES, **(case.get("classes") or {})}
    return [device_class(name, c) for name, c in wanted.items()]
