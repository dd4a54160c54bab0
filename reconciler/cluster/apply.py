"""Server-side dry-run and staged apply of a Plan (DESIGN.md "Stages", docs/cluster-edge.md "Stage waits").

`dry_run` writes nothing: every create/update is sent with `dryRun=All` and compared with the live object
(server-populated fields stripped), so an object the server would leave as it is counts as unchanged and
is never written — a no-op re-apply sends no writes. `apply_plan` goes stage by stage in plan order: it
dry-runs the stage (or reuses a fresh `dry_run` answer), applies only what changes, concurrently, and waits
for the stage's readiness before the next one; deletions follow in reverse stage order. Server-side apply
with our field manager and force makes every step idempotent: a pass cut short is finished by the next.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from reconciler.cluster.applyset import PART_OF_LABEL, label_body
from reconciler.cluster.client import ClusterClient, Invalid, NotFound, ResourceInfo
from reconciler.cluster.health import Health, health_of, pod_failure
from reconciler.errors import DraGitopsError
from reconciler.model import dra
from reconciler.model.objects import api_group
from reconciler.model.plan import Change, Plan
from reconciler.model.stages import CLASSES, DRIVERS, FOUNDATION, stage_label

Op = Literal["create", "update", "delete", "unchanged", "deferred"]
Outcome = Literal["planned", "applied", "unchanged", "deleted", "failed", "not-attempted", "pending-deletion"]
FailFast = Callable[[int, Sequence[Change]], str | None]

DRA_GROUP = "resource.k8s.io"
_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
# Where an object in a namespace the plan creates is dry-run for its schema (every cluster has it).
PROBE_NAMESPACE = "default"
POLL_START = 0.05
POLL_MAX = 1.0
SLICE_GRACE = 60.0
_PREREQUISITE_KINDS = frozenset({"Namespace", "CustomResourceDefinition"})
# More objects than this of one kind in one namespace are read with one LIST instead of GETs.
_LIST_THRESHOLD = 4


# ---- results ------------------------------------------------------------------------------------------


@dataclass
class ObjectResult:
    ref: str
    op: Op
    path: str
    line: int
    error: str | None = None
    stage: int = 0
    step: int = 1
    outcome: Outcome = "planned"
    warning: str | None = None
    # resourceVersion of the live object the op was decided against (None: absent); lets apply_plan
    # trust a dry-run answer only while the object has not moved.
    live_version: str | None = None
    deferred_reason: str | None = None
    # The diff is rendered only when someone reads it: dumping YAML for every object of a large plan would
    # cost more than the dry-run requests themselves.
    _diff: str | None = field(default=None, repr=False, compare=False)
    _diff_source: tuple[dict[str, Any] | None, dict[str, Any] | None] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def diff(self) -> str:
        if self._diff is None:
            self._diff = unified_diff(self.ref, *self._diff_source) if self._diff_source is not None else ""
        return self._diff

    @diff.setter
    def diff(self, value: str) -> None:
        self._diff, self._diff_source = value, None

    def diff_between(self, live: dict[str, Any] | None, desired: dict[str, Any] | None) -> None:
        self._diff, self._diff_source = None, (live, desired)

    def copy_diff(self, other: ObjectResult) -> None:
        self._diff, self._diff_source = other._diff, other._diff_source

    @property
    def label(self) -> str:
        return stage_label(self.stage, self.step)


@dataclass
class DryRunResult:
    results: list[ObjectResult]
    summary: dict[str, dict[str, int]]
    ok: bool

    @property
    def changes_pending(self) -> bool:
        return any(r.op in ("create", "update", "delete", "deferred") for r in self.results)

    def counts(self) -> dict[str, int]:
        total = {"create": 0, "update": 0, "delete": 0, "unchanged": 0, "deferred": 0}
        for counts in self.summary.values():
            for key, value in counts.items():
                total[key] = total.get(key, 0) + value
        return total


@dataclass
class StageResult:
    stage: int
    label: str
    applied: int = 0
    unchanged: int = 0
    deleted: int = 0
    seconds: float = 0.0
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    direction: Literal["apply", "delete"] = "apply"

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class ApplyResult:
    ok: bool
    stages: list[StageResult]
    results: list[ObjectResult]
    writes: int

    @property
    def error(self) -> str | None:
        return next((s.error for s in self.stages if s.error), None)


# ---- comparison and diffs -----------------------------------------------------------------------------


def strip_server_fields(obj: dict[str, Any] | None, *, drop_applyset_label: bool = False) -> dict[str, Any]:
    """The object without what the server populates (and optionally our ApplySet label)."""
    if not obj:
        return {}
    out = {key: value for key, value in obj.items() if key != "status"}
    meta = dict(out.get("metadata") or {})
    for key in _SERVER_META:
        meta.pop(key, None)
    if drop_applyset_label and isinstance(meta.get("labels"), dict):
        labels = {k: v for k, v in meta["labels"].items() if k != PART_OF_LABEL}
        if labels:
            meta["labels"] = labels
        else:
            meta.pop("labels")
    out["metadata"] = meta
    return out


def _dump(obj: dict[str, Any] | None) -> list[str]:
    if not obj:
        return []
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False).splitlines(keepends=True)


def unified_diff(ref: str, live: dict[str, Any] | None, desired: dict[str, Any] | None) -> str:
    """Unified diff of live → desired, server fields and the ApplySet label ignored."""
    before = _dump(strip_server_fields(live, drop_applyset_label=True) if live else None)
    after = _dump(strip_server_fields(desired, drop_applyset_label=True) if desired else None)
    lines = difflib.unified_diff(
        before,
        after,
        fromfile=f"live/{ref}" if live else "/dev/null",
        tofile=f"desired/{ref}" if desired else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# ---- work items ---------------------------------------------------------------------------------------


@dataclass
class _Item:
    change: Change
    body: dict[str, Any]
    result: ObjectResult
    resource: ResourceInfo | None = None
    live: dict[str, Any] | None = None
    resolve_error: str | None = None
    after: dict[str, Any] | None = None  # the object as the apply (or dry-run of an unchanged one) left it

    @property
    def namespace(self) -> str | None:
        ns = self.change.ref.namespace
        return ns or None

    @property
    def name(self) -> str:
        return self.change.ref.name


def _items(plan: Plan, applyset_id: str | None) -> list[_Item]:
    items: list[_Item] = []
    for change in plan.changes:
        manifest = change.current
        body = (
            manifest.body
            if change.op == "delete" or not applyset_id
            else label_body(manifest.body, applyset_id)
        )
        if (
            change.op != "delete"
            and change.ref.namespace
            and not (body.get("metadata") or {}).get("namespace")
        ):
            body = copy.deepcopy(body)
            body.setdefault("metadata", {})["namespace"] = change.ref.namespace
        result = ObjectResult(
            ref=str(change.ref),
            op=change.op,
            path=manifest.path,
            line=manifest.line,
            stage=change.stage,
            step=change.step,
        )
        items.append(_Item(change, body, result))
    return items


def _groups(items: Sequence[_Item]) -> list[tuple[tuple[int, int, str], list[_Item]]]:
    """Consecutive items of one (stage, step, direction), in plan order."""
    groups: list[tuple[tuple[int, int, str], list[_Item]]] = []
    for item in items:
        key = (item.change.stage, item.change.step, "delete" if item.change.op == "delete" else "apply")
        if groups and groups[-1][0] == key:
            groups[-1][1].append(item)
        else:
            groups.append((key, [item]))
    return groups


def _resolve(client: ClusterClient, item: _Item) -> None:
    item.resource = None
    item.resolve_error = None
    try:
        item.resource = client.resource_for(
            str(item.body["apiVersion"]), item.change.ref.kind, where=str(item.change.ref)
        )
    except NotFound as exc:
        if item.change.op == "delete":
            # The version the base used may be gone; any served version of the kind will do.
            item.resource = client.find_kind(item.change.ref.group, item.change.ref.kind)
        if item.resource is None:
            item.resolve_error = exc.detail
    except DraGitopsError as exc:
        item.resolve_error = exc.detail


def _read_live(client: ClusterClient, items: Sequence[_Item], pool: ThreadPoolExecutor) -> None:
    """Live state of every resolved item: one LIST per crowded (kind, namespace), GETs for the rest."""
    by_place: dict[tuple[str, str | None], list[_Item]] = {}
    for item in items:
        if item.resource is not None:
            namespace = item.namespace if item.resource.namespaced else None
            by_place.setdefault((item.resource.path(namespace), namespace), []).append(item)
    singles: list[_Item] = []
    listings: list[list[_Item]] = []
    for group in by_place.values():
        if len(group) > _LIST_THRESHOLD:
            listings.append(group)
        else:
            singles.extend(group)

    def list_group(group: list[_Item]) -> None:
        resource = group[0].resource
        assert resource is not None
        found = {
            str((obj.get("metadata") or {}).get("name")): obj
            for obj in client.list(resource, group[0].namespace if resource.namespaced else None)
        }
        for item in group:
            item.live = found.get(item.name)

    def get_one(item: _Item) -> None:
        assert item.resource is not None
        item.live = client.get(item.resource, item.namespace if item.resource.namespaced else None, item.name)

    futures = [pool.submit(list_group, group) for group in listings] + [
        pool.submit(get_one, i) for i in singles
    ]
    for future in futures:
        future.result()


def _version(obj: dict[str, Any] | None) -> str | None:
    if not obj:
        return None
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return str(value) if value is not None else None


def _error_text(exc: BaseException) -> str:
    return exc.detail if isinstance(exc, DraGitopsError) else f"{type(exc).__name__}: {exc}"


def _crd_kinds(items: Iterable[_Item]) -> set[tuple[str, str]]:
    kinds: set[tuple[str, str]] = set()
    for item in items:
        if item.change.ref.kind == "CustomResourceDefinition" and item.change.op != "delete":
            spec = item.body.get("spec") or {}
            kind = (spec.get("names") or {}).get("kind")
            if spec.get("group") and kind:
                kinds.add((str(spec["group"]), str(kind)))
    return kinds


def _new_namespaces(items: Iterable[_Item]) -> set[str]:
    return {
        item.name
        for item in items
        if item.change.ref.kind == "Namespace" and item.change.op != "delete" and item.live is None
    }


# ---- one object ---------------------------------------------------------------------------------------


def _decide(item: _Item, dry: dict[str, Any]) -> None:
    """Set op and diff from a dry-run answer compared with the live object."""
    result = item.result
    result.live_version = _version(item.live)
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


def _probe(client: ClusterClient, item: _Item) -> str | None:
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


def _check(
    client: ClusterClient, item: _Item, new_namespaces: set[str], new_kinds: set[tuple[str, str]]
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
            result.live_version = _version(item.live)
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
        result.error = _error_text(exc)


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
    items = _items(plan, applyset_id)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for item in items:
            _resolve(client, item)
        _read_live(client, items, pool)
        new_namespaces = _new_namespaces(items)
        new_kinds = _crd_kinds(items)
        # Nothing is written, so stages need no barrier here: every check runs at once, results keep plan order.
        for future in [pool.submit(_check, client, item, new_namespaces, new_kinds) for item in items]:
            future.result()
    results = [item.result for item in items]
    return DryRunResult(results, _summary(results), ok=not any(r.error for r in results))


def render_dry_run(result: DryRunResult, show_diff: bool = True) -> str:
    """Text for humans: one line per object (and its diff), then one summary line per stage."""
    signs = {"create": "+", "update": "~", "delete": "-", "unchanged": "=", "deferred": "?"}
    lines: list[str] = []
    for obj in result.results:
        if obj.error:
            lines.append(f"! error {obj.ref}  {obj.path}:{obj.line}: {obj.error}")
            continue
        if obj.op == "unchanged":
            continue
        note = f"  (checked after creation: {obj.deferred_reason})" if obj.op == "deferred" else ""
        lines.append(f"{signs[obj.op]} {obj.op} {obj.ref}  {obj.path}:{obj.line}{note}")
        if show_diff and obj.diff:
            lines.extend("    " + line for line in obj.diff.rstrip("\n").split("\n"))
        elif show_diff and obj.op == "update":
            lines.append("    (labels or field ownership only)")
    for label, counts in result.summary.items():
        extra = f", {counts['unchanged']} unchanged" if counts.get("unchanged") else ""
        deferred = (
            f" ({counts['deferred']} checked after their namespace or CRD)" if counts.get("deferred") else ""
        )
        lines.append(
            f"stage {label}: {counts['create']} create, {counts['update']} update, {counts['delete']} delete{extra}{deferred}"
        )
    total = result.counts()
    errors = sum(1 for r in result.results if r.error)
    verdict = "dry-run ok" if result.ok else f"dry-run failed: {errors} object(s) rejected"
    lines.append(
        f"{verdict}: {total['create']} create, {total['update']} update, {total['delete']} delete, "
        f"{total['unchanged']} unchanged"
    )
    return "\n".join(lines) + "\n"


# ---- waiting ------------------------------------------------------------------------------------------


def _selector(body: dict[str, Any]) -> str | None:
    """A label selector string from a workload's spec.selector (matchLabels and simple expressions)."""
    selector = (body.get("spec") or {}).get("selector")
    if not isinstance(selector, dict):
        return None
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or None


