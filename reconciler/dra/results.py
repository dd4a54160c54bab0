"""The ``status.allocation`` of a claim from the devices the search picked (pure).

One result per picked device (``adminAccess``, ``tolerations``; a ``shareID`` and the
``consumedCapacity`` on devices that allow multiple allocations), the opaque config of the classes
and of the claim, and the nodeSelector that says where the allocation can be used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from reconciler.dra.devices import Device, DeviceKey
from reconciler.dra.nodematch import node_selector_for
from reconciler.dra.quantity import format_quantity
from reconciler.dra.search import PreparedClaim
from reconciler.model.readers import as_dict, as_list

__all__ = ["allocation_result"]


def allocation_result(
    claim: Mapping[str, Any], c: PreparedClaim, node: str | None, classes: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, Any], list[DeviceKey], list[tuple[DeviceKey, dict[str, Fraction] | None]]]:
    """(status.allocation without timestamp, the devices, what the non-admin results take)."""
    results: list[dict[str, Any]] = []
    keys: list[DeviceKey] = []
    taken: list[tuple[DeviceKey, dict[str, Fraction] | None]] = []
    md = as_dict(claim.get("metadata"))
    for n, (alt, dev, consumed) in enumerate(c.picks):
        r: dict[str, Any] = {
            "request": alt.request,
            "driver": dev.driver,
            "pool": dev.pool,
            "device": dev.name,
        }
        if alt.admin:
            r["adminAccess"] = True
        if alt.tolerations:
            r["tolerations"] = list(alt.tolerations)
        if dev.multi:
            seed = f"{md.get('namespace')}/{md.get('name')}/{md.get('uid')}/{dev.key}/{n}"
            digest = hashlib.sha256(seed.encode()).hexdigest()
            r["shareID"] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
            if consumed:
                r["consumedCapacity"] = {
                    dev.capacity[k].name: format_quantity(v) for k, v in consumed.items()
                }
        results.append(r)
        keys.append(dev.key)
        if not alt.admin:
            taken.append((dev.key, consumed if dev.multi else None))
    allocation: dict[str, Any] = {"devices": {"results": results}}
    config = _config(c, classes)
    if config:
        allocation["devices"]["config"] = config
    selector = _node_selector([d for _, d, _ in c.picks], node)
    if selector is not None:
        allocation["nodeSelector"] = selector
    return allocation, keys, taken


def _config(c: PreparedClaim, classes: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    by_class: dict[str, list[str]] = {}
    for alt, _, _ in c.picks:
        reqs = by_class.setdefault(alt.class_name, [])
        if alt.request not in reqs:
            reqs.append(alt.request)
    for cls_name, reqs in by_class.items():
        cls = classes.get(cls_name) or {}
        for cfg in as_list(as_dict(cls.get("spec")).get("config")):
            if isinstance(cfg, dict) and cfg.get("opaque"):
                out.append({"source": "FromClass", "requests": list(reqs), "opaque": cfg["opaque"]})
    for cfg in as_list(as_dict(c.spec.get("devices")).get("config")):
        if isinstance(cfg, dict) and cfg.get("opaque"):
            entry: dict[str, Any] = {"source": "FromClaim", "opaque": cfg["opaque"]}
            if cfg.get("requests"):
                entry["requests"] = list(cfg["requests"])
            out.append(entry)
    return out


def _node_selector(devices: Sequence[Device], node: str | None) -> dict[str, Any] | None:
    """Where the allocation can be used: the node for node-local devices, else the slices' selector."""
    local = sorted({d.node_name for d in devices if d.node_name})
    if local:
        return node_selector_for(node or local[0])
    for d in devices:
        if d.node_selector is not None and not d.all_nodes:
            return d.node_selector
    return None
