"""Where a driver upgrade in waves stands (issue 32): the progress the reconciler keeps in its state (pure).

The reconcile pass saves it in `inProgress.rollout` after each step that matters, so a pass that dies
(kill -9, a Lease handed over) or a rollout paused by `suspend` resumes at the wave it was in. That key holds
a list, one object per DaemonSet the delivery upgrades in waves (in the order they started); a state written
before holds one object, read as a list of one (`rollouts_from_json`). Each object's JSON keys:

    {"driver", "namespace", "daemonset", "revision", "wave", "of", "nodes", "done", "failedNodes",
     "phase", "soakUntil", "since", "snapshot"}

`wave` is the wave being run (1-based) of `of`; `done` the nodes replaced and verified so far (`nodes` of
them in all); `failedNodes` node -> evidence; `phase` one of PHASES; `soakUntil` the end of the soak after
the wave (ISO 8601, UTC), `revision` the DaemonSet's ControllerRevision hash the rollout delivers;
`snapshot` (only while a wave runs) the devices its nodes had before their old plugin pods were deleted, so a
resumed wave compares them as an unbroken one does (`reconciler/cluster/wave_snapshot.py`; opaque here).
A state written before it has none: its resumed wave checks a node replaced before the kill for a Ready pod
and complete slices only.

Also here: the strategy a main driver DaemonSet with a `rollout` is delivered with (`with_wave_strategy`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.errors import ManifestError
from reconciler.model import dra
from reconciler.model.objects import Manifest

PLANNING = "planning"
DRAINING = "draining"
REPLACING = "replacing"
VERIFYING = "verifying"
SOAKING = "soaking"
SUSPENDED = "suspended"
FAILED = "failed"
REVERTING = "reverting"
DONE = "done"
PHASES = (PLANNING, DRAINING, REPLACING, VERIFYING, SOAKING, SUSPENDED, FAILED, REVERTING, DONE)
# The phases in which the progress's wave has verified (a resume goes on with the next one).
VERIFIED_PHASES = frozenset({SOAKING, SUSPENDED, DONE})

WAVE_STRATEGY = {"type": "OnDelete"}


@dataclass
class RolloutProgress:
    """One main driver DaemonSet's rollout in waves, as far as it went."""

    driver: str
    namespace: str
    daemonset: str
    revision: str = ""
    wave: int = 0
    of: int = 0
    nodes: int = 0
    done: list[str] = field(default_factory=list)
    failed_nodes: dict[str, str] = field(default_factory=dict)
    phase: str = PLANNING
    soak_until: str | None = None
    since: str = ""
    snapshot: dict[str, Any] | None = None  # the running wave's devices before (cluster/wave_snapshot.py)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.daemonset)

    @property
    def verified(self) -> bool:
        """Whether `wave` verified (the next one is the one to run)."""
        return self.phase in VERIFIED_PHASES

    def line(self) -> str:
        """`wave 2 of 4 (soaking), 3/10 nodes done, next soak ends at ...` for status and get."""
        text = f"wave {self.wave} of {self.of} ({self.phase}), {len(self.done)}/{self.nodes} nodes done"
        if self.failed_nodes:
            text += f", {len(self.failed_nodes)} failed ({', '.join(sorted(self.failed_nodes))})"
        if self.soak_until and self.phase in (SOAKING, SUSPENDED):
            text += f", next soak ends at {self.soak_until}"
        return text

    def to_json(self, *, snapshot: bool = True) -> dict[str, Any]:
        """The JSON form; without the running wave's device snapshot (`snapshot=False`) for what people read
        (`get -o json`): it is the state's, for a resumed wave."""
        return {
            "driver": self.driver,
            "namespace": self.namespace,
            "daemonset": self.daemonset,
            "revision": self.revision,
            "wave": self.wave,
            "of": self.of,
            "nodes": self.nodes,
            "done": list(self.done),
            "failedNodes": dict(self.failed_nodes),
            "phase": self.phase,
            "soakUntil": self.soak_until,
            "since": self.since,
            **({"snapshot": self.snapshot} if snapshot and self.snapshot is not None else {}),
        }

    @classmethod
    def from_json(cls, raw: object) -> RolloutProgress | None:
        """The progress of a JSON object; None for anything that is not one (a state edited by hand)."""
        if not isinstance(raw, dict):
            return None
        try:
            failed = raw.get("failedNodes") or {}
            return cls(
                driver=str(raw["driver"]),
                namespace=str(raw["namespace"]),
                daemonset=str(raw["daemonset"]),
                revision=str(raw.get("revision") or ""),
                wave=int(raw.get("wave") or 0),
                of=int(raw.get("of") or 0),
                nodes=int(raw.get("nodes") or 0),
                done=[str(n) for n in raw.get("done") or []],
                failed_nodes={str(k): str(v) for k, v in failed.items()} if isinstance(failed, dict) else {},
                phase=str(raw.get("phase") or PLANNING),
                soak_until=str(raw["soakUntil"]) if raw.get("soakUntil") else None,
                since=str(raw.get("since") or ""),
                snapshot=raw["snapshot"] if isinstance(raw.get("snapshot"), dict) else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


def rollouts_from_json(raw: object) -> list[RolloutProgress]:
    """Every rollout `inProgress.rollout` holds, in the order they started: a list of progress objects (one
    per DaemonSet a delivery upgrades in waves), or the single object states written before kept. What
    does not read as one (a state edited by hand) is left out."""
    items = raw if isinstance(raw, list) else [raw] if raw else []
    found = (RolloutProgress.from_json(item) for item in items)
    return [progress for progress in found if progress is not None]


def current_rollout(raw: object) -> RolloutProgress | None:
    """The rollout under way (or paused, or last to run) of those `inProgress.rollout` holds: the newest."""
    rollouts = rollouts_from_json(raw)
    return rollouts[-1] if rollouts else None


def paused_rollout(raw: object) -> RolloutProgress | None:
    """Of those `inProgress.rollout` holds, the rollout `suspend` paused, else the newest."""
    rollouts = rollouts_from_json(raw)
    paused = [p for p in rollouts if p.phase == SUSPENDED]
    return paused[-1] if paused else rollouts[-1] if rollouts else None


def with_rollout(raw: object, progress: RolloutProgress) -> list[dict[str, Any]]:
    """`inProgress.rollout` with `progress` put in: in its DaemonSet's place (namespace/name) if it was
    there, else after the others. Always a list (a single object read is taken in as its first item)."""
    existing = rollouts_from_json(raw)
    out = [progress if p.key == progress.key else p for p in existing]
    if all(p.key != progress.key for p in existing):
        out.append(progress)
    return [p.to_json() for p in out]


def is_waved(body: dict[str, Any], where: str = "") -> bool:
    """A main driver DaemonSet upgraded in waves (its driver, or its annotation, has a `rollout`)."""
    try:
        return dra.rollout_of(body, where or str(body.get("kind"))) is not None
    except ManifestError:  # an unreadable annotation: the check reports it where it is
        return False


def with_wave_strategy(manifests: Sequence[Manifest]) -> list[Manifest]:
    """The manifests as delivered: a main driver DaemonSet with a `rollout` gets `updateStrategy: OnDelete`
    (a field dra-gitops owns: nothing moves until a wave replaces the node's plugin). Others are unchanged.
    Call it where the drivers' hints are set (`dra.driver_hints`)."""
    out: list[Manifest] = []
    for manifest in manifests:
        body = manifest.body
        spec = body.get("spec")
        if isinstance(spec, dict) and spec.get("updateStrategy") != WAVE_STRATEGY and is_waved(body):
            body = copy.deepcopy(body)
            body["spec"]["updateStrategy"] = dict(WAVE_STRATEGY)
            manifest = replace(manifest, body=body)
        out.append(manifest)
    return out


__all__ = [
    "PHASES",
    "RolloutProgress",
    "current_rollout",
    "is_waved",
    "paused_rollout",
    "rollouts_from_json",
    "with_rollout",
    "with_wave_strategy",
]
