"""`input.class_changes`: a DeviceClass whose selectors the change edits, judged against who uses it (pure).

Running pods keep the devices they hold when their class changes, so a change that breaks a class adds
no Pending pod today; but every restart, reschedule or scale-up of its users is allocated through the new
selectors. Each changed class is evaluated, as kube-scheduler's allocator evaluates a class, on every
published device: the devices it matches, those it fails on at run time (a CEL key the devices do not
publish), and the live users (claims requesting it, workloads whose claims or templates request it) with
the devices their claims hold. The `class-change` rule denies a class that matches no device (or fails on
every one) while it has users, and warns when it matches fewer devices than its users hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.dra.devices import Device, allocated_devices, devices_from_slices, selector_exprs
from reconciler.dra.selectors import SelectorError, evaluate_selectors
from reconciler.model import dra
from reconciler.model.objects import Manifest
from reconciler.model.readers import as_dict

__all__ = ["class_changes"]

_SHOWN = 5


def _selectors(body: Mapping[str, Any]) -> list[str] | None:
    return selector_exprs(as_dict(body.get("spec")).get("selectors"))


def _key(manifest: Manifest) -> str:
    return f"{manifest.ref.namespace}/{manifest.ref.name}"


def class_changes(head: Sequence[Manifest], live: Sequence[Manifest]) -> list[dict[str, Any]]:
    """An entry per DeviceClass of `head` whose CEL selectors differ from the live class of that name."""
    live_classes = {m.ref.name: m for m in live if m.kind == "DeviceClass"}
    changed = []
    for manifest in head:
        old = live_classes.get(manifest.ref.name) if manifest.kind == "DeviceClass" else None
        if old is None:
            continue
        new_exprs, old_exprs = _selectors(manifest.body), _selectors(old.body)
        if new_exprs is not None and new_exprs != old_exprs:
            changed.append((manifest, new_exprs, old_exprs or []))
    if not changed:
        return []
    devices = devices_from_slices(m.body for m in live if m.kind == "ResourceSlice")
    users = _Users(head, live)
    return [_judge(manifest, new, old, devices, users) for manifest, new, old in changed]


class _Users:
    """Who requests each class: live claims and templates, and the workloads that use them."""

    def __init__(self, head: Sequence[Manifest], live: Sequence[Manifest]) -> None:
        head_refs = {m.ref for m in head}
        # The live objects the change leaves alone, plus the head's version of what it manages.
        current = [m for m in live if m.ref not in head_refs] + list(head)
        self.claims = [m for m in live if m.kind == "ResourceClaim" and m.ref not in head_refs]
        self.claims += [m for m in head if m.kind == "ResourceClaim"]
        templates = [m for m in current if m.kind == "ResourceClaimTemplate"]
        self.template_classes = {_key(m): self._classes(m) for m in templates}
        self.claim_classes = {_key(m): self._classes(m) for m in self.claims}
        # What claims hold is in the live objects' status (a head claim has none).
        self.live_claims = [m for m in live if m.kind == "ResourceClaim"]
        # The workloads after the change: the head's, and the live ones it neither manages nor replaces.
        self.workloads = [m for m in current if dra.pod_spec_of(m.body) is not None]

    @staticmethod
    def _classes(manifest: Manifest) -> set[str]:
        return set(dra.describe(manifest.body, manifest.ref.namespace).device_classes)

    def of(self, class_name: str) -> tuple[list[str], list[dict[str, Any]]]:
        """(refs of the users, the live claims requesting the class: what they hold is in their status)."""
        claims = [m for m in self.claims if class_name in self.claim_classes[_key(m)]]
        refs = {str(m.ref) for m in claims if not _generated(m.body)}
        holding = [m.body for m in self.live_claims if class_name in self._classes(m)]
        for workload in self.workloads:
            info = dra.describe(workload.body, workload.ref.namespace)
            uses = [k for k in info.claim_templates if class_name in self.template_classes.get(k, set())]
            uses += [k for k in info.claims if class_name in self.claim_classes.get(k, set())]
            if uses and not _owned(workload.body):
                refs.add(str(workload.ref))
        return sorted(refs), holding


def _owned(body: Mapping[str, Any]) -> bool:
    """A pod of a ReplicaSet, Job, StatefulSet or DaemonSet: its owner is the user to name."""
    return bool(as_dict(body.get("metadata")).get("ownerReferences"))


def _generated(body: Mapping[str, Any]) -> bool:
    """A claim made for a pod from a template: the workload is the user to name."""
    return _owned(body)


def _judge(
    manifest: Manifest, new: list[str], old: list[str], devices: Sequence[Device], users: _Users
) -> dict[str, Any]:
    name = manifest.ref.name
    matched, errors, unknown = _evaluate(name, new, devices)
    old_matched = len(_evaluate(name, old, devices)[0])
    refs, claims = users.of(name)
    held = len(allocated_devices(claims))
    first_error = next(iter(errors.values()), None)
    return {
        "class": name,
        "ref": str(manifest.ref),
        "path": manifest.path,
        "line": manifest.line,
        "devices": len(devices),
        "matched": len(matched),
        "matched_before": old_matched,
        "failing": len(errors),
        "failing_devices": _listed(sorted(errors)),
        "error": first_error.message("") if first_error is not None else None,
        "guarded": first_error.guarded if first_error is not None else None,
        "unknown": unknown,
        "users": refs,
        "users_shown": _listed(refs),
        "held": held,
    }


def _evaluate(
    class_name: str, selectors: list[str], devices: Iterable[Device]
) -> tuple[list[Device], dict[str, SelectorError], bool]:
    """Devices the class's selectors match, those they fail on (by label), and whether any was unknown."""
    matched: list[Device] = []
    errors: dict[str, SelectorError] = {}
    unknown = False
    for device in devices:
        result = evaluate_selectors(class_name, selectors, [], device.context)
        if result is True:
            matched.append(device)
        elif isinstance(result, SelectorError):
            errors[f"{device.driver}/{device.label}"] = result
        elif result is None:
            unknown = True
    return matched, errors, unknown


def _listed(labels: Sequence[str]) -> str:
    return ", ".join(labels[:_SHOWN]) + (f" and {len(labels) - _SHOWN} more" if len(labels) > _SHOWN else "")
