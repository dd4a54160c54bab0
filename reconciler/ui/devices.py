"""The device map's data (pure): every published device with its state and holder, from the objects the
inventory reads (ResourceSlices, ResourceClaims, Nodes, DeviceTaintRules).

Devices are those `dra.devices.read_slices` finds and "allocated" is what `dra.devices.allocated_devices`
says, the same reading `inventory` counts with (`dra.simulate`), so the totals here add up to its totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra.devices import read_slices
from reconciler.model.readers import as_dict, as_list

FREE, ALLOCATED, TAINTED, NODE_NOT_READY = "free", "allocated", "tainted", "node-not-ready"
# What a claim's annotation may show at most (a long value is cut, and said to be).
ANNOTATION_CHARS = 200
# Annotations never shown: a whole object's copy (kubectl's) is no note for a person.
HIDDEN_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


@dataclass
class DeviceCell:
    driver: str
    pool: str
    name: str
    node: str  # "" for a device not local to one node
    state: str  # free | allocated | tainted | node-not-ready
    claim: str = ""  # namespace/name of the claim holding it
    namespace: str = ""
    pods: list[str] = field(default_factory=list)  # pods the claim is reserved for
    taints: list[str] = field(default_factory=list)  # key=value:effect
    notes: dict[str, str] = field(default_factory=dict)  # the claim's labels and annotations

    @property
    def allocated(self) -> bool:
        return bool(self.claim)


@dataclass
class DeviceFilter:
    driver: str = ""
    node: str = ""
    namespace: str = ""

    def keeps(self, cell: DeviceCell) -> bool:
        return (
            (not self.driver or cell.driver == self.driver)
            and (not self.node or cell.node == self.node)
            and (not self.namespace or cell.namespace == self.namespace)
        )

    @property
    def active(self) -> bool:
        return bool(self.driver or self.node or self.namespace)


@dataclass
class Totals:
    devices: int = 0
    allocated: int = 0

    @property
    def free(self) -> int:
        return self.devices - self.allocated


def _holders(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    """Device key -> the claim whose allocation holds it (admin-access results hold none, as in
    `allocated_devices`)."""
    held: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for claim in claims:
        allocation = as_dict(as_dict(claim.get("status")).get("allocation"))
        for result in as_list(as_dict(allocation.get("devices")).get("results")):
            if isinstance(result, Mapping) and not result.get("adminAccess"):
                key = (
                    str(result.get("driver", "")),
                    str(result.get("pool", "")),
                    str(result.get("device", "")),
                )
                held.setdefault(key, claim)
    return held


def _notes(claim: Mapping[str, Any]) -> dict[str, str]:
    meta = as_dict(claim.get("metadata"))
    notes = {f"label {k}": str(v) for k, v in as_dict(meta.get("labels")).items()}
    for key, value in as_dict(meta.get("annotations")).items():
        if key in HIDDEN_ANNOTATIONS:
            continue
        text = str(value)
        notes[f"annotation {key}"] = text if len(text) <= ANNOTATION_CHARS else text[:ANNOTATION_CHARS] + "…"
    return notes


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def build_device_cells(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    taint_rules: Iterable[Mapping[str, Any]] = (),
) -> list[DeviceCell]:
    """Every device, ordered by driver, node, pool and name, with its state and holder."""
    claims = list(claims)
    held = _holders(claims)
    ready = {str(as_dict(n.get("metadata")).get("name")): _node_ready(n) for n in nodes}
    cells = []
    for device in read_slices(slices, taint_rules).devices:
        claim = held.get(device.key)
        node = device.node_name or ""
        taints = [_taint_text(t) for t in device.taints]
        if claim is not None:
            state = ALLOCATED
        elif node and not ready.get(node, False):
            state = NODE_NOT_READY
        elif any(str(t.get("effect")) in ("NoSchedule", "NoExecute") for t in device.taints):
            state = TAINTED
        else:
            state = FREE
        cell = DeviceCell(device.driver, device.pool, device.name, node, state, taints=taints)
        if claim is not None:
            meta = as_dict(claim.get("metadata"))
            cell.namespace = str(meta.get("namespace") or "")
            cell.claim = f"{cell.namespace}/{meta.get('name')}"
            cell.pods = [
                str(r.get("name"))
                for r in as_list(as_dict(claim.get("status")).get("reservedFor"))
                if isinstance(r, Mapping) and r.get("name")
            ]
            cell.notes = _notes(claim)
        cells.append(cell)
    cells.sort(key=lambda c: (c.driver, c.node, c.pool, c.name))
    return cells


def _node_ready(node: Mapping[str, Any]) -> bool:
    for cond in as_list(as_dict(node.get("status")).get("conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def totals_by_driver(cells: Iterable[DeviceCell]) -> dict[str, Totals]:
    out: dict[str, Totals] = {}
    for cell in cells:
        t = out.setdefault(cell.driver, Totals())
        t.devices += 1
        t.allocated += int(cell.allocated)
    return dict(sorted(out.items()))
