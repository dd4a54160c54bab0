"""The `selector-error` mode: a claim's class (or request) selector fails at run time (pure).

kube-scheduler then leaves every pod of the claim Pending with `PodScheduled=False`, reason
`SchedulerError`, message `running "DynamicResources" filter plugin: class <name>: selector #<i>: CEL
runtime error: no such key: <key>`, and a FailedScheduling event per retry, while the devices stay free.
It is seen in those messages, or foreseen from the published devices (the selector fails on devices and
matches none). The diagnosis names the class (or claim), the selector and its expression, the missing
key and the devices it fails on, and suggests the guard (`"<key>" in device.attributes["<domain>"]`).
Never exhaustion: nothing is used up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.cluster.diagnose.types import Diagnosis
from reconciler.dra.allocator import Inventory, normalise_requests
from reconciler.dra.devices import Device, selector_exprs
from reconciler.dra.selectors import SelectorError
from reconciler.model.readers import as_dict, as_list

__all__ = ["SCHEDULER_ERROR_RE", "selector_diagnosis", "selector_failure_in"]

# kube-scheduler's words (k8s.io/dynamic-resource-allocation/structured, selectorsMatch)
SCHEDULER_ERROR_RE = re.compile(
    r"(?P<owner>(?:class|claim) [^\s:]+): selector #(?P<index>\d+): CEL (?P<phase>runtime|compile) error: "
    r"(?P<error>.+?)\s*$"
)
_SHOWN = 5


def selector_failure_in(messages: Iterable[str]) -> re.Match[str] | None:
    """The first scheduler message that reports a selector failing (a SchedulerError)."""
    for message in messages:
        m = SCHEDULER_ERROR_RE.search(message)
        if m is not None:
            return m
    return None


def _request_selectors(spec: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(request, class, the request's own CEL selectors) of every request and alternative."""
    out = []
    for req in normalise_requests(spec):
        name = str(req.get("name", ""))
        bodies = (
            [("", as_dict(req.get("exactly")))]
            if "exactly" in req
            else [(str(as_dict(s).get("name", "")), as_dict(s)) for s in as_list(req.get("firstAvailable"))]
        )
        for sub, body in bodies:
            exprs = selector_exprs(body.get("selectors")) or []
            out.append((f"{name}/{sub}" if sub else name, str(body.get("deviceClassName") or ""), exprs))
    return out


def _failing(
    inv: Inventory, spec: Mapping[str, Any]
) -> list[tuple[str, str, SelectorError, list[Device], list[Device]]]:
    """(request, class, error, devices it fails on, devices matching) per failing selector, in order."""
    out = []
    for request, cls, exprs in _request_selectors(spec):
        if cls not in inv.classes:
            continue
        found = inv.matching_detail(cls, exprs, inv.devices)
        by_error: dict[SelectorError, list[Device]] = {}
        for d in found.devices:
            if d.key in found.errors:
                by_error.setdefault(found.errors[d.key], []).append(d)
        for error, devices in by_error.items():
            out.append((request, cls, error, devices, found.matched))
    return out


def _listed(devices: Sequence[Device]) -> str:
    names = ", ".join(d.label for d in devices[:_SHOWN])
    return names + (f" and {len(devices) - _SHOWN} more" if len(devices) > _SHOWN else "")


def selector_diagnosis(
    inv: Inventory,
    ref: str,
    claim_name: str,
    spec: Mapping[str, Any],
    messages: Sequence[str],
    evidence: Sequence[str],
    classes: Mapping[str, Mapping[str, Any]],
) -> Diagnosis | None:
    """The `selector-error` diagnosis of one claim, or None when its selectors do not fail."""
    seen = selector_failure_in(messages)
    failing = _failing(inv, spec)
    chosen = None
    if seen is not None:
        owner, index = seen.group("owner"), int(seen.group("index"))
        chosen = next(
            (f for f in failing if f[2].owner(claim_name) == owner and f[2].index == index),
            None,
        )
        if chosen is None:  # the devices changed since: tell what the scheduler said
            return _from_message(ref, seen, evidence, classes)
    else:
        # foreseen: a selector that fails on devices and lets none match hangs every pod once tried
        chosen = next((f for f in failing if not f[4]), None)
        if chosen is None:
            return None
    request, cls, error, devices, matched = chosen
    owner = error.owner(claim_name)
    where = (
        f"DeviceClass {cls} spec.selectors[{error.index}]"
        if error.class_name is not None
        else f"{ref} request {request} selectors[{error.index}]"
    )
    said = seen.group(0) if seen is not None else error.message(claim_name)
    summary = (
        f"{owner} selector #{error.index} fails at run time ({error.error}): kube-scheduler stops with "
        f"SchedulerError for every pod of {ref}; the devices are not used up"
    )
    lines = [
        *evidence,
        f"{where}: {error.expression}",
        f"fails on {len(devices)} device(s) ({_listed(devices)}); matches {len(matched)}"
        + (f" ({_listed(matched)})" if matched else ""),
    ]
    if seen is None:
        lines.append(f"foreseen from the published devices: {said}")
    recovery = []
    if error.guard is not None:
        recovery.append(f"guard the selector in {where}: {error.guarded}")
    else:
        recovery.append(f'fix the selector in {where} so that it cannot fail (has(...) or "key" in map)')
    recovery.append(
        "or select devices by what the driver publishes (kubectl get resourceslices -o yaml shows the attributes)"
    )
    numbers: dict[str, Any] = {
        "selector": error.index,
        "expression": error.expression,
        "error": error.error,
        "key": error.key,
        "guard": error.guard,
        "failing": len(devices),
        "matching": len(matched),
        "request": request,
    }
    numbers["class" if error.class_name is not None else "claim"] = (
        cls if error.class_name is not None else claim_name
    )
    return Diagnosis("selector-error", ref, summary, lines, recovery, numbers)


def _from_message(
    ref: str, seen: re.Match[str], evidence: Sequence[str], classes: Mapping[str, Mapping[str, Any]]
) -> Diagnosis:
    owner, index, error = seen.group("owner"), int(seen.group("index")), seen.group("error")
    key = error.removeprefix("no such key: ") if error.startswith("no such key: ") else None
    kind, _, name = owner.partition(" ")
    exprs = selector_exprs(as_dict(as_dict(classes.get(name)).get("spec")).get("selectors")) or []
    expression = exprs[index] if kind == "class" and index < len(exprs) else None
    summary = (
        f"{owner} selector #{index} fails at run time ({error}): kube-scheduler stops with SchedulerError "
        f"for every pod of {ref}; the devices are not used up"
    )
    guard = SelectorError(name if kind == "class" else None, index, expression or "", error, key).guard
    numbers: dict[str, Any] = {
        "selector": index,
        "expression": expression,
        "error": error,
        "key": key,
        "guard": guard,
        kind: name,
    }
    lines = [
        *evidence,
        *([f"DeviceClass {name} spec.selectors[{index}]: {expression}"] if expression else []),
    ]
    recovery = [
        f"guard selector #{index} of {owner}: {guard} && (...)"
        if guard
        else f'fix selector #{index} of {owner} so that it cannot fail ("key" in device.attributes["<domain>"], or has(...))'
    ]
    return Diagnosis("selector-error", ref, summary, lines, recovery, numbers)
