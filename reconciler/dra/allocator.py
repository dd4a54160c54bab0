"""Structured-parameters allocation of a pod's claims on one node, as kube-scheduler's DRA plugin does it.

Pure. Input is plain dicts in resource.k8s.io/v1 shape (older shapes normalised by
:mod:`reconciler.dra.devices`). The search follows the upstream structured allocator: claims in order,
requests in order, ``firstAvailable`` alternatives in order, devices in inventory order, backtracking
over combinations. All of a pod's claims are allocated together on one node or not at all.

Modelled: ``ExactCount`` and ``All`` (every matching device reachable from the node, failing when one of
them is in use or carries an untolerated taint), ``matchAttribute`` / ``distinctAttribute``
constraints, device taints and DeviceTaintRules against request tolerations, ``adminAccess`` (may use
allocated devices, takes nothing), partitionable devices (``consumesCounters`` against the pool's
``sharedCounters``) and consumable capacity (``allowMultipleAllocations`` with capacity requests and
request policies). What is not modelled (a CEL selector that cannot be evaluated, a non-CEL selector, an
unknown allocation mode, ``All`` over a pool still being published, a search past its step budget) makes
the outcome "unknown", never a fit that might not be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.dra.capacity_math import consume
from reconciler.dra.devices import (
    Device,
    DeviceKey,
    Usage,
    allocated_devices,
    claim_spec,
    device_index,
    normalise_requests,
    read_slices,
    selector_exprs,
    usage_from_claims,
)
from reconciler.dra.matching import SelectorMatcher
from reconciler.dra.results import allocation_result
from reconciler.dra.search import Alternative, BudgetExceeded, Constraint, PreparedClaim, Search
from reconciler.dra.selectors import SelectorError, SelectorFailure
from reconciler.model.readers import as_dict, as_list

__all__ = [
    "CANNOT_ALLOCATE",
    "AllocationOutcome",
    "Inventory",
    "allocate",
    "allocated_devices",
    "claim_spec",
    "normalise_requests",
]

CANNOT_ALLOCATE = "cannot allocate all claims"


@dataclass
class AllocationOutcome:
    ok: bool
    allocation: dict[str, Any] | None = None  # status.allocation (no timestamp)
    reason: str | None = None  # scheduler wording, e.g. "cannot allocate all claims"
    missing_class: str | None = None  # the DeviceClass that does not exist
    unknown: bool = False  # something the model cannot decide stood in the way
    unknown_reason: str | None = None  # what it was
    error: str | None = None  # a selector failed at run time: kube-scheduler's error, scheduling stops
    selector_error: SelectorError | None = None
    error_device: DeviceKey | None = None  # the device it failed on
    node: str | None = None
    devices: list[DeviceKey] = field(default_factory=list)
    taken: list[tuple[DeviceKey, dict[str, Fraction] | None]] = field(default_factory=list)  # non-admin


class Inventory(SelectorMatcher):
    """Slices + classes + existing claims (+ DeviceTaintRules), prepared once; allocate many pods on it."""

    def __init__(
        self,
        slices: Iterable[Mapping[str, Any]],
        classes: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]] = (),
        taint_rules: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        data = read_slices(slices, taint_rules)
        super().__init__(data.devices, classes)
        self.counter_sets = data.counters
        self.incomplete = data.incomplete
        self.by_key = device_index(self.devices)
        self.claims = [c for c in claims if isinstance(c, Mapping)]
        self.usage = usage_from_claims(self.claims, self.by_key)
        self._node_cache: dict[tuple[str, tuple[tuple[str, str], ...]], list[Device]] = {}
        self._unbound = [d for d in self.devices if d.node_name is None]
        self._by_node: dict[str, list[Device]] = {}
        for d in self.devices:
            if d.node_name is not None:
                self._by_node.setdefault(d.node_name, []).append(d)

    @property
    def used(self) -> set[DeviceKey]:
        return self.usage.used

    def devices_on_node(self, node: str | None, labels: Mapping[str, str] | None = None) -> list[Device]:
        """Devices reachable from ``node`` (node-local ones, allNodes, matching nodeSelector), in order."""
        if node is None:
            return list(self.devices)
        labels = labels or {}
        cache_key = (node, tuple(sorted(labels.items())))
        cached = self._node_cache.get(cache_key)
        if cached is None:
            cached = sorted(
                [*self._by_node.get(node, []), *(d for d in self._unbound if d.reachable_from(node, labels))],
                key=lambda d: d.index,
            )
            self._node_cache[cache_key] = cached
        return cached

    def local_devices(self, node: str) -> list[Device]:
        """The devices local to ``node`` (published with its nodeName), in inventory order."""
        return self._by_node.get(node, [])

    def nodes(self) -> list[str]:
        """Names of nodes that have node-local devices (sorted)."""
        return sorted(self._by_node)

    # ------------------------------------------------------------------ preparing a claim on a node

    def alternatives(
        self, spec: Mapping[str, Any], devices: Sequence[Device], usage: Usage
    ) -> tuple[list[list[Alternative]], str | None]:
        """Per request its alternatives with candidate devices; and what could not be modelled, if anything."""
        unknown: str | None = None
        out: list[list[Alternative]] = []
        for req in normalise_requests(spec):
            name = str(req.get("name", ""))
            subs = (
                [("", as_dict(req.get("exactly")))]
                if "exactly" in req
                else [
                    (str(as_dict(s).get("name", "")), as_dict(s)) for s in as_list(req.get("firstAvailable"))
                ]
            )
            alts = []
            for sub_name, body in subs:
                cls = str(body.get("deviceClassName", ""))
                selectors = selector_exprs(body.get("selectors"))
                mode = body.get("allocationMode") or "ExactCount"
                opaque = selectors is None or self.class_selectors(cls) is None
                if opaque:
                    unknown = unknown or f"request {name}: a selector that is not CEL"
                    selectors = []
                if mode not in ("ExactCount", "All"):
                    unknown = unknown or f"request {name}: allocationMode {mode}"
                found = self.matching_detail(cls, selectors or [], devices)
                matched, errors = found.devices, found.errors
                if opaque:
                    matched, errors = (
                        [],
                        {},
                    )  # the model cannot tell which devices match: none, and say unknown
                if found.unknown and not opaque:
                    why = self.unknown_reason(cls, selectors or [], devices)
                    unknown = unknown or f"request {name}: {why}"
                capacity = as_dict(as_dict(body.get("capacity")).get("requests"))
                setup_error: tuple[Device, SelectorError] | None = None
                if mode == "All":
                    if any((d.driver, d.pool) in self.incomplete for d in matched):
                        unknown = (
                            unknown or f"request {name}: allocationMode All over a pool still being published"
                        )
                        matched = []  # upstream refuses All until the pool is complete
                    # upstream evaluates every device for All before the search, in use or not
                    setup_error = next(((d, errors[d.key]) for d in matched if d.key in errors), None)
                    matched = [
                        d
                        for d in matched
                        if d.key not in errors and consume(d, capacity, usage.shared.get(d.key)) is not None
                    ]
                    errors = {}
                else:
                    matched = [d for d in matched if (d.driver, d.pool) not in self.incomplete]
                raw_count = body.get("count")
                alts.append(
                    Alternative(
                        request=f"{name}/{sub_name}" if sub_name else name,
                        top=name,
                        class_name=cls,
                        candidates=matched,
                        count=raw_count if isinstance(raw_count, int) and raw_count > 0 else 1,
                        all_mode=mode == "All",
                        admin=bool(body.get("adminAccess")),
                        tolerations=as_list(body.get("tolerations")),
                        capacity=capacity,
                        body=body,
                        errors=errors,
                        setup_error=setup_error,
                    )
                )
            out.append(alts)
        return out, unknown

    @staticmethod
    def constraints(spec: Mapping[str, Any]) -> list[Constraint]:
        out = []
        for c in as_list(as_dict(spec.get("devices")).get("constraints")):
            c = as_dict(c)
            reqs = frozenset(str(r) for r in as_list(c.get("requests")))
            if c.get("matchAttribute"):
                out.append(Constraint("match", str(c["matchAttribute"]), reqs))
            if c.get("distinctAttribute"):
                out.append(Constraint("distinct", str(c["distinctAttribute"]), reqs))
        return out

    # ------------------------------------------------------------------ allocation

    def allocate(
        self,
        claim: Mapping[str, Any],
        node: str | None = None,
        node_labels: Mapping[str, str] | None = None,
        usage: Usage | None = None,
    ) -> AllocationOutcome:
        """Allocate one claim for ``node`` (None: the first node where it fits)."""
        return self.allocate_many([claim], node, node_labels, usage)[0]

    def allocate_many(
        self,
        claims: Sequence[Mapping[str, Any]],
        node: str | None = None,
        node_labels: Mapping[str, str] | None = None,
        usage: Usage | None = None,
    ) -> list[AllocationOutcome]:
        """Allocate several claims together (all of a pod's claims) on one node: all fit or none.

        ``usage`` is what is held already (default: what the inventory's claims hold); a claim's own
        earlier allocation does not count against it. With ``node`` None every node with devices is
        tried, then node-independent devices alone.
        """
        for claim in claims:
            missing = self.missing_class(claim_spec(claim))
            if missing is not None:
                req, cls = missing
                reason = f"request {req}: device class {cls} does not exist"
                return [AllocationOutcome(ok=False, reason=reason, missing_class=cls) for _ in claims]
        base = usage if usage is not None else self.usage
        own = [as_dict(c.get("metadata")).get("uid") for c in claims]
        if any(own) and usage is None:
            base = usage_from_claims(
                [c for c in self.claims if as_dict(c.get("metadata")).get("uid") not in own], self.by_key
            )
        candidates: list[str | None] = [node] if node is not None else [*self.nodes(), None]
        unknown: str | None = None
        for cand in candidates:
            if cand is None and node is None:
                devices = list(self._unbound)
            else:
                devices = self.devices_on_node(cand, node_labels if cand == node else None)
            outcomes = self.allocate_on(claims, cand, devices, base)
            if outcomes[0].ok or outcomes[0].error:
                return outcomes
            unknown = unknown or outcomes[0].unknown_reason
        return _cannot_allocate(claims, node, unknown)

    def allocate_on(
        self, claims: Sequence[Mapping[str, Any]], node: str | None, devices: Sequence[Device], usage: Usage
    ) -> list[AllocationOutcome]:
        """The joint allocation of ``claims`` from ``devices`` (those reachable from ``node``)."""
        prepared: list[PreparedClaim] = []
        unknown: str | None = None
        for claim in claims:
            spec = claim_spec(claim)
            alts, unk = self.alternatives(spec, devices, usage)
            unknown = unknown or unk
            prepared.append(PreparedClaim(spec, alts, self.constraints(spec)))
        for ci, c in enumerate(prepared):
            for alt in (a for alts in c.requests for a in alts):
                if alt.setup_error is not None:
                    device, error = alt.setup_error
                    return _failed(claims, ci, node, error, device.key)
        search = Search(self.counter_sets, prepared, usage)
        try:
            ok = search.run()
        except BudgetExceeded:
            ok = False
            unknown = unknown or "the search for a device combination exceeded its step budget"
        except SelectorFailure as failure:
            return _failed(claims, failure.claim_index, node, failure.error, failure.device)
        if not ok:
            return _cannot_allocate(claims, node, unknown)
        return [self._outcome(claim, c, node, unknown) for claim, c in zip(claims, prepared, strict=True)]

    def _outcome(
        self, claim: Mapping[str, Any], c: PreparedClaim, node: str | None, unknown: str | None
    ) -> AllocationOutcome:
        allocation, keys, taken = allocation_result(claim, c, node, self.classes)
        return AllocationOutcome(
            ok=True,
            allocation=allocation,
            unknown=unknown is not None,
            unknown_reason=unknown,
            node=node,
            devices=keys,
            taken=taken,
        )


def claim_label(claim: Mapping[str, Any]) -> str:
    md = as_dict(claim.get("metadata"))
    return f"{md.get('namespace', '')}/{md.get('name', '')}"


def _cannot_allocate(
    claims: Sequence[Mapping[str, Any]], node: str | None, unknown: str | None
) -> list[AllocationOutcome]:
    """No combination of devices fits the claims (``unknown``: what might have made one fit)."""
    return [
        AllocationOutcome(
            ok=False, reason=CANNOT_ALLOCATE, unknown=unknown is not None, unknown_reason=unknown, node=node
        )
        for _ in claims
    ]


def _failed(
    claims: Sequence[Mapping[str, Any]], ci: int, node: str | None, error: SelectorError, device: DeviceKey
) -> list[AllocationOutcome]:
    """A selector failed at run time: the allocation (the pod's Filter on this node) stops with an error."""
    message = error.message(claim_label(claims[ci]))
    return [
        AllocationOutcome(
            ok=False, reason=message, error=message, selector_error=error, error_device=device, node=node
        )
        for _ in claims
    ]


def allocate(
    slices: Iterable[Mapping[str, Any]],
    classes: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    claim: Mapping[str, Any],
    node: str | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> AllocationOutcome:
    """Allocate ``claim`` on ``node`` given the slices, classes and existing claims."""
    return Inventory(slices, classes, claims).allocate(claim, node, node_labels)
