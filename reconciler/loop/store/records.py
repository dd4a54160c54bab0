"""The records of a target's state (`loop/store/state.py`): the last attempt, the pass in progress, the history.

Typed values inside the package, JSON only at the edge where `state.py` reads and writes the state
ConfigMap. `from_json` takes what any version wrote; `to_json` gives a record back with its keys as they
were read (in their order, the ones this version does not know included), so a state written by an older
or a newer version round-trips unchanged. A record built here writes its keys in the order of its fields,
leaving out those that are None unless a null says something (`sha` of a rollback to nothing). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

from reconciler.outcome import Outcome, read_outcome


def _text(value: Any) -> str:
    return str(value)


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None  # a hand-edited id: treated as absent


@dataclass(kw_only=True)
class _Record:
    """What every record shares: its JSON keys, the keys it was read with, the keys it does not know."""

    # Field name -> JSON key, where they differ.
    KEYS: ClassVar[dict[str, str]] = {}
    # JSON keys written even when null.
    NULLS: ClassVar[frozenset[str]] = frozenset()
    # How a field's JSON value is read (others are taken as they are).
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    # Keys of another version, kept to be written back.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    # The JSON keys in the order they were read (empty for a record built here).
    keys_read: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def _json_keys(cls) -> dict[str, str]:
        """Field name -> JSON key, in the order of the fields."""
        own = (f.name for f in fields(cls) if f.name not in ("extra", "keys_read"))
        return {name: cls.KEYS.get(name, name) for name in own}

    @classmethod
    def from_json(cls, raw: object) -> Self | None:
        """The record of a JSON object; None for anything else (a value edited by hand into garbage)."""
        if not isinstance(raw, dict):
            return None
        names = {key: name for name, key in cls._json_keys().items()}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key in names:
                read = cls.READERS.get(names[key], lambda v: v)
                values[names[key]] = None if value is None else read(value)
        extra = {key: value for key, value in raw.items() if key not in names}
        return cls(**values, extra=extra, keys_read=tuple(raw))

    def _writes_null(self, key: str) -> bool:
        return key in self.NULLS

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the keys as read first, in their order, then whatever was set since."""
        values: dict[str, Any] = {}
        for name, key in self._json_keys().items():
            value = getattr(self, name)
            values[key] = str(value) if isinstance(value, Outcome) else value
        out: dict[str, Any] = {}
        for key in self.keys_read:
            if key in self.extra:
                out[key] = self.extra[key]
            elif key in values:
                out[key] = values[key]
        for key, value in values.items():
            if key not in out and (value is not None or self._writes_null(key)):
                out[key] = value
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


@dataclass(kw_only=True)
class AttemptRecord(_Record):
    """`lastAttempted`: the newest revision a pass tried, and how its delivery ended."""

    KEYS: ClassVar[dict[str, str]] = {"rolled_back": "rolledBack"}
    NULLS: ClassVar[frozenset[str]] = frozenset({"sha", "outcome", "at"})
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {"sha": _text, "outcome": read_outcome, "at": _text}

    sha: str | None = None
    outcome: Outcome | str = ""
    at: str = ""
    # A failed attempt that was rolled back: True when the rollback succeeded, False when it failed.
    rolled_back: bool | None = None

    def failed(self) -> bool:
        """Not retried on its own (an interrupted attempt is no failure: the next pass delivers it again)."""
        return self.outcome not in (Outcome.APPLIED, Outcome.INTERRUPTED)

    def pass_outcome(self) -> Outcome | str:
        """How the pass of this attempt ended: its delivery's outcome, or how its rollback went."""
        if self.rolled_back is False:
            return Outcome.ROLLBACK_FAILED
        if self.rolled_back:
            return Outcome.ROLLED_BACK
        return self.outcome


@dataclass(kw_only=True)
class InProgress(_Record):
    """`inProgress`: set before the first write of a pass, cleared by the write that records it. Seen by
    a later pass, it means a pass died half-way."""

    KEYS: ClassVar[dict[str, str]] = {"from_sha": "from"}
    NULLS: ClassVar[frozenset[str]] = frozenset({"sha", "operation", "from", "stage", "since"})
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        name: _text for name in ("sha", "operation", "from_sha", "stage", "since")
    }

    sha: str | None = None  # the revision being delivered (None: a rollback to nothing)
    operation: str = ""  # apply | rollback | drift
    from_sha: str | None = None  # the revision the cluster was on
    stage: str = ""  # the last stage finished ("" before the first)
    since: str = ""
    # The driver upgrades in waves of the delivery: a list of `model/wave_progress.RolloutProgress.to_json()`
    # (wave N of M, nodes done, failed nodes, phase, soakUntil), one per DaemonSet; a state written before
    # holds one object (`wave_progress.rollouts_from_json` reads both). The next pass resumes from it.
    rollout: dict[str, Any] | list[dict[str, Any]] | None = None


