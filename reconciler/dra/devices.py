"""Device inventory in resource.k8s.io/v1 shape (pure): slices to devices, taints, counters, usage.

v1beta1/v1beta2 shapes are normalised on the way in: flat requests are wrapped into ``exactly``, the
nested ``basic`` device body is flattened. Only the newest generation of each pool counts; a pool whose
slices are not all published yet is "incomplete". DeviceTaintRules add their taint to the devices they
select. :class:`Usage` is what allocated claims hold: whole devices, counters of partitionable devices,
and capacity shared on devices that allow multiple allocations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.dra import cel
from reconciler.dra.nodematch import node_selector_matches
from reconciler.dra.quantity import quantity_or_none
from reconciler.model.dra_readers import FLAT_REQUEST_FIELDS
from reconciler.model.readers import as_dict, as_list

__all__ = [
    "Device",
    "DeviceKey",
    "SliceData",
    "Usage",
    "allocated_devices",
    "claim_spec",
    "devices_from_slices",
    "normalise_requests",
    "read_slices",
    "selector_exprs",
    "usage_from_claims",
]

DeviceKey = tuple[str, str, str]  # (driver, pool, device)
CounterKey = tuple[str, str, str]  # (driver, pool, counter set)


# ------------------------------------------------------------------------------------------- claims


def claim_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ResourceClaimSpec of a ResourceClaim, a ResourceClaimTemplate, or a bare spec."""
    if obj.get("kind") == "ResourceClaimTemplate":
        return as_dict(as_dict(obj.get("spec")).get("spec"))
    if "devices" in obj and "spec" not in obj:
        return dict(obj)
    return as_dict(obj.get("spec"))


