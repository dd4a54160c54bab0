"""Feasibility of claims against the published devices, claim by claim (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra.allocator import Inventory, _admin_flags
from reconciler.dra.devices import (
    DeviceKey,
    _as_dict,
    _as_list,
    _selector_exprs,
    claim_spec,
    normalise_requests,
)

__all__ = ["ClaimFeasibility", "feasibility"]


@dataclass
class ClaimFeasibility:
    ref: str  # "namespace/name" (or the name given)
    outcome: str  # "fits" | "does-not-fit" | "unknown"
    needed: int  # devices requested (for All: devices matching; at least 1)
    free: int  # free devices matching the claim's classes/selectors
    total: int  # devices matching the claim's classes/selectors
    reason: str = ""
    node: str | None = None
    devices: list[DeviceKey] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "outcome": self.outcome,
            "needed": self.needed,
            "free": self.free,
            "total": self.total,
            "reason": self.reason,
            "node": self.node,
            "devices": ["/".join(k) for k in self.devices],
        }


def _ref(obj: Mapping[str, Any]) -> str:
    md = _as_dict(obj.get("metadata"))
    ns = md.get("namespace")
    name = md.get("name") or md.get("generateName") or "<unnamed>"
    return f"{ns}/{name}" if ns else str(name)


def feasibility(
    slices: Iterable[Mapping[str, Any]],
    classes: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    live_claims: Iterable[Mapping[str, Any]],
    new_claims: Sequence[Mapping[str, Any]],
) -> list[ClaimFeasibility]:
    """Do the claims of a change fit the free devices? One answer per claim, in order.

    Claims are placed greedily in order (each on the first node where it fits); devices they take are
    no longer free for the next ones. "unknown" whenever a CEL selector could not be evaluated and the
    claim did not fit otherwise: never a false "does-not-fit" because of CEL.
    """
    inv = Inventory(slices, classes, live_claims)
    taken: set[DeviceKey] = set()
    out: list[ClaimFeasibility] = []
    for claim in new_claims:
        spec = claim_spec(claim)
        needed, free, total, unknown_counts = _counts(inv, spec, taken)
        outcome = inv.allocate(claim, None, None, taken)
        if outcome.ok:
            taken |= set(outcome.devices) - {
                k for k, admin in zip(outcome.devices, _admin_flags(outcome), strict=True) if admin
            }
            out.append(
                ClaimFeasibility(
                    _ref(claim), "fits", needed, free, total, node=outcome.node, devices=outcome.devices
                )
            )
            continue
        if outcome.missing_class:
            reason = outcome.reason or ""
            out.append(ClaimFeasibility(_ref(claim), "does-not-fit", needed, free, total, reason=reason))
            continue
        if outcome.unknown or unknown_counts:
            out.append(
                ClaimFeasibility(
                    _ref(claim),
                    "unknown",
                    needed,
                    free,
                    total,
                    reason="a CEL selector could not be evaluated",
                )
            )
            continue
        reason = f"needs {needed} device(s), {free} free of {total} matching"
        out.append(ClaimFeasibility(_ref(claim), "does-not-fit", needed, free, total, reason=reason))
    return out


def _counts(inv: Inventory, spec: Mapping[str, Any], taken: set[DeviceKey]) -> tuple[int, int, int, bool]:
    """(needed, free, total, unknown) over the claim's requests (first alternative of each)."""
    needed = 0
    matching: set[DeviceKey] = set()
    unknown = False
    for req in normalise_requests(spec):
        if "exactly" in req:
            bodies = [_as_dict(req.get("exactly"))]
        else:
            bodies = [_as_dict(b) for b in _as_list(req.get("firstAvailable"))]
        first = True
        for body in bodies:
            cls = str(body.get("deviceClassName", ""))
            if cls not in inv.classes:
                continue
            matched, unk = inv.matching(cls, _selector_exprs(body.get("selectors")), inv.devices)
            unknown = unknown or unk
            matching |= {d.key for d in matched}
            if first:
                if (body.get("allocationMode") or "ExactCount") == "All":
                    needed += max(1, len(matched))
                else:
                    needed += int(body.get("count") or 1)
                first = False
    used = inv.used | taken
    free = len([k for k in matching if k not in used])
    return needed, free, len(matching), unknown
