"""Small pure helpers on live objects that diagnosis turns into evidence lines and numbers.

Event lines and the events of one object, a pod's claim references, a claim's allocation in one line, and
the needed / free / total devices per requested class. `verify/` and `checklist/gather.py` use some of
them too (through the package's face).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.cluster.objects import meta, namespace_of, nsname
from reconciler.dra.allocator import Inventory, normalise_requests
from reconciler.dra.extended import extended_claim_name
from reconciler.dra.nodematch import untolerated_taint
from reconciler.dra.podinfo import EXTENDED_CLAIM
from reconciler.model import dra
from reconciler.model.readers import as_dict, as_list

# ---- small helpers -----------------------------------------------------------------------------------


def _event_count(event: Mapping[str, Any]) -> int:
    count = event.get("count")
    if isinstance(count, int) and count > 0:
        return count
    series = as_dict(event.get("series")).get("count")
    return series if isinstance(series, int) and series > 0 else 1


def event_line(event: Mapping[str, Any]) -> str:
    inv = as_dict(event.get("involvedObject") or event.get("regarding"))
    obj = (
        f"{inv.get('kind')}/{inv.get('namespace')}/{inv.get('name')}"
        if inv.get("namespace")
        else f"{inv.get('kind')}/{inv.get('name')}"
    )
    source = as_dict(event.get("source")).get("component") or event.get("reportingComponent") or ""
    src = f" from {source}" if source else ""
    message = str(event.get("message") or event.get("note") or "").strip()
    return f"event {event.get('reason')} (x{_event_count(event)}){src} on {obj}: {message}"


def events_for(
    events: Iterable[Mapping[str, Any]], kind: str, namespace: str, name: str, uid: str | None = None
) -> list[dict[str, Any]]:
    out = []
    for ev in events:
        inv = as_dict(ev.get("involvedObject") or ev.get("regarding"))
        if inv.get("kind") != kind or inv.get("name") != name:
            continue
        if namespace and (inv.get("namespace") or namespace_of(ev)) != namespace:
            continue
        if uid and inv.get("uid") and inv.get("uid") != uid:
            continue
        out.append(dict(ev))
    return sorted(out, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))


def pod_claim_refs(pod: Mapping[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """(pod claim name, ResourceClaim name or None when not generated yet, template name or None); last,
    the claim the scheduler made for the pod's extended resources backed by DRA, once it names it."""
    statuses = {
        as_dict(s).get("name"): as_dict(s).get("resourceClaimName")
        for s in as_list(as_dict(pod.get("status")).get("resourceClaimStatuses"))
    }
    out: list[tuple[str, str | None, str | None]] = []
    for pc in dra.pod_claims(as_dict(pod.get("spec"))):
        if pc.claim:
            out.append((pc.name, pc.claim, None))
        else:
            generated = statuses.get(pc.name)
            out.append((pc.name, str(generated) if generated else None, pc.template))
    extended = extended_claim_name(pod)
    if extended:
        out.append((EXTENDED_CLAIM, extended, None))
    return out


def claim_status_line(claim: Mapping[str, Any]) -> str:
    alloc = dra.claim_allocation(dict(claim))
    ref = nsname(claim)
    prefix = "deleted," if meta(claim).get("deletionTimestamp") else ""
    if not alloc["allocated"]:
        return f"claim {ref}: {prefix}pending (no status.allocation)"
    devices = (
        ", ".join(f"{d['driver']}/{d['pool']}/{d['device']}" for d in alloc["devices"]) or "(classic handle)"
    )
    reserved = alloc["reserved_for"]
    state = f"{prefix}allocated" + (",reserved" if reserved else "")
    where = f" on node {alloc['node']}" if alloc["node"] else ""
    by = f", reserved for {', '.join(reserved)}" if reserved else ""
    return f"claim {ref}: {state} {devices}{where}{by}"


def _first_request_bodies(spec: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(class, request body) of the first alternative of each request (v1 shape)."""
    out = []
    for req in normalise_requests(spec):
        if "exactly" in req:
            body = as_dict(req.get("exactly"))
        else:
            alts = [as_dict(a) for a in as_list(req.get("firstAvailable"))]
            body = alts[0] if alts else {}
        out.append((str(body.get("deviceClassName") or ""), body))
    return out


def _selectors(body: Mapping[str, Any]) -> list[str]:
    return [
        str(as_dict(as_dict(s).get("cel")).get("expression"))
        for s in as_list(body.get("selectors"))
        if isinstance(as_dict(as_dict(s).get("cel")).get("expression"), str)
    ]


def class_counts(inv: Inventory, spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per requested class: needed / free / total devices; "unknown" (with ``unknown_reason``) where a CEL
    selector cannot be evaluated by the model; ``failing``: devices a selector fails on at run time."""
    out: dict[str, dict[str, Any]] = {}
    for cls, body in _first_request_bodies(spec):
        if not cls or cls not in inv.classes:
            continue
        found = inv.matching_detail(cls, _selectors(body), inv.devices)
        matched, unknown = found.matched, found.unknown
        if (body.get("allocationMode") or "ExactCount") == "All":
            needed = max(1, len(matched))
        else:
            raw = body.get("count")
            needed = raw if isinstance(raw, int) and raw > 0 else 1
        entry = out.setdefault(
            cls, {"needed": 0, "free": 0, "total": 0, "unknown": False, "_keys": set(), "_tainted": {}}
        )
        entry["needed"] += needed
        entry["_keys"] |= {d.key for d in matched}
        for device in matched:
            taint = untolerated_taint(device.taints, body.get("tolerations"))
            if taint is not None:
                entry["_tainted"][device.key] = device.taint_label(taint)
        entry["unknown"] = entry["unknown"] or unknown
        if unknown and "unknown_reason" not in entry:
            entry["unknown_reason"] = inv.unknown_reason(cls, _selectors(body), inv.devices)
        if found.errors:
            entry["failing"] = entry.get("failing", 0) + len(found.errors)
    for entry in out.values():
        keys = entry.pop("_keys")
        blocked = entry.pop("_tainted")
        entry["total"] = len(keys)
        free = [k for k in keys if k not in inv.used]
        entry["free"] = len(free)
        tainted = [k for k in free if k in blocked]
        if tainted:
            # Free, but no toleration of the request tolerates a NoSchedule/NoExecute taint they carry.
            entry["tainted"] = len(tainted)
            entry["taints"] = sorted({blocked[k] for k in tainted})
        if entry["unknown"]:
            entry["free"] = f"{entry['free']} or more (unknown)" if entry["free"] else "unknown"
            entry["total"] = f"{entry['total']} or more (unknown)" if entry["total"] else "unknown"
    return out