class _Waiter:
    """Polls one stage until every object is ready, a fail-fast signal appears, or the deadline passes."""

    def __init__(
        self,
        client: ClusterClient,
        items: Sequence[_Item],
        pool: ThreadPoolExecutor,
        deadline: float,
        fail_fast: FailFast | None,
        slice_grace: float,
    ) -> None:
        self.client = client
        self.items = list(items)
        self.pool = pool
        self.deadline = deadline
        self.fail_fast = fail_fast
        self.slice_grace = slice_grace
        self.state: dict[int, Health] = {}
        self.rollout_done: dict[int, float] = {}
        self.warnings: list[str] = []
        self._lock = threading.Lock()

    def _pods(self, item: _Item) -> list[dict[str, Any]]:
        if item.change.ref.kind == "Pod":
            return [item.after] if item.after else []
        selector = _selector(item.body)
        if selector is None or item.namespace is None:
            return []
        return self.client.list_kind("", "Pod", item.namespace, label_selector=selector)

    def _driver_slices(self, driver: str) -> list[dict[str, Any]]:
        return [s for s in self.client.list_kind(DRA_GROUP, "ResourceSlice") if dra.slice_driver(s) == driver]

    def _check_one(self, index: int, item: _Item, refresh: bool) -> tuple[Health, str | None]:
        """(health, fail-fast reason) of one object; re-reads it when `refresh`."""
        assert item.resource is not None
        if refresh:
            item.after = self.client.get(
                item.resource, item.namespace if item.resource.namespaced else None, item.name
            )
        health = health_of(item.after)
        if health.failed:
            return health, f"{item.result.ref}: {health.message}"
        is_driver = item.change.stage == DRIVERS and dra.is_driver_workload(item.body)
        if dra.pod_spec_of(item.body) is not None and item.change.ref.kind != "Pod" and not health.current:
            for pod in self._pods(item):
                failure = pod_failure(pod)
                if failure is not None:
                    name = (pod.get("metadata") or {}).get("name")
                    role = "driver pod" if is_driver else "pod"
                    return Health(
                        "failed", f"{role} {name}: {failure}"
                    ), f"{item.result.ref}: {role} {name}: {failure}"
        if is_driver and health.current:
            return self._driver_slices_ready(index, item)
        return health, None

    def _driver_slices_ready(self, index: int, item: _Item) -> tuple[Health, str | None]:
        driver = dra.workload_driver(item.body)
        if driver is None:
            message = f"{item.result.ref}: driver name unknown, ResourceSlices not checked"
            if message not in self.warnings:
                self.warnings.append(message)
            return Health("current", "rollout complete"), None
        pods = self._pods(item)
        nodes = {
            str((pod.get("spec") or {}).get("nodeName"))
            for pod in pods
            if (pod.get("spec") or {}).get("nodeName")
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
        }
        failing = [pod_failure(pod) for pod in pods]
        if any(failing):
            reason = next(f for f in failing if f)
            return Health("failed", reason), f"{item.result.ref}: driver pod {reason}"
        slices = self._driver_slices(driver) if nodes else []
        covered = {dra.slice_node(s) for s in slices}
        missing = sorted(n for n in nodes if n not in covered and None not in covered)
        if not missing:
            return Health("current", f"rollout complete, slices of {driver} on {len(nodes)} node(s)"), None
        with self._lock:
            since = self.rollout_done.setdefault(index, time.monotonic())
        message = f"waiting for ResourceSlices of {driver} on {', '.join(missing)}"
        if time.monotonic() - since > self.slice_grace:
            return (
                Health("failed", message),
                f"{item.result.ref}: no ResourceSlices from driver {driver} on {', '.join(missing)} after its rollout",
            )
        return Health("in-progress", message), None

    def run(self, stage: int, changes: Sequence[Change]) -> str | None:
        """None when the stage is ready, else the error (fail fast or timeout)."""
        pending = list(range(len(self.items)))
        refresh = False
        interval = POLL_START
        while True:
            futures = {i: self.pool.submit(self._check_one, i, self.items[i], refresh) for i in pending}
            reasons: list[str] = []
            for i, future in futures.items():
                try:
                    health, reason = future.result()
                except (DraGitopsError, OSError) as exc:
                    health, reason = Health("in-progress", f"cannot read: {_error_text(exc)}"), None
                self.state[i] = health
                if reason:
                    reasons.append(reason)
                    self.items[i].result.error = health.message
            if reasons:
                return "fail fast: " + "; ".join(reasons)
            if self.fail_fast is not None:
                reason = self.fail_fast(stage, changes)
                if reason:
                    return f"fail fast: {reason}"
            pending = [i for i in pending if not self.state[i].current]
            if not pending:
                return None
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                waiting = [f"{self.items[i].result.ref} ({self.state[i].message})" for i in pending]
                for i in pending:
                    self.items[i].result.error = f"not ready: {self.state[i].message}"
                shown = "; ".join(waiting[:5]) + (
                    f"; and {len(waiting) - 5} more" if len(waiting) > 5 else ""
                )
                return f"timed out waiting for {shown}"
            time.sleep(min(interval, remaining))
            interval = min(interval * 1.6, POLL_MAX)
            refresh = True


