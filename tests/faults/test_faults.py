"""The faults of issue 18, each played with real processes: the controller (`dra-gitops run`), the API
server (`sim serve`, killed, restarted from its data directory, frozen with SIGSTOP) and the Git server
(a bare repository over file://, moved away and back, force-pushed to). The stage-boundary kills are in test_stage_kills.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_support import REPO, Running, example_remote
from faults_support import (
    GitServer,
    Rig,
    ServedSim,
    live_markers,
    markers_of,
    rig_at,
    set_trainers,
    start_controller,
    tail,
    write_markers,
)
from helpers import GitRemote, wait_for

from reconciler.loop.store.state import TargetState


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


def cli(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
    command = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def events(rig: Rig, reason: str) -> list[str]:
    with rig.client() as client:
        found = client.list_kind("", "Event", "dra-gitops")
    return [str(e.get("message")) for e in found if e.get("reason") == reason]


# ---- 1. an interrupted rollback, a standby with a cold cache, and the Git server gone -----------------


def test_a_standby_with_a_cold_cache_finishes_an_interrupted_rollback_while_git_is_down(
    rig: Rig, tmp_path: Path
) -> None:
    git = GitServer(rig.remote)
    try:
        good = rig.commit("a")
        first = rig.start("cache-a", "--identity", "replica-a", repo=git.url)
        rig.settled(good)
        bad = rig.kill_at(first, "rollback", "1 drivers", "bad", trainers=4)
        git.vanish()  # the remote vanishes with the replica: the standby cannot fetch anything

        standby = rig.start("cache-b", "--identity", "replica-b", repo=git.url)
        state = rig.settled(good)
        # Finished from the copy of the last good revision kept beside the state, not from Git.
        assert live_markers(rig.sim) == markers_of("a")
        assert state.last_attempted is not None and state.last_attempted.sha == bad
        assert state.last_attempted.rolled_back is True
        assert "found rollback of" in standby.log.read_text()
        said = standby.log.read_text()
        assert "reading it from ConfigMap/dra-gitops/dra-gitops-default-last-good" in said
        assert "pass failed" not in said
        # Source health says why nothing newer can come, and an Event says so once.
        health = wait_for(lambda: (s := rig.state().source) and s.error and s, 30, "the fetch error recorded")
        assert health.error and "remote.git" in health.error
        assert len(events(rig, "SourceFailed")) == 1

        git.come_back()  # back: recorded as recovered, and the bad head stays held
        wait_for(lambda: (s := rig.state().source) and not s.error, 30, "the source healthy again")
        assert events(rig, "SourceRecovered")
        time.sleep(1.5)
        assert rig.state().last_good == good and live_markers(rig.sim) == markers_of("a")
    finally:
        git.come_back()


# ---- 2. a force-push that drops the last good commit, then a restart ------------------------------------


def test_a_force_push_dropping_the_last_good_commit_then_a_restart_does_not_wedge_the_target(
    rig: Rig,
) -> None:
    git = GitServer(rig.remote)
    try:
        dropped = rig.commit("a")
        first = rig.start("cache-a", "--identity", "replica-a", repo=git.url)
        rig.settled(dropped)
        first.stop()
        # History rewritten: the last good commit replaced by one asking for more GPUs than exist.
        write_markers(rig.remote, "rewritten")
        set_trainers(rig.remote, 4)
        rig.remote.git("add", "-A")
        rig.remote.git("commit", "--quiet", "--amend", "-m", "revision a, rewritten: 4 trainers")
        rewritten = rig.remote.git("rev-parse", "HEAD")
        rig.remote.push("--force")
        rig.remote.git("reflog", "expire", "--expire=now", "--all", cwd=rig.remote.bare)
        rig.remote.git("gc", "--quiet", "--prune=now", cwd=rig.remote.bare)  # as a forge does, in time
        probe = GitRemote(rig.root / "probe")
        fetch = ["git", "fetch", git.url, dropped]
        refused = subprocess.run(fetch, cwd=probe.work, capture_output=True, text=True)
        assert refused.returncode != 0, refused.stderr  # "not our ref" / "no such remote ref"

        restarted = rig.start("cache-b", "--identity", "replica-b", repo=git.url)  # a cold cache
        state = wait_for(
            lambda: (
                (s := rig.state()).last_attempted
                and s.last_attempted.sha == rewritten
                and s.in_progress is None
                and s
            ),
            90,
            "the rewritten head attempted",
        )
        assert state.last_good == dropped, tail(restarted)
        assert state.last_attempted is not None and state.last_attempted.rolled_back is True
        assert live_markers(rig.sim) == markers_of("a")  # rolled back to a commit Git no longer has
        assert "pass failed" not in restarted.log.read_text()

        # Drift is still corrected toward the dropped commit while the head is held.
        with rig.client() as client:
            configmaps = client.resource_for("v1", "ConfigMap")
            client.delete(configmaps, "ml-team", "marker-stage-4")
        wait_for(lambda: live_markers(rig.sim) == markers_of("a"), 30, "the deleted marker put back")

        # And a newer good commit is delivered.
        newer = rig.commit("c")
        rig.settled(newer)
        assert live_markers(rig.sim) == markers_of("c")
    finally:
        git.come_back()


# ---- 3. a head that fails before its dry-run ------------------------------------------------------------


def test_a_broken_head_is_recorded_raises_an_event_fails_status_and_drift_is_still_corrected(
    rig: Rig,
) -> None:
    good = rig.commit("a")
    rig.start("cache-a")
    rig.settled(good)
    broken = rig.remote.work / "40-workloads" / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: [unclosed\n")
    bad = rig.remote.commit_and_push("a manifest that does not parse")

    state: TargetState = wait_for(
        lambda: (s := rig.state()).last_attempted and s.last_attempted.sha == bad and s, 30, "attempted"
    )
    assert state.last_attempted is not None and state.last_attempted.outcome == "invalid"
    assert state.history[0].message.startswith("40-workloads/broken.yaml:")
    assert [m for m in events(rig, "InvalidRevision") if bad[:12] in m]
    shown = cli(rig.kubeconfig, "status")
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "invalid" in shown.stdout and "40-workloads/broken.yaml:" in shown.stdout

    with rig.client() as client:
        client.delete(client.resource_for("v1", "ConfigMap"), "ml-team", "marker-stage-0")
    wait_for(lambda: live_markers(rig.sim) == markers_of("a"), 30, "drift corrected while the head is bad")
    assert len([r for r in rig.state().history if r.sha == bad]) == 1  # recorded once, not every poll


# ---- 5. a rollback to a commit the policies denied -------------------------------------------------------


def test_a_rollback_to_a_denied_commit_is_refused_and_with_force_done_by_the_running_controller(
    rig: Rig,
) -> None:
    good = rig.commit("a")
    run = rig.start("cache-a", "--identity", "replica-a")
    rig.settled(good)
    driver = rig.remote.work / "10-driver" / "kubelet-plugin.yaml"
    driver.write_text(driver.read_text().replace("gpu-example-driver:v0.3.0", "gpu-example-driver:v0.4.0"))
    denied = rig.remote.commit_and_push("driver v0.4.0 straight to main")
    wait_for(lambda: (s := rig.state()).last_attempted and s.last_attempted.sha == denied, 30, "the denial")
    assert rig.state().last_attempted.outcome == "denied"  # type: ignore[union-attr]

    refused = cli(rig.kubeconfig, "rollback", denied, "--repo", rig.remote.url)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "was never applied and verified here" in refused.stderr + refused.stdout
    assert rig.state().last_good == good

    forced = cli(rig.kubeconfig, "rollback", denied, "--force", "--repo", rig.remote.url, "-o", "json")
    assert forced.returncode == 0, forced.stdout + forced.stderr + tail(run)
    state = rig.state()
    record = state.history[0]
    assert (record.sha, record.operation, record.outcome) == (denied, "rollback", "applied")
    assert record.forced and "driver-canary" in record.forced[-1]
    assert state.last_good == denied and state.in_progress is None
    assert "requested by" in run.log.read_text()  # the replica holding the Lease carried it out


# ---- 6/7. the API server killed and restarted, and frozen -------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedSim]:
    sim = ServedSim(tmp_path)
    try:
        yield sim
    finally:
        sim.stop()


def served_markers(served: ServedSim) -> dict[str, str | None]:
    with served.client() as client:
        configmaps = client.resource_for("v1", "ConfigMap")
        return {
            name: ((client.get(configmaps, "ml-team", name) or {}).get("data") or {}).get("revision")
            for name in markers_of("")
        }


def served_rig(tmp_path: Path, served: ServedSim, *extra: str) -> tuple[GitRemote, Running]:
    remote = example_remote(tmp_path / "git")
    write_markers(remote, "a")
    good = remote.commit_and_push("revision a")
    run = start_controller(tmp_path, remote.url, served.kubeconfig, "cache", *extra)
    wait_for(lambda: served.state().last_good == good, 90, "revision a applied", 0.2)
    return remote, run


def test_an_api_server_killed_mid_pass_and_restarted_ends_on_one_revision(
    served: ServedSim, tmp_path: Path
) -> None:
    remote, run = served_rig(tmp_path, served)
    try:
        write_markers(remote, "b")
        newer = remote.commit_and_push("revision b")
        wait_for(lambda: (p := served.state().in_progress) and p.sha == newer, 60, "b in progress", 0.01)
        served.kill()
        time.sleep(2)  # the controller finds no API server for a while
        assert run.proc.poll() is None, tail(run)
        served.start()
        state = wait_for(
            lambda: (s := served.state()).in_progress is None and s.last_good == newer and s,
            90,
            "b applied after the restart",
            0.2,
        )
        assert served_markers(served) == markers_of("b")
        assert state.history[0].sha == newer and state.history[0].outcome == "applied"
    finally:
        run.stop()


def test_a_frozen_api_server_bounds_the_pass_and_says_what_went_unanswered(
    served: ServedSim, tmp_path: Path
) -> None:
    remote, run = served_rig(tmp_path, served, "--request-timeout", "2s")
    try:
        write_markers(remote, "b")
        newer = remote.commit_and_push("revision b")
        wait_for(lambda: (p := served.state().in_progress) and p.sha == newer, 60, "b in progress", 0.01)
        served.freeze()
        frozen_at = time.monotonic()
        log = run.log
        # The pass's own request (bounded by --request-timeout 2s) or, when the Lease fence stopped the pass
        # first, the Lease round's (bounded by a third of the renew deadline): either says what went
        # unanswered, and when.
        unanswered = re.compile(r"no answer from the API server within \d")
        try:
            wait_for(lambda: unanswered.search(log.read_text()) is not None, 30, "the timeout said")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{tail(run)}") from exc
        said = time.monotonic() - frozen_at
        assert said < 15, said
        assert "written by someone else" not in log.read_text()
        time.sleep(3)
        served.thaw()
        wait_for(
            lambda: (s := served.state()).in_progress is None and s.last_good == newer,
            90,
            "b applied once the API server answers again",
            0.2,
        )
        assert served_markers(served) == markers_of("b")
    finally:
        run.stop()
