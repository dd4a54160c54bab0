"""History ids over many failing pushes (issue 29, item 4): each failed apply and its rollback get ids of
their own, unique and stable across a restart; `rollback ID --force` onto a commit whose last record is a
failure asks for `--yes-bad`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_support import REPO
from faults_support import Rig, rig_at
from helpers import wait_for

from reconciler.loop.store.state import TargetState

PUSHES = 50


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


def cli(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
    command = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=180)


def done_with(rig: Rig, sha: str) -> TargetState | None:
    state = rig.state()
    attempted = state.last_attempted
    if state.in_progress is None and attempted is not None and attempted.sha == sha:
        return state
    return None


def ids_of(state: TargetState) -> list[int]:
    return [r.id for r in state.history if r.id is not None]


def test_failed_applies_and_their_rollbacks_have_ids_of_their_own(rig: Rig) -> None:
    good = rig.commit("a")
    rig.start("cache-a", "--identity", "replica-a")
    rig.settled(good)
    bad: list[str] = []
    for n in range(PUSHES):
        sha = rig.commit(f"bad-{n}", trainers=4)  # 4 trainers, 3 free devices: verification fails
        bad.append(sha)
        state = wait_for(lambda sha=sha: done_with(rig, sha), 90, f"push {n} tried and rolled back")
        ids = ids_of(state)
        assert len(ids) == len(set(ids)), f"push {n}: ids {ids}"
    state = rig.state()
    by_id = {r.id: (r.sha, r.operation, r.outcome) for r in state.history}
    failed = [r for r in state.history if r.sha == bad[-1] and r.operation == "apply"]
    assert failed and failed[0].outcome == "verify-failed", by_id

    # A restart reads the same ids; what it records next has a new one.
    for run in rig.runs:
        run.stop()
    rig.start("cache-a", "--identity", "replica-a")
    again = rig.state()
    assert {r.id: (r.sha, r.operation, r.outcome) for r in again.history} == by_id

    # `rollback ID --force` onto the failed apply: a known-bad commit, refused without --yes-bad.
    target = failed[0].id
    refused = cli(
        rig.kubeconfig, "rollback", str(target), "--force", "--via", "controller", "--timeout", "60s"
    )
    assert refused.returncode == 1, f"{refused.stdout}\n{refused.stderr}"
    assert "--yes-bad" in refused.stderr and "is a failure" in refused.stderr, refused.stderr
    assert rig.state().request is None and rig.state().last_good == good