# ---- applying -----------------------------------------------------------------------------------------


def _trusted(item: _Item, checked: dict[str, ObjectResult]) -> bool:
    """Reuse an earlier dry-run answer only if it was clean and the live object has not moved since."""
    previous = checked.get(item.result.ref)
    if previous is None or previous.error:
        return False
    if previous.op == "deferred":
        # A namespace-deferred object passed the schema probe and cannot exist yet; a CRD-deferred one
        # was never checked by the server.
        if (previous.deferred_reason or "").startswith("namespace") and item.live is None:
            item.result.op = "create"
            item.result.copy_diff(previous)
            return True
        return False
    if previous.op not in ("unchanged", "create", "update") or previous.live_version != _version(item.live):
        return False
    item.result.op = previous.op
    item.result.copy_diff(previous)
    item.result.live_version = previous.live_version
    if previous.op == "unchanged":
        item.after = item.live
    return True


def _apply_group(
    client: ClusterClient,
    items: Sequence[_Item],
    pool: ThreadPoolExecutor,
    checked: dict[str, ObjectResult],
    stage_result: StageResult,
) -> bool:
    """Dry-run then apply one stage's creates/updates; False (results filled) when anything failed."""
    for item in items:
        _resolve(client, item)
    _read_live(client, [i for i in items if i.resource is not None], pool)
    to_check: list[_Item] = []
    for item in items:
        if item.resource is None:
            item.result.error = item.resolve_error or "kind not served"
        elif not _trusted(item, checked):
            to_check.append(item)
    for future in [pool.submit(_check, client, item, set(), set()) for item in to_check]:
        future.result()
    rejected = [item for item in items if item.result.error]
    if rejected:
        for item in items:
            item.result.outcome = "failed" if item.result.error else "not-attempted"
        stage_result.error = "dry-run rejected " + "; ".join(
            f"{i.result.ref}: {i.result.error}" for i in rejected[:5]
        )
        return False

    def write(item: _Item) -> None:
        try:
            item.after = client.apply(item.body, where=item.result.ref)
            item.result.outcome = "applied"
        except (DraGitopsError, OSError) as exc:
            item.result.error = _error_text(exc)
            item.result.outcome = "failed"

    changed = [item for item in items if item.result.op in ("create", "update")]
    for future in [pool.submit(write, item) for item in changed]:
        future.result()
    for item in items:
        if item.result.op == "unchanged":
            item.result.outcome = "unchanged"
    stage_result.applied += sum(1 for item in changed if item.result.outcome == "applied")
    stage_result.unchanged += sum(1 for item in items if item.result.outcome == "unchanged")
    failed = [item for item in changed if item.result.error]
    if failed:
        stage_result.error = "apply failed for " + "; ".join(
            f"{i.result.ref}: {i.result.error}" for i in failed[:5]
        )
        return False
    return True


