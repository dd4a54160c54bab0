"""The wave planner (issue 32): node order and each wave's nodes, as tables."""

from __future__ import annotations

import itertools
import math

import pytest

from reconciler.model.driver_rollout import RolloutSpec, Wave, parse_wave
from reconciler.model.waves import ZONE_LABEL, TargetNode, node_order, plan_waves


def spec(*waves: str, max_failed: int = 0) -> RolloutSpec:
    parsed = tuple(parse_wave(w) for w in waves)
    assert all(w is not None for w in parsed)
    return RolloutSpec(waves=tuple(w for w in parsed if w is not None), max_failed_nodes=max_failed)


def nodes(count: int, zones: str = "") -> list[TargetNode]:
    """node-0.. ; with `zones` ("abc"), node i is in zone zones[i % len(zones)]."""
    return [
        TargetNode(f"node-{i}", {ZONE_LABEL: f"zone-{zones[i % len(zones)]}"} if zones else {})
        for i in range(count)
    ]


# ------------------------------------------------------------------------------------------------ order


@pytest.mark.parametrize(
    ("given", "canary_nodes", "canary_labels", "expected"),
    [
        # by name, as people read names
        (["node-10", "node-2", "node-1"], (), None, ["node-1", "node-2", "node-10"]),
        (["b", "a", "c"], (), None, ["a", "b", "c"]),
        # named canaries first, in name order
        (["node-1", "node-2", "node-3"], ("node-3", "node-2"), None, ["node-2", "node-3", "node-1"]),
        # a canary named that the DaemonSet does not target changes nothing
        (["node-1", "node-2"], ("node-9",), None, ["node-1", "node-2"]),
        # duplicates count once
        (["node-2", "node-1", "node-2"], (), None, ["node-1", "node-2"]),
        ([], ("node-1",), None, []),
    ],
)
def test_order_without_zones(
    given: list[str], canary_nodes: tuple[str, ...], canary_labels: dict[str, str] | None, expected: list[str]
) -> None:
    assert list(node_order([TargetNode(n) for n in given], canary_nodes, canary_labels)) == expected


def test_canary_label_nodes_first_then_zones_round_robin_then_names() -> None:
    given = [
        TargetNode("a-3", {ZONE_LABEL: "zone-a"}),
        TargetNode("a-1", {ZONE_LABEL: "zone-a"}),
        TargetNode("a-2", {ZONE_LABEL: "zone-a", "gpu.example.com/canary": "true"}),
        TargetNode("b-1", {ZONE_LABEL: "zone-b"}),
        TargetNode("c-2", {ZONE_LABEL: "zone-c"}),
        TargetNode("c-1", {ZONE_LABEL: "zone-c"}),
        TargetNode("c-10", {ZONE_LABEL: "zone-c"}),
        TargetNode("x-1", {}),  # no zone label: the zone ""
        TargetNode("b-9", {ZONE_LABEL: "zone-b", "gpu.example.com/canary": "false"}),
    ]
    order = node_order(given, canary_labels={"gpu.example.com/canary": "true"})
    assert order == ("a-2", "x-1", "a-1", "b-1", "c-1", "a-3", "b-9", "c-2", "c-10")
    # the order does not depend on the order nodes are listed in
    for shuffled in itertools.islice(itertools.permutations(given), 0, 200, 7):
        assert node_order(list(shuffled), canary_labels={"gpu.example.com/canary": "true"}) == order


def test_zone_label_is_a_parameter_and_an_empty_selector_names_no_canary() -> None:
    given = [
        TargetNode("n1", {"rack": "r2"}),
        TargetNode("n2", {"rack": "r1"}),
        TargetNode("n3", {"rack": "r1"}),
    ]
    assert node_order(given, zone_label="rack") == ("n2", "n1", "n3")
    assert node_order(given, canary_labels={}) == ("n1", "n2", "n3")


def test_zones_spread_the_first_waves() -> None:
    plan = plan_waves(nodes(9, "abc"), spec("3", "100%"))
    first = plan.waves[0].nodes
    assert first == ("node-0", "node-1", "node-2")
    assert {i % 3 for i in (int(n.split("-")[1]) for n in first)} == {0, 1, 2}  # one node of each zone


# ------------------------------------------------------------------------------------------------ waves


