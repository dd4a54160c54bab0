"""What the caller of a driver rollout in waves gives and gets (`cluster/waverollout.py`): its callbacks
(`WaveControl`), the outcome, and the removal of the DeviceTaintRules a rollout left."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.objects import name_of
from reconciler.cluster.wave import DRA_GROUP, ROLLOUT_LABEL, rollout_label
from reconciler.model.wave_progress import RolloutProgress


def now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """UTC, to the millisecond (a soak of 500ms ends when it says)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass
class WaveControl:
    """How the caller follows and steers a rollout in waves (all optional: `dra-gitops apply` gives none)."""

    # The progress saved before for this DaemonSet (namespace, name), to resume from; None: start afresh.
    resume: Callable[[str, str], RolloutProgress | None] = lambda _ns, _name: None
    # Called with the progress after each step that matters (may raise to stop: a state lost to a writer).
    save: Callable[[RolloutProgress], None] = lambda _progress: None
    # Asked at every poll: a reason to stop now (abort, Lease lost), or None.
    stop: Callable[[], str | None] = lambda: None
    # Asked between waves: a reason to pause (suspend), or None.
    pause: Callable[[], str | None] = lambda: None
    # An Event: (reason, message, warning).
    event: Callable[[str, str, bool], None] = lambda _reason, _message, _warning: None
    # A rollback: put the old plugin back on the nodes the rollout touched.
    revert: bool = False
    wave_timeout: float = 300.0
    # Where a wave's probe claims and pods go ("": the DaemonSet's namespace; the reconciler's own in-cluster).
    probe_namespace: str = ""
    poll: float = 0.1
    # Set when the rollout paused (`pause` said why): the delivery stops there, the progress kept.
    paused: str | None = None
    # The rollouts run (for metrics and tests): the last progress of each, by (namespace, daemonset).
    progress: dict[tuple[str, str], RolloutProgress] = field(default_factory=dict)


class Stopped(Exception):
    """`WaveControl.stop` gave a reason: the rollout ends where it is (the caller reverts)."""


NOT_NEEDED = "not-needed"  # nothing to replace: the stage waits for the DaemonSet as for any other


@dataclass
class RolloutOutcome:
    error: str | None = None
    warning: str | None = None
    not_needed: bool = False
    diagnosis: dict[str, Any] | None = None


def clear_wave_taints(client: ClusterClient, namespace: str, daemonset: str) -> list[str]:
    """Remove the DeviceTaintRules the waves of this DaemonSet left (a failed wave keeps its drain for the
    revert); their names."""
    rules_api = client.find_kind(DRA_GROUP, "DeviceTaintRule")
    if rules_api is None:
        return []
    label = rollout_label(namespace, daemonset)
    removed = []
    for rule in client.list_kind(DRA_GROUP, "DeviceTaintRule", label_selector=f"{ROLLOUT_LABEL}={label}"):
        client.delete(rules_api, None, name_of(rule))
        removed.append(name_of(rule))
    return removed


__all__ = [
    "NOT_NEEDED",
    "RolloutOutcome",
    "Stopped",
    "WaveControl",
    "clear_wave_taints",
    "iso",
    "now",
    "parse_iso",
]