def _class_warnings(client: ClusterClient, items: Sequence[_Item]) -> list[str]:
    """A DeviceClass whose driver publishes no slices applies fine but cannot allocate anything yet."""
    drivers = {
        item.result.ref: dra.class_driver(item.body)
        for item in items
        if item.change.ref.kind == "DeviceClass"
    }
    wanted = {d for d in drivers.values() if d}
    if not wanted:
        return []
    publishing = {dra.slice_driver(s) for s in client.list_kind(DRA_GROUP, "ResourceSlice")}
    return [
        f"{ref}: driver {driver} publishes no ResourceSlices"
        for ref, driver in drivers.items()
        if driver and driver not in publishing
    ]


def _delete_group(
    client: ClusterClient,
    items: Sequence[_Item],
    pool: ThreadPoolExecutor,
    deadline: float,
    wait: bool,
    stage_result: StageResult,
) -> None:
    for item in items:
        _resolve(client, item)

    def remove(item: _Item) -> None:
        if item.resource is None:
            item.result.outcome = "deleted"  # the kind is gone, and with it every object of it
            item.result.warning = "kind no longer served"
            return
        try:
            client.delete(
                item.resource,
                item.namespace if item.resource.namespaced else None,
                item.name,
                propagation="Background",
            )
            item.result.outcome = "deleted"
        except (DraGitopsError, OSError) as exc:
            item.result.error = _error_text(exc)
            item.result.outcome = "failed"

    for future in [pool.submit(remove, item) for item in items]:
        future.result()
    failed = [item for item in items if item.result.error]
    if failed:
        stage_result.error = "delete failed for " + "; ".join(
            f"{i.result.ref}: {i.result.error}" for i in failed[:5]
        )
    pending = [item for item in items if item.result.outcome == "deleted" and item.resource is not None]
    interval = POLL_START
    while wait and pending:

        def present(item: _Item) -> dict[str, Any] | None:
            assert item.resource is not None
            return client.get(item.resource, item.namespace if item.resource.namespaced else None, item.name)

        lives = list(pool.map(present, pending))
        still = [(item, live) for item, live in zip(pending, lives, strict=True) if live is not None]
        pending = [item for item, _ in still]
        if not pending:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            # Finalizers may hold an object for as long as their controller likes: report, don't block.
            for item, live in still:
                finalizers = (live.get("metadata") or {}).get("finalizers") or []
                held = f" (finalizers: {', '.join(finalizers)})" if finalizers else ""
                item.result.outcome = "pending-deletion"
                item.result.warning = f"still present after the stage timeout{held}"
                stage_result.warnings.append(f"{item.result.ref}: still present{held}")
            break
        time.sleep(min(interval, remaining))
        interval = min(interval * 1.6, POLL_MAX)
    stage_result.deleted = sum(1 for item in items if item.result.outcome in ("deleted", "pending-deletion"))