@pytest.mark.parametrize(
    ("waves", "total", "sizes"),
    [
        (("1", "10%", "50%", "100%"), 6, [1, 1, 1, 3]),  # 10% of 6 is 1 node: the wave still takes one more
        (("1", "10%", "50%", "100%"), 20, [1, 1, 8, 10]),
        (("1", "10%", "50%", "100%"), 100, [1, 9, 40, 50]),
        (("1", "10%", "50%", "100%"), 1, [1]),  # waves after the last node are dropped
        (("1", "10%", "50%", "100%"), 2, [1, 1]),
        (("1", "10%", "50%", "100%"), 3, [1, 1, 1]),
        (("100%",), 7, [7]),
        (("100%",), 1, [1]),
        (("5", "100%"), 3, [3]),  # a wave larger than the nodes left takes them all
        (("2", "5", "100%"), 4, [2, 2]),
        (("2", "5", "100%"), 6, [2, 3, 1]),
        (("25%", "50%", "75%", "100%"), 8, [2, 2, 2, 2]),
        (("25%", "50%", "75%", "100%"), 5, [2, 1, 1, 1]),  # ceil(1.25)=2, ceil(2.5)=3, ceil(3.75)=4
        (("33%", "66%", "100%"), 3, [1, 1, 1]),
        (("99%", "100%"), 10, [10]),
        (("99%", "100%"), 101, [100, 1]),
        (("1", "2", "3", "100%"), 3, [1, 1, 1]),
    ],
)
def test_wave_sizes(waves: tuple[str, ...], total: int, sizes: list[int]) -> None:
    plan = plan_waves(nodes(total), spec(*waves))
    assert [len(w.nodes) for w in plan.waves] == sizes
    assert [w.number for w in plan.waves] == list(range(1, len(sizes) + 1))
    assert [w.written for w in plan.waves] == list(waves[: len(sizes)])
    assert plan.failure is None and plan.notice is None


def test_the_waves_cut_the_order_in_turn() -> None:
    plan = plan_waves(nodes(6, "ab"), spec("1", "50%", "100%"), canary_nodes=("node-5",))
    assert plan.order == ("node-5", "node-0", "node-1", "node-2", "node-3", "node-4")
    assert [w.nodes for w in plan.waves] == [
        ("node-5",),
        ("node-0", "node-1"),
        ("node-2", "node-3", "node-4"),
    ]
    assert [w.done_after for w in plan.waves] == [1, 3, 6]
    assert plan.wave_of("node-3") == 3 and plan.wave_of("node-5") == 1 and plan.wave_of("node-9") is None


WAVE_SPECS = [
    ("100%",),
    ("1", "100%"),
    ("1", "10%", "50%", "100%"),
    ("2", "3", "100%"),
    ("10", "100%"),
    ("5%", "100%"),
    ("1", "5", "20%", "40%", "60%", "80%", "100%"),
    ("50%", "51%", "100%"),
]


@pytest.mark.parametrize("waves", WAVE_SPECS)
@pytest.mark.parametrize("total", range(1, 41))
def test_every_plan_is_a_partition_of_the_order_that_meets_each_wave(
    waves: tuple[str, ...], total: int
) -> None:
    rollout = spec(*waves)
    plan = plan_waves(nodes(total, "abc"), rollout)
    flat = [n for w in plan.waves for n in w.nodes]
    assert flat == list(plan.order) and len(set(flat)) == total  # each node once, in order
    assert all(w.nodes for w in plan.waves)  # no empty wave
    assert plan.waves[-1].done_after == total
    assert len(plan.waves) <= len(rollout.waves)
    done = 0
    for planned, wave in zip(plan.waves, rollout.waves, strict=False):
        wanted = min(total, wave.value) if not wave.percent else math.ceil(wave.value * total / 100)
        assert planned.done_after == min(total, max(done + 1, wanted))  # at least what the wave asks
        done = planned.done_after
    # a wave is dropped only once every node is done
    assert len(plan.waves) == len(rollout.waves) or plan.waves[-1].done_after == total


# ------------------------------------------------------------------------------------ no nodes, failures


def test_no_target_node_fails_unless_no_nodes_is_allowed() -> None:
    plan = plan_waves([], spec("1", "100%"))
    assert plan.waves == () and plan.order == ()
    assert plan.failure is not None and "targets no node" in plan.failure and plan.notice is None
    allowed = plan_waves([], spec("1", "100%"), allow_no_nodes="allowNoNodes of driver gpu.example.com")
    assert allowed.failure is None and allowed.waves == ()
    assert allowed.notice is not None and allowed.notice.endswith(
        "passes: allowNoNodes of driver gpu.example.com"
    )


@pytest.mark.parametrize(
    ("max_failed", "failed", "halts"), [(0, 0, False), (0, 1, True), (2, 2, False), (2, 3, True)]
)
def test_max_failed_nodes(max_failed: int, failed: int, halts: bool) -> None:
    plan = plan_waves(nodes(4), spec("100%", max_failed=max_failed))
    assert plan.max_failed_nodes == max_failed
    assert plan.halts(failed) is halts


def test_a_spec_is_read_as_written() -> None:
    assert spec("1", "10%", "100%").waves == (Wave(1, False), Wave(10, True), Wave(100, True))
