"""Where a target's last good / last attempted / in-progress revision and its history live.

One ConfigMap per target, `dra-gitops-<target>` in the state namespace: the same object that is the
ApplySet parent (its labels and annotations belong to the applyset field manager; the state owns `data`).
Every key is a string `kubectl get configmap -o yaml` shows as it is: `lastGood` a bare sha, the others
JSON. Every write is a PUT with the resourceVersion that was read, so two writers never silently overwrite
each other: the loser gets `StateConflict` and re-reads. The records are typed (`loop/store/records.py`): JSON
only here, at the edge.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.cluster import applyset
from reconciler.cluster.client import ClusterClient, Conflict, ResourceInfo
from reconciler.errors import DraGitopsError
from reconciler.loop.store.records import (
    AbortRequest,
    Approval,
    AttemptRecord,
    HistoryRecord,
    InProgress,
    PromotionView,
    RevisionRequest,
    SourceHealth,
    Suspension,
    VerifiedCommit,
    next_history_id,
)

# The history is bounded by count and by size, so the ConfigMap stays well under the 1 MiB object limit.
HISTORY_LIMIT = 20
HISTORY_BYTES = 400_000
CONFIGMAP_DATA_BYTES = 1024 * 1024  # what a real API server lets a ConfigMap's data hold
# A record keeps at most this many refs/findings/devices; the rest is counted, not listed.
RECORD_ITEMS = 50


class StateConflict(DraGitopsError):
    """Somebody else wrote the state since we read it (optimistic concurrency)."""


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class TargetState:
    """The state of one target, as read (with its resourceVersion) or about to be written."""

    last_good: str | None = None
    last_attempted: AttemptRecord | None = None
    in_progress: InProgress | None = None
    # Refs ("apiVersion Kind/ns/name" strings) that `last_good` applied.
    inventory: list[str] = field(default_factory=list)
    history: list[HistoryRecord] = field(default_factory=list)  # newest first
    # A sha `dra-gitops retry` asked to try again although it failed.
    retry: str | None = None
    # Set by `dra-gitops rollback`: stay on last good until a commit newer than this sha arrives.
    hold: str | None = None
    # A `rollback` or `sync` handed to the controller, not taken up yet (`loop/passes/requested.py`).
    request: RevisionRequest | None = None
    suspended: Suspension | None = None  # `dra-gitops suspend`: no pass applies or corrects anything
    abort: AbortRequest | None = None  # `dra-gitops abort`: the running pass stops and rolls back
    source: SourceHealth | None = None  # the last fetch of the remote
    # Promotion (`loop/promotion/decide.py`): the commits this target verified (newest first, bounded), what its
    # own gates decided last, the commit awaiting (or given) approval.
    verified: list[VerifiedCommit] = field(default_factory=list)
    promotion: PromotionView | None = None
    approval: Approval | None = None
    # The cluster's identity (the uid of its kube-system Namespace) as the first pass found it.
    cluster_id: str | None = None
    resource_version: str | None = None
    # The data as last read or written: tells a write by someone else from a parent-metadata update.
    seen_data: dict[str, Any] = field(default_factory=dict, repr=False)
    # The highest history id this state gave out (in memory: the history keeps the highest stored).
    issued_id: int = field(default=0, repr=False, compare=False)

    def failed(self, sha: str) -> bool:
        """A sha whose last attempt failed (or that a user rolled back) is not retried on its own."""
        if self.retry == sha:
            return False
        if self.hold == sha:
            return True
        attempted = self.last_attempted
        return attempted is not None and attempted.sha == sha and attempted.failed()

    def record(self, entry: HistoryRecord) -> None:
        """Add one evidence record (newest first) and keep the history within its bounds. Ids are unique:
        one more than any the history holds or this state gave (a record taken out to be recorded again,
        as a failed apply above its rollback, keeps its id and lends it to nobody)."""
        if entry.id is None or any(r.id == entry.id for r in self.history if r is not entry):
            entry.id = max(next_history_id(self.history), self.issued_id + 1)
        self.issued_id = max(self.issued_id, entry.id)
        self.history.insert(0, entry)
        del self.history[HISTORY_LIMIT:]
        while (
            len(self.history) > 1 and len(json.dumps(self._history_json(), indent=1)) > HISTORY_BYTES
        ):  # as stored
            self.history.pop()

    def _history_json(self) -> list[dict[str, Any]]:
        return [record.to_json() for record in self.history]

    def to_data(self) -> dict[str, str]:
        data = {
            "lastGood": self.last_good or "",
            "lastAttempted": _dump(self.last_attempted.to_json() if self.last_attempted else None),
            "inProgress": _dump(self.in_progress.to_json() if self.in_progress else None),
            "inventory": json.dumps(self.inventory, indent=0),
            "history": json.dumps(self._history_json(), indent=1),
        }
        if self.cluster_id:
            data["clusterId"] = self.cluster_id
        if self.retry:
            data["retry"] = self.retry
        if self.hold:
            data["hold"] = self.hold
        if self.request:
            data["request"] = _dump(self.request.to_json())
        if self.suspended:
            data["suspended"] = _dump(self.suspended.to_json())
        if self.abort:
            data["abort"] = _dump(self.abort.to_json())
        if self.source:
            data["source"] = _dump(self.source.to_json())
        if self.verified:
            data["verified"] = json.dumps([v.to_json() for v in self.verified], indent=1)
        if self.promotion:
            data["promotion"] = _dump(self.promotion.to_json())
        if self.approval:
            data["approval"] = _dump(self.approval.to_json())
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any], resource_version: str | None = None) -> TargetState:
        return cls(
            last_good=str(data.get("lastGood") or "") or None,
            last_attempted=AttemptRecord.from_json(_load(data.get("lastAttempted"))),
            in_progress=InProgress.from_json(_load(data.get("inProgress"))),
            inventory=list(_load(data.get("inventory")) or []),
            history=[
                record
                for record in map(HistoryRecord.from_json, _load(data.get("history")) or [])
                if record is not None
            ],
            retry=str(data.get("retry") or "") or None,
            hold=str(data.get("hold") or "") or None,
            request=RevisionRequest.from_json(_load(data.get("request"))),
            suspended=Suspension.from_json(_load(data.get("suspended"))),
            abort=AbortRequest.from_json(_load(data.get("abort"))),
            source=SourceHealth.from_json(_load(data.get("source"))),
            verified=[v for v in map(VerifiedCommit.from_json, _load(data.get("verified")) or []) if v],
            promotion=PromotionView.from_json(_load(data.get("promotion"))),
            approval=Approval.from_json(_load(data.get("approval"))),
            cluster_id=str(data.get("clusterId") or "") or None,
            resource_version=resource_version,
            seen_data=dict(data),
        )

    def to_json(self) -> dict[str, Any]:
        """What `status -o json` prints."""
        out = {
            "lastGood": self.last_good,
            "lastAttempted": self.last_attempted.to_json() if self.last_attempted else None,
            "inProgress": self.in_progress.to_json() if self.in_progress else None,
            "inventory": self.inventory,
            "history": self._history_json(),
            "retry": self.retry,
            "hold": self.hold,
        }
        if self.request:  # only while one waits (a state without one prints as before)
            out["request"] = self.request.to_json()
        if self.suspended:
            out["suspended"] = self.suspended.to_json()
        if self.abort:
            out["abort"] = self.abort.to_json()
        if self.source:
            out["source"] = self.source.to_json()
        if self.verified:
            out["verified"] = [v.to_json() for v in self.verified]
        if self.promotion:
            out["promotion"] = self.promotion.to_json()
        if self.approval:
            out["approval"] = self.approval.to_json()
        return out


# What the operator verbs write while a pass may run (`loop/store/operations.py`, `loop/passes/handoff.py`, retry).
OPERATOR_KEYS = frozenset({"suspended", "retry", "request", "hold", "abort", "approval"})
# The history records those verbs add (`approve` records who approved what).
OPERATOR_RECORDS = frozenset({"suspend", "resume", "approve"})


def _merge_operator_writes(ours: TargetState, live: TargetState) -> bool:
    """Take into `ours` what verbs wrote into `live` since `ours` was last read or written; False when
    someone else changed anything else."""
    seen = ours.seen_data
    for key in (set(seen) | set(live.seen_data)) - OPERATOR_KEYS - {"history"}:
        if seen.get(key) != live.seen_data.get(key):
            return False
    seen_ids = {r.id for r in TargetState.from_data(seen).history}
    added = [r for r in live.history if r.id not in seen_ids]
    if any(r.operation not in OPERATOR_RECORDS for r in added):
        return False
    for key in OPERATOR_KEYS:  # the verb's writes win; what the pass changed of the others stays
        if seen.get(key) != live.seen_data.get(key):
            setattr(ours, key, getattr(live, key))
    for record in reversed(added):
        record.id = None  # numbered again among the pass's own records
        ours.record(record)
    ours.resource_version, ours.seen_data = live.resource_version, live.seen_data
    return True


def _dump(value: Any) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True)


def _check_size(data: dict[str, str], where: str) -> None:
    """A real API server refuses ConfigMap data over 1 MiB: say which part of the state grew that big."""
    sizes = {k: len(v.encode()) for k, v in data.items()}
    total = sum(sizes.values())
    if total > CONFIGMAP_DATA_BYTES:
        parts = ", ".join(f"{k} {n:,} bytes" for k, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:3])
        raise DraGitopsError(
            f"the target's state is {total:,} bytes, over the {CONFIGMAP_DATA_BYTES:,} a ConfigMap holds "
            f"({parts}); the inventory lists every object the last good commit applied",
            where=where,
        )


def _load(text: Any) -> Any:
    if not text:
        return None
    try:
        return json.loads(str(text))
    except json.JSONDecodeError:
        # A hand-edited value must not wedge the reconciler: treat it as absent (the next write repairs it).
        return None


class StateStore:
    """Reads and writes one target's state ConfigMap."""

    def __init__(
        self, client: ClusterClient, target: str, namespace: str = applyset.DEFAULT_NAMESPACE
    ) -> None:
        self.client = client
        self.target = target
        self.namespace = namespace
        self.name = applyset.parent_name(target)
        # The object as last read or written: the base of the next PUT while its version still stands.
        self._known: dict[str, Any] | None = None

    @property
    def ref(self) -> str:
        return f"ConfigMap/{self.namespace}/{self.name}"

    @property
    def _resource(self) -> ResourceInfo:
        # Asked for at first use, not when built: a controller starts while a target's cluster is down.
        return self.client.resource_for("v1", "ConfigMap")

    def _live(self) -> dict[str, Any] | None:
        self._known = self.client.get(self._resource, self.namespace, self.name)
        return self._known

    def load(self) -> TargetState:
        live = self._live()
        if live is None:
            return TargetState()
        meta = live.get("metadata") or {}
        return TargetState.from_data(live.get("data") or {}, str(meta.get("resourceVersion") or "") or None)

    def save(self, state: TargetState) -> TargetState:
        """Write `state` if nobody changed the state since it was read; returns it with the new version.

        The ConfigMap is also the ApplySet parent, whose labels and annotations the applier updates: a
        resourceVersion moved by that alone (the data still what this state was read or written as) is
        not a conflict, so the write is retried once against the new version.
        """
        data = state.to_data()
        _check_size(data, self.ref)
        try:
            if state.resource_version is None:
                written = self._create(data)
            else:
                try:
                    written = self._replace(state.resource_version, data)
                except Conflict:
                    live = self._live()
                    if live is None or (live.get("data") or {}) != state.seen_data:
                        raise
                    version = str((live.get("metadata") or {}).get("resourceVersion") or "")
                    written = self._replace(version, data, live)
        except Conflict as exc:
            raise StateConflict(
                "the state changed since it was read (another replica or a user wrote it)", where=self.ref
            ) from exc
        self._known = written
        state.resource_version = str((written.get("metadata") or {}).get("resourceVersion") or "") or None
        state.seen_data = dict(written.get("data") or {})
        return state

    def save_during_pass(self, state: TargetState) -> TargetState:
        """`save` for a pass: when only a person's verb wrote since (suspend, resume, retry, a request:
        the operator keys, and records it added to the history), keep what it wrote and write again; any
        other change (another replica's pass) is a StateConflict."""
        try:
            return self.save(state)
        except StateConflict:
            live = self.load()
            if not _merge_operator_writes(state, live):
                raise
            return self.save(state)

    def take_operator_writes(self, state: TargetState) -> bool:
        """Read the state and take into `state` what verbs wrote since (an `abort` while a pass waits on
        verification); False when someone else changed anything else (another replica's pass)."""
        live = self.load()
        if live.resource_version == state.resource_version:
            return True
        return _merge_operator_writes(state, live)

    def _replace(
        self, version: str, data: dict[str, str], live: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        if live is None:
            known = self._known
            known_version = str(((known or {}).get("metadata") or {}).get("resourceVersion") or "")
            live = known if known is not None and known_version == version else self._live()
        if live is None:
            raise StateConflict("the state ConfigMap was deleted since it was read", where=self.ref)
        body = copy.deepcopy(live)
        body.pop("status", None)
        meta = body.setdefault("metadata", {})
        meta["resourceVersion"] = version
        meta.pop("managedFields", None)
        body["data"] = data
        return self.client.replace(self._resource, body)

    def _create(self, data: dict[str, str]) -> dict[str, Any]:
        namespaces = self.client.resource_for("v1", "Namespace")
        if self.client.get(namespaces, None, self.namespace) is None:
            with contextlib.suppress(Conflict):  # created meanwhile by another writer: fine
                self.client.create(
                    namespaces,
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}},
                )
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "data": data,
        }
        try:
            return self.client.create(self._resource, body)
        except Conflict as exc:
            # Exists although we read nothing: the parent was applied since, or another replica won.
            if "already exists" in str(exc) or exc.reason == "AlreadyExists":
                live = self._live()
                if live is not None and not (live.get("data") or {}):
                    meta = dict(live.get("metadata") or {})
                    meta.pop("managedFields", None)
                    return self.client.replace(self._resource, {**body, "metadata": meta})
            raise

    def update(self, change: Callable[[TargetState], None], attempts: int = 5) -> TargetState:
        """Read, apply `change(state)` and write, re-reading on conflicts (for user commands)."""
        for attempt in range(attempts):
            state = self.load()
            change(state)
            try:
                return self.save(state)
            except StateConflict:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")