@dataclass(kw_only=True)
class RevisionRequest(_Record):
    """`request`: a delivery a person asked the controller for (`rollback`, `sync --revision`), waiting for
    the replica that holds the target's Lease (`loop/passes/requested.py` runs it and clears it)."""

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        **{name: _text for name in ("verb", "revision", "by", "at", "id")},
        "force": bool,
        "yes_bad": bool,
    }
    KEYS: ClassVar[dict[str, str]] = {"yes_bad": "yesBad"}

    verb: str = ""  # rollback | sync
    revision: str = ""  # as given: a sha (or a prefix of one in the history), or a history id
    force: bool = False  # rollback --force: past the history check and a policy denial, recorded
    yes_bad: bool = False  # --yes-bad: with --force, onto a commit whose last record is a failure
    by: str = ""
    at: str = ""
    id: str = ""  # the record answering it carries it as `request`


@dataclass(kw_only=True)
class HistoryRecord(_Record):
    """One evidence record of the history (`loop/store/evidence.py` builds those of a delivery): what a pass
    decided and why. The evidence parts (`diff`, `decisions`, `devices`, ...) are the JSON of the
    delivery's report (`delivery/result.py`), bounded."""

    KEYS: ClassVar[dict[str, str]] = {
        "executed": "exec",
        "decisions_omitted": "decisionsOmitted",
        "force_push": "forcePush",
        "from_sha": "from",
        "requested_by": "requestedBy",
        "rolled_back_to": "rolledBackTo",
    }
    NULLS: ClassVar[frozenset[str]] = frozenset({"sha", "operation", "outcome", "at"})
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "id": _number,
        "sha": _text,
        "operation": _text,
        "outcome": read_outcome,
        "at": _text,
        "message": _text,
        "from_sha": _text,
        "rolled_back_to": _text,
        "rollback": read_outcome,
    }

    # Short and stable: the number `rollback ID` names, given when the record enters the history
    # (`next_history_id`); None only in records written before ids existed.
    id: int | None = None
    sha: str | None = None  # None: the empty revision (a rollback of a first pass)
    operation: str = ""  # apply | rollback | drift | sync
    outcome: Outcome | str = ""
    at: str = ""
    diff: dict[str, Any] | None = None  # {"summary", "create", "update", ...}
    decisions: list[dict[str, Any]] | None = None  # {"rule", "severity", "ref", "msg", "path", "line"}
    timings: dict[str, Any] | None = None  # stage -> seconds
    devices: list[dict[str, Any]] | None = None  # {"claim", "pod", "devices", "node"}
    executed: list[dict[str, Any]] | None = None  # verify-exec: {"pod", "container", "command", "ok", ...}
    decisions_omitted: int | None = None
    message: str | None = None  # why it did not succeed
    diagnoses: list[dict[str, Any]] | None = None  # {"mode", "ref", "summary", "evidence", "recovery"}
    force_push: dict[str, Any] | None = None  # {"previous"}: the head was force-pushed over it
    drift: dict[str, list[str]] | None = None  # missing | changed | extra -> refs
    from_sha: str | None = None  # a rollback: the revision it rolled back from
    requested_by: str | None = None  # who asked for it (`rollback`, `sync`: cluster/whoami.py)
    request: str | None = None  # the id of the request (`loop/passes/requested.py`) this record answers
    forced: list[str] | None = None  # what `--force` overrode (not in the history, a policy denial)
    rolled_back_to: str | None = None  # a failed apply: the revision it was rolled back to
    rollback: Outcome | str | None = None  # ... and how that rollback's delivery ended
    revert: dict[str, Any] | None = None  # {"branch", "sha" | "error"}: the revert commit pushed
    # Promotion (`loop/promotion/decide.py`, `loop/passes/rehearsal.py`): who approved the commit, its rollback rehearsal
    # ({"ok", "steps": [{"step", "sha", "outcome", "at", "seconds", "message"}]}), the ref published.
    approval: dict[str, Any] | None = None
    rehearsal: dict[str, Any] | None = None
    published: dict[str, Any] | None = None  # {"ref", "sha" | "error"}
    promoted: dict[str, Any] | None = (
        None  # {"from", "verifiedAt", "rehearsed"}: what the upstream said of it
    )

    def _writes_null(self, key: str) -> bool:
        if key == "rolledBackTo":
            return self.rollback is not None  # rolled back to nothing (a first pass)
        if key == "from":
            return self.operation == "rollback" and self.diff is not None  # a rollback from nothing
        return super()._writes_null(key)

    @property
    def rolled_back(self) -> bool:
        """Whether this (failed) record says where it was rolled back to."""
        return "rolledBackTo" in self.to_json()

    @property
    def summary(self) -> str:
        """The diff's one line ("1 to create, 2 to update, ..."), or ''."""
        return str((self.diff or {}).get("summary") or "")

    def seconds(self) -> float:
        """The time its stages took."""
        timings = self.timings or {}
        return sum(float(v) for v in timings.values() if isinstance(v, int | float))


