"""Structured-parameters device allocation, as kube-scheduler's DynamicResources plugin does it (pure).

Input is plain dicts in resource.k8s.io/v1 shape (v1beta1/v1beta2 shapes are normalised on the way in):
ResourceSlices, DeviceClasses, the claims that already exist (their allocated devices are taken, unless a
result has ``adminAccess``), and the claim(s) to allocate for a candidate node.

The search is a small backtracking over requests, ``firstAvailable`` alternatives and devices, with
``matchAttribute`` / ``distinctAttribute`` constraints checked as devices are picked (best effort, with a
step budget). CEL selectors go through :mod:`reconciler.dra.cel`; a selector whose answer is unknown
makes the device not match, and is remembered so that callers can say "unknown" instead of
"does not fit".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra import cel
from reconciler.dra.devices import (
    Device,
    DeviceKey,
    _as_dict,
    _as_list,
    _match_labels_selector,
    _selector_exprs,
    _tolerates,
    allocated_devices,
    claim_spec,
    devices_from_slices,
    node_selector_for,
    normalise_requests,
)

__all__ = [
    "CANNOT_ALLOCATE",
    "AllocationOutcome",
    "Device",
    "Inventory",
    "allocate",
    "allocated_devices",
    "claim_spec",
    "node_selector_for",
    "normalise_requests",
]

CANNOT_ALLOCATE = "cannot allocate all claims"
ADMIN_FINALIZER = "resource.kubernetes.io/delete-protection"
STEP_BUDGET = 50_000


# -------------------------------------------------------------------------------------------- outcomes


@dataclass
class AllocationOutcome:
    ok: bool
    allocation: dict[str, Any] | None = None  # status.allocation (no timestamp)
    reason: str | None = None  # scheduler wording, e.g. "cannot allocate all claims"
    missing_class: str | None = None  # the DeviceClass that does not exist
    unknown: bool = False  # a CEL selector could not be evaluated for some device
    node: str | None = None
    devices: list[DeviceKey] = field(default_factory=list)


@dataclass
class _Slot:
    request: str  # result request name ("req" or "req/sub")
    top: str  # top-level request name (for constraints)
    candidates: list[Device]
    count: int
    all_mode: bool
    admin: bool
    class_name: str


@dataclass
class _Search:
    used: set[DeviceKey]
    constraints: list[dict[str, Any]]
    steps: int = 0
    exhausted: bool = False


class Inventory:
    """Slices + classes + existing claims, prepared once; allocate many claims against it."""

    def __init__(
        self,
        slices: Iterable[Mapping[str, Any]],
        classes: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        self.devices = devices_from_slices(slices)
        if isinstance(classes, Mapping):
            self.classes: dict[str, Mapping[str, Any]] = {str(k): v for k, v in classes.items()}
        else:
            self.classes = {str(_as_dict(c.get("metadata")).get("name", "")): c for c in classes}
        self.claims = [c for c in claims if isinstance(c, Mapping)]
        self.used = allocated_devices(self.claims)
        self._match_cache: dict[tuple[tuple[str, ...], DeviceKey], bool | None] = {}

    # ------------------------------------------------------------------ helpers

    def class_selectors(self, class_name: str) -> list[str] | None:
        cls = self.classes.get(class_name)
        if cls is None:
            return None
        return _selector_exprs(_as_dict(cls.get("spec")).get("selectors"))

    def device_matches(self, device: Device, exprs: Sequence[str]) -> bool | None:
        if not exprs:
            return True
        key = (tuple(exprs), device.key)
        if key in self._match_cache:
            return self._match_cache[key]
        result = None if device.context is None else cel.evaluate_all(list(exprs), device.context)
        self._match_cache[key] = result
        return result

    def devices_on_node(self, node: str | None, labels: Mapping[str, str] | None = None) -> list[Device]:
        if node is None:
            return list(self.devices)
        labels = labels or {}
        out = []
        for d in self.devices:
            if d.node_name is not None:
                if d.node_name == node:
                    out.append(d)
            elif d.all_nodes or _match_labels_selector(d.node_selector, node, labels):
                out.append(d)
        return out

    def nodes(self) -> list[str]:
        """Names of nodes that have node-local devices (sorted)."""
        return sorted({d.node_name for d in self.devices if d.node_name})

    def matching(
        self, class_name: str, selectors: Sequence[str], devices: Iterable[Device]
    ) -> tuple[list[Device], bool]:
        """Devices matching a class and request selectors; and whether any answer was unknown."""
        class_exprs = self.class_selectors(class_name) or []
        exprs = list(class_exprs) + list(selectors)
        out: list[Device] = []
        unknown = False
        for d in devices:
            r = self.device_matches(d, exprs)
            if r is True:
                out.append(d)
            elif r is None:
                unknown = True
        return out, unknown

    # ------------------------------------------------------------------ allocation

    def allocate(
        self,
        claim: Mapping[str, Any],
        node: str | None = None,
        node_labels: Mapping[str, str] | None = None,
        extra_used: Iterable[DeviceKey] = (),
    ) -> AllocationOutcome:
        """Allocate one claim for ``node`` (None: any single node, or network-attached devices)."""
        return self.allocate_many([claim], node, node_labels, extra_used)[0]

    def allocate_many(
        self,
        claims: Sequence[Mapping[str, Any]],
        node: str | None = None,
        node_labels: Mapping[str, str] | None = None,
        extra_used: Iterable[DeviceKey] = (),
    ) -> list[AllocationOutcome]:
        """Allocate several claims together (all of a pod's claims) on one node.

        When ``node`` is None every node with devices is tried (and node-independent devices), and the
        first where all claims fit wins. The outcomes list is per claim, all ok or all failed.
        """
        # A missing class fails scheduling on every node (PreFilter), before any device is looked at.
        for claim in claims:
            missing = self.missing_class(claim_spec(claim))
            if missing is not None:
                req, cls = missing
                return [
                    AllocationOutcome(
                        ok=False,
                        reason=f"request {req}: device class {cls} does not exist",
                        missing_class=cls,
                    )
                    for _ in claims
                ]
        candidates: list[str | None] = [node] if node is not None else [*self.nodes(), None]
        unknown = False
        for cand in candidates:
            labels = node_labels if cand == node else None
            outcomes = self._allocate_on(claims, cand, labels, set(extra_used))
            if outcomes is not None and all(o.ok for o in outcomes):
                return outcomes
            if outcomes is not None:
                unknown = unknown or any(o.unknown for o in outcomes)
        return [
            AllocationOutcome(ok=False, reason=CANNOT_ALLOCATE, unknown=unknown, node=node) for _ in claims
        ]

    def missing_class(self, spec: Mapping[str, Any]) -> tuple[str, str] | None:
        for req in normalise_requests(spec):
            name = str(req.get("name", ""))
            if "exactly" in req:
                cls = str(_as_dict(req.get("exactly")).get("deviceClassName", ""))
                if cls not in self.classes:
                    return name, cls
            else:
                for sub in _as_list(req.get("firstAvailable")):
                    cls = str(_as_dict(sub).get("deviceClassName", ""))
                    if cls not in self.classes:
                        return f"{name}/{_as_dict(sub).get('name', '')}", cls
        return None

    def _allocate_on(
        self,
        claims: Sequence[Mapping[str, Any]],
        node: str | None,
        labels: Mapping[str, str] | None,
        extra_used: set[DeviceKey],
    ) -> list[AllocationOutcome] | None:
        if node is None:
            # "no node": only devices that are not node-local (network-attached / allNodes)
            devices = [d for d in self.devices if d.node_name is None]
        else:
            devices = self.devices_on_node(node, labels)
        used = set(self.used) | extra_used
        outcomes: list[AllocationOutcome] = []
        for claim in claims:
            md = _as_dict(claim.get("metadata"))
            own_uid = md.get("uid")
            claim_used = used
            if own_uid:
                claim_used = used - {
                    k
                    for k in allocated_devices(
                        [c for c in self.claims if _as_dict(c.get("metadata")).get("uid") == own_uid]
                    )
                }
            outcome = self._allocate_claim(claim_spec(claim), devices, claim_used, node)
            outcomes.append(outcome)
            if not outcome.ok:
                return [
                    AllocationOutcome(
                        ok=False, reason=CANNOT_ALLOCATE, unknown=any(o.unknown for o in outcomes), node=node
                    )
                    for _ in claims
                ]
            used |= {k for k, admin in zip(outcome.devices, _admin_flags(outcome), strict=True) if not admin}
        return outcomes

    def _allocate_claim(
        self, spec: Mapping[str, Any], devices: list[Device], used: set[DeviceKey], node: str | None
    ) -> AllocationOutcome:
        requests = normalise_requests(spec)
        constraints = [
            c for c in _as_list(_as_dict(spec.get("devices")).get("constraints")) if isinstance(c, dict)
        ]
        unknown = False
        # Per request, the list of alternatives (each a _Slot template without device choice yet).
        alternatives: list[list[_Slot]] = []
        for req in requests:
            name = str(req.get("name", ""))
            alts: list[_Slot] = []
            subs = (
                [("", _as_dict(req.get("exactly")))]
                if "exactly" in req
                else [
                    (str(_as_dict(s).get("name", "")), _as_dict(s))
                    for s in _as_list(req.get("firstAvailable"))
                ]
            )
            for sub_name, body in subs:
                cls = str(body.get("deviceClassName", ""))
                selectors = _selector_exprs(body.get("selectors"))
                admin = bool(body.get("adminAccess"))
                pool = [d for d in devices if _tolerates(body.get("tolerations"), d.taints)]
                matched, unk = self.matching(cls, selectors, pool)
                unknown = unknown or unk
                mode = body.get("allocationMode") or "ExactCount"
                count = int(body.get("count") or 1)
                alts.append(
                    _Slot(
                        request=f"{name}/{sub_name}" if sub_name else name,
                        top=name,
                        candidates=matched,
                        count=count,
                        all_mode=mode == "All",
                        admin=admin,
                        class_name=cls,
                    )
                )
            alternatives.append(alts)
        search = _Search(used=set(used), constraints=constraints)
        chosen: list[tuple[_Slot, Device]] = []
        if not self._search(alternatives, 0, chosen, search):
            return AllocationOutcome(ok=False, reason=CANNOT_ALLOCATE, unknown=unknown, node=node)
        results: list[dict[str, Any]] = []
        keys: list[DeviceKey] = []
        node_local = False
        selector: dict[str, Any] | None = None
        for slot, dev in chosen:
            r: dict[str, Any] = {
                "request": slot.request,
                "driver": dev.driver,
                "pool": dev.pool,
                "device": dev.name,
            }
            if slot.admin:
                r["adminAccess"] = True
            results.append(r)
            keys.append(dev.key)
            if dev.node_name:
                node_local = True
            elif dev.node_selector and selector is None:
                selector = dev.node_selector
        allocation: dict[str, Any] = {"devices": {"results": results}}
        config = self._config(spec, chosen)
        if config:
            allocation["devices"]["config"] = config
        if node_local and node:
            allocation["nodeSelector"] = node_selector_for(node)
        elif node_local:
            nodes = sorted({d.node_name for _, d in chosen if d.node_name})
            allocation["nodeSelector"] = node_selector_for(nodes[0])
        elif selector is not None:
            allocation["nodeSelector"] = selector
        return AllocationOutcome(ok=True, allocation=allocation, unknown=unknown, node=node, devices=keys)

    def _config(self, spec: Mapping[str, Any], chosen: list[tuple[_Slot, Device]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        by_class: dict[str, list[str]] = {}
        for slot, _ in chosen:
            reqs = by_class.setdefault(slot.class_name, [])
            if slot.request not in reqs:
                reqs.append(slot.request)
        for cls_name, reqs in by_class.items():
            cls = self.classes.get(cls_name) or {}
            for cfg in _as_list(_as_dict(cls.get("spec")).get("config")):
                if isinstance(cfg, dict) and cfg.get("opaque"):
                    out.append({"source": "FromClass", "requests": list(reqs), "opaque": cfg["opaque"]})
        for cfg in _as_list(_as_dict(spec.get("devices")).get("config")):
            if isinstance(cfg, dict) and cfg.get("opaque"):
                entry: dict[str, Any] = {"source": "FromClaim", "opaque": cfg["opaque"]}
                if cfg.get("requests"):
                    entry["requests"] = list(cfg["requests"])
                out.append(entry)
        return out

    # ------------------------------------------------------------------ backtracking

    def _search(
        self, alternatives: list[list[_Slot]], i: int, chosen: list[tuple[_Slot, Device]], s: _Search
    ) -> bool:
        if i == len(alternatives):
            return True
        for slot in alternatives[i]:
            if s.exhausted:
                return False
            mark = len(chosen)
            if slot.all_mode:
                picks = [d for d in slot.candidates]
                if not picks or (not slot.admin and any(d.key in s.used for d in picks)):
                    continue
                ok = True
                for d in picks:
                    if not self._fits_constraints(slot, d, chosen, s):
                        ok = False
                        break
                    chosen.append((slot, d))
                if ok and self._search(alternatives, i + 1, chosen, s):
                    return True
                del chosen[mark:]
                continue
            if self._pick(slot, 0, slot.count, chosen, s, alternatives, i):
                return True
            del chosen[mark:]
        return False

    def _pick(
        self,
        slot: _Slot,
        start: int,
        remaining: int,
        chosen: list[tuple[_Slot, Device]],
        s: _Search,
        alternatives: list[list[_Slot]],
        i: int,
    ) -> bool:
        if remaining == 0:
            return self._search(alternatives, i + 1, chosen, s)
        taken = {d.key for _, d in chosen}
        for idx in range(start, len(slot.candidates)):
            s.steps += 1
            if s.steps > STEP_BUDGET:
                s.exhausted = True
                return False
            if len(slot.candidates) - idx < remaining:
                return False
            d = slot.candidates[idx]
            if d.key in taken or (not slot.admin and d.key in s.used):
                continue
            if not self._fits_constraints(slot, d, chosen, s):
                continue
            chosen.append((slot, d))
            if self._pick(slot, idx + 1, remaining - 1, chosen, s, alternatives, i):
                return True
            chosen.pop()
        return False

    @staticmethod
    def _fits_constraints(slot: _Slot, d: Device, chosen: list[tuple[_Slot, Device]], s: _Search) -> bool:
        for c in s.constraints:
            reqs = [str(r) for r in _as_list(c.get("requests"))]
            if reqs and slot.top not in reqs and slot.request not in reqs:
                continue
            peers = [pd for ps, pd in chosen if not reqs or ps.top in reqs or ps.request in reqs]
            if c.get("matchAttribute"):
                attr = str(c["matchAttribute"])
                value = d.attribute(attr)
                if value is None:
                    return False
                if any(pd.attribute(attr) != value for pd in peers):
                    return False
            if c.get("distinctAttribute"):
                attr = str(c["distinctAttribute"])
                value = d.attribute(attr)
                if value is None:
                    return False
                if any(pd.attribute(attr) == value for pd in peers):
                    return False
        return True


def _admin_flags(outcome: AllocationOutcome) -> list[bool]:
    results = _as_list(_as_dict(_as_dict(outcome.allocation).get("devices")).get("results"))
    return [bool(_as_dict(r).get("adminAccess")) for r in results]


# ------------------------------------------------------------------------------------------- functions


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
