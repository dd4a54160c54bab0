"""A wave resumed after the pass that ran it died (issue 32): the devices its nodes had before their plugin was
replaced are kept (`WaveSnapshot`, given to `keep` before any old plugin pod is deleted), and the resumed wave
compares the republished devices with them as an unbroken wave does, with the same evidence. Against the
simulated cluster of test_wave.py: the run that dies is cut right after its first pod deletion."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from test_wave import DRIVER, DS, NS, WAVE, Env, images, start, upgrade

from reconciler.cluster.wave import WaveRunner, WaveTarget, run_wave
from reconciler.cluster.wave_pools import Pool, devices_problem
from reconciler.cluster.wave_snapshot import VALUES_BUDGET, WaveSnapshot
from reconciler.model.wave_progress import RolloutProgress


@pytest.fixture
def env() -> Iterator[Env]:
    yield from start()


class Died(BaseException):
    """The pass dies (kill -9) right after the wave deleted its first old plugin pod."""


def die_after_first_delete(env: Env) -> WaveSnapshot:
    """Run the wave until its first pod deletion, then die; what it kept (through `keep`) before."""
    kept: list[WaveSnapshot] = []

    def progress(line: str) -> None:
        if " delete-pod " in line:
            raise Died(line)

    runner = WaveRunner(
        env.client,
        WaveTarget(NS, DS, DRIVER, 1, WAVE),
        timeout=30,
        poll=0.05,
        progress=progress,
        keep=kept.append,
    )
    with pytest.raises(Died):
        runner.run()
    assert len(kept) == 1 and runner.replaced == {WAVE[0]}  # kept before the deletion; one node replaced
    return kept[0]


def test_a_resumed_wave_finds_the_device_that_disappeared_on_the_node_replaced_before_the_kill(
    env: Env,
) -> None:
    upgrade(env)
    assert env.plane.driver is not None
    env.plane.driver.configs[DRIVER].devices_per_node = 1  # the new plugin publishes one device fewer
    kept = die_after_first_delete(env)
    assert set(kept.pools) == set(WAVE) and sorted(kept.pools[WAVE[0]][WAVE[0]].devices) == ["gpu-0", "gpu-1"]
    saved = WaveSnapshot.from_json(json.loads(json.dumps(kept.to_json())))  # as the state keeps it
    assert saved == kept
    result = run_wave(env.client, WaveTarget(NS, DS, DRIVER, 1, WAVE), timeout=30, poll=0.05, saved=saved)
    assert set(result.failed_nodes) == set(WAVE), result.failed_nodes
    for node in WAVE:  # the node replaced before the kill is judged as the one this run replaced
        assert f"device(s) gpu-1 of pool {node} disappeared" in result.failed_nodes[node], result.failed_nodes
    assert "delete-pod" not in result.actions(WAVE[0]) and "delete-pod" in result.actions(WAVE[1])


def test_a_resumed_wave_finds_the_attribute_a_class_selects_on_that_changed(env: Env) -> None:
    upgrade(env)
    assert env.plane.driver is not None
    config = env.plane.driver.configs[DRIVER]
    config.attributes = {"model": {"string": "OTHER-MODEL"}}  # the class selects on `model`
    config.driver_version = "2.0.0"  # no class selects on driverVersion: not kept, not compared
    kept = die_after_first_delete(env)
    device = kept.pools[WAVE[0]][WAVE[0]].devices["gpu-0"]
    assert device == {"gpu.example.com/model": {"string": "LATEST-GPU-MODEL"}} and kept.selects >= {"model"}
    result = run_wave(env.client, WaveTarget(NS, DS, DRIVER, 1, WAVE), timeout=30, poll=0.05, saved=kept)
    evidence = result.failed_nodes.get(WAVE[0], "")
    assert (
        "attribute gpu.example.com/model of device gpu-0 (pool sim-node-0) changed from {'string': 'LATEST-GPU-MODEL'}"
        in (evidence)
    ), result.failed_nodes


def test_a_good_resumed_wave_passes_and_a_snapshot_of_another_wave_is_not_used(env: Env) -> None:
    upgrade(env)
    kept = die_after_first_delete(env)
    other = WaveSnapshot(2, kept.selects, {node: {} for node in WAVE})  # of wave 2: ignored by wave 1
    assert WaveRunner(env.client, WaveTarget(NS, DS, DRIVER, 1, WAVE), saved=other).saved is None
    result = run_wave(env.client, WaveTarget(NS, DS, DRIVER, 1, WAVE), timeout=30, poll=0.05, saved=kept)
    assert result.ok, result.failed_nodes
    assert result.actions(WAVE[0]) == ["pod-ready", "slices-republished"]  # not deleted again, compared
    assert images(env) == {"sim-node-0": "2", "sim-node-1": "2", "sim-node-2": "1", "sim-node-3": "1"}


def fleet(nodes: int, devices: int, unique: bool = False) -> dict[str, dict[str, Pool]]:
    """`nodes` nodes of `devices` GPUs each, one pool (named after the node) of one slice each, the attributes
    the sim's driver publishes (a class selects on `model`; with `unique`, each device's model is its own)."""
    out: dict[str, dict[str, Pool]] = {}
    for n in range(nodes):
        node = f"gpu-node-{n:04d}.zone-a.example.com"
        out[node] = {
            node: Pool(
                3,
                frozenset({f"6f1c2a7e-0000-4000-8000-{n:012d}"}),
                True,
                {
                    f"gpu-{i}": {
                        "gpu.example.com/index": {"int": i},
                        "gpu.example.com/uuid": {"string": f"gpu-1f0c9a4e-{n:04d}-{i:04d}-8000-000000000000"},
                        "gpu.example.com/driverVersion": {"version": "1.2.3"},
                        "gpu.example.com/model": {
                            "string": f"H100-SXM5-80GB-{n}-{i}" if unique else "H100-SXM5-80GB"
                        },
                    }
                    for i in range(devices)
                },
            )
        }
    return out


def test_the_snapshot_of_a_1000_node_wave_keeps_the_state_well_under_1_mib() -> None:
    pools = fleet(1000, 8)
    snapshot = WaveSnapshot.of(4, pools, {"model"})
    raw = snapshot.to_json()
    size = len(json.dumps(raw, sort_keys=True))  # as the state store writes inProgress
    assert size < 100_000, size  # one hardware model: the nodes share one devices entry (93,254 bytes)
    assert WaveSnapshot.from_json(json.loads(json.dumps(raw))) == snapshot
    assert len(raw["devices"]) == 1 and len(raw["values"]) == 1 and "digests" not in raw
    # the worst case: a class selects on a value of each device's own: the values are kept as digests
    worst = WaveSnapshot.of(4, fleet(1000, 8, unique=True), {"model"}).to_json()
    assert worst["digests"] is True
    assert len(json.dumps(worst, sort_keys=True)) < 400_000  # 359,907 bytes


def test_a_digested_snapshot_finds_the_same_changes_naming_the_device_and_the_attribute() -> None:
    before = fleet(300, 8, unique=True)
    raw = WaveSnapshot.of(3, before, {"model"}).to_json()
    assert raw["digests"] is True and len(json.dumps(raw["values"])) < VALUES_BUDGET
    saved = WaveSnapshot.from_json(json.loads(json.dumps(raw)))
    assert saved is not None and saved.digests
    assert saved.to_json() == raw  # kept again as read (a resumed wave saves it again): not digested twice
    again = WaveSnapshot.of(3, saved.pools, {"model"}, digests=True).to_json()
    assert again == raw
    after = fleet(300, 8, unique=True)
    node = next(iter(after))
    for name, pool in after.items():
        compared = saved.comparable(pool)
        assert devices_problem(saved.pools[name][name], compared[name], name, {"model"}) is None
    pool = after[node][node]
    changed = {
        **pool.devices,
        "gpu-3": {**pool.devices["gpu-3"], "gpu.example.com/model": {"string": "B200"}},
    }
    gone = {d: a for d, a in pool.devices.items() if d != "gpu-7"}
    for devices, words in (
        (changed, f"attribute gpu.example.com/model of device gpu-3 (pool {node}) changed from {{'sha256': "),
        (gone, f"device(s) gpu-7 of pool {node} disappeared"),
    ):
        republished = {node: Pool(pool.generation + 1, frozenset({"new"}), True, devices)}
        problem = devices_problem(
            saved.pools[node][node], saved.comparable(republished)[node], node, {"model"}
        )
        assert problem is not None and words in problem, problem


def test_old_progress_without_a_snapshot_reads_as_before_and_a_bad_one_as_none() -> None:
    progress = RolloutProgress("gpu.example.com", NS, DS, "abc", 2, 4, 6, ["n1"], {}, "replacing")
    raw = progress.to_json()
    assert "snapshot" not in raw  # a state without one is written as before
    assert RolloutProgress.from_json(raw) == progress and progress.snapshot is None
    kept = WaveSnapshot.of(2, fleet(2, 2), {"model"})
    progress.snapshot = kept.to_json()
    again = RolloutProgress.from_json(json.loads(json.dumps(progress.to_json())))
    assert again is not None and WaveSnapshot.from_json(again.snapshot) == kept
    for bad in (
        None,
        "x",
        {},
        {**kept.to_json(), "nodes": {"n": {"n": [1, [], 9]}}},
        {**kept.to_json(), "wave": "x"},
    ):
        assert WaveSnapshot.from_json(bad) is None
    assert RolloutProgress.from_json({**raw, "snapshot": "garbage"}).snapshot is None  # type: ignore[union-attr]
