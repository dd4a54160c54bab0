"""The demo follows a driver upgrade in waves while its pass runs, from what the reconciler writes.

Three sources, each told once, as it is seen: the Events the reconciler records on the target's state
ConfigMap (`WaveStarted`, `WaveVerified`, `WaveFailed`, `RolloutReverting`, `RolloutReverted`,
`RolloutComplete`), the DeviceTaintRules of the drain in the cluster (made and removed by the wave), and the
rollout's progress in the state (`inProgress.rollout`: the soak after a wave and when it ends). Nothing is
inferred: a drain shorter than the poll is not told, and the Events alone tell every wave. The Events and
rules are matched to waves by number: this follows one waved DaemonSet at a time (the demo has one).

A poll reads the state and the taint rules before the Events, so an Event that came before what the
state or the cluster shows is always in the same poll's list: the lines of a wave's drain are told after its
`WaveStarted`, its soak after its `WaveVerified`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reconciler.cluster.probe import TAINT_KEY
from reconciler.loop.store.state import StateStore
from reconciler.model.wave_progress import SOAKING, RolloutProgress, rollouts_from_json

REASONS = (
    "WaveStarted",
    "WaveVerified",
    "WaveFailed",
    "RolloutReverting",
    "RolloutReverted",
    "RolloutComplete",
)
_WAVE = re.compile(r"\bwave (\d+) of \d+")


@dataclass
class _Line:
    text: str
    after: tuple[str, int] | None = None  # (event reason, wave): told right after that Event
    wave: int = -1  # a drain's removal: told before the first Event that ends its wave (>= 0)

    def ends_before(self, reason: str, wave: int) -> bool:
        """Whether this removal comes before that Event: its wave verified, or the rollout ended."""
        if self.wave < 0:
            return False
        if reason in ("RolloutReverted", "RolloutComplete"):
            return True
        return self.wave > 0 and (reason, wave) == ("WaveVerified", self.wave)  # a failed wave's stays


@dataclass
class WaveWatch:
    """Polled while a pass runs (`poll()`): the new lines to tell about the target's rollouts in waves."""

    client: Any
    target: str
    seen_events: set[str] = field(default_factory=set)
    rules: dict[str, tuple[str, int]] = field(default_factory=dict)  # rule told -> (pool, wave)
    soaks: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.store = StateStore(self.client, self.target)
        # What happened before this pass was told already (or is not this pass's).
        self.seen_events = {e["metadata"]["name"] for e in self._events()}
        self.before = {r["metadata"]["name"] for r in self._rules()}

    def _events(self) -> list[dict[str, Any]]:
        events = [
            e
            for e in self.client.list_kind("", "Event", self.store.namespace)
            if e.get("reason") in REASONS and (e.get("involvedObject") or {}).get("name") == self.store.name
        ]
        return sorted(events, key=lambda e: (e.get("firstTimestamp") or "", _version(e)))

    def _rules(self) -> list[dict[str, Any]]:
        return [
            r
            for r in self.client.list_kind("resource.k8s.io", "DeviceTaintRule")
            if ((r.get("spec") or {}).get("taint") or {}).get("key") == TAINT_KEY
        ]

    def _progress(self) -> list[RolloutProgress]:
        marker = self.store.load().in_progress
        return rollouts_from_json(marker.rollout) if marker is not None else []

    def poll(self) -> list[str]:
        """The lines of what is new since the last poll, in the order it happened.

        The state and the taint rules are read before the Events: what they show that is new came after an
        Event of the list that it follows (a soak after its WaveVerified, a drain after its WaveStarted). The
        rules are read again after the Events: a drain removed before an Event of the list is seen gone."""
        progress = self._progress()
        made = self._made(self._rules())
        events = [e for e in self._events() if e["metadata"]["name"] not in self.seen_events]
        gone = self._gone(self._rules())
        extra = made + self._soak_lines(progress)
        lines: list[str] = []
        for event in events:
            self.seen_events.add(event["metadata"]["name"])
            reason = str(event.get("reason"))
            message = str(event.get("message") or "").split("): ", 1)[-1]
            anchor = (reason, _wave_of(message))
            lines += [x.text for x in gone if x.ends_before(*anchor)]
            gone = [x for x in gone if not x.ends_before(*anchor)]
            lines.append(f"[Event {reason}] {message}")
            lines += [x.text for x in extra if x.after == anchor]
            extra = [x for x in extra if x.after != anchor]
        # What follows an Event told in an earlier poll came before this poll's Events; a drain removed
        # and not followed by one of them came after.
        return [x.text for x in extra] + lines + [x.text for x in gone]

    def _made(self, rules: list[dict[str, Any]]) -> list[_Line]:
        out: list[_Line] = []
        for rule in rules:
            name = rule["metadata"]["name"]
            if name in self.rules or name in self.before:
                continue
            spec = rule.get("spec") or {}
            selector, taint = spec.get("deviceSelector") or {}, spec.get("taint") or {}
            value = re.fullmatch(r"wave-(\d+)", str(taint.get("value") or ""))
            wave = int(value.group(1)) if value else 0
            pool = str(selector.get("pool") or "*")
            self.rules[name] = (pool, wave)
            # A wave's drain follows its WaveStarted; the revert's (wave-0) follows RolloutReverting.
            anchor = ("WaveStarted", wave) if wave else ("RolloutReverting", 0)
            out.append(
                _Line(
                    f"  [DeviceTaintRule] drained: the {selector.get('driver')} devices of pool {pool} are "
                    f"tainted {taint.get('effect')} ({taint.get('value') if wave else 'for the revert'}): "
                    "new claims go elsewhere",
                    anchor,
                )
            )
        return out

    def _gone(self, rules: list[dict[str, Any]]) -> list[_Line]:
        live = {r["metadata"]["name"] for r in rules}
        self.before &= live  # a rule of before the pass, removed: made again, it is this pass's
        out: list[_Line] = []
        for name in sorted(set(self.rules) - live):
            pool, wave = self.rules.pop(name)
            out.append(_Line(f"  [DeviceTaintRule] undrained: pool {pool} takes new claims again", wave=wave))
        return out

    def _soak_lines(self, rollouts: list[RolloutProgress]) -> list[_Line]:
        out: list[_Line] = []
        for progress in rollouts:
            key = (f"{progress.namespace}/{progress.daemonset}", progress.wave)
            if progress.phase != SOAKING or not progress.soak_until or key in self.soaks:
                continue
            self.soaks.add(key)
            out.append(_Line(f"  [state] soaking: {progress.line()}", ("WaveVerified", progress.wave)))
        return out


def _wave_of(text: str) -> int:
    match = _WAVE.search(text)
    return int(match.group(1)) if match else 0


def _version(obj: dict[str, Any]) -> int:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0
