"""Device inventory in resource.k8s.io/v1 shape (pure): slices to devices, claim specs, node selectors.

v1beta1/v1beta2 shapes are normalised on the way in: flat requests are wrapped into ``exactly``, the
nested ``basic`` device body is flattened. Used by :mod:`reconciler.dra.allocator` and the placement model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra import cel

__all__ = [
    "Device",
    "DeviceKey",
    "allocated_devices",
    "claim_spec",
    "devices_from_slices",
    "node_selector_for",
    "normalise_requests",
]

DeviceKey = tuple[str, str, str]  # (driver, pool, device)


def _as_dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def claim_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ResourceClaimSpec of a ResourceClaim, a ResourceClaimTemplate, or a bare spec."""
    if obj.get("kind") == "ResourceClaimTemplate":
        return _as_dict(_as_dict(obj.get("spec")).get("spec"))
    if "devices" in obj and "spec" not in obj:
        return dict(obj)
    return _as_dict(obj.get("spec"))


_REQUEST_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations")


def normalise_requests(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Requests in v1 shape: each has ``exactly`` or ``firstAvailable`` (v1beta1 flat fields wrapped)."""
    out: list[dict[str, Any]] = []
    for req in _as_list(_as_dict(spec.get("devices")).get("requests")):
        if not isinstance(req, dict):
            continue
        if "exactly" in req or "firstAvailable" in req:
            out.append(req)
            continue
        exactly = {k: req[k] for k in _REQUEST_FIELDS if k in req}
        out.append({"name": req.get("name", ""), "exactly": exactly})
    return out


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    slice_name: str
    node_name: str | None  # node-local device
    node_selector: dict[str, Any] | None
    all_nodes: bool
    attributes: dict[str, Any]  # qualified "domain/name" -> raw slice attribute value
    taints: tuple[dict[str, Any], ...]
    context: dict[str, Any] | None = field(compare=False, hash=False)  # CEL device; None when unparsable

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified: str) -> Any:
        """The plain value of a fully-qualified attribute ("gpu.example.com/model"), or None."""
        raw = self.attributes.get(qualified)
        if isinstance(raw, Mapping):
            for k in ("string", "int", "bool", "version"):
                if k in raw:
                    return (k, raw[k])
            return None
        return None if raw is None else ("raw", raw)


def _match_labels_selector(selector: Mapping[str, Any] | None, node: str, labels: Mapping[str, str]) -> bool:
    """Evaluate a core NodeSelector against a node (name + labels). Unknown shapes match (permissive)."""
    if not selector:
        return True
    terms = _as_list(selector.get("nodeSelectorTerms"))
    if not terms:
        return False
    for term in terms:
        ok = True
        for expr in _as_list(_as_dict(term).get("matchExpressions")):
            ok = ok and _requirement(expr, labels.get(str(expr.get("key")), None))
        for expr in _as_list(_as_dict(term).get("matchFields")):
            value = node if expr.get("key") == "metadata.name" else None
            ok = ok and _requirement(expr, value)
        if ok:
            return True
    return False


def _requirement(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in _as_list(expr.get("values"))]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            a, b = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_selector_for(node: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }


def devices_from_slices(slices: Iterable[Mapping[str, Any]]) -> list[Device]:
    """All devices of the current generation of each pool (v1 and v1beta1 `basic` shapes)."""
    slices = [s for s in slices if isinstance(s, Mapping)]
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = _as_dict(s.get("spec"))
        pool = _as_dict(spec.get("pool"))
        k = (str(spec.get("driver", "")), str(pool.get("name", "")))
        newest[k] = max(newest.get(k, 0), int(pool.get("generation") or 0))
    out: list[Device] = []
    for s in slices:
        spec = _as_dict(s.get("spec"))
        pool = _as_dict(spec.get("pool"))
        driver, pool_name = str(spec.get("driver", "")), str(pool.get("name", ""))
        if int(pool.get("generation") or 0) < newest.get((driver, pool_name), 0):
            continue
        for d in _as_list(spec.get("devices")):
            if not isinstance(d, dict):
                continue
            body = _as_dict(d.get("basic")) if "basic" in d else d
            attrs_raw = _as_dict(body.get("attributes"))
            caps_raw = _as_dict(body.get("capacity"))
            try:
                ctx: dict[str, Any] | None = cel.device_context(
                    driver, attrs_raw, caps_raw, bool(body.get("allowMultipleAllocations"))
                )
            except (ValueError, TypeError):
                ctx = None
            qualified = {
                f"{dom}/{n}": v
                for dom, names in cel.qualify_attributes(driver, attrs_raw).items()
                for n, v in names.items()
            }
            per_device = bool(spec.get("perDeviceNodeSelection"))
            node_name = (body.get("nodeName") if per_device else spec.get("nodeName")) or None
            node_sel = body.get("nodeSelector") if per_device else spec.get("nodeSelector")
            all_nodes = bool(body.get("allNodes") if per_device else spec.get("allNodes"))
            out.append(
                Device(
                    driver=driver,
                    pool=pool_name,
                    name=str(d.get("name", "")),
                    slice_name=str(_as_dict(s.get("metadata")).get("name", "")),
                    node_name=str(node_name) if node_name else None,
                    node_selector=node_sel if isinstance(node_sel, dict) else None,
                    all_nodes=all_nodes,
                    attributes=qualified,
                    taints=tuple(t for t in _as_list(body.get("taints")) if isinstance(t, dict)),
                    context=ctx,
                )
            )
    return out


def allocated_devices(claims: Iterable[Mapping[str, Any]], exclude_uid: str | None = None) -> set[DeviceKey]:
    """Devices taken by allocated claims (admin-access results do not take a device)."""
    used: set[DeviceKey] = set()
    for c in claims:
        md = _as_dict(c.get("metadata"))
        if exclude_uid and md.get("uid") == exclude_uid:
            continue
        alloc = _as_dict(_as_dict(c.get("status")).get("allocation"))
        for r in _as_list(_as_dict(alloc.get("devices")).get("results")):
            if isinstance(r, dict) and not r.get("adminAccess"):
                used.add((str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", ""))))
    return used


def _selector_exprs(selectors: Any) -> list[str]:
    out = []
    for sel in _as_list(selectors):
        expr = _as_dict(_as_dict(sel).get("cel")).get("expression")
        if isinstance(expr, str):
            out.append(expr)
    return out


def _tolerates(tolerations: Any, taints: Sequence[Mapping[str, Any]]) -> bool:
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        tolerated = False
        for tol in _as_list(tolerations):
            tol = _as_dict(tol)
            if tol.get("effect") and tol.get("effect") != taint.get("effect"):
                continue
            same_key = tol.get("key") == taint.get("key")
            if tol.get("operator") == "Exists":
                tolerated = tolerated or not tol.get("key") or same_key
            else:
                tolerated = tolerated or (
                    same_key and str(tol.get("value", "")) == str(taint.get("value", ""))
                )
        if not tolerated:
            return False
    return True
