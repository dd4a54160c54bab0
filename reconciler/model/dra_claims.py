"""Claim-side DRA accessors: the spec of claims and templates, their requests, and allocation status.

Part of :mod:`reconciler.model.dra` (which re-exports every name here); same defensive reading rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.model.dra_readers import (
    _cel_expressions,
    _dict,
    _dicts,
    _dra_kind,
    _get,
    _is_classic,
    _list,
    _str,
    _uniq,
)

# --- claims and templates ----------------------------------------------------------------------------


def claim_spec_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The ResourceClaimSpec of a ResourceClaim (spec) or ResourceClaimTemplate (spec.spec)."""
    kind = _dra_kind(body)
    if kind == "ResourceClaim":
        spec = _get(body, "spec")
    elif kind == "ResourceClaimTemplate":
        spec = _get(body, "spec", "spec")
    else:
        return None
    return spec if isinstance(spec, dict) else None


@dataclass(frozen=True)
class RequestAlternative:
    """One way to satisfy a request: the request itself, or one `firstAvailable` subrequest.

    count is 0 for allocation mode All, where the number of devices is whatever matches.
    """

    name: str
    device_class: str
    selectors: tuple[str, ...]
    allocation_mode: str
    count: int
    admin_access: bool


@dataclass(frozen=True)
class DeviceRequest:
    """A request of a claim; more than one alternative only for a prioritized list (firstAvailable)."""

    name: str
    alternatives: tuple[RequestAlternative, ...]


def _count(value: Any) -> int:
    # bool is an int subclass; `count: true` is a typo, not 1.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return 1


def _alternative(name: str, fields: dict[str, Any]) -> RequestAlternative:
    mode = _str(fields.get("allocationMode")) or "ExactCount"
    count = 0 if mode == "All" else _count(fields.get("count", 1))
    return RequestAlternative(
        name=name,
        device_class=_str(fields.get("deviceClassName")) or "",
        selectors=_cel_expressions(fields.get("selectors")),
        allocation_mode=mode,
        count=count,
        admin_access=fields.get("adminAccess") is True,
    )


def _request_alternatives(request: dict[str, Any]) -> tuple[RequestAlternative, ...]:
    name = _str(request.get("name")) or ""
    if "firstAvailable" in request:
        return tuple(
            _alternative(_str(sub.get("name")) or "", sub) for sub in _dicts(request.get("firstAvailable"))
        )
    if "exactly" in request:
        return (_alternative(name, _dict(request.get("exactly"))),)
    # v1alpha3/v1beta1: the request fields sit on the request itself.
    return (_alternative(name, request),)


def device_requests(body: dict[str, Any]) -> list[DeviceRequest]:
    """Requests of a claim/template normalised across versions.

    Classic (v1alpha1/v1alpha2) claims have no structured requests; they are read as one request named
    after the class, for one device, so callers can treat every version alike.
    """
    spec = claim_spec_of(body)
    if spec is None:
        return []
    classic_class = _str(spec.get("resourceClassName"))
    if classic_class is not None:
        alt = RequestAlternative(classic_class, classic_class, (), "ExactCount", 1, False)
        return [DeviceRequest(classic_class, (alt,))]
    return [
        DeviceRequest(_str(req.get("name")) or "", _request_alternatives(req))
        for req in _dicts(_get(spec, "devices", "requests"))
    ]


def requested_classes(body: dict[str, Any]) -> list[str]:
    """Every class a claim/template may use (all alternatives), in order, without duplicates."""
    classes = [alt.device_class for req in device_requests(body) for alt in req.alternatives]
    return _uniq([c for c in classes if c])


def requests_admin_access(body: dict[str, Any]) -> bool:
    return any(alt.admin_access for req in device_requests(body) for alt in req.alternatives)


def _node_from_selector(selector: Any) -> str | None:
    """The node a NodeSelector pins to, when it is the one-node form allocation writes; else None."""
    nodes: list[str] = []
    for term in _dicts(_dict(selector).get("nodeSelectorTerms")):
        for field, key in (("matchFields", "metadata.name"), ("matchExpressions", "kubernetes.io/hostname")):
            for req in _dicts(term.get(field)):
                values = _list(req.get("values"))
                if req.get("key") == key and req.get("operator") == "In" and len(values) == 1:
                    nodes.extend(v for v in values if isinstance(v, str))
    unique = _uniq(nodes)
    return unique[0] if len(unique) == 1 else None


def claim_allocation(body: dict[str, Any]) -> dict[str, Any]:
    """Allocation summary of a claim's status: allocated, devices, reserved_for (pod names), node."""
    status = _dict(_get(body, "status"))
    allocation = _dict(status.get("allocation"))
    devices = [
        {
            "request": _str(r.get("request")),
            "driver": _str(r.get("driver")),
            "pool": _str(r.get("pool")),
            "device": _str(r.get("device")),
        }
        for r in _dicts(_get(allocation, "devices", "results"))
    ]
    if _is_classic(body):
        # Classic allocations carry opaque resourceHandle(s), no device list; presence is the signal.
        allocated = bool(allocation)
        node = _node_from_selector(allocation.get("availableOnNodes"))
    else:
        allocated = bool(devices) or bool(_list(_get(allocation, "devices", "config")))
        node = _node_from_selector(allocation.get("nodeSelector"))
    reserved = [n for n in (_str(r.get("name")) for r in _dicts(status.get("reservedFor"))) if n]
    return {"allocated": allocated, "devices": devices, "reserved_for": reserved, "node": node}