def _apply_stage(
    client: ClusterClient,
    group: list[_Item],
    pool: ThreadPoolExecutor,
    known: dict[str, ObjectResult],
    result: StageResult,
    deadline: float,
    timeout: float,
    wait: bool,
    fail_fast: FailFast | None,
    slice_grace: float,
) -> None:
    """Apply one stage and wait for it; namespaces and CRDs first, as the rest may live in them."""
    first = [item for item in group if item.change.ref.kind in _PREREQUISITE_KINDS]
    rest = [item for item in group if item.change.ref.kind not in _PREREQUISITE_KINDS]
    parts = [first, rest] if first and rest else [group]
    for index, part in enumerate(parts):
        if not _apply_group(client, part, pool, known, result):
            for later in parts[index + 1 :]:
                for item in later:
                    item.result.outcome = "not-attempted"
            return
        has_crds = any(item.change.ref.kind == "CustomResourceDefinition" for item in part)
        # Later objects need their namespaces Active and CRDs Established, even without `wait`.
        if wait or result.stage == FOUNDATION or has_crds or index < len(parts) - 1:
            waiter = _Waiter(client, part, pool, deadline, fail_fast, slice_grace)
            waited = waiter.run(result.stage, [item.change for item in part])
            result.warnings.extend(waiter.warnings)
            if waited is not None:
                detail = waited if waited.startswith("fail fast") else f"{waited} (timeout {timeout:g}s)"
                result.error = f"stage {result.label}: {detail}"
                for later in parts[index + 1 :]:
                    for item in later:
                        item.result.outcome = "not-attempted"
                return
        if has_crds:
            client.invalidate()  # discovery must see the new kinds from here on
    if wait and result.stage == CLASSES:
        with contextlib.suppress(DraGitopsError, OSError):
            result.warnings.extend(_class_warnings(client, group))


