"""Device totals per driver from the published slices and the allocated claims (pure).

``simulate(slices, classes, live_claims)`` counts devices, allocated devices, pools and nodes per
driver. Whether new pods and claims fit is the placement model's question
(:mod:`reconciler.dra.placement`, used by :mod:`reconciler.dra.capacity`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra.devices import allocated_devices, read_slices

__all__ = ["DriverTotals", "SimulationResult", "simulate"]


@dataclass
class DriverTotals:
    driver: str
    devices: int = 0
    allocated: int = 0
    pools: int = 0
    nodes: list[str] = field(default_factory=list)

    @property
    def free(self) -> int:
        return self.devices - self.allocated

    def to_dict(self) -> dict[str, Any]:
        return {
            "driver": self.driver,
            "devices": self.devices,
            "allocated": self.allocated,
            "free": self.free,
            "pools": self.pools,
            "nodes": list(self.nodes),
        }


@dataclass
class SimulationResult:
    drivers: dict[str, DriverTotals]

    @property
    def devices(self) -> int:
        return sum(d.devices for d in self.drivers.values())

    @property
    def allocated(self) -> int:
        return sum(d.allocated for d in self.drivers.values())

    @property
    def free(self) -> int:
        return self.devices - self.allocated

    def to_dict(self) -> dict[str, Any]:
        return {
            "totals": {"devices": self.devices, "allocated": self.allocated, "free": self.free},
            "drivers": {k: v.to_dict() for k, v in sorted(self.drivers.items())},
        }


def simulate(
    slices: Iterable[Mapping[str, Any]],
    classes: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    live_claims: Iterable[Mapping[str, Any]],
    new_claims: Iterable[Mapping[str, Any]] = (),
) -> SimulationResult:
    """Totals per driver (``classes`` and ``new_claims`` are accepted for callers' convenience, unused)."""
    del classes, new_claims
    used = allocated_devices(list(live_claims))
    drivers: dict[str, DriverTotals] = {}
    pools: dict[str, set[str]] = {}
    for d in read_slices(slices).devices:
        t = drivers.setdefault(d.driver, DriverTotals(d.driver))
        t.devices += 1
        if d.key in used:
            t.allocated += 1
        pools.setdefault(d.driver, set()).add(d.pool)
        if d.node_name and d.node_name not in t.nodes:
            t.nodes.append(d.node_name)
    for drv, names in pools.items():
        drivers[drv].pools = len(names)
        drivers[drv].nodes.sort()
    return SimulationResult(drivers=drivers)
