"""Steady state: is the cluster still what the last good revision applied? One LIST per kind answers.

A pass on an unchanged sha must cost next to nothing. The live members of the ApplySet are read with one
LIST per kind (label selector), and each desired object is compared with its live copy in memory:
* an object whose fingerprint (generation and metadata, or resourceVersion for kinds without a generation)
  is the one seen when it last matched is unchanged without looking further;
* otherwise, when every field the manifest sets has the same value live, it is unchanged too;
* only what is left (defaulting or canonical forms the comparison cannot see through, or real drift) is
  dry-run, and a dry-run that leaves the live object as it is clears it.
What still differs is drift: changed or deleted objects are re-applied, and members Git no longer has are
pruned.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.cluster import applyset
from reconciler.cluster.apply.changeset import strip_server_fields
from reconciler.cluster.client import ClusterClient, NotFound, ResourceInfo
from reconciler.errors import DraGitopsError
from reconciler.model.compare import covers
from reconciler.model.objects import Manifest, ObjRef
from reconciler.model.scope import live_ref

Fingerprints = dict[ObjRef, str]


@dataclass
class DriftReport:
    missing: list[Manifest] = field(default_factory=list)  # desired, not live: re-create
    changed: list[Manifest] = field(default_factory=list)  # live differs from desired: re-apply
    extra: list[dict[str, Any]] = field(default_factory=list)  # live members Git does not have: prune
    unchanged: int = 0
    dry_runs: int = 0

    @property
    def drifted(self) -> bool:
        return bool(self.missing or self.changed or self.extra)

    def refs(self) -> dict[str, list[str]]:
        return {
            "missing": [str(m.ref) for m in self.missing],
            "changed": [str(m.ref) for m in self.changed],
            "extra": [str(live_ref(body)) for body in self.extra],
        }


def fingerprint(live: dict[str, Any]) -> str:
    """What moves when somebody edits the object, but not when only its status does (where possible)."""
    meta = live.get("metadata") or {}
    generation = meta.get("generation")
    if generation is None:
        return f"rv:{meta.get('resourceVersion')}"
    material = json.dumps([meta.get("labels"), meta.get("annotations")], sort_keys=True).encode()
    return f"gen:{generation}:{hashlib.sha1(material, usedforsecurity=False).hexdigest()}"


def _resources(
    client: ClusterClient, desired: Sequence[Manifest], group_kinds: Iterable[str]
) -> list[ResourceInfo]:
    """One resource per kind: the version the manifests use, else the cluster's preferred one."""
    by_kind: dict[tuple[str, str], ResourceInfo] = {}
    for manifest in desired:
        key = (manifest.api_version, manifest.kind)
        if key not in by_kind:
            by_kind[key] = client.resource_for(manifest.api_version, manifest.kind, where=str(manifest.ref))
    seen = {(r.group, r.kind) for r in by_kind.values()}
    for group_kind in group_kinds:
        kind, _, group = group_kind.partition(".")
        if (group, kind) in seen:
            continue
        resource = client.find_kind(group, kind)
        if resource is not None:
            by_kind[(resource.api_version, kind)] = resource
            seen.add((group, kind))
    return list(by_kind.values())


def scan_drift(
    client: ClusterClient,
    desired: Sequence[Manifest],
    set_id: str,
    fingerprints: Fingerprints,
    group_kinds: Iterable[str] = (),
) -> DriftReport:
    """Compare the live members of the set with the desired objects; updates `fingerprints` in place."""
    report = DriftReport()
    live: dict[ObjRef, dict[str, Any]] = {}
    for resource in _resources(client, desired, group_kinds):
        try:
            items = client.list(resource, None, label_selector=f"{applyset.PART_OF_LABEL}={set_id}")
        except NotFound:
            continue
        for item in items:
            if not (item.get("metadata") or {}).get("deletionTimestamp"):
                live[live_ref(item)] = item
    served = applyset.served_refs(client, (m.ref for m in desired))
    wanted = set(served.values())
    for manifest in desired:
        current = live.get(served[manifest.ref])
        if current is None:
            report.missing.append(manifest)
            fingerprints.pop(manifest.ref, None)
            continue
        mark = fingerprint(current)
        if fingerprints.get(manifest.ref) == mark:
            report.unchanged += 1
            continue
        labelled = applyset.label_body(manifest.body, set_id)
        if covers(current, labelled) or _dry_run_unchanged(client, labelled, current, report):
            fingerprints[manifest.ref] = mark
            report.unchanged += 1
        else:
            report.changed.append(manifest)
    report.extra = [body for ref, body in sorted(live.items()) if ref not in wanted]
    return report


def _dry_run_unchanged(
    client: ClusterClient, body: dict[str, Any], live: dict[str, Any], report: DriftReport
) -> bool:
    report.dry_runs += 1
    try:
        answer = client.apply(body, dry_run=True)
    except DraGitopsError:
        return False  # the real apply will say what is wrong
    return strip_server_fields(answer) == strip_server_fields(live)


__all__ = ["DriftReport", "Fingerprints", "fingerprint", "scan_drift"]
