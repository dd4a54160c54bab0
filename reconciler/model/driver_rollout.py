"""A driver's upgrade in waves (issue 32): the `rollout:` of a `drivers:` entry or a DaemonSet's annotation (pure).

```yaml
rollout:
  waves: ["1", "10%", "50%", "100%"]   # after the canary: nodes done so far, of those the DaemonSet targets
  soak: 2m                             # between waves, after the wave verified
  drainDevices: true                   # taint a wave's devices NoSchedule while its plugin is replaced
  probe: {class: gpu.example.com, image: registry.example.com/gpu-probe:1}
  maxFailedNodes: 0
```

Waves are cumulative: a count (`"3"`: three nodes done) or a percentage of the target nodes (`"10%"`, rounded
up); counts come first, each list increasing, and the last wave is `"100%"`. `soak` is a duration (`30s`,
`2m`, `1h30m`, `500ms`, or plain seconds). The same mapping may sit on a plain manifest's driver DaemonSet
as the annotation `dra-gitops.io/rollout` (YAML or JSON). Every mistake is an error at `file:line`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.errors import ManifestError

ROLLOUT_ANNOTATION = "dra-gitops.io/rollout"

WAVE_PATTERN = r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$"
DURATION_PATTERN = r"^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+$|^[0-9]+(\.[0-9]*)?$"

ROLLOUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Upgrade the driver's kubelet plugin node by node in waves after its canary (OnDelete).",
    "required": ["waves"],
    "additionalProperties": False,
    "properties": {
        "waves": {
            "type": "array",
            "items": {"type": "string", "pattern": WAVE_PATTERN},
            "description": 'Nodes done after each wave, cumulative: counts ("1") then percentages, ending "100%".',
        },
        "soak": {
            "type": "string",
            "pattern": DURATION_PATTERN,
            "description": "How long to wait between waves, after a wave verified (30s, 2m, 1h30m).",
        },
        "drainDevices": {
            "type": "boolean",
            "description": "Taint the wave's devices NoSchedule (a DeviceTaintRule) while its plugin is replaced.",
        },
        "probe": {
            "type": "object",
            "description": "A ResourceClaim of this class and a pod of this image on each wave node must run.",
            "required": ["class", "image"],
            "additionalProperties": False,
            "properties": {
                "class": {"type": "string", "description": "The DeviceClass the probe claim requests."},
                "image": {"type": "string", "description": "The probe pod's image."},
            },
        },
        "maxFailedNodes": {
            "type": "integer",
            "minimum": 0,
            "description": "Nodes of the rollout that may fail before it halts and reverts (default 0).",
        },
    },
}

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Wave:
    """One wave as written: a node count, or a percentage of the target nodes."""

    value: int
    percent: bool

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


@dataclass(frozen=True)
class Probe:
    device_class: str
    image: str


@dataclass(frozen=True)
class RolloutSpec:
    """A driver's validated `rollout`."""

    waves: tuple[Wave, ...]
    soak_seconds: float = 0.0
    drain_devices: bool = False
    probe: Probe | None = None
    max_failed_nodes: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "waves": [str(w) for w in self.waves],
            "soakSeconds": self.soak_seconds,
            "drainDevices": self.drain_devices,
            "maxFailedNodes": self.max_failed_nodes,
        }
        if self.probe is not None:
            out["probe"] = {"class": self.probe.device_class, "image": self.probe.image}
        return out


def parse_duration(text: str) -> float | None:
    """Seconds of `30s`, `1m30s`, `500ms`, `2h` or plain seconds; None when it is none of those."""
    text = text.strip()
    try:
        return float(text) if text and float(text) >= 0 else None
    except ValueError:
        pass
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return total if text and position == len(text) else None


def parse_wave(text: str) -> Wave | None:
    """`"3"` or `"10%"` (1 to 100); None for anything else."""
    if not re.fullmatch(WAVE_PATTERN, text.strip()):
        return None
    text = text.strip()
    return Wave(int(text[:-1]), True) if text.endswith("%") else Wave(int(text), False)


def check_waves(values: list[str], line_of: Callable[[int], str], where: str) -> tuple[Wave, ...]:
    """The waves of `values`, or a ManifestError at the line of the first that is wrong (`line_of(index)`;
    -1 for the list itself)."""
    if not values:
        raise ManifestError(f'`{where}` must list at least one wave (the last is "100%")', where=line_of(-1))
    waves: list[Wave] = []
    for index, text in enumerate(values):
        wave = parse_wave(text)
        if wave is None:
            raise ManifestError(
                f'`{where}[{index}]` must be a node count ("1", "5") or a percentage ("10%", "100%"), not {text!r}',
                where=line_of(index),
            )
        if waves:
            last = waves[-1]
            if last.percent and not wave.percent:
                raise ManifestError(
                    f"`{where}[{index}]`: counts of nodes come before percentages ({text!r} after {str(last)!r})",
                    where=line_of(index),
                )
            if last.percent == wave.percent and wave.value <= last.value:
                raise ManifestError(
                    f"`{where}[{index}]`: waves count the nodes done so far and must increase "
                    f"({text!r} after {str(last)!r})",
                    where=line_of(index),
                )
        waves.append(wave)
    if waves[-1] != Wave(100, True):
        raise ManifestError(
            f'`{where}` must end with "100%" (the last wave takes every node left), not {str(waves[-1])!r}',
            where=line_of(len(values) - 1),
        )
    return tuple(waves)


def check_rollout_node(node: yaml.Node, where: str, line: Callable[[yaml.Node], str]) -> None:
    """What the schema cannot say of a schema-valid `rollout` mapping node: waves in order, a real duration."""
    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        if key_node.value == "waves" and isinstance(value_node, yaml.SequenceNode):
            items = value_node.value
            check_waves(
                [str(i.value) for i in items],
                lambda i, items=items, seq=value_node: line(items[i] if i >= 0 else seq),  # type: ignore[misc]
                f"{where}.waves",
            )
        elif key_node.value == "soak" and parse_duration(str(value_node.value)) is None:
            raise ManifestError(
                f"`{where}.soak` must be a duration like 30s, 2m or 1h30m, not {value_node.value!r}",
                where=line(value_node),
            )


def rollout_from(data: Mapping[str, Any], where: str, at: str) -> RolloutSpec:
    """A RolloutSpec of a schema-valid mapping (`where`: the key path, `at`: file:line for errors)."""
    waves = check_waves([str(w) for w in data.get("waves") or []], lambda _i: at, f"{where}.waves")
    soak_text = str(data.get("soak", "0"))
    soak = parse_duration(soak_text)
    if soak is None:
        raise ManifestError(
            f"`{where}.soak` must be a duration like 30s, 2m or 1h30m, not {soak_text!r}", where=at
        )
    probe_data = data.get("probe")
    probe = (
        Probe(str(probe_data["class"]), str(probe_data["image"])) if isinstance(probe_data, Mapping) else None
    )
    return RolloutSpec(
        waves=waves,
        soak_seconds=soak,
        drain_devices=data.get("drainDevices") is True,
        probe=probe,
        max_failed_nodes=int(data.get("maxFailedNodes") or 0),
    )
