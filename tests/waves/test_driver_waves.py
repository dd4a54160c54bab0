"""Driver upgrades in waves, end to end through a reconcile pass (issue 32): the main driver DaemonSet is
delivered OnDelete, then upgraded wave by wave (drain, replace, verify, undrain, soak) in the planned order;
a wave that fails halts the rollout and reverts it; `abort` reverts; `suspend` holds between waves; a pass
that dies mid-wave is resumed at that wave by the next one. Against the simulated cluster (waves_support.py):
the order of pod replacements and taint windows is read from the API server's audit log."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import wait_for
from waves_support import (
    CANARY,
    GPU_NODES,
    MAIN,
    NEW,
    NS,
    OLD,
    TARGET,
    WAVES,
    Env,
    node_of_writes,
    start,
    upgraded_canary,
)

from reconciler.cluster.client import ClusterClient
from reconciler.loop.passes.reconcile_types import PassResult
from reconciler.loop.store.operations import TargetRef, abort, resume, suspend
from reconciler.loop.store.statusview import render_status, target_row
from reconciler.outcome import Outcome

ROLLOUT = {"waves": ["1", "2", "50%", "100%"], "soak": "200ms", "drainDevices": True}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from start(tmp_path, ROLLOUT)


@pytest.fixture
def soaking(tmp_path: Path) -> Iterator[Env]:
    """Soaks long enough for a person to step in between waves."""
    yield from start(tmp_path, {**ROLLOUT, "soak": "3s"})


def in_thread(env: Env) -> tuple[threading.Thread, list[PassResult]]:
    out: list[PassResult] = []
    thread = threading.Thread(target=lambda: out.append(env.reconciler().reconcile()), daemon=True)
    thread.start()
    return thread, out


def expected_order() -> list[tuple[str, str]]:
    steps: list[tuple[str, str]] = []
    for wave in WAVES:
        steps += [("taint", n) for n in wave]
        steps += [("delete-pod", n) for n in wave]
        steps += [("untaint", n) for n in wave]
    return steps


def sorted_within_waves(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The steps with the nodes of one wave's same action in name order (they go concurrently)."""
    out: list[tuple[str, str]] = []
    index = 0
    while index < len(steps):
        end = index
        while end < len(steps) and steps[end][0] == steps[index][0]:
            end += 1
        out += sorted(steps[index:end])
        index = end
    return out


def test_a_good_upgrade_goes_wave_by_wave_in_order_with_taint_windows(env: Env) -> None:
    upgraded_canary(env)
    live = env.client.get(env.client.resource_for("apps/v1", "DaemonSet"), NS, MAIN) or {}
    assert live["spec"]["updateStrategy"] == {"type": "OnDelete"}  # ours, though the manifest sets none
    canary = env.client.get(env.client.resource_for("apps/v1", "DaemonSet"), NS, CANARY) or {}
    assert canary["spec"]["updateStrategy"]["type"] == "RollingUpdate"  # not upgraded in waves
    before = env.plugin_pods()
    env.sim.api.audit.clear()  # type: ignore[union-attr]
    env.set_image(MAIN, NEW)
    reconciler = env.reconciler()
    phases: list[tuple[int, str, float]] = []

    def record(progress: Any) -> None:
        if not phases or phases[-1][:2] != (progress.wave, progress.phase):
            phases.append((progress.wave, progress.phase, time.monotonic()))

    reconciler.on_rollout = record
    result = reconciler.reconcile()
    assert result.outcome == Outcome.APPLIED, result.message
    assert env.images() == dict.fromkeys(GPU_NODES, NEW)
    # each wave: drained, replaced, verified, then soaked (at least the soak, from the moment it verified)
    for wave in range(1, 5):
        seen = [phase for number, phase, _ in phases if number == wave]
        assert seen[:3] == ["draining", "replacing", "verifying"], phases
        assert seen[3:] == (["soaking"] if wave < 4 else ["done"]), phases
    soaked = [at for _, phase, at in phases if phase == "soaking"]
    next_starts = [at for wave, phase, at in phases if phase == "draining" and wave > 1]
    # (the soak's end is stamped, to the millisecond, just before the phase `soaking` is saved)
    assert all(start - soak >= 0.19 for soak, start in zip(soaked, next_starts, strict=True)), phases
    steps = node_of_writes(env, before, env.writes())
    assert sorted_within_waves(steps) == sorted_within_waves(expected_order()), steps
    assert env.taint_rules() == []
    state = env.store().load()
    assert state.last_good == result.sha and state.in_progress is None
    events = [
        (e["reason"], e["message"])
        for e in env.client.list_kind("", "Event", "dra-gitops")
        if e["reason"].startswith(("Wave", "Rollout"))
    ]
    reasons = [reason for reason, _ in events]
    assert reasons.count("WaveStarted") == 4 and reasons.count("WaveVerified") == 4, reasons
    assert "RolloutComplete" in reasons and "WaveFailed" not in reasons
    assert any("wave 3 of 4: sim-node-2" in message for _, message in events), events
    # A later pass on the same commit finds nothing to do: OnDelete is not drift.
    again = env.reconciler().reconcile()
    assert again.outcome == Outcome.UNCHANGED, (again.outcome, again.message)