def normalise_requests(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Requests in v1 shape: each has ``exactly`` or ``firstAvailable`` (v1beta1 flat fields wrapped)."""
    out: list[dict[str, Any]] = []
    for req in as_list(as_dict(spec.get("devices")).get("requests")):
        if not isinstance(req, dict):
            continue
        if "exactly" in req or "firstAvailable" in req:
            out.append(req)
            continue
        exactly = {k: req[k] for k in FLAT_REQUEST_FIELDS if k in req}
        out.append({"name": req.get("name", ""), "exactly": exactly})
    return out


def selector_exprs(selectors: Any) -> list[str] | None:
    """The CEL expressions of a selector list; None when a selector is not CEL (a future type)."""
    out = []
    for sel in as_list(selectors):
        expr = as_dict(as_dict(sel).get("cel")).get("expression")
        if not isinstance(expr, str):
            return None
        out.append(expr)
    return out


# ------------------------------------------------------------------------------------------ devices


@dataclass(frozen=True)
class Capacity:
    name: str  # as the slice publishes it
    value: Fraction
    policy: dict[str, Any] | None


@dataclass(frozen=True, eq=False)
class Device:
    driver: str
    pool: str
    name: str
    slice_name: str
    node_name: str | None  # node-local device
    node_selector: dict[str, Any] | None
    all_nodes: bool
    attributes: dict[str, Any]  # qualified "domain/name" -> raw slice attribute value
    taints: tuple[dict[str, Any], ...]
    context: dict[str, Any] | None = field(compare=False, hash=False)  # CEL device; None when unparsable
    # Where each taint of `taints` comes from: "ResourceSlice/<name>" or "DeviceTaintRule/<name>".
    taint_sources: tuple[str, ...] = ()
    capacity: dict[str, Capacity] = field(default_factory=dict)  # qualified name -> capacity
    consumes: tuple[tuple[str, dict[str, Fraction]], ...] = ()  # (counter set, {counter: amount})
    multi: bool = False  # allowMultipleAllocations
    index: int = 0  # position in the inventory: the order devices are tried in

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)

    @property
    def label(self) -> str:
        return f"{self.pool}/{self.name}" if self.pool else self.name

    def attribute(self, qualified: str) -> Any:
        """The typed value of a fully-qualified attribute ("gpu.example.com/model"), or None."""
        raw = self.attributes.get(qualified)
        if isinstance(raw, Mapping):
            for k in ("string", "int", "bool", "version"):
                if k in raw:
                    return (k, raw[k])
            return None
        return None if raw is None else ("raw", raw)

    def taint_label(self, taint: Mapping[str, Any]) -> str:
        """`DeviceTaintRule/gpu-maintenance: example.com/maintenance=true:NoSchedule`: a taint of this
        device, led by where it comes from."""
        value = f"={taint['value']}" if taint.get("value") else ""
        text = f"{taint.get('key')}{value}:{taint.get('effect')}"
        index = next((i for i, t in enumerate(self.taints) if t is taint), None)
        source = self.taint_sources[index] if index is not None and index < len(self.taint_sources) else ""
        return f"{source}: {text}" if source else text

    def reachable_from(self, node: str, labels: Mapping[str, str]) -> bool:
        if self.node_name is not None:
            return self.node_name == node
        if self.all_nodes:
            return True
        return self.node_selector is not None and node_selector_matches(self.node_selector, node, labels)


# ---------------------------------------------------------------------------------- DeviceTaintRules


RuleTaint = tuple[dict[str, Any], dict[str, Any], str]


def _rule_taints(rules: Iterable[Mapping[str, Any]]) -> list[RuleTaint]:
    """(deviceSelector, taint, the rule's ref) of each DeviceTaintRule."""
    out = []
    for rule in rules:
        spec = as_dict(rule.get("spec"))
        taint = as_dict(spec.get("taint"))
        if taint:
            name = str(as_dict(rule.get("metadata")).get("name", ""))
            out.append((as_dict(spec.get("deviceSelector")), taint, f"DeviceTaintRule/{name}"))
    return out


def _selected(selector: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    return all(
        not selector.get(field_name) or selector.get(field_name) == value
        for field_name, value in (("driver", driver), ("pool", pool), ("device", device))
    )


# ------------------------------------------------------------------------------------------- slices


@dataclass
class SliceData:
    devices: list[Device]
    counters: dict[CounterKey, dict[str, Fraction]]  # shared counter sets of each pool
    incomplete: set[tuple[str, str]]  # (driver, pool) with slices still missing


def _counter_values(counters: Any) -> dict[str, Fraction]:
    out = {}
    for name, raw in as_dict(counters).items():
        q = quantity_or_none(raw)
        if q is not None:
            out[str(name)] = q
    return out


def read_slices(
    slices: Iterable[Mapping[str, Any]], taint_rules: Iterable[Mapping[str, Any]] = ()
) -> SliceData:
    """Devices of the current generation of each pool (v1 and v1beta1 ``basic`` shapes), in pool order."""
    slices = [s for s in slices if isinstance(s, Mapping)]
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = as_dict(s.get("spec"))
        pool = as_dict(spec.get("pool"))
        k = (str(spec.get("driver", "")), str(pool.get("name", "")))
        newest[k] = max(newest.get(k, 0), int(pool.get("generation") or 0))
    current = []
    seen: dict[tuple[str, str], int] = {}
    expected: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = as_dict(s.get("spec"))
        pool = as_dict(spec.get("pool"))
        k = (str(spec.get("driver", "")), str(pool.get("name", "")))
        if int(pool.get("generation") or 0) < newest.get(k, 0):
            continue
        current.append(s)
        seen[k] = seen.get(k, 0) + 1
        expected[k] = max(expected.get(k, 0), int(pool.get("resourceSliceCount") or 1))
    current.sort(
        key=lambda s: (
            str(as_dict(s.get("spec")).get("driver", "")),
            str(as_dict(as_dict(s.get("spec")).get("pool")).get("name", "")),
            str(as_dict(s.get("metadata")).get("name", "")),
        )
    )
    rules = _rule_taints(taint_rules)
    data = SliceData(devices=[], counters={}, incomplete={k for k, n in seen.items() if n < expected[k]})
    for s in current:
        spec = as_dict(s.get("spec"))
        driver = str(spec.get("driver", ""))
        pool_name = str(as_dict(spec.get("pool")).get("name", ""))
        for counter_set in as_list(spec.get("sharedCounters")):
            counter_set = as_dict(counter_set)
            key = (driver, pool_name, str(counter_set.get("name", "")))
            data.counters[key] = _counter_values(counter_set.get("counters"))
        for d in as_list(spec.get("devices")):
            if isinstance(d, dict):
                data.devices.append(_device(s, spec, d, driver, pool_name, rules, len(data.devices)))
    return data


def _device(
    s: Mapping[str, Any],
    spec: Mapping[str, Any],
    d: Mapping[str, Any],
    driver: str,
    pool_name: str,
    rules: list[RuleTaint],
    index: int,
) -> Device:
    body = as_dict(d.get("basic")) if "basic" in d else d
    attrs_raw = as_dict(body.get("attributes"))
    caps_raw = as_dict(body.get("capacity"))
    multi = bool(body.get("allowMultipleAllocations"))
    try:
        ctx: dict[str, Any] | None = cel.device_context(driver, attrs_raw, caps_raw, multi)
    except (ValueError, TypeError):
        ctx = None
    qualified = {
        f"{dom}/{n}": v
        for dom, names in cel.qualify_attributes(driver, attrs_raw).items()
        for n, v in names.items()
    }
    capacity: dict[str, Capacity] = {}
    for name, raw in caps_raw.items():
        value = quantity_or_none(raw)
        if value is None:
            continue
        full = str(name) if "/" in str(name) else f"{driver}/{name}"
        if full in capacity and "/" not in str(name):
            continue  # the entry qualified with the driver's own domain wins
        policy = as_dict(raw).get("requestPolicy") if isinstance(raw, Mapping) else None
        capacity[full] = Capacity(str(name), value, policy if isinstance(policy, dict) else None)
    per_device = bool(spec.get("perDeviceNodeSelection"))
    node_name = (body.get("nodeName") if per_device else spec.get("nodeName")) or None
    node_sel = body.get("nodeSelector") if per_device else spec.get("nodeSelector")
    all_nodes = bool(body.get("allNodes") if per_device else spec.get("allNodes"))
    name = str(d.get("name", ""))
    taints = [t for t in as_list(body.get("taints")) if isinstance(t, dict)]
    sources = ["ResourceSlice/" + str(as_dict(s.get("metadata")).get("name", ""))] * len(taints)
    for selector, taint, rule in rules:
        if _selected(selector, driver, pool_name, name):
            taints.append(dict(taint))
            sources.append(rule)
    consumes = tuple(
        (str(as_dict(c).get("counterSet", "")), _counter_values(as_dict(c).get("counters")))
        for c in as_list(body.get("consumesCounters"))
    )
    return Device(
        driver=driver,
        pool=pool_name,
        name=name,
        slice_name=str(as_dict(s.get("metadata")).get("name", "")),
        node_name=str(node_name) if node_name else None,
        node_selector=node_sel if isinstance(node_sel, dict) else None,
        all_nodes=all_nodes,
        attributes=qualified,
        taints=tuple(taints),
        taint_sources=tuple(sources),
        context=ctx,
        capacity=capacity,
        consumes=consumes,
        multi=multi,
        index=index,
    )


def devices_from_slices(slices: Iterable[Mapping[str, Any]]) -> list[Device]:
    """All devices of the current generation of each pool."""
    return read_slices(slices).devices


# -------------------------------------------------------------------------------------------- usage


@dataclass
class Usage:
    """What allocated claims hold: devices, counters of partitionable devices, shared capacity."""

    used: set[DeviceKey] = field(default_factory=set)
    shared: dict[DeviceKey, dict[str, Fraction]] = field(default_factory=dict)  # multi-allocation devices
    counters: dict[CounterKey, dict[str, Fraction]] = field(default_factory=dict)

    def copy(self) -> Usage:
        return Usage(
            set(self.used),
            {k: dict(v) for k, v in self.shared.items()},
            {k: dict(v) for k, v in self.counters.items()},
        )

    def take(self, device: Device | None, key: DeviceKey, consumed: Mapping[str, Fraction] | None) -> None:
        """Record one allocated (non-admin) result."""
        multi = device.multi if device is not None else consumed is not None
        first_use = key not in self.used and key not in self.shared
        if multi:
            share = self.shared.setdefault(key, {})
            for name, q in (consumed or {}).items():
                share[name] = share.get(name, Fraction(0)) + q
        else:
            self.used.add(key)
        if device is not None and first_use:
            for counter_set, counters in device.consumes:
                held = self.counters.setdefault((device.driver, device.pool, counter_set), {})
                for name, q in counters.items():
                    held[name] = held.get(name, Fraction(0)) + q


def allocated_devices(claims: Iterable[Mapping[str, Any]], exclude_uid: str | None = None) -> set[DeviceKey]:
    """Devices taken by allocated claims (admin-access results do not take a device)."""
    used: set[DeviceKey] = set()
    for _, key, _ in _results(claims, exclude_uid):
        used.add(key)
    return used


def _results(
    claims: Iterable[Mapping[str, Any]], exclude_uid: str | None = None
) -> Iterable[tuple[Mapping[str, Any], DeviceKey, dict[str, Fraction] | None]]:
    for c in claims:
        if exclude_uid and as_dict(c.get("metadata")).get("uid") == exclude_uid:
            continue
        alloc = as_dict(as_dict(c.get("status")).get("allocation"))
        for r in as_list(as_dict(alloc.get("devices")).get("results")):
            if isinstance(r, dict) and not r.get("adminAccess"):
                key = (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
                consumed = None
                if r.get("shareID") or r.get("consumedCapacity"):
                    consumed = {}
                    for name, raw in as_dict(r.get("consumedCapacity")).items():
                        q = quantity_or_none(raw)
                        if q is not None:
                            consumed[name if "/" in name else f"{key[0]}/{name}"] = q
                yield r, key, consumed


def usage_from_claims(claims: Iterable[Mapping[str, Any]], devices: Mapping[DeviceKey, Device]) -> Usage:
    usage = Usage()
    for _, key, consumed in _results(claims):
        usage.take(devices.get(key), key, consumed)
    return usage


def device_index(devices: Sequence[Device]) -> dict[DeviceKey, Device]:
    return {d.key: d for d in devices}
