"""`abort` of a driver rollout in waves paused by `suspend` (issue 32): the next pass rolls it back without
`resume` — the old plugin back on the nodes the waves touched, no DeviceTaintRule left, the last good commit
restored, the history naming who aborted and the wave it was paused at — and the target stays suspended.
Against the simulated cluster (waves_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from waves_support import (
    GPU_NODES,
    MAIN,
    NEW,
    NS,
    OLD,
    TARGET,
    WAVES,
    Env,
    start,
    suspended_while_soaking,
    upgraded_canary,
)

from reconciler.loop.store.operations import TargetRef, abort, resume
from reconciler.outcome import Outcome

ROLLOUT = {"waves": ["1", "2", "50%", "100%"], "soak": "3s", "drainDevices": True}
REF = TargetRef(TARGET, "dra-gitops")


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from start(tmp_path, ROLLOUT)


def suspended_after_wave_2(env: Env) -> tuple[str | None, str]:
    """Deliver the new plugin and suspend the rollout while it soaks after wave 2; the last good commit
    before it and the new commit's sha."""
    upgraded_canary(env)
    good = env.store().load().last_good
    sha = suspended_while_soaking(env, 2)
    return good, sha


def test_abort_of_a_suspended_rollout_reverts_it_without_resume(env: Env) -> None:
    good, sha = suspended_after_wave_2(env)
    touched = [n for wave in WAVES[:2] for n in wave]
    images = env.images()
    assert [images[n] for n in touched] == [NEW, NEW] and images[WAVES[2][0]] == OLD
    paused = env.rollout()
    assert paused is not None and paused.phase == "suspended"

    assert abort(env.client, REF, "alice") == sha
    # Still suspended: without `resume`, the next pass takes the abort and rolls back.
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.outcome, result.message)
    wait_for(lambda: env.ready_on(OLD, GPU_NODES), 30, "the old plugin Ready on every GPU node")
    assert env.taint_rules() == []
    state = env.store().load()
    assert state.last_good == good and state.in_progress is None and state.abort is None
    assert state.suspended is not None and state.suspended.by == "tester"  # the suspension stands
    assert state.last_attempted is not None and state.last_attempted.sha == sha
    assert state.last_attempted.outcome == Outcome.ABORTED and state.last_attempted.rolled_back is True
    aborted = next(r for r in state.history if r.sha == sha and r.operation == "apply")
    assert aborted.outcome == Outcome.ABORTED and aborted.requested_by == "alice"
    message = aborted.message or ""
    assert message.startswith("aborted by alice while the target was suspended by tester: "), message
    assert f"DaemonSet/{NS}/{MAIN} in waves was paused (wave 2 of 4 (suspended), 2/6 nodes done" in message
    assert aborted.rolled_back_to == good and aborted.rollback == Outcome.APPLIED
    rollback = next(r for r in state.history if r.operation == "rollback" and r.from_sha == sha)
    assert rollback.sha == good and rollback.outcome == Outcome.APPLIED
    reasons = [e["reason"] for e in env.client.list_kind("", "Event", "dra-gitops")]
    assert "Aborted" in reasons and "RolloutReverted" in reasons and "RolledBack" in reasons, reasons

    # Suspended still: a pass changes nothing; once resumed, the aborted commit is held, not delivered.
    before = env.plugin_pods()
    assert env.reconciler().reconcile().outcome == Outcome.SUSPENDED
    resume(env.client, REF, "tester")
    after = env.reconciler().reconcile()
    assert after.outcome == Outcome.HELD, (after.outcome, after.message)
    assert {n: p["metadata"]["uid"] for n, p in env.plugin_pods().items()} == {
        n: p["metadata"]["uid"] for n, p in before.items()
    }
    assert set(env.images().values()) == {OLD}


def test_a_suspended_target_without_an_abort_keeps_its_paused_rollout(env: Env) -> None:
    suspended_after_wave_2(env)
    before: dict[str, Any] = {n: p["metadata"]["uid"] for n, p in env.plugin_pods().items()}
    assert env.reconciler().reconcile().outcome == Outcome.SUSPENDED
    paused = env.rollout()
    assert paused is not None and paused.phase == "suspended" and paused.wave == 2
    assert {n: p["metadata"]["uid"] for n, p in env.plugin_pods().items()} == before


def test_an_aborts_rollback_that_dies_is_finished_by_the_next_pass_while_suspended(env: Env) -> None:
    good, sha = suspended_after_wave_2(env)
    abort(env.client, REF, "alice")
    dying = env.reconciler()

    class Died(BaseException):
        pass

    def die_reverting(progress: Any) -> None:
        if progress.phase == "reverting":
            raise Died()

    dying.on_rollout = die_reverting
    with pytest.raises(Died):
        dying.reconcile()
    left = env.store().load()
    assert left.in_progress is not None and left.in_progress.operation == "rollback"
    assert left.suspended is not None and left.abort is None
    # Another replica's pass, the target still suspended: it finishes the rollback the abort began.
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.outcome, result.message)
    wait_for(lambda: env.ready_on(OLD, GPU_NODES), 30, "the old plugin Ready on every GPU node")
    assert env.taint_rules() == []
    state = env.store().load()
    assert state.last_good == good and state.in_progress is None and state.suspended is not None
    assert state.last_attempted is not None and state.last_attempted.sha == sha
    assert state.last_attempted.rolled_back is True
    aborted = next(r for r in state.history if r.sha == sha and r.operation == "apply")
    assert aborted.outcome == Outcome.ABORTED and aborted.requested_by == "alice"
    assert aborted.rollback == Outcome.APPLIED
    assert env.reconciler().reconcile().outcome == Outcome.SUSPENDED  # and nothing more