def test_a_plugin_that_crash_loops_on_a_wave_3_node_halts_there_and_reverts(env: Env) -> None:
    upgraded_canary(env)
    good = env.store().load().last_good
    bad_node = WAVES[2][0]
    env.plane.fail_pods(
        lambda pod: (
            pod["spec"].get("nodeName") == bad_node
            and pod["spec"]["containers"][0]["image"].endswith(NEW)
            and pod["metadata"].get("namespace") == NS
        ),
        "CrashLoopBackOff",
    )
    before = env.plugin_pods()
    env.sim.api.audit.clear()  # type: ignore[union-attr]
    env.set_image(MAIN, NEW)
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.outcome, result.message)
    # halted at wave 3: the nodes of wave 4 were never touched
    after = env.plugin_pods()
    for node in WAVES[3]:
        assert after[node]["metadata"]["uid"] == before[node]["metadata"]["uid"]
    touched = [n for wave in WAVES[:3] for n in wave]
    wait_for(lambda: env.ready_on(OLD, GPU_NODES), 30, "the old plugin Ready on every GPU node")
    for node in touched:  # the old plugin came back: a new pod of the old revision
        assert after[node]["metadata"]["uid"] != before[node]["metadata"]["uid"]
    assert env.taint_rules() == []
    state = env.store().load()
    assert state.last_good == good and state.in_progress is None
    failed = next(r for r in state.history if r.operation == "apply" and r.sha == result.sha)
    assert failed.message is not None
    for words in ("wave 3 of 4", bad_node, "CrashLoopBackOff"):
        assert words in failed.message, failed.message
    diagnosis = next(d for d in failed.diagnoses or [] if d["mode"] == "driver-wave-failed")
    assert diagnosis["numbers"]["wave"] == 3 and bad_node in " ".join(diagnosis["evidence"])
    deleted = [node for action, node in node_of_writes(env, before, env.writes()) if action == "delete-pod"]
    assert deleted[: len(touched)] == touched  # waves 1-3 in order; the revert's deletions came after


def wait_rollout(env: Env, wave: int, phase: str) -> Any:
    return wait_for(
        lambda: (p := env.rollout()) is not None and p.wave == wave and p.phase == phase and p,
        60,
        f"the rollout at wave {wave} ({phase})",
        interval=0.02,
    )


def test_abort_mid_rollout_reverts_every_touched_node(soaking: Env) -> None:
    env = soaking
    upgraded_canary(env)
    good = env.store().load().last_good
    env.set_image(MAIN, NEW)
    thread, out = in_thread(env)
    wait_rollout(env, 2, "soaking")
    abort(env.client, TargetRef(TARGET, "dra-gitops"), "tester")
    thread.join(120)
    assert out and out[0].outcome == Outcome.ROLLED_BACK, out
    wait_for(lambda: env.ready_on(OLD, GPU_NODES), 30, "the old plugin Ready on every GPU node")
    assert env.taint_rules() == []
    state = env.store().load()
    assert state.last_good == good and state.in_progress is None
    assert any(r.outcome == Outcome.ABORTED for r in state.history)


def test_suspend_holds_between_waves_and_resume_goes_on_from_the_next(soaking: Env) -> None:
    env = soaking
    upgraded_canary(env)
    env.set_image(MAIN, NEW)
    ref = TargetRef(TARGET, "dra-gitops")
    thread, out = in_thread(env)
    wait_rollout(env, 1, "soaking")
    suspend(env.client, ref, "tester", "hold the waves")
    thread.join(120)
    assert out and out[0].outcome == Outcome.SUSPENDED, out
    assert "in waves is paused (wave 1 of 4 (suspended)" in out[0].message, out[0].message
    progress = env.rollout()
    assert progress is not None and progress.phase == "suspended" and progress.done == WAVES[0]
    assert "wave 1 of 4 (suspended), 1/6 nodes done, next soak ends at " in progress.line()
    state = env.store().load()
    shown = render_status(TARGET, state, 0)
    assert f"driver waves:  DaemonSet/{NS}/{MAIN}: wave 1 of 4 (suspended), 1/6 nodes done" in shown, shown
    row = target_row(TARGET, state)
    assert row["rollout"]["wave"] == 1 and row["rollout"]["of"] == 4 and "wave 1 of 4" in row["inProgress"]
    # held: the nodes of later waves still run the old plugin, and a pass changes nothing
    assert env.images()["sim-node-4"] == OLD
    assert env.reconciler().reconcile().outcome == Outcome.SUSPENDED
    before = env.plugin_pods()
    env.sim.api.audit.clear()  # type: ignore[union-attr]
    resume(env.client, ref, "tester")
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.APPLIED, (result.outcome, result.message)
    assert set(env.images().values()) == {NEW}
    deleted = [node for action, node in node_of_writes(env, before, env.writes()) if action == "delete-pod"]
    assert deleted[0] == WAVES[1][0] and WAVES[0][0] not in deleted  # from wave 2 on
    resumed = next(r for r in env.store().load().history if r.outcome == Outcome.INTERRUPTED)
    assert (resumed.message or "").startswith("paused by `suspend`; the rollout of ")