def next_history_id(history: list[HistoryRecord]) -> int:
    """The id of the next record: one more than any in the history (the newest are kept, so ids only grow)."""
    return max((r.id for r in history if r.id is not None), default=0) + 1


@dataclass(kw_only=True)
class Suspension(_Record):
    """`suspended`: a person stopped the target (`dra-gitops suspend`): nothing is applied or corrected
    until `dra-gitops resume`."""

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {name: _text for name in ("at", "by", "reason")}

    at: str = ""
    by: str = ""
    reason: str = ""


@dataclass(kw_only=True)
class AbortRequest(_Record):
    """`abort`: a person asked the running pass to stop at its next stage boundary and roll back."""

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {name: _text for name in ("at", "by", "sha")}

    at: str = ""
    by: str = ""
    sha: str | None = None  # the revision the pass was delivering


@dataclass(kw_only=True)
class SourceHealth(_Record):
    """`source`: how the last fetch of the target's remote went, and since when it has gone that way."""

    KEYS: ClassVar[dict[str, str]] = {"last_fetch": "lastFetch"}
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        **{name: _text for name in ("last_fetch", "error", "since")},
        "ok": bool,
    }

    last_fetch: str = ""
    ok: bool = True
    error: str | None = None
    since: str = ""  # the first fetch of the current run of successes or failures


# ---- promotion between targets (`loop/promotion/decide.py`) -------------------------------------------------------


@dataclass(kw_only=True)
class VerifiedCommit(_Record):
    """One entry of `verified`, newest first: a commit this target applied and verified, what the targets
    that promote from it may take."""

    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        **{name: _text for name in ("sha", "at", "until", "withdrawn", "published")},
        "rehearsed": bool,
    }

    sha: str = ""
    at: str = ""  # verified at (with rehearseRollback: once the rehearsal ended); "" not known (a ref)
    until: str | None = None  # no longer the last good since (a newer commit, a rollback); None: still is
    rehearsed: bool | None = None  # its rollback rehearsal: passed, failed, or not run
    withdrawn: str | None = None  # why it must not be promoted (a person rolled it back)
    published: str | None = None  # `publishVerified`: the ref it was pushed to


@dataclass(kw_only=True)
class Approval(_Record):
    """`approval`: the commit a target with `approval: manual` waits for, and who approved it."""

    KEYS: ClassVar[dict[str, str]] = {"approved_by": "approvedBy", "approved_at": "approvedAt"}
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        name: _text for name in ("sha", "since", "approved_by", "approved_at")
    }

    sha: str = ""
    since: str = ""  # awaiting approval since
    approved_by: str | None = None
    approved_at: str | None = None


@dataclass(kw_only=True)
class PromotionView(_Record):
    """`promotion`: what the last pass of a promoted target decided, for `status` and `approve`."""

    KEYS: ClassVar[dict[str, str]] = {
        "soak_until": "soakUntil",
        "not_eligible": "notEligible",
        "first_seen": "firstSeen",
    }
    READERS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        **{name: _text for name in ("upstream", "eligible", "waiting", "soak_until", "error")},
    }

    upstream: str = ""  # the upstream target, or the ref followed
    eligible: str | None = None  # the newest commit every gate but approval lets through
    waiting: str | None = None  # approval | soak: what the eligible (or a newer) commit waits for
    soak_until: str | None = None
    not_eligible: list[dict[str, str]] | None = None  # {"sha", "why"}: newer commits, and why not
    first_seen: dict[str, str] | None = None  # a followed ref: sha -> when this target first saw it
    error: str | None = None  # the upstream could not be read
