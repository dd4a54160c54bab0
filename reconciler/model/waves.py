"""The waves of a driver upgrade (issue 32): which nodes each wave replaces the plugin on, in what order (pure).

The order is deterministic: canary nodes first, then the other nodes spread across zones (the zones in turn,
round-robin, zones and the nodes of each zone in name order), names compared as people read them
(`node-2` before `node-10`). Waves are cumulative (`driver_rollout.Wave`): after wave k, `"3"` means three nodes
done, `"10%"` a tenth of the target nodes (rounded up). Every wave takes at least one node, a wave larger than
the nodes left takes them all, and waves after the last node are dropped. A DaemonSet that targets no node is
judged as stage 1 judges a main driver DaemonSet that desires 0 pods: a failure unless its driver allows no
nodes (`allowNoNodes`, or the annotation `dra-gitops.io/allow-no-nodes`), then a notice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.model.driver_rollout import RolloutSpec, Wave

ZONE_LABEL = "topology.kubernetes.io/zone"


@dataclass(frozen=True)
class TargetNode:
    """A node the driver's DaemonSet runs a pod on."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class PlannedWave:
    number: int  # 1-based
    written: str  # the wave as the spec writes it ("10%")
    nodes: tuple[str, ...]
    done_after: int  # nodes replaced once this wave is through


@dataclass(frozen=True)
class WavePlan:
    """The waves of one rollout, or why there are none (`failure`; `notice` when no nodes is allowed)."""

    order: tuple[str, ...]
    waves: tuple[PlannedWave, ...]
    max_failed_nodes: int = 0
    failure: str | None = None
    notice: str | None = None

    def halts(self, failed_nodes: int) -> bool:
        """The rollout halts (and reverts) once more nodes failed than `maxFailedNodes` allows."""
        return failed_nodes > self.max_failed_nodes

    def wave_of(self, node: str) -> int | None:
        return next((w.number for w in self.waves if node in w.nodes), None)


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """`node-10` after `node-2`: digit runs compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part)


def node_order(
    nodes: Sequence[TargetNode],
    canary_nodes: Collection[str] = (),
    canary_labels: Mapping[str, str] | None = None,
    zone_label: str = ZONE_LABEL,
) -> tuple[str, ...]:
    """The order the rollout replaces plugins in: canary nodes (named, or carrying every `canary_labels` pair)
    first, then the zones in turn. A node without the zone label is in the zone ""; a name listed twice counts
    once."""
    unique: dict[str, TargetNode] = {}
    for node in nodes:
        unique.setdefault(node.name, node)

    def is_canary(node: TargetNode) -> bool:
        if node.name in canary_nodes:
            return True
        return bool(canary_labels) and all(node.labels.get(k) == v for k, v in (canary_labels or {}).items())

    canaries = sorted((n.name for n in unique.values() if is_canary(n)), key=_natural)
    zones: dict[str, list[str]] = {}
    for node in unique.values():
        if not is_canary(node):
            zones.setdefault(str(node.labels.get(zone_label, "")), []).append(node.name)
    columns = [sorted(zones[zone], key=_natural) for zone in sorted(zones, key=_natural)]
    spread = [
        column[row]
        for row in range(max(map(len, columns), default=0))
        for column in columns
        if row < len(column)
    ]
    return (*canaries, *spread)


def _cumulative(wave: Wave, total: int) -> int:
    return min(total, wave.value) if not wave.percent else math.ceil(wave.value * total / 100)


def plan_waves(
    nodes: Sequence[TargetNode],
    spec: RolloutSpec,
    *,
    canary_nodes: Collection[str] = (),
    canary_labels: Mapping[str, str] | None = None,
    zone_label: str = ZONE_LABEL,
    allow_no_nodes: str | None = None,
) -> WavePlan:
    """The waves of `spec` over the DaemonSet's target `nodes`. `allow_no_nodes`: why no nodes passes (as
    `dra.allows_no_nodes` says it), None when it does not."""
    order = node_order(nodes, canary_nodes, canary_labels, zone_label)
    total = len(order)
    if total == 0:
        reason = "the DaemonSet targets no node: a rollout in waves would replace and verify nothing"
        if allow_no_nodes is not None:
            return WavePlan((), (), spec.max_failed_nodes, notice=f"{reason}; passes: {allow_no_nodes}")
        return WavePlan((), (), spec.max_failed_nodes, failure=reason)
    waves: list[PlannedWave] = []
    done = 0
    for wave in spec.waves:
        if done == total:
            break
        upto = min(total, max(done + 1, _cumulative(wave, total)))
        waves.append(PlannedWave(len(waves) + 1, str(wave), order[done:upto], upto))
        done = upto
    return WavePlan(order, tuple(waves), spec.max_failed_nodes)
