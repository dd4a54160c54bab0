"""The demo's narration of a driver upgrade in waves (reconciler/demo/waves.py), against the simulated cluster:
it tells what the reconciler wrote (Events on the state ConfigMap, the drain's DeviceTaintRules, the rollout's
progress in the state), each once, in the order it happened."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.events import EventRecorder
from reconciler.cluster.probe import TAINT_KEY
from reconciler.demo.story import GPUS, STORY, Edit
from reconciler.demo.waves import WaveWatch
from reconciler.loop.store.records import InProgress
from reconciler.loop.store.state import StateStore
from reconciler.model.wave_progress import RolloutProgress
from reconciler.outcome import Outcome
from reconciler.sim.server import SimCluster

TARGET = "default"
REF = "DaemonSet/gpu-system/plugin (gpu.example.com): "


@pytest.fixture
def client() -> Iterator[ClusterClient]:
    with (
        SimCluster(served_versions=("v1", "v1beta2")) as sim,
        ClusterClient.for_url(sim.url) as client,
    ):
        yield client


def _rule(client: ClusterClient, pool: str, wave: int) -> str:
    name = f"dra-gitops-wave-plugin-{pool}"
    client.create(
        client.resource_for("resource.k8s.io/v1beta2", "DeviceTaintRule"),
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {
                "deviceSelector": {"driver": "gpu.example.com", "pool": pool},
                "taint": {"key": TAINT_KEY, "value": f"wave-{wave}", "effect": "NoSchedule"},
            },
        },
    )
    return name


def _soaking(store: StateStore, wave: int) -> None:
    state = store.load()
    progress = RolloutProgress(
        "gpu.example.com",
        "gpu-system",
        "plugin",
        wave=wave,
        of=2,
        nodes=2,
        done=[f"n{i}" for i in range(1, wave + 1)],
        phase="soaking",
        soak_until="2026-01-01T00:00:01Z",
    )
    state.in_progress = InProgress(sha="a" * 40, operation="apply", rollout=[progress.to_json()])
    store.save(state)


def test_each_wave_is_told_once_in_order_from_what_the_reconciler_wrote(client: ClusterClient) -> None:
    store = StateStore(client, TARGET)
    store.save(store.load())  # the state ConfigMap (and its namespace)
    events = EventRecorder(client, store.namespace, store.name)
    events.emit("WaveStarted", REF + "wave 9 of 9: old")  # before the watch: told already
    watch = WaveWatch(client, TARGET)
    assert watch.poll() == []

    events.emit("WaveStarted", REF + "wave 1 of 2: n1")
    rule = _rule(client, "n1", 1)
    drained = (
        "  [DeviceTaintRule] drained: the gpu.example.com devices of pool n1 are tainted NoSchedule (wave-1): "
        "new claims go elsewhere"
    )
    assert watch.poll() == ["[Event WaveStarted] wave 1 of 2: n1", drained]

    client.delete(client.resource_for("resource.k8s.io/v1beta2", "DeviceTaintRule"), None, rule)
    events.emit("WaveVerified", REF + "wave 1 of 2: 1/2 node(s) done")
    _soaking(store, 1)
    assert watch.poll() == [
        "  [DeviceTaintRule] undrained: pool n1 takes new claims again",
        "[Event WaveVerified] wave 1 of 2: 1/2 node(s) done",
        "  [state] soaking: wave 1 of 2 (soaking), 1/2 nodes done, next soak ends at 2026-01-01T00:00:01Z",
    ]
    assert watch.poll() == []  # each told once

    # A drain seen after its WaveStarted was told comes on its own; the revert's drain says so.
    events.emit("WaveStarted", REF + "wave 2 of 2: n2")
    assert watch.poll() == ["[Event WaveStarted] wave 2 of 2: n2"]
    _rule(client, "n2", 2)
    assert watch.poll() == [drained.replace("n1", "n2").replace("wave-1", "wave-2")]
    events.emit("WaveFailed", REF + "wave 2 of 2 failed on node n2: CrashLoopBackOff", warning=True)
    events.emit("RolloutReverting", REF + "the old plugin back on n1, n2", warning=True)
    _rule(client, "n1", 0)
    lines = watch.poll()
    assert lines[:2] == [
        "[Event WaveFailed] wave 2 of 2 failed on node n2: CrashLoopBackOff",
        "[Event RolloutReverting] the old plugin back on n1, n2",
    ]
    assert lines[2:] == [
        "  [DeviceTaintRule] drained: the gpu.example.com devices of pool n1 are tainted NoSchedule "
        "(for the revert): new claims go elsewhere"
    ]
    # A removal no Event of the poll follows is told after them; the others before RolloutReverted.
    rules = client.resource_for("resource.k8s.io/v1beta2", "DeviceTaintRule")
    client.delete(rules, None, "dra-gitops-wave-plugin-n1")
    assert watch.poll() == ["  [DeviceTaintRule] undrained: pool n1 takes new claims again"]
    client.delete(rules, None, "dra-gitops-wave-plugin-n2")
    events.emit("RolloutReverted", REF + "old plugin back on 2 node(s), 1 taint rule(s) removed")
    assert watch.poll() == [
        "  [DeviceTaintRule] undrained: pool n2 takes new claims again",
        "[Event RolloutReverted] old plugin back on 2 node(s), 1 taint rule(s) removed",
    ]


def _replicas(edit: Edit) -> int:
    match = re.fullmatch(r"replicas: (\d+)", edit.new.strip())
    assert match is not None, edit
    return int(match.group(1))


def test_the_storys_gpu_arithmetic_holds_for_the_demo_cluster() -> None:
    too_many = next(s for s in STORY if s.expect_diagnosis == "exhaustion")
    fix = STORY[-1]
    # the notebook's shared GPU and one per trainer: one more than exist, then exactly all of them
    assert 1 + _replicas(too_many.edits[0]) == GPUS + 1
    assert f"{GPUS + 1} asked, {GPUS} exist" in too_many.why
    assert fix.expect == Outcome.APPLIED and 1 + _replicas(fix.edits[0]) == GPUS
    assert f"({GPUS} GPUs in use of {GPUS})" in fix.message


def test_the_story_upgrades_in_waves_before_it_promotes(tmp_path: Any) -> None:
    titles = [s.title for s in STORY]
    waves = [i for i, s in enumerate(STORY) if s.waves]
    assert titles.index("Upgrades in waves") < waves[0]
    assert [STORY[i].expect for i in waves] == [Outcome.APPLIED, Outcome.ROLLED_BACK]
    assert STORY[waves[1]].expect_diagnosis == "driver-wave-failed"
