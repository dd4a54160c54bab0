"""The change set between two object sets, computed as a value before anything is applied.

Creates and updates run in stage order (canary drivers first inside the drivers stage); deletes run in
reverse stage order, after every create and update. A plan renders to stable text for tests and humans.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reconciler.model import dra
from reconciler.model.objects import Manifest, ObjRef
from reconciler.model.stages import DRIVERS, STAGE_NAMES, stage_label, stage_of, step_of

Op = Literal["create", "update", "delete"]
_OP_SIGN = {"create": "+", "update": "~", "delete": "-"}


@dataclass(frozen=True)
class Change:
    op: Op
    ref: ObjRef
    stage: int
    step: int
    old: Manifest | None
    new: Manifest | None
    driver_change: bool

    @property
    def current(self) -> Manifest:
        """The manifest that describes the change: the new one, or the old one for a delete."""
        manifest = self.new or self.old
        assert manifest is not None
        return manifest


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]

    def count(self, op: Op) -> int:
        return sum(1 for change in self.changes if change.op == op)

    @property
    def empty(self) -> bool:
        return not self.changes

    def summary(self) -> str:
        create, update, delete = self.count("create"), self.count("update"), self.count("delete")
        return f"{create} to create, {update} to update, {delete} to delete"

    def render(self) -> str:
        """Stable text: one line per change, grouped under stage headings in execution order."""
        lines = [f"Plan: {self.summary()}"]
        heading = None
        for change in self.changes:
            label = stage_label(change.stage, change.step)
            direction = "delete" if change.op == "delete" else "apply"
            if (label, direction) != heading:
                heading = (label, direction)
                lines.append(f"stage {label}{' (deletions)' if direction == 'delete' else ''}")
            note = "  (driver change)" if change.driver_change else ""
            lines.append(f"  {_OP_SIGN[change.op]} {change.op} {change.ref}  {change.current.where}{note}")
        return "\n".join(lines) + "\n"


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    """What counts for "changed": everything the user wrote except status, which the server owns."""
    return {key: value for key, value in body.items() if key != "status"}


def _pod_template(body: dict[str, Any]) -> Any:
    """The whole pod template (metadata too: a changed template annotation restarts every driver pod)."""
    spec = body.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    return template if isinstance(template, dict) else dra.pod_spec_of(body)


def _is_driver_change(
    old: Manifest | None, new: Manifest | None, driver_config: set[tuple[str, str, str]]
) -> bool:
    """A driver change (docs/operator-guide.md, "Upgrade a DRA driver with a canary"): a change to a driver's
    pod template, to config it mounts, or to a DeviceClass's config."""
    current = new or old
    assert current is not None
    body = current.body
    if dra.is_driver_workload(body):
        if old is None or new is None:
            return True
        return bool(_pod_template(old.body) != _pod_template(new.body))
    if current.kind in ("ConfigMap", "Secret"):
        return (current.kind, current.ref.namespace, current.ref.name) in driver_config
    if current.kind == "DeviceClass" and dra.is_dra_group(current.api_version):
        old_config = ((old.body.get("spec") or {}).get("config") if old else None) or None
        new_config = ((new.body.get("spec") or {}).get("config") if new else None) or None
        return old_config != new_config
    return False


def _driver_config(objects: Iterable[Manifest]) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every ConfigMap/Secret mounted by a driver workload."""
    found: set[tuple[str, str, str]] = set()
    for manifest in objects:
        if dra.is_driver_workload(manifest.body):
            found.update(
                (kind, manifest.ref.namespace, name) for kind, name in dra.mounted_config(manifest.body)
            )
    return found


def compute_plan(base: Sequence[Manifest], head: Sequence[Manifest]) -> Plan:
    """Everything that must happen to go from `base` to `head`, in execution order."""
    old_by_ref = {manifest.ref: manifest for manifest in base}
    new_by_ref = {manifest.ref: manifest for manifest in head}
    driver_config = _driver_config(head) | _driver_config(base)
    applies: list[Change] = []
    deletes: list[Change] = []
    for ref, new in new_by_ref.items():
        old = old_by_ref.get(ref)
        if old is not None and _comparable(old.body) == _comparable(new.body):
            continue
        stage = stage_of(new)
        applies.append(
            Change(
                op="create" if old is None else "update",
                ref=ref,
                stage=stage,
                step=step_of(new, stage),
                old=old,
                new=new,
                driver_change=_is_driver_change(old, new, driver_config),
            )
        )
    for ref, old in old_by_ref.items():
        if ref in new_by_ref:
            continue
        stage = stage_of(old)
        deletes.append(
            Change(
                op="delete",
                ref=ref,
                stage=stage,
                step=step_of(old, stage),
                old=old,
                new=None,
                driver_change=_is_driver_change(old, None, driver_config),
            )
        )
    applies.sort(key=lambda c: (c.stage, c.step, c.ref))
    # Reverse stage order for deletions: workloads go before the claims and classes they use.
    deletes.sort(key=lambda c: (-c.stage, -c.step, c.ref))
    return Plan(tuple(applies + deletes))


__all__ = ["Change", "Plan", "compute_plan", "DRIVERS", "STAGE_NAMES"]
