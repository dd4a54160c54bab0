"""Why a pod's claims cannot be allocated on a node, in short words with numbers that add up (pure).

``claim gpu: needs 2, 1 of 3 matching devices free (1 allocated, 1 tainted)``: the matching devices
reachable from the node, split into the free ones and why each other one is not free. Devices that do
not publish a requested capacity at all are told apart from those whose capacity is used up. ``All`` requests
say how many they take; ``firstAvailable`` requests list each alternative with its own count. When each
request alone has enough free devices the blame goes to the claim's constraints, or to claims that fit
one at a time but not together.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from reconciler.dra.capacity_math import consume
from reconciler.dra.devices import Device, Usage, claim_spec
from reconciler.dra.nodematch import untolerated_taint

if TYPE_CHECKING:
    from reconciler.dra.allocator import Inventory
    from reconciler.dra.search import Alternative

__all__ = ["explain_node"]

# Why a matching device is not free, in the order they are checked.
ALLOCATED = "allocated"  # by claims in the cluster
EARLIER = "held by pods placed before it"  # by pods of the prediction
TAINTED = "tainted"
COUNTERS = "partition counters used up"
CAPACITY = "capacity used up"
NO_CAPACITY = "without capacity"  # the device publishes no capacity of the requested name


def blocker(inv: Inventory, alt: Alternative, d: Device, usage: Usage) -> str | None:
    """Why ``d`` cannot be taken for ``alt`` given what allocated claims hold (None: it is free)."""
    if not alt.admin and not d.multi and d.key in usage.used:
        return ALLOCATED if d.key in inv.usage.used else EARLIER
    if untolerated_taint(d.taints, alt.tolerations) is not None:
        return TAINTED
    in_use = d.multi and d.key in usage.shared
    if d.consumes and not alt.admin and not in_use:
        for counter_set, counters in d.consumes:
            ck = (d.driver, d.pool, counter_set)
            total = inv.counter_sets.get(ck, {})
            held = usage.counters.get(ck, {})
            if any(
                name not in total or held.get(name, Fraction(0)) + q > total[name]
                for name, q in counters.items()
            ):
                return COUNTERS
    missing = _missing_capacity(alt, d) if alt.capacity else ""
    if missing:
        return f"{NO_CAPACITY} {missing}"
    if (d.multi or alt.capacity) and consume(d, alt.capacity, usage.shared.get(d.key)) is None:
        return CAPACITY
    return None


def _missing_capacity(alt: Alternative, d: Device) -> str:
    """The requested capacity the device does not publish at all ("" when it has each one)."""
    for name in alt.capacity:
        if (str(name) if "/" in str(name) else f"{d.driver}/{name}") not in d.capacity:
            return str(name)
    return ""


def _alternative_text(inv: Inventory, alt: Alternative, usage: Usage) -> tuple[str, bool]:
    """The numbers of one request alternative; and whether it is short of devices on its own."""
    candidates = alt.matched
    total = len(candidates)
    if total == 0:
        return "no matching device", True
    lacking = {_missing_capacity(alt, d) for d in candidates} if alt.capacity else {""}
    if "" not in lacking:
        names = ", ".join(sorted(lacking))
        asked = ", ".join(f"{k}: {v}" for k, v in alt.capacity.items())
        return f"none of the {total} matching devices has capacity {names} (the request asks {asked})", True
    why = Counter(b for b in (blocker(inv, alt, d, usage) for d in candidates) if b is not None)
    free = total - sum(why.values())
    breakdown = ", ".join(f"{n} {reason}" for reason, n in why.items())
    tail = f" ({breakdown})" if breakdown else ""
    if alt.all_mode:
        return f"takes all {total} matching devices, {free} free{tail}", free < total
    return f"needs {alt.count}, {free} of {total} matching devices free{tail}", free < alt.count


def _claim_text(inv: Inventory, spec: Mapping[str, Any], devices: Sequence[Device], usage: Usage) -> str:
    requests, _ = inv.alternatives(spec, devices, usage)
    parts = []
    for alts in requests:
        if len(alts) == 1:
            text, short = _alternative_text(inv, alts[0], usage)
            if short:
                parts.append(text if len(requests) == 1 else f"request {alts[0].top}: {text}")
            continue
        texts = [_alternative_text(inv, a, usage) for a in alts]
        if all(short for _, short in texts):
            listed = ", ".join(
                f"{a.request.rpartition('/')[2]}: {t}" for a, (t, _) in zip(alts, texts, strict=True)
            )
            parts.append(f"request {alts[0].top}: no alternative fits ({listed})")
    if parts:
        return ", ".join(parts)
    constraints = inv.constraints(spec)
    if constraints:
        names = ", ".join(
            f"{'matchAttribute' if c.kind == 'match' else 'distinctAttribute'} {c.attribute}"
            for c in constraints
        )
        return f"no combination of free devices meets its constraints ({names})"
    return "its requests together need more devices than are free"


def explain_node(
    inv: Inventory,
    claims: Sequence[tuple[str, Mapping[str, Any]]],
    node: str,
    devices: Sequence[Device],
    usage: Usage,
) -> str:
    """Why the (pod claim name, claim) pairs cannot all be allocated from ``devices`` on ``node``."""
    parts = []
    for name, claim in claims:
        alone = inv.allocate_on([claim], node, devices, usage)[0]
        if alone.ok:
            continue
        text = _claim_text(inv, claim_spec(claim), devices, usage)
        if alone.unknown_reason:
            text += f" (unknown: {alone.unknown_reason})"
        parts.append(f"claim {name}: {text}")
    if parts:
        return ", ".join(parts)
    names = " and ".join(name for name, _ in claims)
    return f"claims {names} fit one at a time but not together"
