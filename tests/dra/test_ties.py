"""The exploration of the scheduler's ties (reconciler.dra.ties): exact, merged, sampled past a budget."""

from __future__ import annotations

from typing import Any

from capacity_scenario import classes_of, node, resource_slice, template

from reconciler.dra.allocator import Inventory
from reconciler.dra.placement import NodeInfo, Placement, PodClaim, PodInfo
from reconciler.dra.ties import explore


def _setup(devices: list[int], pods: list[list[int]]) -> tuple[Placement, list[PodInfo]]:
    """Nodes n0.. with the given device counts; pods with one claim per count (devices per claim)."""
    nodes = [f"n{i}" for i in range(len(devices))]
    slices = [
        resource_slice({"node": n, "devices": [f"gpu-{d}" for d in range(k)]}, i)
        for i, (n, k) in enumerate(zip(nodes, devices, strict=True))
    ]
    inv = Inventory(slices, classes_of({}))
    infos = []
    for seq, counts in enumerate(pods):
        claims = []
        for c, count in enumerate(counts):
            spec: dict[str, Any] = template({"name": "t", "requests": [{"name": "gpu", "count": count}]})[
                "spec"
            ]
            body = {"kind": "ResourceClaim", "metadata": {"name": f"p{seq}-c{c}"}, "spec": spec["spec"]}
            claims.append(PodClaim(f"c{c}", ("default", f"p{seq}-c{c}"), body))
        infos.append(PodInfo("default", f"p{seq}", {"containers": [{"name": "m"}]}, claims, seq=seq))
    return Placement(inv, [NodeInfo.from_node(node(n)) for n in nodes], explain=True), infos


def test_equal_nodes_are_one_class_and_nothing_is_searched() -> None:
    placement, pods = _setup([1] * 10, [[1]] * 11)
    found = explore(placement, pods)
    assert [v.verdict for v in found.verdicts] == ["fits"] * 10 + ["does-not-fit"]
    assert found.mode == "exact" and found.placements == 1 and found.searched == 0
    assert found.pending == (1, 1)
    assert found.verdicts[0].result.ties == [[f"n{i}" for i in range(10)]]


def test_unequal_ties_are_followed_and_merged() -> None:
    placement, pods = _setup([4, 2], [[2], [2, 2]])
    found = explore(placement, pods)
    first, second = found.verdicts
    assert first.verdict == "fits" and first.nodes == {"n0", "n1"}
    assert second.verdict == "at-risk" and str(second.fits) == "1/2"
    assert second.deciders == ["default/p0"] and second.searched
    assert found.pending == (0, 1) and found.placements == 2


def test_past_the_budget_the_rest_is_sampled_reproducibly() -> None:
    shape = ([4, 2, 3, 1], [[2], [1], [1], [2, 2], [1], [2]])
    exact = explore(*_setup(*shape), budget=1000)
    assert exact.mode == "exact" and not exact.cut
    sampled = explore(*_setup(*shape), budget=1, samples=40, seed=7)
    assert sampled.mode == "sampled" and sampled.cut and sampled.placements == 40
    again = explore(*_setup(*shape), budget=1, samples=40, seed=7)
    assert [v.fits for v in again.verdicts] == [v.fits for v in sampled.verdicts]
    for e, s in zip(exact.verdicts, sampled.verdicts, strict=True):
        if e.verdict in ("fits", "does-not-fit"):
            assert s.verdict == e.verdict  # what holds in every placement holds in every sample
    assert exact.pending[0] <= sampled.pending[0] <= sampled.pending[1] <= exact.pending[1]
    assert any(v.samples == 40 for v in sampled.verdicts)
    assert sampled.to_dict()["cut_by_budget"] is True


def _uuid_setup(selector: str | None) -> tuple[Placement, list[PodInfo]]:
    nodes = ["n0", "n1", "n2"]
    slices = [
        resource_slice(
            {"node": n, "devices": [{"name": "gpu-0", "attrs": {"uuid": f"GPU-{n}", "model": "A"}}]}, i
        )
        for i, n in enumerate(nodes)
    ]
    request: dict[str, Any] = {"name": "gpu", **({"selector": selector} if selector else {})}
    spec = template({"name": "t", "requests": [request]})["spec"]["spec"]
    pods = []
    for seq in range(3):
        body = {"kind": "ResourceClaim", "metadata": {"name": f"p{seq}-gpu"}, "spec": spec}
        claims = [PodClaim("gpu", ("default", f"p{seq}-gpu"), body)]
        pods.append(PodInfo("default", f"p{seq}", {"containers": [{"name": "m"}]}, claims, seq=seq))
    inv = Inventory(slices, classes_of({}))
    return Placement(inv, [NodeInfo.from_node(node(n)) for n in nodes]), pods


def test_devices_told_apart_only_by_an_attribute_nobody_reads_leave_nodes_interchangeable() -> None:
    found = explore(*_uuid_setup('device.attributes["gpu.example.com"].model == "A"'))
    assert found.verdicts[0].result.ties == [["n0", "n1", "n2"]]
    assert found.searched == 0 and found.placements == 1
    read = explore(*_uuid_setup('device.attributes["gpu.example.com"].uuid != "GPU-n9"'))
    assert read.verdicts[0].result.ties == [["n0"], ["n1"], ["n2"]]
    assert [v.verdict for v in read.verdicts] == ["fits"] * 3


def test_single_device_pods_need_no_search_whatever_nodes_tie() -> None:
    placement, pods = _setup([3, 1, 2], [[1]] * 7)
    found = explore(placement, pods)
    assert [v.verdict for v in found.verdicts] == ["fits"] * 6 + ["does-not-fit"]
    assert found.mode == "exact" and found.placements == 1 and found.searched == 0
    assert found.pending == (1, 1)
    assert len(found.verdicts[0].result.ties) > 1  # the nodes do tie: the choice just cannot matter


def test_a_pod_asking_two_devices_makes_the_ties_matter_again() -> None:
    placement, pods = _setup([2, 2], [[1], [1], [2]])
    found = explore(placement, pods)
    assert found.searched > 0 and found.verdicts[2].verdict == "at-risk"
    assert str(found.verdicts[2].fits) == "1/2"  # only when the first two share a node
