"""The operational checklist of a DRA deployment, built from facts (`facts.py`): pure, no I/O.

Three sections, as an operator walks a change: *before* (versions and served APIs, driver health, classes
and slices, capacity, the last dry-run, the rollback target; `before.py`), *during* (claim states,
Warning Events) and *after* (pods Ready, claims allocated, the last revision verified, devices seen in
the container; `after.py`). Every item is checked, not checked or not applicable, and carries its
evidence: numbers, names, shas.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reconciler.checklist.after import (
    claims_allocated_item,
    claims_item,
    devices_in_container_item,
    events_item,
    pods_ready_item,
    verified_item,
)
from reconciler.checklist.before import (
    api_item,
    capacity_item,
    classes_item,
    driver_pods_item,
    driver_rollout_item,
    dry_run_item,
    rollback_target_item,
    slices_item,
)
from reconciler.checklist.common import (
    CHECKED,
    DEFAULT_EVENT_WINDOW,
    MAX_DETAILS,
    NOT_APPLICABLE,
    NOT_CHECKED,
    SECTIONS,
    Built,
    Checklist,
    Item,
    attempt_record,
    event_window_start,
    good_record,
    iso,
    short,
)
from reconciler.checklist.facts import ChecklistFacts

# ---- the checklist -----------------------------------------------------------------------------------

_BUILDERS: Sequence[tuple[str, Callable[[ChecklistFacts], Built]]] = (
    ("before", api_item),
    ("before", driver_rollout_item),
    ("before", driver_pods_item),
    ("before", classes_item),
    ("before", slices_item),
    ("before", capacity_item),
    ("before", dry_run_item),
    ("before", rollback_target_item),
    ("during", claims_item),
    ("during", events_item),
    ("after", pods_ready_item),
    ("after", claims_allocated_item),
    ("after", verified_item),
    ("after", devices_in_container_item),
)

ITEM_IDS = (
    "api",
    "driver-rollout",
    "driver-pods",
    "classes",
    "slices",
    "capacity",
    "dry-run",
    "rollback-target",
    "claims",
    "events",
    "pods-ready",
    "claims-allocated",
    "verified",
    "devices-in-container",
)


def build_checklist(f: ChecklistFacts) -> Checklist:
    items = []
    for section, build in _BUILDERS:
        item_id, title, status, evidence = build(f)
        items.append(Item(item_id, section, title, status, evidence))
    return Checklist(
        target=f.target,
        cluster=f.cluster,
        generated=iso(f.now),
        state_ref=f.state.ref,
        last_good=f.state.last_good,
        last_attempted=f.state.last_attempted,
        items=tuple(items),
    )


__all__ = [
    "CHECKED",
    "DEFAULT_EVENT_WINDOW",
    "MAX_DETAILS",
    "short",
    "ITEM_IDS",
    "NOT_APPLICABLE",
    "NOT_CHECKED",
    "SECTIONS",
    "Checklist",
    "Item",
    "attempt_record",
    "build_checklist",
    "event_window_start",
    "good_record",
]
