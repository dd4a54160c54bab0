"""Node scores as kube-scheduler v1.36 computes them, for what the model weighs (reconciler.dra.scoring)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from reconciler.dra.allocator import AllocationOutcome
from reconciler.dra.podinfo import NodeInfo, PodInfo
from reconciler.dra.scoring import default_spread, dra_score, node_scores, pod_requests

GI = 1024**3


def _node(name: str, cpu: int = 4000, memory: int = 8 * GI, **kw: Any) -> NodeInfo:
    return NodeInfo(
        name, {"kubernetes.io/hostname": name, **kw.pop("labels", {})}, cpu=cpu, memory=memory, **kw
    )


def _pod(resources: dict[str, Any] | None = None, **spec: Any) -> PodInfo:
    container: dict[str, Any] = {"name": "main"}
    if resources:
        container["resources"] = {"requests": resources}
    return PodInfo("ml", "p", {"containers": [container], **spec}, [])


def test_a_container_without_requests_counts_the_schedulers_defaults() -> None:
    spec = {"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "500m"}}}]}
    assert pod_requests(spec, nonzero=True) == (600, 2 * 200 * 1024 * 1024)
    assert pod_requests(spec, nonzero=False) == (500, 0)
    init = {
        "containers": [{"name": "a"}],
        "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "2"}}}],
    }
    assert pod_requests(init, nonzero=False) == (2000, 0)


def test_least_allocated_and_balanced_allocation_in_numbers() -> None:
    a, b = _node("a"), _node("b")
    held = {"b": (1000, 2 * GI, 1000, 2 * GI)}
    scores = node_scores(_pod({"cpu": "1", "memory": "1Gi"}), [a, b], [a, b], [a, b], held, {}, {})
    # taints 3 x 100; fit (75 + 87) // 2 = 81 and (50 + 62) // 2 = 56; balanced 93 on both
    assert scores == {"a": 300 + 81 + 93, "b": 300 + 56 + 93}


def test_a_best_effort_pod_skips_balanced_allocation_and_equal_nodes_tie() -> None:
    a, b = _node("a"), _node("b")
    scores = node_scores(_pod(), [a, b], [a, b], [a, b], {}, {}, {})
    assert scores["a"] == scores["b"] == 300 + (97 + 97) // 2


def test_a_single_feasible_node_is_not_scored() -> None:
    a = _node("a")
    assert node_scores(_pod(), [a], [a], [a], {}, {}, {}) == {"a": 0}


def test_untolerated_prefer_no_schedule_taints_lower_the_score() -> None:
    spot = [{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]
    a, b = _node("a"), _node("b", taints=spot)
    scores = node_scores(_pod(), [a, b], [a, b], [a, b], {}, {}, {})
    assert scores["a"] - scores["b"] == 300
    tolerant = _pod(tolerations=[{"key": "spot", "operator": "Exists"}])
    scores = node_scores(tolerant, [a, b], [a, b], [a, b], {}, {}, {})
    assert scores["a"] == scores["b"]


def test_preferred_node_affinity_weights_count() -> None:
    a, b = _node("a"), _node("b", labels={"fast": "yes"})
    term = {
        "weight": 5,
        "preference": {"matchExpressions": [{"key": "fast", "operator": "In", "values": ["yes"]}]},
    }
    pod = _pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}})
    scores = node_scores(pod, [a, b], [a, b], [a, b], {}, {}, {})
    assert scores["b"] - scores["a"] == 2 * 100


def test_default_spreading_counts_the_owners_pods_in_the_namespace() -> None:
    a, b = _node("a"), _node("b")
    pod = _pod()
    pod.spread = {"matchLabels": {"app": "t"}}
    mine = ("ml", frozenset({("app", "t")}))
    pods_on = {"a": Counter({mine: 1}), "b": Counter({("other", frozenset({("app", "t")})): 3})}
    scores = node_scores(pod, [a, b], [a, b], [a, b], {}, pods_on, {})
    assert scores["b"] > scores["a"]
    pod.spread = None
    scores = node_scores(pod, [a, b], [a, b], [a, b], {}, pods_on, {})
    assert scores["a"] == scores["b"]


def test_first_available_scores_the_earlier_subrequest_higher() -> None:
    claim = {
        "spec": {
            "devices": {"requests": [{"name": "dev", "firstAvailable": [{"name": "big"}, {"name": "small"}]}]}
        }
    }

    def got(sub: str) -> AllocationOutcome:
        return AllocationOutcome(ok=True, allocation={"devices": {"results": [{"request": f"dev/{sub}"}]}})

    assert dra_score([claim], [got("big")]) == 8
    assert dra_score([claim], [got("small")]) == 7
    a, b = _node("a"), _node("b")
    scores = node_scores(_pod(), [a, b], [a, b], [a, b], {}, {}, {"a": 8, "b": 7})
    assert scores["a"] - scores["b"] == 100 - 87


def test_the_default_spreading_selector_merges_services_and_the_owner() -> None:
    labels = {"app": "t", "tier": "gpu"}
    assert default_spread(labels, [], None) is None  # a bare pod, or a Job's, no Service: not spread
    assert default_spread(labels, [{"app": "t"}, {"app": "other"}], None) == {"matchLabels": {"app": "t"}}
    owner = {"matchLabels": {"tier": "gpu"}, "matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}
    assert default_spread(labels, [{"app": "t"}], owner) == {
        "matchLabels": {"app": "t", "tier": "gpu"},
        "matchExpressions": [{"key": "x", "operator": "DoesNotExist"}],
    }
