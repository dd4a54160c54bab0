"""A delivery of the desired state the set was last delivered from: the steady state's one LIST per kind.

Re-applying an unchanged tree must not cost a dry-run per object. When the digest of the desired state
is the one the last verified delivery recorded on the ApplySet parent (and no delivery wrote since), the
manifests are exactly what the live objects were applied from, so a field the manifests stopped setting
cannot be waiting for removal; the live copies are then compared in memory, as the reconcile loop's
steady state does (`drift.scan_drift`). Only when every object is still as delivered is the dry-run skipped; any
drift, a deletion, or another digest takes the full dry-run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from reconciler.cluster import applyset
from reconciler.cluster.apply.changeset import DryRunResult, ObjectResult
from reconciler.cluster.apply.drift import scan_drift
from reconciler.cluster.client import ClusterClient
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan


def desired_digest(manifests: Sequence[Manifest], set_id: str) -> str:
    """A digest of what a delivery applies: the set and every manifest's body, in a stable order."""
    digest = hashlib.sha256(set_id.encode())
    for manifest in sorted(manifests, key=lambda m: str(m.ref)):
        digest.update(str(manifest.ref).encode())
        digest.update(json.dumps(manifest.body, sort_keys=True, separators=(",", ":"), default=str).encode())
    return digest.hexdigest()


def unchanged_since_delivery(
    client: ClusterClient, plan: Plan, target: str, namespace: str, digest: str
) -> DryRunResult | None:
    """The dry-run's answer for a plan that changes nothing live, found without a dry-run; else None."""
    if any(change.op == "delete" for change in plan.changes):
        return None
    if applyset.delivered_digest(client, target, namespace) != digest:
        return None
    set_id = applyset.applyset_id(target, namespace)
    report = scan_drift(client, [change.current for change in plan.changes], set_id, {})
    if report.drifted:
        return None
    results = [
        ObjectResult(
            ref=str(change.ref),
            op="unchanged",
            path=change.current.path,
            line=change.current.line,
            stage=change.stage,
            step=change.step,
            outcome="unchanged",
            via=change.current.rendered_by,
        )
        for change in plan.changes
    ]
    summary: dict[str, dict[str, int]] = {}
    for result in results:
        counts = summary.setdefault(
            result.label, {"create": 0, "update": 0, "delete": 0, "unchanged": 0, "deferred": 0}
        )
        counts["unchanged"] += 1
    return DryRunResult(results, summary, ok=True)


__all__ = ["desired_digest", "unchanged_since_delivery"]
