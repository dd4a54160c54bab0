"""A rollback target that cannot be read (issue 29, item 2): the last good commit force-pushed away and
collected by the remote, its kept copy gone. The failed commit is held, not applied again; the outcome is
rollback-failed (`status` exits 5) with one record, a RollbackFailed Event and a message saying how to get
out. And the kept copy is written again by the running controller whenever it goes missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_support import REPO
from faults_support import GitServer, Rig, rig_at, set_trainers, tail, write_markers
from helpers import GitRemote, wait_for

KEPT = "dra-gitops-default-last-good"


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


def cli(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
    command = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def kept(rig: Rig) -> str | None:
    obj = rig.sim.store.get_ref("", "configmaps", "dra-gitops", KEPT)
    return None if obj is None else obj["metadata"].get("annotations", {}).get("dra-gitops.io/revision")


def delete_kept(rig: Rig) -> None:
    with rig.client() as client:
        client.delete(client.resource_for("v1", "ConfigMap"), "dra-gitops", KEPT)


def events(rig: Rig, reason: str) -> list[str]:
    with rig.client() as client:
        found = client.list_kind("", "Event", "dra-gitops")
    return [str(e.get("message")) for e in found if e.get("reason") == reason]


def test_the_kept_copy_is_written_again_when_it_goes_missing(rig: Rig) -> None:
    good = rig.commit("a")
    run = rig.start("cache-a", "--identity", "replica-a")
    rig.settled(good)
    wait_for(lambda: kept(rig) == good, 30, "the last good commit kept")
    delete_kept(rig)
    wait_for(lambda: kept(rig) == good, 30, f"the kept copy written again\n{tail(run)}")


def test_an_unreadable_rollback_target_holds_the_failed_commit_as_rollback_failed(rig: Rig) -> None:
    git = GitServer(rig.remote)
    dropped = rig.commit("a")
    first = rig.start("cache-a", "--identity", "replica-a", repo=git.url)
    rig.settled(dropped)
    first.stop()
    delete_kept(rig)
    # History rewritten: the last good commit replaced by one that never verifies, then collected.
    write_markers(rig.remote, "rewritten")
    set_trainers(rig.remote, 4)
    rig.remote.git("add", "-A")
    rig.remote.git("commit", "--quiet", "--amend", "-m", "revision a, rewritten: 4 trainers")
    bad = rig.remote.git("rev-parse", "HEAD")
    rig.remote.push("--force")
    rig.remote.git("reflog", "expire", "--expire=now", "--all", cwd=rig.remote.bare)
    rig.remote.git("gc", "--quiet", "--prune=now", cwd=rig.remote.bare)
    probe = GitRemote(rig.root / "probe")
    refused = subprocess.run(
        ["git", "fetch", git.url, dropped], cwd=probe.work, capture_output=True, text=True
    )
    assert refused.returncode != 0, refused.stderr

    run = rig.start("cache-b", "--identity", "replica-b", repo=git.url)
    state = wait_for(
        lambda: (
            (s := rig.state()).last_attempted and s.last_attempted.sha == bad and s.in_progress is None and s
        ),
        90,
        f"the bad head attempted\n{tail(run)}",
    )
    assert state.last_good == dropped
    assert state.last_attempted is not None and state.last_attempted.rolled_back is False
    records = [r for r in state.history if r.sha == bad]
    assert [(r.operation, r.outcome, r.rollback) for r in records] == [
        ("apply", "verify-failed", "rollback-failed")
    ], [(r.id, r.operation, r.outcome) for r in state.history]
    assert "sync --revision" in (records[0].message or "")
    wait_for(lambda: events(rig, "RollbackFailed"), 30, "a RollbackFailed Event")

    # Held, not applied again: a few more polls leave the history as it is.
    logged = len(run.log.read_text())
    wait_for(
        lambda: run.log.read_text()[logged:].count("pass held") >= 3, 60, f"three held passes\n{tail(run)}"
    )
    again = rig.state()
    assert [r.id for r in again.history] == [r.id for r in state.history]
    assert "interrupted" not in [r.outcome for r in again.history]

    status = cli(rig.kubeconfig, "status")
    assert status.returncode == 5, f"{status.stdout}\n{status.stderr}"
