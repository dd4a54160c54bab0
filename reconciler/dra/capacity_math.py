"""Consumable capacity (pure): how much of a device's capacity a request consumes, and whether it fits.

A request names capacities (``capacity.requests``, names with or without the driver's domain). Each
capacity a device publishes is consumed by the requested amount rounded up by the capacity's
``requestPolicy`` (``validRange`` min/step, ``validValues``), or, when not requested, by the policy's
``default`` or else the whole capacity. A device that allows multiple allocations is shared while the
sum of what its allocations consume stays within each capacity; any other device just has to hold the
request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from reconciler.dra.quantity import quantity_or_none

if TYPE_CHECKING:
    from reconciler.dra.devices import Device

__all__ = ["consume"]


def _rounded(
    requested: Fraction | None, total: Fraction, policy: Mapping[str, Any] | None
) -> Fraction | None:
    """The amount consumed; None when the request breaks the policy."""
    policy = policy or {}
    if requested is None:
        default = quantity_or_none(policy.get("default"))
        return default if default is not None else total
    valid_range = policy.get("validRange") if isinstance(policy.get("validRange"), Mapping) else None
    values = policy.get("validValues") if isinstance(policy.get("validValues"), list) else None
    if valid_range is not None and quantity_or_none(valid_range.get("min")) is not None:
        low = quantity_or_none(valid_range.get("min"))
        assert low is not None
        high = quantity_or_none(valid_range.get("max"))
        step = quantity_or_none(valid_range.get("step"))
        amount = max(requested, low)
        if step:
            amount = low + math.ceil((amount - low) / step) * step
        if high is not None and amount > high:
            return None
        return amount
    if values is not None:
        allowed = sorted(q for q in (quantity_or_none(v) for v in values) if q is not None)
        fitting = [v for v in allowed if v >= requested]
        return fitting[0] if fitting else None
    return requested


def consume(
    device: Device, requests: Mapping[str, Any], held: Mapping[str, Fraction] | None
) -> dict[str, Fraction] | None:
    """Per capacity (qualified name) what the request consumes on ``device``; None when it does not fit.

    ``held`` is what other allocations consume on a shared device already. For a device that does
    not allow multiple allocations the answer is {} when the request fits it.
    """
    wanted: dict[str, Fraction] = {}
    for name, raw in requests.items():
        key = str(name) if "/" in str(name) else f"{device.driver}/{name}"
        amount = quantity_or_none(raw)
        if key not in device.capacity or amount is None:
            return None
        wanted[key] = amount
    consumed: dict[str, Fraction] = {}
    for key, cap in device.capacity.items():
        if not device.multi and key not in wanted:
            continue
        amount = _rounded(wanted.get(key), cap.value, cap.policy)
        if amount is None:
            return None
        if amount + (held or {}).get(key, Fraction(0)) > cap.value:
            return None
        consumed[key] = amount
    return consumed if device.multi else {}
