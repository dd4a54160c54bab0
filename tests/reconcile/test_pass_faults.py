"""Faults inside a pass: a rollback killed half-way and finished by a replica with a cold Git cache, and a
head that fails before its dry-run (a manifest that does not parse, a file over the size limit).

A kill is played by a `should_stop` that raises a BaseException at a stage boundary: nothing of ours
catches it, so the state is left exactly as a kill -9 there leaves it (the marker in progress, the cluster
half-way). The real-process kills are in tests/faults/.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import GitRemote
from pass_support import TARGET, edit, live_specs, reconciler_for

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore
from reconciler.outcome import Outcome


class Killed(BaseException):
    """The process died here."""


def kill_at_rollback_stage(client: ClusterClient, stage_prefix: str) -> object:
    store = StateStore(client, TARGET)

    def should_stop() -> str | None:
        marker = store.load().in_progress
        if marker is not None and marker.operation == "rollback" and marker.stage.startswith(stage_prefix):
            raise Killed(f"killed during the rollback, after stage {marker.stage}")
        return None

    return should_stop


@pytest.mark.parametrize("stage", ["0", "1", "2"])
def test_a_rollback_killed_half_way_is_finished_by_a_replica_with_a_cold_cache(
    client: ClusterClient, remote: GitRemote, tmp_path: Path, stage: str
) -> None:
    good = remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == Outcome.APPLIED
    before = {k: v for k, v in live_specs(client).items() if not k.startswith(("Pod/", "ResourceClaim/"))}
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
    bad = remote.commit_and_push("trainer: 4 replicas (5 GPUs needed, 4 exist)")

    dying = reconciler_for(client, remote, tmp_path)
    dying.should_stop = kill_at_rollback_stage(client, stage)  # type: ignore[assignment]
    with pytest.raises(Killed):
        dying.reconcile()
    left = StateStore(client, TARGET).load()
    assert left.in_progress is not None and left.in_progress.operation == "rollback"

    # The standby takes over with an empty cache (a temporary directory, as by default).
    standby = reconciler_for(client, remote, tmp_path / "standby")
    result = standby.reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.message, result.records)
    state = StateStore(client, TARGET).load()
    assert state.in_progress is None and state.last_good == good
    assert state.last_attempted is not None and state.last_attempted.sha == bad
    # The failed apply's record, with its diagnosis, survived the kill.
    failed = [r for r in state.history if r.sha == bad and r.operation == "apply"]
    assert failed and failed[0].outcome == Outcome.VERIFY_FAILED and failed[0].message
    assert any(r.operation == "rollback" and r.outcome == Outcome.APPLIED for r in state.history)
    after = {k: v for k, v in live_specs(client).items() if not k.startswith(("Pod/", "ResourceClaim/"))}
    assert after == before
    # The bad commit is held, not tried again.
    assert standby.reconcile().outcome == Outcome.HELD


def test_a_head_that_does_not_parse_is_recorded_held_and_drift_still_corrected(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    broken = remote.work / "40-workloads" / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: [unclosed\n")
    bad = remote.commit_and_push("a manifest that does not parse")

    writes = client.writes_sent
    result = reconciler.reconcile()
    assert result.outcome == Outcome.INVALID, (result.message, result.records)
    assert result.message.startswith("40-workloads/broken.yaml:"), result.message
    state = StateStore(client, TARGET).load()
    assert state.last_good == good
    assert state.last_attempted is not None
    assert (state.last_attempted.sha, state.last_attempted.outcome) == (bad, Outcome.INVALID)
    assert state.last_attempted.pass_outcome() == Outcome.INVALID  # `status` exits 1, not 0
    assert state.history[0].sha == bad and state.history[0].message.startswith("40-workloads/broken.yaml:")
    events = client.list_kind("", "Event", "dra-gitops")
    assert any(e["reason"] == "InvalidRevision" and bad[:12] in e["message"] for e in events)
    # Only the state and its Event were written: nothing of the broken commit reached the cluster.
    assert client.writes_sent - writes <= 3

    # Held: not read again every poll; and drift is still put back toward the last good commit.
    deployments = client.resource_for("apps/v1", "Deployment")
    client.delete(deployments, "ml-team", "trainer")
    held = reconciler.reconcile()
    assert held.outcome == Outcome.DRIFT_CORRECTED, (held.message, held.records)
    assert client.get(deployments, "ml-team", "trainer") is not None
    assert reconciler.reconcile().outcome == Outcome.HELD


def test_a_file_over_the_size_limit_is_recorded_as_invalid(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    huge = remote.work / "40-workloads" / "huge.yaml"
    huge.write_text("# padding\n" * 2_200_000)  # 22 MB, over the loader's per-file limit
    bad = remote.commit_and_push("a 22 MB file")
    result = reconciler.reconcile()
    assert result.outcome == Outcome.INVALID, (result.message, result.records)
    assert "40-workloads/huge.yaml" in result.message
    state = StateStore(client, TARGET).load()
    assert state.last_attempted is not None and state.last_attempted.sha == bad
    assert reconciler.reconcile().outcome == Outcome.HELD


def test_a_force_push_dropping_the_last_good_commit_then_a_restart_does_not_wedge_the_target(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    dropped = remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == Outcome.APPLIED
    before = {k: v for k, v in live_specs(client).items() if not k.startswith(("Pod/", "ResourceClaim/"))}
    # History rewritten: the last good commit is replaced by one asking for more GPUs than exist.
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
    remote.git("add", "-A")
    remote.git("commit", "--quiet", "--amend", "-m", "example, rewritten: 4 trainers")
    rewritten = remote.git("rev-parse", "HEAD")
    remote.push("--force")
    remote.git("reflog", "expire", "--expire=now", "--all", cwd=remote.bare)
    remote.git("gc", "--quiet", "--prune=now", cwd=remote.bare)
    probe = tmp_path / "probe"
    remote.git("init", "--quiet", str(probe))
    with pytest.raises(subprocess.CalledProcessError):  # gone from the remote: "not our ref"
        remote.git("fetch", "--quiet", str(remote.bare), dropped, cwd=probe)

    # A restarted controller (cold cache): the head is delivered, fails, and is rolled back to the
    # dropped commit, read from the copy kept beside the state.
    result = reconciler_for(client, remote, tmp_path / "restarted").reconcile()
    assert result.outcome == Outcome.ROLLED_BACK, (result.message, result.records)
    state = StateStore(client, TARGET).load()
    assert state.last_good == dropped and state.last_attempted is not None
    assert state.last_attempted.sha == rewritten
    after = {k: v for k, v in live_specs(client).items() if not k.startswith(("Pod/", "ResourceClaim/"))}
    assert after == before

    # Another restart: drift is still corrected toward the dropped commit while the head is held.
    deployments = client.resource_for("apps/v1", "Deployment")
    client.delete(deployments, "ml-team", "trainer")
    held = reconciler_for(client, remote, tmp_path / "again").reconcile()
    assert held.outcome == Outcome.DRIFT_CORRECTED, (held.message, held.records)

    # A newer good commit is delivered.
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=2))
    fixed = remote.commit_and_push("trainer: 2 replicas again")
    result = reconciler_for(client, remote, tmp_path / "again").reconcile()
    assert result.outcome == Outcome.APPLIED, (result.message, result.records)
    assert StateStore(client, TARGET).load().last_good == fixed
