"""Conversion between the stored shape and the versions the server serves.

resource.k8s.io is stored in the v1 shape. v1beta2 has the same shape; v1beta1 keeps the flat request
(``requests[].deviceClassName``) and the nested device (``devices[].basic``). Core Events are also served
as events.k8s.io/v1 Events, whose fields have other names.
"""

from __future__ import annotations

from typing import Any

from reconciler.model.dra_readers import FLAT_REQUEST_FIELDS
from reconciler.sim.resources import Served

Obj = dict[str, Any]

# event field renames: events.k8s.io/v1 name -> core/v1 name
_EVENT_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}


def to_storage(served: Served, obj: Obj) -> Obj:
    """A request body (served version) in the stored shape; returns a new top-level dict."""
    out = dict(obj)
    if served.converted:
        if served.group == "resource.k8s.io" and served.version == "v1beta1":
            _claim_like(out, served.plural, _request_v1beta1_to_v1, _device_v1beta1_to_v1)
        elif served.group == "events.k8s.io":
            out = _event_to_core(out)
    out["apiVersion"] = served.rtype.api_version
    return out


def from_storage(served: Served, obj: Obj) -> Obj:
    """A stored object as the served version shows it; returns a new top-level dict."""
    out = dict(obj)
    if served.converted:
        if served.group == "resource.k8s.io" and served.version == "v1beta1":
            _claim_like(out, served.plural, _request_v1_to_v1beta1, _device_v1_to_v1beta1)
        elif served.group == "events.k8s.io":
            out = _event_from_core(out)
    if "apiVersion" in out:
        out["apiVersion"] = served.api_version
    return out


def field_selector_to_storage(served: Served, selector: str | None) -> str | None:
    if not selector or served.group != "events.k8s.io":
        return selector
    for new, old in _EVENT_RENAMES.items():
        selector = selector.replace(new + ".", old + ".").replace(new + "=", old + "=")
    return selector


def _claim_like(obj: Obj, plural: str, conv_request: Any, conv_device: Any) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if plural == "resourceclaims":
        obj["spec"] = _claim_spec(spec, conv_request)
    elif plural == "resourceclaimtemplates" and isinstance(spec.get("spec"), dict):
        obj["spec"] = dict(spec, spec=_claim_spec(spec["spec"], conv_request))
    elif plural == "resourceslices" and isinstance(spec.get("devices"), list):
        obj["spec"] = dict(
            spec, devices=[conv_device(d) if isinstance(d, dict) else d for d in spec["devices"]]
        )


def _claim_spec(spec: Obj, conv_request: Any) -> Obj:
    devices = spec.get("devices")
    if not isinstance(devices, dict) or not isinstance(devices.get("requests"), list):
        return spec
    requests = [conv_request(r) if isinstance(r, dict) else r for r in devices["requests"]]
    return dict(spec, devices=dict(devices, requests=requests))


def _request_v1beta1_to_v1(req: Obj) -> Obj:
    if req.get("firstAvailable") or "exactly" in req:
        return {k: v for k, v in req.items() if k not in FLAT_REQUEST_FIELDS}
    out = {k: v for k, v in req.items() if k not in FLAT_REQUEST_FIELDS}
    exactly = {k: req[k] for k in FLAT_REQUEST_FIELDS if k in req}
    out["exactly"] = exactly
    return out


def _request_v1_to_v1beta1(req: Obj) -> Obj:
    out = {k: v for k, v in req.items() if k != "exactly"}
    if isinstance(req.get("exactly"), dict):
        out.update(req["exactly"])
    return out


def _device_v1beta1_to_v1(dev: Obj) -> Obj:
    out = {k: v for k, v in dev.items() if k != "basic"}
    if isinstance(dev.get("basic"), dict):
        out.update(dev["basic"])
    return out


def _device_v1_to_v1beta1(dev: Obj) -> Obj:
    basic = {k: v for k, v in dev.items() if k != "name"}
    out: Obj = {"name": dev.get("name")} if "name" in dev else {}
    out["basic"] = basic
    return out


def _event_to_core(ev: Obj) -> Obj:
    out = {}
    for k, v in ev.items():
        if k == "series" and isinstance(v, dict):
            out["series"] = {"count": v.get("count"), "lastObservedTime": v.get("lastObservedTime")}
        else:
            out[_EVENT_RENAMES.get(k, k)] = v
    if "source" not in out and ev.get("reportingController"):
        out["source"] = {"component": ev["reportingController"]}
    return out


def _event_from_core(ev: Obj) -> Obj:
    back = {old: new for new, old in _EVENT_RENAMES.items()}
    out = {back.get(k, k): v for k, v in ev.items()}
    source = ev.get("source") or {}
    if not out.get("reportingController") and source.get("component"):
        out["reportingController"] = source["component"]
    if not out.get("reportingInstance") and source.get("host"):
        out["reportingInstance"] = source["host"]
    return out
