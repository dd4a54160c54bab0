"""Why a DaemonSet runs on no node: `nodefit.no_node` names the selector, the affinity or the taints."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.cluster.readiness import no_node


def node(name: str, labels: dict[str, str] | None = None, *taints: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": list(taints)}}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": list(terms)}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


GPU_PRESENT = {"matchExpressions": [expr("nvidia.com/gpu.present", "In", "true")]}
NODES = [node("cpu-0", {"pool": "cpu"}), node("cpu-1", {"pool": "cpu", "gpu": "false"})]


def test_a_node_that_fits_means_no_reason() -> None:
    assert no_node({"nodeSelector": {"pool": "cpu"}}, NODES) is None
    assert no_node(affinity({"matchExpressions": [expr("gpu", "DoesNotExist")]}), NODES) is None


def test_no_nodes_at_all_blames_no_selector() -> None:
    unfit = no_node({"nodeSelector": {"gpu": "true"}}, [])
    assert unfit is not None and unfit.why == "the cluster has no nodes" and unfit.fix == ""


def test_affinity_on_a_label_no_node_has() -> None:
    unfit = no_node(affinity(GPU_PRESENT), NODES)
    assert unfit is not None
    assert unfit.why == (
        "its nodeAffinity requires nvidia.com/gpu.present In [true]: "
        "no node has the label nvidia.com/gpu.present"
    )
    assert "correct the affinity" in unfit.fix


@pytest.mark.parametrize(
    ("requirement", "why"),
    [
        (expr("gpu", "In", "true"), "no node has gpu in [true] (seen: gpu=false)"),
        (expr("pool", "NotIn", "cpu"), "every node has pool in [cpu]"),
        (expr("pool", "DoesNotExist"), "every node has the label pool"),
        (expr("gpus", "Gt", "4"), "no node has gpus greater than 4"),
        (expr("zone", "Exists"), "no node has the label zone"),
    ],
)
def test_each_operator_says_why_no_node_matches(requirement: dict[str, Any], why: str) -> None:
    unfit = no_node(affinity({"matchExpressions": [requirement]}), NODES)
    assert unfit is not None and unfit.why.endswith(": " + why), unfit.why


def test_terms_are_ored_and_requirements_anded() -> None:
    both = {"matchExpressions": [expr("pool", "In", "cpu"), expr("gpu", "In", "false")]}
    assert no_node(affinity(both), NODES) is None  # cpu-1 has both
    apart = {"matchExpressions": [expr("pool", "In", "cpu"), expr("gpu", "DoesNotExist")]}
    assert no_node(affinity(apart), [NODES[1]]) is not None
    unfit = no_node(affinity(GPU_PRESENT, {"matchFields": [expr("metadata.name", "In", "gpu-9")]}), NODES)
    assert unfit is not None
    assert unfit.why == (
        "its nodeAffinity requires nvidia.com/gpu.present In [true] or field metadata.name In [gpu-9]: "
        "no node has the label nvidia.com/gpu.present; no node has field metadata.name In [gpu-9]"
    )


def test_requirements_each_met_by_some_node_but_never_together() -> None:
    term = {"matchExpressions": [expr("pool", "In", "cpu"), expr("gpu", "DoesNotExist")]}
    unfit = no_node(affinity(term), [node("a", {"pool": "cpu", "gpu": "x"}), node("b", {})])
    assert unfit is not None
    assert unfit.why.endswith("no node matches all of pool In [cpu] and gpu DoesNotExist"), unfit.why


def test_an_empty_term_matches_no_node() -> None:
    unfit = no_node(affinity({}), NODES)
    assert unfit is not None and unfit.why.endswith(": an empty term matches no node")


def test_node_selector_names_the_missing_pair_and_the_label_fix() -> None:
    unfit = no_node({"nodeSelector": {"gpu": "true", "pool": "cpu"}}, NODES)
    assert unfit is not None
    assert (
        unfit.why
        == "its nodeSelector gpu=true, pool=cpu matches no node (no node has gpu=true (seen: gpu=false))"
    )
    assert unfit.fix == "label the nodes that have its devices: kubectl label node <node> gpu=true pool=cpu"
    missing = no_node({"nodeSelector": {"nvidia.com/gpu.present": "true"}}, NODES)
    assert missing is not None and "(no node has the label nvidia.com/gpu.present)" in missing.why


def test_selector_and_affinity_that_select_different_nodes() -> None:
    unfit = no_node(
        {"nodeSelector": {"gpu": "false"}, **affinity({"matchExpressions": [expr("gpu", "DoesNotExist")]})},
        NODES,
    )
    assert unfit is not None
    assert unfit.why == (
        "its nodeSelector gpu=false matches only cpu-1 and its nodeAffinity (gpu DoesNotExist) only cpu-0"
    )


def test_taints_not_tolerated_are_named_per_node() -> None:
    tainted = [
        node("gpu-0", {}, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}),
        node(
            "gpu-1",
            {},
            {"key": "dedicated", "effect": "NoExecute"},
            {"key": "x", "effect": "PreferNoSchedule"},
        ),
    ]
    unfit = no_node({}, tainted)
    assert unfit is not None
    assert unfit.why == (
        "it does not tolerate a taint on every node: gpu-0 (nvidia.com/gpu=present:NoSchedule), "
        "gpu-1 (dedicated:NoExecute)"
    )
    assert "tolerations" in unfit.fix
    tolerated = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    assert no_node(tolerated, tainted) is None
    selected = no_node(
        {"nodeSelector": {"pool": "gpu"}},
        [*NODES, node("gpu-2", {"pool": "gpu"}, *tainted[1]["spec"]["taints"])],
    )
    assert selected is not None and selected.why.startswith(
        "it does not tolerate a taint on each of the 1 node(s) it selects: gpu-2"
    )


def test_the_daemon_controllers_own_tolerations_count() -> None:
    """Cordoned, not-ready and pressured nodes still run daemon pods; network-unavailable only hostNetwork."""
    cordoned = node("n", {}, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    assert no_node({}, [cordoned]) is None
    offline = node("n", {}, {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"})
    assert no_node({}, [offline]) is not None
    assert no_node({"hostNetwork": True}, [offline]) is None