def apply_plan(
    client: ClusterClient,
    plan: Plan,
    *,
    applyset_id: str | None,
    stage_timeout: float = 300.0,
    concurrency: int = 16,
    wait: bool = True,
    on_stage: Callable[[StageResult], None] | None = None,
    fail_fast: FailFast | None = None,
    checked: DryRunResult | None = None,
    slice_grace: float = SLICE_GRACE,
    stage_timeouts: dict[int, float] | None = None,
    waited_by_caller: frozenset[int] = frozenset(),
) -> ApplyResult:
    """Apply the plan stage by stage (canary step 1a before the main drivers), then delete in reverse order.

    `waited_by_caller`: stages whose readiness the caller waits for itself (the workloads stage, which
    verification watches with DRA-aware fail-fast signals), so the apply moves on right after writing.

    `checked`: a `dry_run` answer from just before, reused for objects whose live state has not moved
    since (saves a second dry-run per object). `fail_fast(stage, changes)` is asked on every poll of a
    stage wait and stops the apply with its reason. `stage_timeouts` overrides the timeout per stage.
    """
    writes_before = client.writes_sent
    items = _items(plan, applyset_id)
    known = {r.ref: r for r in checked.results} if checked is not None else {}
    stages: list[StageResult] = []
    failed = False
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for (stage, step, direction), group in _groups(items):
            label = stage_label(stage, step)
            if failed:
                for item in group:
                    item.result.outcome = "not-attempted"
                continue
            started = time.monotonic()
            timeout = (stage_timeouts or {}).get(stage, stage_timeout)
            deadline = started + timeout
            result = StageResult(
                stage=stage, label=label, direction="delete" if direction == "delete" else "apply"
            )
            if direction == "delete":
                _delete_group(client, group, pool, deadline, wait, result)
            else:
                _apply_stage(
                    client,
                    group,
                    pool,
                    known,
                    result,
                    deadline,
                    timeout,
                    wait and stage not in waited_by_caller,
                    fail_fast,
                    slice_grace,
                )
            if result.error and not result.error.startswith("stage "):
                result.error = f"stage {label}: {result.error}"
            result.seconds = time.monotonic() - started
            failed = result.error is not None
            stages.append(result)
            if on_stage is not None:
                on_stage(result)
    results = [item.result for item in items]
    ok = not failed and not any(r.error for r in results)
    return ApplyResult(ok=ok, stages=stages, results=results, writes=client.writes_sent - writes_before)


def group_kinds_of(plan: Plan) -> list[str]:
    """`Kind.group` of every object the plan creates or updates (for the ApplySet parent)."""
    kinds = set()
    for change in plan.changes:
        if change.op != "delete":
            group = api_group(change.current.api_version)
            kinds.add(f"{change.ref.kind}.{group}" if group else change.ref.kind)
    return sorted(kinds)


__all__ = [
    "ApplyResult",
    "DryRunResult",
    "ObjectResult",
    "StageResult",
    "apply_plan",
    "dry_run",
    "group_kinds_of",
    "render_dry_run",
    "strip_server_fields",
    "unified_diff",
]
