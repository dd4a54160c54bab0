"""The devices a wave's nodes had before their plugin was replaced, kept in the rollout's progress (pure).

A wave compares each node's republished pools with those its old plugin published (`wave_pools.devices_problem`).
The wave reads them before it deletes any old plugin pod; `WaveSnapshot` is what it keeps of them in the
rollout's progress (`RolloutProgress.snapshot`, saved before the first deletion), so a pass that dies mid-wave
(kill -9, a Lease handed over) is followed by one that compares the republished devices with the same
snapshot, with the same evidence, as an unbroken wave does.

Kept per node and pool: the pool's generation and slice UIDs (was it republished?), the device names, and the
values of the attributes the driver's DeviceClasses select on (`selects`, fixed at the wave's start). Compact:
attribute names and values are interned in tables, and the pools with the same devices (names and values: the
common case on a fleet of one hardware model) share one entry of `devices`. The JSON form:

    {"wave": 2, "selects": ["model"], "attributes": ["gpu.example.com/model"],
     "values": [{"string": "A100"}], "devices": [{"gpu-0": [0], "gpu-1": [0]}],
     "nodes": {"node-1": {"=": [generation, ["slice uid", ...], index into devices]}}}

A pool named after its node (the common case) is keyed "=".
A device's list holds, for each of `attributes`, the index of its value in `values` (null: it has none).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.wave_pools import Pool

SAME = "="  # the key of a node's pool named after the node (the common case; no pool name has a "=")
# Over this many bytes of distinct attribute values (a class that selects on an attribute of its own on each
# device), the snapshot keeps a digest of each value instead (`digests`): the evidence still names the device
# and the attribute, with the digests of its values.
VALUES_BUDGET = 64_000


def _digested(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"sha256"}


def digest(value: Any) -> dict[str, str]:
    """What a digested snapshot keeps of an attribute's value."""
    return {"sha256": hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]}


@dataclass(frozen=True)
class WaveSnapshot:
    """The pools of a wave's nodes as the old plugin published them (devices: the selected attributes only)."""

    wave: int
    selects: frozenset[str]  # short names of the attributes the driver's DeviceClasses select on
    pools: Mapping[str, Mapping[str, Pool]]  # node -> pool name -> pool
    digests: bool = False  # the attributes' values are digests (`digest`): compare with `comparable(...)`

    @classmethod
    def of(
        cls, wave: int, before: Mapping[str, Mapping[str, Pool]], selects: set[str], digests: bool = False
    ) -> WaveSnapshot:
        """What a wave keeps of `before` (node -> pools, as read, or as a digested snapshot kept them: then
        `digests`): the attributes in `selects` only."""
        kept = {
            node: {
                name: Pool(
                    pool.generation,
                    pool.slice_uids,
                    True,
                    {
                        device: {k: v for k, v in attrs.items() if k.split("/")[-1] in selects}
                        for device, attrs in pool.devices.items()
                    },
                )
                for name, pool in pools.items()
            }
            for node, pools in before.items()
        }
        return cls(wave, frozenset(selects), kept, digests)

    def to_json(self) -> dict[str, Any]:
        attributes = sorted(
            {
                a
                for pools in self.pools.values()
                for p in pools.values()
                for d in p.devices.values()
                for a in d
            }
        )
        values: list[Any] = []
        value_index: dict[str, int] = {}
        profiles: list[dict[str, list[int | None]]] = []
        profile_index: dict[str, int] = {}

        def value_of(value: Any) -> int:
            key = json.dumps(value, sort_keys=True)
            if key not in value_index:
                value_index[key] = len(values)
                values.append(value)
            return value_index[key]

        def profile_of(pool: Pool) -> int:
            profile = {
                device: [value_of(attrs[a]) if a in attrs else None for a in attributes]
                for device, attrs in sorted(pool.devices.items())
            }
            key = json.dumps(profile, sort_keys=True)
            if key not in profile_index:
                profile_index[key] = len(profiles)
                profiles.append(profile)
            return profile_index[key]

        nodes = {
            node: {
                SAME if name == node else name: [pool.generation, sorted(pool.slice_uids), profile_of(pool)]
                for name, pool in sorted(pools.items())
            }
            for node, pools in sorted(self.pools.items())
        }
        kept = values
        if self.digests or len(json.dumps(values)) > VALUES_BUDGET:  # (a value read digested stays so)
            kept = [v["sha256"] if _digested(v) else digest(v)["sha256"] for v in values]
        return {
            "wave": self.wave,
            "selects": sorted(self.selects),
            **({"digests": True} if kept is not values else {}),
            "attributes": attributes,
            "values": kept,
            "devices": profiles,
            "nodes": nodes,
        }

    @classmethod
    def from_json(cls, raw: object) -> WaveSnapshot | None:
        """The snapshot of its JSON form; None for anything that does not read as one (read as absent)."""
        if not isinstance(raw, dict):
            return None
        try:
            attributes = [str(a) for a in raw["attributes"]]
            digests = raw.get("digests") is True
            values = [{"sha256": str(v)} for v in raw["values"]] if digests else list(raw["values"])
            profiles = [
                {
                    str(device): {attributes[i]: values[v] for i, v in enumerate(vector) if v is not None}
                    for device, vector in profile.items()
                }
                for profile in raw["devices"]
            ]
            pools = {
                str(node): {
                    str(node) if name == SAME else str(name): Pool(
                        int(entry[0]), frozenset(str(u) for u in entry[1]), True, profiles[int(entry[2])]
                    )
                    for name, entry in of_node.items()
                }
                for node, of_node in raw["nodes"].items()
            }
            return cls(int(raw["wave"]), frozenset(str(s) for s in raw["selects"]), pools, digests)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            return None

    def comparable(self, pools: Mapping[str, Pool]) -> dict[str, Pool]:
        """`pools` (as republished) as they compare with this snapshot's: digested if it keeps digests."""
        if not self.digests:
            return dict(pools)
        return {
            name: Pool(
                pool.generation,
                pool.slice_uids,
                pool.complete,
                {
                    d: {k: v if _digested(v) else digest(v) for k, v in attrs.items()}
                    for d, attrs in pool.devices.items()
                },
            )
            for name, pool in pools.items()
        }


__all__ = ["VALUES_BUDGET", "WaveSnapshot", "digest"]
