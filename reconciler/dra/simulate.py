"""Feasibility of a change's claims against the published devices (pure; feeds the ``capacity`` rule).

``simulate(slices, classes, live_claims, new_claims)`` answers, per new claim, "fits", "does-not-fit"
(with free and needed device counts) or "unknown" (a CEL selector could not be evaluated: never a false
denial), plus device totals per driver. ``new_claims`` are ResourceClaims or ResourceClaimTemplates (a
template stands for one generated claim; pass it once per replica that will use it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra.allocator import Inventory, allocated_devices
from reconciler.dra.placement import ClaimFeasibility, feasibility

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
    claims: list[ClaimFeasibility]

    @property
    def devices(self) -> int:
        return sum(d.devices for d in self.drivers.values())

    @property
    def allocated(self) -> int:
        return sum(d.allocated for d in self.drivers.values())

    @property
    def free(self) -> int:
        return self.devices - self.allocated

    @property
    def fits(self) -> bool | None:
        """True when every claim fits, False when one does not, None when only unknowns stand in the way."""
        outcomes = {c.outcome for c in self.claims}
        if "does-not-fit" in outcomes:
            return False
        if "unknown" in outcomes:
            return None
        return True

    def to_dict(self) -> dict[str, Any]:
        return {
            "totals": {"devices": self.devices, "allocated": self.allocated, "free": self.free},
            "drivers": {k: v.to_dict() for k, v in sorted(self.drivers.items())},
            "claims": [c.to_dict() for c in self.claims],
            "fits": self.fits,
        }


def simulate(
    slices: Iterable[Mapping[str, Any]],
    classes: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    live_claims: Iterable[Mapping[str, Any]],
    new_claims: Sequence[Mapping[str, Any]],
) -> SimulationResult:
    slices = list(slices)
    classes = classes if isinstance(classes, Mapping) else list(classes)
    live = list(live_claims)
    inv = Inventory(slices, classes, live)
    used = allocated_devices(live)
    drivers: dict[str, DriverTotals] = {}
    pools: dict[str, set[str]] = {}
    for d in inv.devices:
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
    claims = feasibility(slices, classes, live, list(new_claims))
    return SimulationResult(drivers=drivers, claims=claims)
