"""Device-side DRA accessors: DeviceClasses (selectors, driver) and ResourceSlices (driver, node, devices).

Part of :mod:`reconciler.model.dra` (which re-exports every name here); same defensive reading rules.
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.model.dra_readers import cel_expressions, is_classic
from reconciler.model.readers import as_dict, as_dicts, as_str, dig, kind_of, unique

_ATTRIBUTE_TYPES = ("int", "bool", "string", "version")
# `device.driver == "x"` in either operand order, single or double quotes.
_DRIVER_CEL = re.compile(
    r"""device\.driver\s*==\s*(?P<q1>["'])(?P<a>[^"']+)(?P=q1)"""
    r"""|(?P<q2>["'])(?P<b>[^"']+)(?P=q2)\s*==\s*device\.driver\b"""
)


# --- classes -----------------------------------------------------------------------------------------


def class_selectors(body: dict[str, Any]) -> list[str]:
    """CEL expressions of a DeviceClass (classic ResourceClasses have none)."""
    return list(cel_expressions(dig(body, "spec", "selectors")))


def class_driver(body: dict[str, Any]) -> str | None:
    """The driver a DeviceClass (or classic ResourceClass) selects; None when it cannot be told.

    Structured classes name the driver only inside CEL, so `device.driver == "x"` is looked for; when
    the selectors name several drivers (an `||`) the answer is ambiguous and None. Class-level opaque
    config is the fallback because it is addressed to one driver.
    """
    if kind_of(body) == "ResourceClass" or (is_classic(body) and "driverName" in as_dict(body)):
        return as_str(as_dict(body).get("driverName"))
    found: list[str] = []
    for expr in class_selectors(body):
        for m in _DRIVER_CEL.finditer(expr):
            found.append(m.group("a") or m.group("b"))
    drivers = unique(found)
    if len(drivers) == 1:
        return drivers[0]
    if drivers:
        return None
    config_drivers = unique(
        [d for d in (as_str(dig(c, "opaque", "driver")) for c in as_dicts(dig(body, "spec", "config"))) if d]
    )
    return config_drivers[0] if len(config_drivers) == 1 else None


# --- slices ------------------------------------------------------------------------------------------


def slice_driver(body: dict[str, Any]) -> str | None:
    """spec.driver (1.31+) or the top-level driverName of a 1.30 v1alpha2 slice."""
    return as_str(dig(body, "spec", "driver")) or as_str(as_dict(body).get("driverName"))


def slice_node(body: dict[str, Any]) -> str | None:
    """The node of a node-local slice; None for nodeSelector/allNodes slices."""
    return as_str(dig(body, "spec", "nodeName")) or as_str(as_dict(body).get("nodeName"))


def slice_pool(body: dict[str, Any]) -> str | None:
    """spec.pool.name; 1.30 slices had no pools."""
    return as_str(dig(body, "spec", "pool", "name"))


def _qualify(name: str, driver: str | None) -> str:
    # Names without a domain belong to the driver (the CEL view is device.attributes['<driver>'].name).
    return name if "/" in name or not driver else f"{driver}/{name}"


def _quantity_text(value: Any) -> str | None:
    """A scalar quantity as the slice writes it (parsing it is the capacity model's job:
    :mod:`reconciler.dra.quantity`); None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _typed_attribute(value: Any) -> dict[str, Any] | None:
    typed = {k: value[k] for k in _ATTRIBUTE_TYPES if k in as_dict(value)}
    return typed or None


def slice_devices(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Devices of a ResourceSlice in the flat v1 shape.

    Result: [{"name", "attributes": {qualified: {int|bool|string|version: v}}, "capacity": {qualified:
    {"value": str}}}]. v1alpha3/v1beta1 nest under `basic`; v1alpha3 capacity is a plain quantity;
    1.30 v1alpha2 `namedResources` lists attributes, where quantity-typed ones are read as capacity.
    Capacity names are qualified like attribute names (the CEL view is device.capacity['<domain>']).
    """
    driver = slice_driver(body)
    out: list[dict[str, Any]] = []
    if dig(body, "spec", "devices") is None and isinstance(dig(body, "namedResources"), dict):
        for inst in as_dicts(dig(body, "namedResources", "instances")):
            name = as_str(inst.get("name"))
            if name is None:
                continue
            attrs: dict[str, Any] = {}
            caps: dict[str, Any] = {}
            for attr in as_dicts(inst.get("attributes")):
                aname = as_str(attr.get("name"))
                if aname is None:
                    continue
                typed = _typed_attribute(attr)
                if typed:
                    attrs[_qualify(aname, driver)] = typed
                elif (q := _quantity_text(attr.get("quantity"))) is not None:
                    caps[_qualify(aname, driver)] = {"value": q}
            out.append({"name": name, "attributes": attrs, "capacity": caps})
        return out
    for dev in as_dicts(dig(body, "spec", "devices")):
        name = as_str(dev.get("name"))
        if name is None:
            continue
        fields = as_dict(dev.get("basic")) if "basic" in dev else dev
        attrs = {}
        for aname, value in as_dict(fields.get("attributes")).items():
            typed = _typed_attribute(value)
            if isinstance(aname, str) and typed:
                attrs[_qualify(aname, driver)] = typed
        caps = {}
        for cname, value in as_dict(fields.get("capacity")).items():
            q = _quantity_text(value.get("value")) if isinstance(value, dict) else _quantity_text(value)
            if isinstance(cname, str) and q is not None:
                caps[_qualify(cname, driver)] = {"value": q}
        out.append({"name": name, "attributes": attrs, "capacity": caps})
    return out
