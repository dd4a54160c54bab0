"""The backtracking search of the structured allocator (pure): one pod's claims on one node's devices.

Claims in order, requests in order, ``firstAvailable`` alternatives in order, devices in inventory order,
combinations (not permutations) within a request, as upstream's allocator does. Reaching a free device
whose selectors fail at run time stops the search with :class:`SelectorFailure`, as upstream's does. Tracks, while it
searches, the devices, partition counters and shared capacity being taken, and the claims'
``matchAttribute`` / ``distinctAttribute`` constraints. Bounded by a step budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.dra.capacity_math import consume
from reconciler.dra.devices import CounterKey, Device, DeviceKey, Usage
from reconciler.dra.nodematch import untolerated_taint
from reconciler.dra.selectors import SelectorError, SelectorFailure
from reconciler.errors import DraGitopsError

__all__ = [
    "MAX_RESULTS",
    "STEP_BUDGET",
    "Alternative",
    "BudgetExceeded",
    "Constraint",
    "PreparedClaim",
    "Search",
]

STEP_BUDGET = 50_000
MAX_RESULTS = 32  # AllocationResultsMaxSize


@dataclass
class Alternative:
    """One request, or one ``firstAvailable`` subrequest, with its candidate devices on a node."""

    request: str  # result request name ("req" or "req/sub")
    top: str  # top-level request name
    class_name: str
    candidates: list[Device]
    count: int
    all_mode: bool
    admin: bool
    tolerations: list[Any]
    capacity: dict[str, Any]  # capacity.requests
    body: dict[str, Any]
    # candidates whose selectors fail at run time (kept in their place: reaching one stops the search)
    errors: dict[DeviceKey, SelectorError] = field(default_factory=dict)
    # All mode: the first device failing its selectors, found before the search as upstream does
    setup_error: tuple[Device, SelectorError] | None = None

    @property
    def matched(self) -> list[Device]:
        return [d for d in self.candidates if d.key not in self.errors] if self.errors else self.candidates


@dataclass
class Constraint:
    kind: str  # "match" | "distinct"
    attribute: str
    requests: frozenset[str]
    values: list[Any] = field(default_factory=list)

    def applies(self, alt: Alternative) -> bool:
        return not self.requests or alt.top in self.requests or alt.request in self.requests

    def add(self, alt: Alternative, d: Device) -> bool:
        if not self.applies(alt):
            return True
        value = d.attribute(self.attribute)
        if value is None:
            return False
        if self.kind == "match" and self.values and value != self.values[0]:
            return False
        if self.kind == "distinct" and value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, alt: Alternative) -> None:
        if self.applies(alt):
            self.values.pop()


@dataclass
class PreparedClaim:
    spec: dict[str, Any]
    requests: list[list[Alternative]]
    constraints: list[Constraint]
    picks: list[tuple[Alternative, Device, dict[str, Fraction] | None]] = field(default_factory=list)


class BudgetExceeded(DraGitopsError):
    """The search took more than `STEP_BUDGET` steps: the allocator reports the outcome as unknown."""


class Search:
    """Backtracking over claims → requests → alternatives → device combinations (upstream's order)."""

    def __init__(
        self,
        counter_sets: Mapping[CounterKey, Mapping[str, Fraction]],
        claims: list[PreparedClaim],
        usage: Usage,
    ) -> None:
        self.counter_sets = counter_sets  # the pools' shared counters: what partitions draw from
        self.claims = claims
        self.usage = usage
        self.taking: dict[DeviceKey, set[int]] = {}  # devices being allocated → claim indices
        self.shared: dict[DeviceKey, dict[str, Fraction]] = {}  # capacity being allocated (multi devices)
        self.counters: dict[tuple[str, str, str], dict[str, Fraction]] = {}
        self.steps = 0
        self._marks: list[bool] = []  # per pick: the shared device was in use before (no counters taken)

    def run(self) -> bool:
        return self._claim(0)

    def _claim(self, ci: int) -> bool:
        if ci == len(self.claims):
            return True
        return self._request(ci, 0)

    def _request(self, ci: int, ri: int) -> bool:
        claim = self.claims[ci]
        if ri == len(claim.requests):
            return self._claim(ci + 1)
        for alt in claim.requests[ri]:
            if alt.all_mode:
                if self._all(ci, ri, alt):
                    return True
            elif len(claim.picks) + alt.count <= MAX_RESULTS and self._pick(ci, ri, alt, 0, alt.count):
                return True
        return False

    def _all(self, ci: int, ri: int, alt: Alternative) -> bool:
        if not alt.candidates or len(self.claims[ci].picks) + len(alt.candidates) > MAX_RESULTS:
            return False
        done = 0
        for d in alt.candidates:
            if not self._add(ci, alt, d):
                break
            done += 1
        else:
            if self._request(ci, ri + 1):
                return True
        for _ in range(done):
            self._undo(ci)
        return False

    def _pick(self, ci: int, ri: int, alt: Alternative, start: int, remaining: int) -> bool:
        if remaining == 0:
            return self._request(ci, ri + 1)
        cands = alt.candidates
        # Upstream walks every device even when too few are left, so it reaches a failing one.
        end = len(cands) if alt.errors else len(cands) - remaining + 1
        for idx in range(start, end):
            self.steps += 1
            if self.steps > STEP_BUDGET:
                raise BudgetExceeded(f"the search took more than {STEP_BUDGET} steps")
            if self._add(ci, alt, cands[idx]):
                if self._pick(ci, ri, alt, idx + 1, remaining - 1):
                    return True
                self._undo(ci)
        return False

    # ------------------------------------------------------------------ one device

    def in_use(self, key: DeviceKey) -> bool:
        return key in self.usage.used or bool(self.taking.get(key))

    def _add(self, ci: int, alt: Alternative, d: Device) -> bool:
        key = d.key
        if not alt.admin and not d.multi and self.in_use(key):
            return False  # upstream checks "in use" before the selectors
        error = alt.errors.get(key)
        if error is not None:
            raise SelectorFailure(error, key, ci)
        if not d.multi and alt.admin and ci in self.taking.get(key, ()):
            return False
        capacity_in_use = d.multi and (key in self.usage.shared or key in self.shared)
        if d.consumes and not alt.admin and not capacity_in_use and not self._counters_free(d):
            return False
        if untolerated_taint(d.taints, alt.tolerations) is not None:
            return False
        consumed: dict[str, Fraction] | None = None
        if d.multi or alt.capacity:
            held = dict(self.usage.shared.get(key, {})) if d.multi else {}
            for name, q in self.shared.get(key, {}).items():
                held[name] = held.get(name, Fraction(0)) + q
            consumed = consume(d, alt.capacity, held)
            if consumed is None:
                return False
        claim = self.claims[ci]
        for n, constraint in enumerate(claim.constraints):
            if not constraint.add(alt, d):
                for earlier in claim.constraints[:n]:
                    earlier.remove(alt)
                return False
        if not d.multi:
            self.taking.setdefault(key, set()).add(ci)
        elif consumed:
            share = self.shared.setdefault(key, {})
            for name, q in consumed.items():
                share[name] = share.get(name, Fraction(0)) + q
        if d.consumes and not alt.admin and not capacity_in_use:
            for counter_set, counters in d.consumes:
                held_counters = self.counters.setdefault((d.driver, d.pool, counter_set), {})
                for name, q in counters.items():
                    held_counters[name] = held_counters.get(name, Fraction(0)) + q
        claim.picks.append((alt, d, consumed if d.multi else None))
        self._marks.append(capacity_in_use)
        return True

    def _undo(self, ci: int) -> None:
        claim = self.claims[ci]
        alt, d, consumed = claim.picks.pop()
        capacity_in_use = self._marks.pop()
        for constraint in claim.constraints:
            constraint.remove(alt)
        key = d.key
        if not d.multi:
            self.taking[key].discard(ci)
        elif consumed:
            share = self.shared[key]
            for name, q in consumed.items():
                share[name] -= q
            if not any(share.values()):
                del self.shared[key]
        if d.consumes and not alt.admin and not capacity_in_use:
            for counter_set, counters in d.consumes:
                held_counters = self.counters[(d.driver, d.pool, counter_set)]
                for name, q in counters.items():
                    held_counters[name] -= q

    def _counters_free(self, d: Device) -> bool:
        for counter_set, counters in d.consumes:
            ck = (d.driver, d.pool, counter_set)
            total = self.counter_sets.get(ck)
            if total is None:
                return False
            held = self.usage.counters.get(ck, {})
            taking = self.counters.get(ck, {})
            for name, q in counters.items():
                if name not in total:
                    return False
                if held.get(name, Fraction(0)) + taking.get(name, Fraction(0)) + q > total[name]:
                    return False
        return True
