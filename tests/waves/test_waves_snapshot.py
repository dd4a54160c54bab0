"""A reconcile pass that dies mid-wave after the wave's old plugin pods were deleted (issue 32): the devices the
wave's nodes had are in the state (`inProgress.rollout[].snapshot`, saved before the first deletion), so the
next pass compares the republished devices with them as an unbroken wave does: a device that disappeared on
the node replaced before the kill fails that wave on resume, with the evidence; a good resume goes on. The
snapshot is cleared when its wave is over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from waves_support import DRIVER, GPU_NODES, MAIN, NEW, OLD, TARGET, WAVES, Env, start, upgraded_canary

from reconciler.cluster.wave_snapshot import WaveSnapshot
from reconciler.loop.store.statusview import target_row
from reconciler.outcome import Outcome

ROLLOUT = {"waves": ["1", "2", "50%", "100%"], "soak": "200ms", "drainDevices": True}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from start(tmp_path, ROLLOUT)


class Died(BaseException):
    pass


def die_in_wave_2(env: Env, devices_after: int | None = None) -> None:
    """A pass that dies in wave 2 right after deleting its old plugin pod (sim-node-4); with `devices_after`,
    the new plugin publishes that many devices from the wave's drain on (the old one published 2)."""
    dying = env.reconciler()

    def on_rollout(progress: Any) -> None:
        if progress.wave == 2 and progress.phase == "draining" and devices_after is not None:
            assert env.plane.driver is not None
            env.plane.driver.configs[DRIVER].devices_per_node = devices_after
        if progress.wave == 2 and progress.phase == "replacing":
            raise Died()
        if progress.phase in ("verifying", "soaking") and progress.wave < 2:
            assert progress.snapshot is None or progress.phase == "verifying"

    dying.on_rollout = on_rollout
    with pytest.raises(Died):
        dying.reconcile()
    left = env.rollout()
    assert left is not None and left.wave == 2  # (on_rollout runs before the save: "replacing" is not saved)
    kept = WaveSnapshot.from_json(left.snapshot)
    assert kept is not None and kept.wave == 2 and set(kept.pools) == set(WAVES[1])
    assert sorted(kept.pools["sim-node-4"]["sim-node-4"].devices) == ["gpu-0", "gpu-1"]
    row = target_row(TARGET, env.store().load())  # `get -o json`: the wave, not its devices
    assert (
        row["rollout"]["wave"] == 2
        and "snapshot" not in row["rollout"]
        and "snapshot" not in row["rollouts"][0]
    )
    # the old pod was deleted before the pass died: the new one comes up and republishes the node's slices
    wait_for(lambda: env.ready_on(NEW, ["sim-node-4"]), 30, "the new plugin Ready on sim-node-4")


def test_a_resume_after_the_old_pods_were_deleted_fails_the_wave_on_a_device_that_disappeared(
    env: Env,
) -> None:
    upgraded_canary(env)
    good = env.store().load().last_good
    env.set_image(MAIN, NEW)
    die_in_wave_2(env, devices_after=1)
    resumed = env.reconciler()

    def on_rollout(progress: Any) -> None:
        if progress.phase == "failed":  # the old plugin, put back by the revert, publishes 2 devices again
            assert env.plane.driver is not None
            env.plane.driver.configs[DRIVER].devices_per_node = 2

    resumed.on_rollout = on_rollout
    result = resumed.reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.outcome, result.message)
    state = env.store().load()
    assert state.last_good == good and state.in_progress is None
    failed = next(r for r in state.history if r.operation == "apply" and r.sha == result.sha)
    for words in ("wave 2 of 4", "sim-node-4", "device(s) gpu-1 of pool sim-node-4 disappeared"):
        assert words in (failed.message or ""), failed.message
    diagnosis = next(d for d in failed.diagnoses or [] if d["mode"] == "driver-wave-failed")
    assert diagnosis["numbers"]["wave"] == 2
    assert any("gpu-1 of pool sim-node-4 disappeared" in line for line in diagnosis["evidence"])
    assert env.images()["sim-node-2"] == OLD  # wave 3 never started
    assert env.taint_rules() == []


def test_a_good_resume_compares_with_the_kept_snapshot_and_clears_it_after_each_wave(env: Env) -> None:
    upgraded_canary(env)
    env.set_image(MAIN, NEW)
    die_in_wave_2(env)
    seen: list[tuple[int, str, bool]] = []
    resumed = env.reconciler()
    resumed.on_rollout = lambda p: seen.append((p.wave, p.phase, p.snapshot is not None))
    result = resumed.reconcile()
    assert result.outcome == Outcome.APPLIED, (result.outcome, result.message)
    assert set(env.images().values()) == {NEW} and set(env.images()) == set(GPU_NODES)
    # kept while a wave runs (from before its first deletion), cleared once it verified
    assert (2, "verifying", True) in seen and (2, "replacing", True) not in seen, seen  # nothing to delete
    for wave in (3, 4):
        assert (wave, "replacing", True) in seen, seen
    for wave in (2, 3, 4):
        assert (wave, "verifying", False) in seen, seen
    assert all(not kept for _, phase, kept in seen if phase in ("soaking", "done")), seen
    assert env.store().load().in_progress is None
