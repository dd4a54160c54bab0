"""Server-side dry-run of a Plan: nothing is written.

Every create/update is sent with `dryRun=All` and compared with the live object (server-populated fields
stripped), so an object the server would leave as it is counts as unchanged and is never written — a
no-op re-apply sends no writes.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reconciler.cluster.apply.changeset import (
    DryRunResult,
    ObjectResult,
    WorkItem,
    crd_kinds,
    error_text,
    namespaces_created,
    read_live,
    resolve,
    strip_server_fields,
    terminating,
    version_of,
    work_items,
)
from reconciler.cluster.client import ClusterClient, Invalid
from reconciler.errors import DraGitopsError
from reconciler.model.plan import Plan

# Where an object in a namespace the plan creates is dry-run for its schema (every cluster has it).
PROBE_NAMESPACE = "default"

__all__ = ["check_item", "dry_run"]

# ---- one object ---------------------------------------------------------------------------------------


def _decide(item: WorkItem, dry: dict[str, Any]) -> None:
    """Set op and diff from a dry-run answer compared with the live object."""
    result = item.result
    result.live_version = version_of(item.live)
    if item.live is None:
        result.op = "create"
    elif strip_server_fields(dry) == strip_server_fields(item.live):
        result.op = "unchanged"
        item.after = item.live
    else:
        result.op = "update"
    if result.op == "unchanged":
        result.diff = ""
    else:
        result.diff_between(item.live, dry)


def _probe(client: ClusterClient, item: WorkItem) -> str | None:
    """Schema check of an object whose namespace does not exist yet: dry-run a renamed copy in `default`.

    Only a schema/validation rejection (Invalid) counts; admission answers that depend on the namespace
    (quota, service accounts, RBAC) are not this object's fault and are left to the staged dry-run.
    """
    body = copy.deepcopy(item.body)
    meta = body.setdefault("metadata", {})
    meta["namespace"] = PROBE_NAMESPACE
    meta["name"] = f"dra-gitops-probe-{secrets.token_hex(4)}"
    try:
        client.apply(body, dry_run=True, where=item.result.ref)
    except Invalid as exc:
        return exc.detail
    except DraGitopsError:
        return None
    return None


def check_item(
    client: ClusterClient, item: WorkItem, new_namespaces: set[str], new_kinds: set[tuple[str, str]]
) -> None:
    """Dry-run one change and record what it would do (nothing is written)."""
    result = item.result
    ref = item.change.ref
    try:
        if item.change.op == "delete":
            if item.resource is None or item.live is None:
                result.op = "unchanged"
                result.diff = ""
                return
            client.delete(
                item.resource, item.namespace if item.resource.namespaced else None, item.name, dry_run=True
            )
            result.op = "delete"
            result.live_version = version_of(item.live)
            result.diff_between(item.live, None)
            return
        if item.resource is None:
            if (ref.group, ref.kind) in new_kinds:
                result.op = "deferred"
                result.deferred_reason = "its CustomResourceDefinition is created by this plan"
                result.diff_between(None, item.body)
                return
            result.error = item.resolve_error or "kind not served"
            return
        if ref.kind == "Namespace" and terminating(item.live):
            result.op = "deferred"
            result.deferred_reason = f"namespace {item.name} is terminating: created again once it is gone"
            result.diff_between(None, item.body)
            return
        if item.resource.namespaced and ref.namespace in new_namespaces:
            problem = _probe(client, item)
            if problem is not None:
                result.error = problem
                return
            result.op = "deferred"
            result.deferred_reason = f"namespace {ref.namespace} is created by this plan"
            result.diff_between(None, item.body)
            return
        dry = client.apply(item.body, dry_run=True, where=result.ref)
        _decide(item, dry)
    except (DraGitopsError, OSError) as exc:
        result.error = error_text(exc)


def _summary(results: Iterable[ObjectResult]) -> dict[str, dict[str, int]]:
    summary: dict[str, dict[str, int]] = {}
    for result in results:
        counts = summary.setdefault(
            result.label, {"create": 0, "update": 0, "delete": 0, "unchanged": 0, "deferred": 0}
        )
        if result.error:
            continue
        if result.op == "deferred":
            # Its namespace or CRD is new, so the object cannot exist yet: it will be created.
            counts["create"] += 1
            counts["deferred"] += 1
        else:
            counts[result.op] += 1
    return summary


def dry_run(
    client: ClusterClient, plan: Plan, *, applyset_id: str | None = None, concurrency: int = 16
) -> DryRunResult:
    """Server-side dry-run of the whole plan; nothing is written. Errors carry the server's message."""
    items = work_items(plan, applyset_id)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for item in items:
            resolve(client, item)
        read_live(client, items, pool)
        new_namespaces = namespaces_created(items)
        new_kinds = crd_kinds(items)
        # Nothing is written, so stages need no barrier here: every check runs at once, results keep plan order.
        for future in [pool.submit(check_item, client, item, new_namespaces, new_kinds) for item in items]:
            future.result()
    results = [item.result for item in items]
    return DryRunResult(results, _summary(results), ok=not any(r.error for r in results))
