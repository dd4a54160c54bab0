"""Claim-side DRA accessors: the spec of claims and templates, their requests, and allocation status.

Part of :mod:`reconciler.model.dra` (which re-exports every name here); same defensive reading rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.model.dra_readers import cel_expressions, dra_kind, is_classic
from reconciler.model.readers import as_dict, as_dicts, as_list, as_str, dig, unique

# --- claims and templates ----------------------------------------------------------------------------


def claim_spec_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The ResourceClaimSpec of a ResourceClaim (spec) or ResourceClaimTemplate (spec.spec)."""
    kind = dra_kind(body)
    if kind == "ResourceClaim":
        spec = dig(body, "spec")
    elif kind == "ResourceClaimTemplate":
        spec = dig(body, "spec", "spec")
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
    mode = as_str(fields.get("allocationMode")) or "ExactCount"
    count = 0 if mode == "All" else _count(fields.get("count", 1))
    return RequestAlternative(
        name=name,
        device_class=as_str(fields.get("deviceClassName")) or "",
        selectors=cel_expressions(fields.get("selectors")),
        count=count,
        admin_access=fields.get("adminAccess") is True,
    )


def _request_alternatives(request: dict[str, Any]) -> tuple[RequestAlternative, ...]:
    name = as_str(request.get("name")) or ""
    if "firstAvailable" in request:
        return tuple(
            _alternative(as_str(sub.get("name")) or "", sub)
            for sub in as_dicts(request.get("firstAvailable"))
        )
    if "exactly" in request:
        return (_alternative(name, as_dict(request.get("exactly"))),)
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
    classic_class = as_str(spec.get("resourceClassName"))
    if classic_class is not None:
        alt = RequestAlternative(classic_class, classic_class, (), 1, False)
        return [DeviceRequest(classic_class, (alt,))]
    return [
        DeviceRequest(as_str(req.get("name")) or "", _request_alternatives(req))
        for req in as_dicts(dig(spec, "devices", "requests"))
    ]


def requested_classes(body: dict[str, Any]) -> list[str]:
    """Every class a claim/template may use (all alternatives), in order, without duplicates."""
    classes = [alt.device_class for req in device_requests(body) for alt in req.alternatives]
    return unique([c for c in classes if c])


def requests_admin_access(body: dict[str, Any]) -> bool:
    return any(alt.admin_access for req in device_requests(body) for alt in req.alternatives)


def _node_from_selector(selector: Any) -> str | None:
    """The node a NodeSelector pins to, when it is the one-node form allocation writes; else None."""
    nodes: list[str] = []
    for term in as_dicts(as_dict(selector).get("nodeSelectorTerms")):
        for field, key in (("matchFields", "metadata.name"), ("matchExpressions", "kubernetes.io/hostname")):
            for req in as_dicts(term.get(field)):
                values = as_list(req.get("values"))
                if req.get("key") == key and req.get("operator") == "In" and len(values) == 1:
                    nodes.extend(v for v in values if isinstance(v, str))
    distinct = unique(nodes)
    return distinct[0] if len(distinct) == 1 else None


def claim_allocation(body: dict[str, Any]) -> dict[str, Any]:
    """Allocation summary of a claim's status: allocated, devices, reserved_for (pod names), node."""
    status = as_dict(dig(body, "status"))
    allocation = as_dict(status.get("allocation"))
    devices = [
        {
            "request": as_str(r.get("request")),
            "driver": as_str(r.get("driver")),
            "pool": as_str(r.get("pool")),
            "device": as_str(r.get("device")),
        }
        for r in as_dicts(dig(allocation, "devices", "results"))
    ]
    if is_classic(body):
        # Classic allocations carry opaque resourceHandle(s), no device list; presence is the signal.
        allocated = bool(allocation)
        node = _node_from_selector(allocation.get("availableOnNodes"))
    else:
        allocated = bool(devices) or bool(as_list(dig(allocation, "devices", "config")))
        node = _node_from_selector(allocation.get("nodeSelector"))
    reserved = [n for n in (as_str(r.get("name")) for r in as_dicts(status.get("reservedFor"))) if n]
    return {"allocated": allocated, "devices": devices, "reserved_for": reserved, "node": node}
