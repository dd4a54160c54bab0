"""Claims and templates whose spec is immutable: a rollback deletes and recreates those that differ.

A forward change of one is refused by the dry-run and the `immutable-claim` rule; a rollback must put the
last good revision's spec back, so `deliver` (with `recreate_immutable`) deletes the objects the dry-run
refused for that reason only, waits until they are gone, and dry-runs again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reconciler.cluster.apply import DryRunResult
from reconciler.cluster.client import ClusterClient
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan

Progress = Callable[[str], None]


IMMUTABLE_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate"})


def immutable_rejections(dry: DryRunResult, plan: Plan) -> list[Manifest]:
    """Claims and templates the dry-run refused because their spec is immutable (and changed)."""
    by_ref = {str(change.ref): change for change in plan.changes if change.op != "delete"}
    found = []
    for result in dry.results:
        change = by_ref.get(result.ref)
        if (
            change is not None
            and change.ref.kind in IMMUTABLE_KINDS
            and result.error
            and "immutable" in result.error.lower()
        ):
            found.append(change.current)
    return found


def recreate(
    client: ClusterClient, manifests: list[Manifest], timeout: float, progress: Progress
) -> list[str]:
    """Delete objects whose spec cannot change in place and wait until they are gone.

    A claim goes only when nothing reserves it any more (its delete-protection finalizer), so pods of the
    failed revision that still hold it are deleted too; their controllers recreate them, and they wait,
    Pending, for the claim the apply recreates right after.
    """
    deadline = time.monotonic() + timeout
    gone: list[str] = []
    for manifest in manifests:
        resource = client.resource_for(manifest.api_version, manifest.kind, where=str(manifest.ref))
        namespace = manifest.ref.namespace or None
        progress(f"recreate {manifest.ref}: its spec is immutable and differs")
        live = client.get(resource, namespace, manifest.ref.name)
        client.delete(resource, namespace, manifest.ref.name)
        if manifest.kind == "ResourceClaim" and live is not None:
            pods = client.resource_for("v1", "Pod")
            for holder in (live.get("status") or {}).get("reservedFor") or []:
                if holder.get("resource") == "pods" and holder.get("name"):
                    client.delete(pods, namespace, str(holder["name"]))
        while client.get(resource, namespace, manifest.ref.name) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{manifest.ref}: still present {timeout:.0f}s after its delete")
            time.sleep(0.1)
        gone.append(str(manifest.ref))
    return gone


def recreate_refused(
    client: ClusterClient,
    plan: Plan,
    dry: DryRunResult,
    timeout: float,
    before_write: Callable[[], None],
    progress: Progress,
) -> list[str]:
    """When everything the dry-run refused is a claim or template with a changed immutable spec: call
    `before_write`, recreate them and return their refs; else nothing is written and the list is empty."""
    rejected = immutable_rejections(dry, plan)
    if not rejected or len(rejected) != sum(1 for r in dry.results if r.error):
        return []
    before_write()
    return recreate(client, rejected, timeout, progress)
