"""Which nodes are interchangeable while pods are placed (pure).

Two nodes are in one class when swapping them changes nothing for any pod still to come: the same
labels (the hostname apart, unless a pod names the node), taints, readiness and allocatable resources;
node-local devices alike one by one (driver, name, the attributes a selector or constraint of the pods
may read, capacity, taints, counters; the pool's name and a per-device UUID nobody selects on apart) with the same ones in use; the same node-independent devices reachable; and the same pods
bound (by namespace and labels) requesting the same. Such nodes pass the same filters, allocate the
same devices and score the same: the placement model asks one node per class, and the exploration of
the scheduler's ties (:mod:`reconciler.dra.ties`) follows one node per class.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.dra.allocator import Inventory
from reconciler.dra.devices import Usage
from reconciler.dra.podinfo import NodeInfo, PodInfo

__all__ = ["NodeClasses", "named_nodes", "pod_texts", "words"]

HOSTNAME = "kubernetes.io/hostname"


def named_nodes(nodes: Iterable[NodeInfo], texts: Iterable[Any]) -> set[str]:
    """The nodes whose name appears in any of ``texts`` (pod specs, allocations): never merged."""
    blob = "\n".join(json.dumps(t, sort_keys=True, default=str) for t in texts)
    return {n.name for n in nodes if n.name in blob}


def words(texts: Iterable[Any]) -> set[str]:
    """Every identifier in ``texts``: the attribute names a selector or constraint may read are among them."""
    blob = "\n".join(json.dumps(t, sort_keys=True, default=str) for t in texts)
    return set(re.findall(r"[A-Za-z0-9_-]+", blob))


def pod_texts(pods: Iterable[PodInfo]) -> list[Any]:
    out: list[Any] = []
    for p in pods:
        out.append(p.spec)
        out.extend(pc.claim for pc in p.claims if pc.claim is not None)
    return out


class NodeClasses:
    """The static half of a node's class (computed once) and the dynamic half (what is held on it)."""

    def __init__(self, inv: Inventory, nodes: Iterable[NodeInfo]) -> None:
        self.inv = inv
        self.nodes = list(nodes)
        self.named: set[str] = set()
        self.relevant: set[str] | None = None  # attribute names that matter (None: all of them)
        self.static: dict[str, int] = {}
        self.local = {n.name: inv.local_devices(n.name) for n in self.nodes}
        self._classify()

    def _classify(self) -> None:
        ids: dict[Any, int] = {}
        self.static = {n.name: ids.setdefault(self._static_key(n), len(ids)) for n in self.nodes}

    def focus(self, texts: Iterable[Any]) -> None:
        """Only what ``texts`` (the pods to place, their claims) and the classes may read tells nodes apart."""
        texts = list(texts)
        self.named |= named_nodes(self.nodes, texts)
        self.relevant = words([*texts, *self.inv.classes.values()])
        self._classify()

    def _attributes(self, attributes: Mapping[str, Any]) -> str:
        if self.relevant is not None:
            attributes = {k: v for k, v in attributes.items() if k.rpartition("/")[2] in self.relevant}
        return json.dumps(attributes, sort_keys=True, default=str)

    def _static_key(self, node: NodeInfo) -> Any:
        devices = self.local[node.name]
        pools: dict[tuple[str, str], int] = {}
        for d in devices:
            pools.setdefault((d.driver, d.pool), len(pools))
        described = tuple(
            (
                d.driver,
                pools[(d.driver, d.pool)],
                d.name,
                self._attributes(d.attributes),
                repr(sorted(d.capacity.items())),
                json.dumps(d.taints, sort_keys=True, default=str),
                repr(d.consumes),
                d.multi,
            )
            for d in devices
        )
        counters = tuple(
            sorted(
                (pools[(drv, pool)], cs, repr(sorted(values.items())))
                for (drv, pool, cs), values in self.inv.counter_sets.items()
                if (drv, pool) in pools
            )
        )
        remote = tuple(d.key for d in self.inv.devices_on_node(node.name, node.labels) if d.node_name is None)
        return (
            tuple(sorted((k, v) for k, v in node.labels.items() if k != HOSTNAME)),
            json.dumps(node.taints, sort_keys=True, default=str),
            node.unschedulable,
            node.ready,
            tuple(sorted(node.allocatable.items())),
            node.cpu,
            node.memory,
            described,
            counters,
            remote,
        )

    def dynamic(
        self,
        node: str,
        usage: Usage,
        held: Mapping[str, Any],
        requested: Mapping[str, Mapping[str, Any]],
        pods_on: Mapping[str, Counter[Any]],
    ) -> Any:
        devices = self.local.get(node, [])
        pools: dict[tuple[str, str], int] = {}
        used: list[Any] = []
        for i, d in enumerate(devices):
            pools.setdefault((d.driver, d.pool), len(pools))
            if d.key in usage.used:
                used.append(i)
            elif d.key in usage.shared:
                used.append((i, repr(sorted(usage.shared[d.key].items()))))
        counters = tuple(
            sorted(
                (pools[(drv, pool)], cs, repr(sorted(values.items())))
                for (drv, pool, cs), values in usage.counters.items()
                if (drv, pool) in pools and any(values.values())
            )
        )
        return (
            tuple(used),
            counters,
            held.get(node),
            tuple(sorted(requested.get(node, {}).items())),
            frozenset(pods_on.get(node, Counter()).items()),
        )

    def key(self, node: str, dynamic: Any, *, ties: bool = False) -> Any:
        """The class of ``node``; for ties a node a pod names is a class of its own."""
        return (self.static[node], dynamic, node if ties and node in self.named else None)
