"""A driver node's pools as its ResourceSlices publish them, and whether a republication kept its devices (pure).

Used by one wave of a driver upgrade (`reconciler/cluster/wave.py`): the pools read before the plugin is
replaced, compared with those its new pod publishes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.objects import meta
from reconciler.model import dra
from reconciler.model.readers import as_dict


@dataclass(frozen=True)
class Pool:
    """A node's pool of the driver as published: its generation, slice objects and devices."""

    generation: int
    slice_uids: frozenset[str]
    complete: bool
    devices: Mapping[str, Mapping[str, Any]]  # device name -> attributes (qualified names)


def node_pools(slices: list[dict[str, Any]], driver: str, node: str) -> dict[str, Pool]:
    """The pools `driver` publishes for `node` (the newest generation of each)."""
    mine = [s for s in slices if dra.slice_driver(s) == driver and dra.slice_node(s) == node]
    pools: dict[str, Pool] = {}
    for name in sorted({dra.slice_pool(s) or "" for s in mine}):
        of_pool = [s for s in mine if (dra.slice_pool(s) or "") == name]
        generation = max(
            int(as_dict(as_dict(s.get("spec")).get("pool")).get("generation") or 0) for s in of_pool
        )
        current = [
            s
            for s in of_pool
            if int(as_dict(as_dict(s.get("spec")).get("pool")).get("generation") or 0) == generation
        ]
        expected = max(
            int(as_dict(as_dict(s.get("spec")).get("pool")).get("resourceSliceCount") or 1) for s in current
        )
        devices = {
            str(d.get("name")): dict(as_dict(d.get("attributes")))
            for s in current
            for d in dra.slice_devices(s)
        }
        uids = frozenset(str(meta(s).get("uid")) for s in current)
        pools[name] = Pool(generation, uids, len(current) >= expected, devices)
    return pools


def selected_attributes(classes: list[dict[str, Any]], driver: str) -> set[str]:
    """Short names of the attributes the driver's DeviceClasses mention in their CEL selectors."""
    text = "\n".join(e for c in classes if dra.class_driver(c) == driver for e in dra.class_selectors(c))
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_.-]*", text))


def devices_problem(before: Pool, after: Pool, pool: str, watched: set[str]) -> str | None:
    """Why the republished pool does not have the devices it had, or None."""
    gone = sorted(set(before.devices) - set(after.devices))
    if gone:
        return f"device(s) {', '.join(gone)} of pool {pool} disappeared after the plugin was replaced"
    for device, attrs in sorted(before.devices.items()):
        new = after.devices[device]
        for name in sorted(set(attrs) | set(new)):
            if name.split("/")[-1] in watched and attrs.get(name) != new.get(name):
                return (
                    f"attribute {name} of device {device} (pool {pool}) changed from {attrs.get(name)} to "
                    f"{new.get(name)}, and a DeviceClass of the driver selects on it"
                )
    return None


def republished(before: Pool, after: Pool) -> bool:
    return after.complete and (
        after.generation > before.generation or not (after.slice_uids & before.slice_uids)
    )


__all__ = ["Pool", "devices_problem", "node_pools", "republished", "selected_attributes"]
