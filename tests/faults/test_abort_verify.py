"""`abort` while a pass waits on verification: the wait ends at once, the last good commit is put back, and
the record says `aborted` and by whom (issue 29, item 3). Before, the pass waited out the verification and
the abort then cancelled the automatic rollback: `rollback-failed`, exit 5.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_support import REPO
from faults_support import Rig, live_markers, markers_of, rig_at, tail
from helpers import wait_for


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


def cli(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
    command = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=180)


def verifying(rig: Rig, sha: str) -> bool:
    marker = rig.state().in_progress
    return marker is not None and marker.sha == sha and marker.stage == "4 workloads"


def test_abort_during_verification_rolls_back_at_once_and_records_who(rig: Rig) -> None:
    good = rig.commit("a")
    # A shortage is terminal only past the grace: with 90 s, verification of the bad commit waits.
    run = rig.start("cache-a", "--identity", "replica-a", "--grace", "90s", "--verify-timeout", "120s")
    rig.settled(good)
    bad = rig.commit("bad", trainers=4)  # 4 trainers, 3 free devices: never verifies
    wait_for(lambda: verifying(rig, bad), 90, "the bad commit's pass waiting on verification")
    wait_for(lambda: "verify: " in run.log.read_text(), 30, "verification started")

    asked = time.monotonic()
    done = cli(rig.kubeconfig, "abort", "--timeout", "60s")
    took = time.monotonic() - asked
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{tail(run)}"
    assert took < 60, took  # far less than the 90 s grace the verification would have waited
    state = rig.settled(good, 90)
    wait_for(lambda: live_markers(rig.sim) == markers_of("a"), 30, "every stage back on the good revision")
    record = next(r for r in state.history if r.sha == bad)
    assert record.outcome == "aborted", [(r.sha[:7], r.operation, r.outcome) for r in state.history]
    assert record.requested_by and "during verification" in (record.message or ""), record
    assert (record.rolled_back_to, record.rollback) == (good, "applied")
    assert state.failed(bad) and state.abort is None
    assert "rollback-failed" not in [r.outcome for r in state.history]