def test_a_pass_that_dies_mid_wave_is_resumed_at_that_wave(env: Env) -> None:
    upgraded_canary(env)
    env.set_image(MAIN, NEW)
    dying = env.reconciler()

    class Died(BaseException):
        pass

    def die_in_wave_2(progress: Any) -> None:
        if progress.wave == 2 and progress.phase == "replacing":
            raise Died()

    dying.on_rollout = die_in_wave_2
    with pytest.raises(Died):
        dying.reconcile()
    left = env.rollout()
    assert left is not None and left.wave == 2 and left.done == WAVES[0]
    before = env.plugin_pods()
    env.sim.api.audit.clear()  # type: ignore[union-attr]
    result = env.reconciler().reconcile()  # another replica's pass: the marker says where it was
    assert result.outcome == Outcome.APPLIED, (result.outcome, result.message)
    assert set(env.images().values()) == {NEW}
    assert env.taint_rules() == []
    deleted = [node for action, node in node_of_writes(env, before, env.writes()) if action == "delete-pod"]
    assert WAVES[0][0] not in deleted  # wave 1 was not run again
    state = env.store().load()
    interrupted = next(r for r in state.history if r.outcome == Outcome.INTERRUPTED)
    assert "resumes: wave 2 of 4" in (interrupted.message or "")


def test_plan_and_dry_run_show_the_strategy_ours(env: Env) -> None:
    from reconciler.delivery.pipeline import delivered_manifests

    revisions = env.reconciler().source
    desired = revisions.desired(revisions.head(None).sha)
    bodies = {m.ref.name: m.body for m in delivered_manifests(desired) if m.ref.kind == "DaemonSet"}
    assert bodies[MAIN]["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert bodies[CANARY]["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert isinstance(env.client, ClusterClient)


@pytest.fixture
def tolerant(tmp_path: Path) -> Iterator[Env]:
    """One node of the rollout may fail."""
    yield from start(tmp_path, {**ROLLOUT, "maxFailedNodes": 1})


def test_a_node_that_goes_not_ready_mid_wave_counts_against_max_failed_nodes(tolerant: Env) -> None:
    env = tolerant
    upgraded_canary(env)
    lost = WAVES[1][0]
    reconciler = env.reconciler()

    def lose_the_node(progress: Any) -> None:
        if progress.wave == 2 and progress.phase == "replacing" and env.plane.kubelet is not None:
            env.plane.set_node_ready(lost, False)

    reconciler.on_rollout = lose_the_node
    env.set_image(MAIN, NEW)
    result = reconciler.reconcile()
    assert result.outcome == Outcome.APPLIED, (result.outcome, result.message)
    assert result.delivery is not None and result.delivery.applied is not None
    warnings = [w for stage in result.delivery.applied.stages for w in stage.warnings]
    assert any(
        "1 node(s) failed within maxFailedNodes 1" in w and f"{lost}: node {lost} is not Ready" in w
        for w in warnings
    ), warnings
    others = [n for n in GPU_NODES if n != lost]
    assert all(env.images()[n] == NEW for n in others)
    assert env.taint_rules() == []  # the failed node's drain was released too


def test_without_a_not_ready_budget_the_lost_node_halts_and_the_rest_reverts(env: Env) -> None:
    upgraded_canary(env)
    lost = WAVES[1][0]
    reconciler = env.reconciler()

    def lose_the_node(progress: Any) -> None:
        if progress.wave == 2 and progress.phase == "replacing":
            env.plane.set_node_ready(lost, False)

    reconciler.on_rollout = lose_the_node
    env.set_image(MAIN, NEW)
    result = reconciler.reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.outcome, result.message)
    assert f"wave 2 of 4 failed on node {lost}: node {lost} is not Ready" in result.message
    wait_for(lambda: env.ready_on(OLD, WAVES[0]), 30, "the old plugin back on the wave 1 node")
    assert env.taint_rules() == []
    assert result.rollback is not None and result.rollback.outcome == Outcome.APPLIED


