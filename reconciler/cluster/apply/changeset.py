"""What a plan's changes became on the server: per-object results, diffs, and the work items behind them.

Shared by the dry-run (`dryrun.py`), the stage waits (`stagewait.py`) and the staged apply (`staged.py`).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from reconciler.cluster.applyset import PART_OF_LABEL, label_body
from reconciler.cluster.client import ClusterClient, NotFound, ResourceInfo
from reconciler.errors import DraGitopsError
from reconciler.model.objects import located
from reconciler.model.plan import Change, Plan
from reconciler.model.stages import stage_label

Op = Literal["create", "update", "delete", "unchanged", "deferred"]
Outcome = Literal["planned", "applied", "unchanged", "deleted", "failed", "not-attempted", "pending-deletion"]

_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
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
    via: str = ""  # a rendered object: the kustomization or chart release that made it
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

    @property
    def where(self) -> str:
        """`path:line`, led by the kustomization or release for a rendered object."""
        return located(self.path, self.line, self.via)


@dataclass
class DryRunResult:
    results: list[ObjectResult]
    summary: dict[str, dict[str, int]]
    ok: bool

    @property
    def changes_pending(self) -> bool:
        return any(r.op in ("create", "update", "delete", "deferred") for r in self.results)

    def counts(self) -> dict[str, int]:
        """THE numbers of a plan, for progress, text and JSON alike: what the server-side dry-run says.

        `create` includes the `deferred` objects (their Namespace or CRD is new, so they cannot exist
        yet); `deferred` says how many of those the server could judge only after their stage.
        """
        total = {"create": 0, "update": 0, "delete": 0, "unchanged": 0, "deferred": 0}
        for counts in self.summary.values():
            for key, value in counts.items():
                total[key] = total.get(key, 0) + value
        return total

    def summary_line(self) -> str:
        """`N to create, N to update, N to delete, N unchanged`, from `counts()`."""
        c = self.counts()
        return f"{c['create']} to create, {c['update']} to update, {c['delete']} to delete, {c['unchanged']} unchanged"


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
    # What went wrong, as `diagnose` says it (a driver rollout's failed wave: its node and evidence).
    diagnoses: list[dict[str, Any]] = field(default_factory=list)

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
class WorkItem:
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


def work_items(plan: Plan, applyset_id: str | None) -> list[WorkItem]:
    items: list[WorkItem] = []
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
            via=manifest.rendered_by,
        )
        items.append(WorkItem(change, body, result))
    return items


def stage_groups(items: Sequence[WorkItem]) -> list[tuple[tuple[int, int, str], list[WorkItem]]]:
    """Consecutive items of one (stage, step, direction), in plan order."""
    groups: list[tuple[tuple[int, int, str], list[WorkItem]]] = []
    for item in items:
        key = (item.change.stage, item.change.step, "delete" if item.change.op == "delete" else "apply")
        if groups and groups[-1][0] == key:
            groups[-1][1].append(item)
        else:
            groups.append((key, [item]))
    return groups


def resolve(client: ClusterClient, item: WorkItem) -> None:
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


def read_live(client: ClusterClient, items: Sequence[WorkItem], pool: ThreadPoolExecutor) -> None:
    """Live state of every resolved item: one LIST per crowded (kind, namespace), GETs for the rest."""
    by_place: dict[tuple[str, str | None], list[WorkItem]] = {}
    for item in items:
        if item.resource is not None:
            namespace = item.namespace if item.resource.namespaced else None
            by_place.setdefault((item.resource.path(namespace), namespace), []).append(item)
    singles: list[WorkItem] = []
    listings: list[list[WorkItem]] = []
    for group in by_place.values():
        if len(group) > _LIST_THRESHOLD:
            listings.append(group)
        else:
            singles.extend(group)

    def list_group(group: list[WorkItem]) -> None:
        resource = group[0].resource
        assert resource is not None
        found = {
            str((obj.get("metadata") or {}).get("name")): obj
            for obj in client.list(resource, group[0].namespace if resource.namespaced else None)
        }
        for item in group:
            item.live = found.get(item.name)

    def get_one(item: WorkItem) -> None:
        assert item.resource is not None
        item.live = client.get(item.resource, item.namespace if item.resource.namespaced else None, item.name)

    futures = [pool.submit(list_group, group) for group in listings] + [
        pool.submit(get_one, i) for i in singles
    ]
    for future in futures:
        future.result()


def version_of(obj: dict[str, Any] | None) -> str | None:
    if not obj:
        return None
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return str(value) if value is not None else None


def error_text(exc: BaseException) -> str:
    return exc.detail if isinstance(exc, DraGitopsError) else f"{type(exc).__name__}: {exc}"


def crd_kinds(items: Iterable[WorkItem]) -> set[tuple[str, str]]:
    kinds: set[tuple[str, str]] = set()
    for item in items:
        if item.change.ref.kind == "CustomResourceDefinition" and item.change.op != "delete":
            spec = item.body.get("spec") or {}
            kind = (spec.get("names") or {}).get("kind")
            if spec.get("group") and kind:
                kinds.add((str(spec["group"]), str(kind)))
    return kinds


def terminating(live: dict[str, Any] | None) -> bool:
    """A live object being deleted (a pruned Namespace whose termination goes on in the background)."""
    return live is not None and bool((live.get("metadata") or {}).get("deletionTimestamp"))


def namespaces_created(items: Iterable[WorkItem]) -> set[str]:
    """Namespaces the plan creates: absent, or terminating (they must be gone before they can be created)."""
    return {
        item.name
        for item in items
        if item.change.ref.kind == "Namespace"
        and item.change.op != "delete"
        and (item.live is None or terminating(item.live))
    }
