"""How kube-scheduler (v1.36) scores the nodes a pod fits on, for what the model knows (pure).

The default score plugins and their weights: TaintToleration (3: fewer untolerated ``PreferNoSchedule``
taints), NodeAffinity (2: the weights of the preferred terms that match), NodeResourcesFit (1:
LeastAllocated over cpu and memory, counting 100m cpu and 200Mi memory for a container that requests
none), NodeResourcesBalancedAllocation (1: cpu and memory used in the same proportion; skipped for a
pod that requests neither), PodTopologySpread (2: the system default constraints, hostname maxSkew 3
and zone maxSkew 5, ScheduleAnyway, for a pod its owner or a Service selects), DynamicResources (1: a
``firstAvailable`` request scores 8 minus the index of the subrequest it got). Each plugin's scores
are normalised over the feasible nodes as upstream does, then weighted and summed. ImageLocality and
InterPodAffinity are not modelled (images are not known; inter-pod affinity makes a pod "unknown").

Not modelled either: over 100 nodes kube-scheduler stops filtering once it found a share of the nodes
feasible (percentageOfNodesToScore), starting where its last cycle stopped, so in a larger cluster it
may also take a node that is not the best of all.

The nodes left with the highest sum are ties: which one the scheduler binds to depends on its score
heap and on the order parallel filtering finished, which cannot be predicted from outside.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.dra.allocator import AllocationOutcome
from reconciler.dra.nodematch import label_selector_matches, node_selector_matches, tolerates
from reconciler.dra.podinfo import NodeInfo, PodInfo
from reconciler.dra.quantity import quantity_or_none
from reconciler.model.readers import as_dict, as_list

__all__ = [
    "DEFAULT_CPU",
    "DEFAULT_MEMORY",
    "Held",
    "Requests",
    "default_spread",
    "dra_score",
    "node_scores",
    "pod_requests",
]

MAX_SCORE = 100
DEFAULT_CPU = 100  # millicores: schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY = 200 * 1024 * 1024  # bytes: schedutil.DefaultMemoryRequest
FIRST_AVAILABLE_MAX = 8  # resourceapi.FirstAvailableDeviceRequestMaxSize
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SPREAD_DEFAULTS = ((HOSTNAME, 3), (ZONE, 5))  # system default constraints: (topology key, maxSkew)
WEIGHTS = {"taints": 3, "affinity": 2, "fit": 1, "balanced": 1, "spread": 2, "dra": 1}

Requests = tuple[int, int]  # (cpu millicores, memory bytes)
# what the pods bound to a node request: (cpu, memory) with the non-zero defaults, then as requested
Held = tuple[int, int, int, int]


def _amount(raw: Any, scale: int) -> int | None:
    q = quantity_or_none(raw)
    return None if q is None else math.ceil(q * scale)


def _container(container: Mapping[str, Any], nonzero: bool) -> Requests:
    resources = as_dict(container.get("resources"))
    merged = {**as_dict(resources.get("limits")), **as_dict(resources.get("requests"))}
    cpu, memory = _amount(merged.get("cpu"), 1000), _amount(merged.get("memory"), 1)
    if nonzero:
        return (DEFAULT_CPU if cpu is None else cpu, DEFAULT_MEMORY if memory is None else memory)
    return (cpu or 0, memory or 0)


def pod_requests(spec: Mapping[str, Any], nonzero: bool) -> Requests:
    """A pod's cpu and memory request (containers summed, the largest init container if larger, overhead).

    ``nonzero``: a container without a request counts the scheduler's defaults (what scoring uses).
    """
    cpu, memory = 0, 0
    for c in as_list(spec.get("containers")):
        a, b = _container(as_dict(c), nonzero)
        cpu, memory = cpu + a, memory + b
    for c in as_list(spec.get("initContainers")):
        a, b = _container(as_dict(c), nonzero)
        cpu, memory = max(cpu, a), max(memory, b)
    overhead = as_dict(spec.get("overhead"))
    cpu += _amount(overhead.get("cpu"), 1000) or 0
    memory += _amount(overhead.get("memory"), 1) or 0
    return cpu, memory


def _normalise(scores: dict[str, int], reverse: bool) -> dict[str, int]:
    """helper.DefaultNormalizeScore: scaled to 0..100 by the highest; reversed for "fewer is better"."""
    top = max(scores.values(), default=0)
    if top == 0:
        return {n: MAX_SCORE if reverse else 0 for n in scores}
    out = {}
    for n, s in scores.items():
        v = MAX_SCORE * s // top
        out[n] = MAX_SCORE - v if reverse else v
    return out


def _taints(pod: PodInfo, nodes: Sequence[NodeInfo]) -> dict[str, int]:
    tolerations = [
        as_dict(t)
        for t in as_list(pod.spec.get("tolerations"))
        if as_dict(t).get("effect") in (None, "", "PreferNoSchedule")
    ]
    counts = {
        n.name: sum(
            1
            for t in n.taints
            if t.get("effect") == "PreferNoSchedule" and not any(tolerates(tol, t) for tol in tolerations)
        )
        for n in nodes
    }
    return _normalise(counts, reverse=True)


def _affinity(pod: PodInfo, nodes: Sequence[NodeInfo]) -> dict[str, int] | None:
    preferred = as_list(
        as_dict(as_dict(pod.spec.get("affinity")).get("nodeAffinity")).get(
            "preferredDuringSchedulingIgnoredDuringExecution"
        )
    )
    if not preferred:
        return None
    sums = {}
    for n in nodes:
        total = 0
        for term in preferred:
            term = as_dict(term)
            weight = term.get("weight")
            selector = {"nodeSelectorTerms": [as_dict(term.get("preference"))]}
            if isinstance(weight, int) and weight and node_selector_matches(selector, n.name, n.labels):
                total += weight
        sums[n.name] = total
    return _normalise(sums, reverse=False)


def _least_allocated(requested: int, capacity: int) -> int:
    if capacity <= 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_SCORE // capacity


def _fit(pod: PodInfo, nodes: Sequence[NodeInfo], held: Mapping[str, Held]) -> dict[str, int]:
    cpu, memory = pod_requests(pod.spec, nonzero=True)
    out = {}
    for n in nodes:
        h = held.get(n.name, (0, 0, 0, 0))
        out[n.name] = (_least_allocated(h[0] + cpu, n.cpu) + _least_allocated(h[1] + memory, n.memory)) // 2
    return out


def _balanced(pod: PodInfo, nodes: Sequence[NodeInfo], held: Mapping[str, Held]) -> dict[str, int] | None:
    cpu, memory = pod_requests(pod.spec, nonzero=False)
    if not cpu and not memory:
        return None  # a best-effort pod: the plugin skips it
    out = {}
    for n in nodes:
        h = held.get(n.name, (0, 0, 0, 0))
        fractions = [
            min(1.0, (used + want) / cap)
            for used, want, cap in ((h[2], cpu, n.cpu), (h[3], memory, n.memory))
            if cap > 0
        ]
        if len(fractions) < 2:
            out[n.name] = MAX_SCORE
            continue
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
        out[n.name] = int((1 - std) * MAX_SCORE)
    return out


def _spread(
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    feasible: Sequence[NodeInfo],
    all_nodes: Sequence[NodeInfo],
    pods_on: Mapping[str, Counter[tuple[str, frozenset[tuple[str, str]]]]],
) -> dict[str, int] | None:
    selector = pod.spread
    if selector is None:
        return None
    matches: dict[frozenset[tuple[str, str]], bool] = {}

    def count(node: str) -> int:
        total = 0
        for (ns, labels), k in pods_on.get(node, Counter()).items():
            if ns != pod.namespace:
                continue
            hit = matches.get(labels)
            if hit is None:
                hit = matches[labels] = label_selector_matches(selector, dict(labels))
            total += k if hit else 0
        return total

    raw: dict[str, float] = {n.name: 0.0 for n in nodes}
    for key, skew in SPREAD_DEFAULTS:
        domains = {n.labels[key] for n in feasible if key in n.labels}
        weight = math.log(len(domains) + 2)
        per_domain: Counter[str] = Counter()
        if key != HOSTNAME:
            for n in all_nodes:
                if n.labels.get(key) in domains:
                    per_domain[n.labels[key]] += count(n.name)
        for n in nodes:
            if key not in n.labels:
                continue
            cnt = count(n.name) if key == HOSTNAME else per_domain[n.labels[key]]
            raw[n.name] += cnt * weight + (skew - 1)
    scores = {n: int(math.floor(v + 0.5)) for n, v in raw.items()}
    top, low = max(scores.values(), default=0), min(scores.values(), default=0)
    if top == 0:
        return {n: MAX_SCORE for n in scores}
    return {n: MAX_SCORE * (top + low - s) // top for n, s in scores.items()}


def default_spread(
    labels: Mapping[str, str],
    services: Sequence[Mapping[str, Any]],
    owner: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """helper.DefaultSelector: the selectors of the Services (of the pod's namespace) that select the pod,
    and that of its owning ReplicaSet, StatefulSet or ReplicationController; None when that is empty."""
    match: dict[str, str] = {}
    for selector in services:
        if selector and all(labels.get(str(k)) == str(v) for k, v in selector.items()):
            match.update({str(k): str(v) for k, v in selector.items()})
    expressions: list[Any] = []
    if owner:
        match.update({str(k): str(v) for k, v in as_dict(owner.get("matchLabels")).items()})
        expressions = list(as_list(owner.get("matchExpressions")))
    if not match and not expressions:
        return None
    return {"matchLabels": match, **({"matchExpressions": expressions} if expressions else {})}


def dra_score(claims: Sequence[Mapping[str, Any]], outcomes: Sequence[AllocationOutcome]) -> int:
    """DynamicResources' raw score: per ``firstAvailable`` request, 8 minus the index of the subrequest
    the node's allocation used."""
    score = 0
    for claim, outcome in zip(claims, outcomes, strict=False):
        used = {
            str(as_dict(r).get("request"))
            for r in as_list(as_dict(as_dict(outcome.allocation).get("devices")).get("results"))
        }
        for req in as_list(as_dict(as_dict(claim.get("spec")).get("devices")).get("requests")):
            req = as_dict(req)
            for i, sub in enumerate(as_list(req.get("firstAvailable"))):
                if f"{req.get('name')}/{as_dict(sub).get('name')}" in used:
                    score += FIRST_AVAILABLE_MAX - i
    return score


def node_scores(
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    feasible: Sequence[NodeInfo],
    all_nodes: Sequence[NodeInfo],
    held: Mapping[str, Held],
    pods_on: Mapping[str, Counter[tuple[str, frozenset[tuple[str, str]]]]],
    dra: Mapping[str, int],
) -> dict[str, int]:
    """The weighted sum of the plugins' normalised scores of ``nodes``.

    ``nodes`` stand for every ``feasible`` node (one of each class of interchangeable nodes, which all
    score the same); ``all_nodes`` are the cluster's, for the pods counted per zone.
    """
    total = {n.name: 0 for n in nodes}
    if len(feasible) < 2:
        return total  # the scheduler does not score a single feasible node
    parts: list[tuple[str, dict[str, int] | None]] = [
        ("taints", _taints(pod, nodes)),
        ("affinity", _affinity(pod, nodes)),
        ("fit", _fit(pod, nodes, held)),
        ("balanced", _balanced(pod, nodes, held)),
        ("spread", _spread(pod, nodes, feasible, all_nodes, pods_on)),
        ("dra", _normalise({n.name: dra.get(n.name, 0) for n in nodes}, reverse=False) if dra else None),
    ]
    for name, scores in parts:
        if scores is None:
            continue
        weight = WEIGHTS[name]
        for n, s in scores.items():
            total[n] += weight * s
    return total
