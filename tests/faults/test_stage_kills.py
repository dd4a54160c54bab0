"""kill -9 at every stage boundary of an apply and of a rollback, then a restart: the same replica with its
warm Git cache, or a standby replica with a cold one (the case that wedged: recovery ran before any fetch).

Each case ends with the cluster on one revision (every stage's marker object carries it), the state naming
that revision as last good, nothing in progress, and a history that says what happened: the interrupted
pass and how it was finished.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults_support import STAGES, Rig, live_markers, markers_of, rig_at
from helpers import wait_for

POINTS = ("", "0 foundation", "1a drivers", *STAGES[1:])
# "" is the mark set before the first write; each stage label is written once that stage is done.
assert POINTS == ("", "0 foundation", "1a drivers", "1 drivers", "2 classes", "3 claims", "4 workloads")
RESTARTS = ("warm", "cold")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


def restart(rig: Rig, how: str) -> None:
    """`warm`: the same replica again (identity, cache); `cold`: a standby with an empty cache, which waits for
    the dead replica's Lease to expire."""
    if how == "warm":
        rig.start("cache-a", "--identity", "replica-a")
    else:
        rig.start("cache-b", "--identity", "replica-b")


@pytest.mark.parametrize("how", RESTARTS)
@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.replace(" ", "-") or "marked")
def test_an_apply_killed_at_a_stage_boundary_is_finished_after_a_restart(
    rig: Rig, point: str, how: str
) -> None:
    first = rig.commit("a")
    run = rig.start("cache-a", "--identity", "replica-a")
    rig.settled(first)
    newer = rig.kill_at(run, "apply", point, "b")
    left = rig.state()
    assert left.in_progress is not None and left.in_progress.sha == newer
    assert left.in_progress.stage == point

    restart(rig, how)
    state = rig.settled(newer)
    assert live_markers(rig.sim) == markers_of("b")
    outcomes = [(r.sha, r.outcome) for r in state.history]
    assert outcomes[0] == (newer, "applied"), outcomes
    assert (newer, "interrupted") in outcomes
    assert state.last_attempted is not None and state.last_attempted.sha == newer
    assert state.hold is None


@pytest.mark.parametrize("how", RESTARTS)
@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.replace(" ", "-") or "marked")
def test_a_rollback_killed_at_a_stage_boundary_is_finished_after_a_restart(
    rig: Rig, point: str, how: str
) -> None:
    good = rig.commit("a")
    run = rig.start("cache-a", "--identity", "replica-a")
    rig.settled(good)
    # 4 trainers, 3 free devices: verification fails, the rollback starts.
    bad = rig.kill_at(run, "rollback", point, "bad", trainers=4)
    left = rig.state()
    assert left.in_progress is not None and left.in_progress.operation == "rollback"
    assert left.in_progress.sha == good and left.in_progress.stage == point
    # The failed apply's record (and its diagnosis) was saved before the rollback began.
    assert [(r.sha, r.outcome) for r in left.history][0] == (bad, "verify-failed")

    restart(rig, how)
    state = rig.settled(good)
    wait_for(lambda: live_markers(rig.sim) == markers_of("a"), 30, "every stage back on the good revision")
    outcomes = [(r.sha, r.outcome) for r in state.history]
    assert (bad, "verify-failed") in outcomes
    assert state.last_attempted is not None and state.last_attempted.sha == bad
    assert state.last_attempted.rolled_back is True
    failed = next(r for r in state.history if r.sha == bad and r.outcome == "verify-failed")
    assert (failed.rolled_back_to, failed.rollback) == (good, "applied")
    assert state.failed(bad)  # not tried again on its own: the next polls leave the cluster where it is
    time.sleep(1.5)
    assert rig.state().history[0].id == state.history[0].id
    assert live_markers(rig.sim) == markers_of("a")
