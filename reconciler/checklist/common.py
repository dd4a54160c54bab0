"""What every checklist item shares: statuses, the Item and Checklist values, evidence helpers, and the
readers of the state history (which record is the last attempt's, which verified the last good one). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.checklist.facts import ChecklistFacts, StateFact
from reconciler.loop.store.records import AttemptRecord, HistoryRecord
from reconciler.model.readers import parse_time
from reconciler.outcome import Outcome

CHECKED = "checked"
NOT_CHECKED = "not-checked"
NOT_APPLICABLE = "not-applicable"
SECTIONS = ("before", "during", "after")
# Without a recorded attempt, Warning Events of this long ago count as recent.
DEFAULT_EVENT_WINDOW = timedelta(minutes=15)
# Evidence lines per item beyond the summary; the rest is counted.
MAX_DETAILS = 12
DRA_GROUP = "resource.k8s.io"
# What an item builder returns: id, title, status, evidence (summary first).
Built = tuple[str, str, str, tuple[str, ...]]


@dataclass(frozen=True)
class Item:
    id: str
    section: str
    title: str
    status: str
    evidence: tuple[str, ...]  # the summary first, then details

    @property
    def failed(self) -> bool:
        return self.status == NOT_CHECKED

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "section": self.section,
            "title": self.title,
            "status": self.status,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True)
class Checklist:
    target: str
    cluster: str
    generated: str
    state_ref: str
    last_good: str | None
    last_attempted: AttemptRecord | None
    items: tuple[Item, ...]

    @property
    def ok(self) -> bool:
        """Every applicable item checked."""
        return not any(item.failed for item in self.items)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def counts(self) -> dict[str, int]:
        return {
            s: sum(1 for i in self.items if i.status == s) for s in (CHECKED, NOT_CHECKED, NOT_APPLICABLE)
        }

    def section(self, name: str) -> list[Item]:
        return [i for i in self.items if i.section == name]

    def item(self, item_id: str) -> Item:
        for i in self.items:
            if i.id == item_id:
                return i
        raise KeyError(item_id)


def short(sha: Any) -> str:
    return str(sha)[:12] if sha else "(none)"


def bounded(lines: Iterable[str]) -> list[str]:
    lines = list(lines)
    if len(lines) > MAX_DETAILS:
        return [*lines[:MAX_DETAILS], f"... and {len(lines) - MAX_DETAILS} more"]
    return lines


def make_item(item_id: str, title: str, status: str, summary: str, details: Iterable[str] = ()) -> Built:
    return item_id, title, status, (summary, *bounded(details))


def status_of(failed: bool) -> str:
    return NOT_CHECKED if failed else CHECKED


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def scope_text(f: ChecklistFacts) -> str:
    return f"namespace(s) {', '.join(f.namespaces)}" if f.namespaces else "all namespaces"


def no_state(state: StateFact, target: str) -> str:
    where = state.ref or f"ConfigMap dra-gitops-{target}"
    hint = f"; targets with a state there: {', '.join(state.other_targets)}" if state.other_targets else ""
    return f"no reconcile recorded for target {target} ({where} not found){hint}"


# ---- reading the state history -----------------------------------------------------------------------


def attempt_record(state: StateFact) -> HistoryRecord | None:
    """The evidence record of the last attempted revision (its newest `apply` record)."""
    attempted = state.last_attempted
    if attempted is None or not attempted.sha:
        return None
    records = [r for r in state.history if r.sha == attempted.sha and r.operation == "apply"]
    same = [r for r in records if r.outcome == attempted.outcome]
    found = same or records
    return found[0] if found else None


def good_record(state: StateFact) -> HistoryRecord | None:
    """The newest record of a pass that put the cluster on the last good revision and verified it."""
    for record in state.history:
        if (
            state.last_good
            and record.sha == state.last_good
            and record.outcome == Outcome.APPLIED
            and record.operation in ("apply", "rollback", "drift")
        ):
            return record
    return None


def event_window_start(f: ChecklistFacts) -> datetime:
    """From when Events count as recent: the start of the last attempt, else DEFAULT_EVENT_WINDOW ago."""
    record = attempt_record(f.state)
    at = parse_time(record.at if record else None)
    if record is None or at is None:
        return f.now - DEFAULT_EVENT_WINDOW
    # `at` (when the record was written) is cut to the second, and so are event times: whole seconds back
    # from it never miss an event of the attempt.
    return at - timedelta(seconds=math.ceil(record.seconds()))