def test_a_rollout_introduced_with_a_bad_upgrade_reverts_to_the_rolling_update(tmp_path: Path) -> None:
    """The last good revision has no `rollout` (its DaemonSet rolls by itself): the rollback re-applies its
    RollingUpdate, the DaemonSet's controller puts the old plugin back, and the drain of the failed wave goes."""
    for env in start(tmp_path, ROLLOUT):
        introduce_with_a_bad_upgrade(env)


def introduce_with_a_bad_upgrade(env: Env) -> None:
    config = env.remote.work / "dra-gitops.yaml"
    with_rollout = config.read_text()
    config.write_text(with_rollout.split("drivers:")[0])  # no drivers: no waves yet
    main = env.remote.work / "10-driver" / "kubelet-plugin.yaml"
    doc = yaml.safe_load(main.read_text())
    doc["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    main.write_text(yaml.safe_dump(doc, sort_keys=False))
    env.remote.commit_and_push("no waves")
    upgraded_canary(env)
    good = env.store().load().last_good
    bad_node = WAVES[1][0]
    env.plane.fail_pods(
        lambda pod, bad_node=bad_node: (
            pod["spec"].get("nodeName") == bad_node and pod["spec"]["containers"][0]["image"].endswith(NEW)
        ),
        "CrashLoopBackOff",
    )
    config.write_text(with_rollout)
    del doc["spec"]["updateStrategy"]
    main.write_text(yaml.safe_dump(doc, sort_keys=False))
    env.set_image(MAIN, NEW)  # the rollout and the new image in one commit
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, [r.message for r in result.records]
    assert "wave 2 of 4 failed" in result.message
    live = env.client.get(env.client.resource_for("apps/v1", "DaemonSet"), NS, MAIN) or {}
    assert live["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    wait_for(lambda: env.ready_on(OLD, GPU_NODES), 60, "the old plugin Ready on every GPU node")
    assert env.taint_rules() == []
    assert env.store().load().last_good == good


@pytest.fixture
def probed(tmp_path: Path) -> Iterator[Env]:
    """Each wave node must run a probe: a claim of the driver's class and a pod, in the reconciler's namespace."""
    probe = {"class": "gpu.example.com", "image": "registry.example.com/gpu-probe:1"}
    yield from start(tmp_path, {**ROLLOUT, "probe": probe})


def test_each_wave_probes_its_nodes_in_the_reconcilers_namespace(probed: Env) -> None:
    env = probed
    upgraded_canary(env)
    env.sim.api.audit.clear()  # type: ignore[union-attr]
    env.set_image(MAIN, NEW)
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.APPLIED, (result.outcome, result.message)
    assert env.sim.api.audit is not None
    probes = [
        e.request.name
        for e in env.sim.api.audit.events
        if e.request.verb == "create"
        and e.request.resource == "pods"
        and e.request.namespace == "dra-gitops"
        and not e.dry_run
        and e.code < 400
    ]
    assert len(probes) == len(GPU_NODES), probes  # one per node, wave by wave

    def left() -> list[str]:
        objects = env.client.list_kind("", "Pod", "dra-gitops")
        objects += env.client.list_kind("resource.k8s.io", "ResourceClaim", "dra-gitops")
        return [o["metadata"]["name"] for o in objects if not o["metadata"].get("deletionTimestamp")]

    assert left() == []  # the probe deletes what it created (pods may still be terminating)


def nowhere(env: Env) -> None:
    """The main plugin's affinity matches no node (a GPU pool scaled to zero)."""
    main = env.remote.work / "10-driver" / "kubelet-plugin.yaml"
    doc = yaml.safe_load(main.read_text())
    terms = doc["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ].append({"key": "gpu.example.com/pool", "operator": "In", "values": ["scaled-to-zero"]})
    main.write_text(yaml.safe_dump(doc, sort_keys=False))
    env.remote.commit_and_push("the GPU pool is scaled to zero")


def test_no_target_node_fails_stage_1_as_without_waves(env: Env) -> None:
    nowhere(env)
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.outcome, result.message)
    assert f"driver DaemonSet/{NS}/{MAIN} runs on no node" in result.message


def test_no_target_node_passes_with_allow_no_nodes(tmp_path: Path) -> None:
    for env in start(tmp_path, ROLLOUT):
        config = env.remote.work / "dra-gitops.yaml"
        settings = yaml.safe_load(config.read_text())
        settings["drivers"][0]["allowNoNodes"] = True
        config.write_text(yaml.safe_dump(settings, sort_keys=False))
        nowhere(env)
        result = env.reconciler().reconcile()
        assert result.outcome == Outcome.APPLIED, (result.outcome, result.message)
        assert env.taint_rules() == [] and env.plugin_pods() == {}
