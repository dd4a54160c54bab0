"""suspend / resume, get and history: what they record, and what a pass does while a target is suspended."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import GitRemote
from pass_support import TARGET, edit, live_specs, reconciler_for

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.errors import UserError
from reconciler.loop.store.operations import TargetRef, abort, suspend
from reconciler.loop.store.state import StateStore
from reconciler.outcome import Outcome
from reconciler.sim.server import SimCluster


def _cli(cluster: SimCluster, tmp_path: Path, *args: str) -> tuple[int, str]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    done = CliRunner().invoke(cli, [*args, "--kubeconfig", str(kubeconfig)], catch_exceptions=False)
    return done.exit_code, done.output


def test_a_suspended_target_is_neither_applied_nor_corrected_until_resumed(
    cluster: SimCluster, client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    code, _ = _cli(cluster, tmp_path, "suspend", "--target", TARGET, "--reason", "driver maintenance")
    assert code == 0
    code, output = _cli(cluster, tmp_path, "suspend", "--target", TARGET)
    assert code == 1 and "suspended already" in output

    deployments = client.resource_for("apps/v1", "Deployment")
    client.delete(deployments, "ml-team", "trainer")
    remote.git("commit", "--quiet", "--allow-empty", "-m", "a newer commit")
    remote.push()
    writes = client.writes_sent
    result = reconciler.reconcile()
    assert result.outcome == Outcome.SUSPENDED and "driver maintenance" in result.message
    assert client.writes_sent == writes  # nothing applied, the drift left alone
    assert client.get(deployments, "ml-team", "trainer") is None
    code, status = _cli(cluster, tmp_path, "status", "--target", TARGET)
    assert "suspended:     since " in status and "driver maintenance" in status

    code, _ = _cli(cluster, tmp_path, "resume", "--target", TARGET)
    assert code == 0
    assert reconciler.reconcile().outcome == Outcome.APPLIED  # the newer commit, the trainer back
    assert client.get(deployments, "ml-team", "trainer") is not None
    state = StateStore(client, TARGET).load()
    assert state.suspended is None and state.last_good != good
    operations = [(r.operation, r.outcome, bool(r.requested_by)) for r in state.history[1:3]]
    assert operations == [("resume", Outcome.RESUMED, True), ("suspend", Outcome.SUSPENDED, True)]


def test_get_lists_every_target_of_the_cluster_and_history_lists_records(
    cluster: SimCluster, client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == Outcome.APPLIED
    StateStore(client, "other").update(lambda state: None)  # a second target, nothing attempted yet
    code, output = _cli(cluster, tmp_path, "get", "-o", "json")
    assert code == 0
    rows = {row["target"]: row for row in json.loads(output)}
    assert set(rows) == {TARGET, "other"}
    assert rows[TARGET]["outcome"] == "applied" and rows["other"]["lastGood"] is None
    code, table = _cli(cluster, tmp_path, "get")
    assert table.splitlines()[0].split()[:2] == ["TARGET", "LAST"] and TARGET in table

    code, output = _cli(cluster, tmp_path, "history", "--target", TARGET, "-o", "json")
    records = json.loads(output)
    assert code == 0 and records[0]["operation"] == "apply" and records[0]["id"] == 1
    code, text = _cli(cluster, tmp_path, "history", "--target", TARGET)
    assert text.split()[0] == "1" and "applied" in text


def test_self_heal_off_reports_drift_and_prune_off_keeps_what_git_dropped(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    reconciler.options.self_heal = False
    reconciler.options.delivery = replace(reconciler.options.delivery, prune=False)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    deployments = client.resource_for("apps/v1", "Deployment")
    client.delete(deployments, "ml-team", "trainer")
    drifted = reconciler.reconcile()
    assert drifted.outcome == Outcome.DRIFTED and "selfHeal is off" in drifted.message
    assert client.get(deployments, "ml-team", "trainer") is None  # left as it is
    events = [e for e in client.list_kind("", "Event", "dra-gitops") if e["reason"] == "DriftDetected"]
    assert reconciler.reconcile().outcome == Outcome.DRIFTED
    again = [e for e in client.list_kind("", "Event", "dra-gitops") if e["reason"] == "DriftDetected"]
    assert len(events) == 1 and [e.get("count", 1) for e in again] == [e.get("count", 1) for e in events]

    # selfHeal back on, prune still off: the trainer comes back; a workload dropped from Git stays.
    reconciler.options.self_heal = True
    assert reconciler.reconcile().outcome == Outcome.DRIFT_CORRECTED
    (remote.work / "40-workloads" / "trainer.yaml").unlink()
    remote.commit_and_push("trainer dropped from Git")
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    assert client.get(deployments, "ml-team", "trainer") is not None


def test_a_verb_written_during_a_pass_is_kept_and_the_pass_goes_on(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    """A person suspends the target while a pass is between two stages: the pass finishes its delivery
    (it no longer stops with "written by someone else"), and the suspension and its record stay."""
    remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    store = StateStore(client, TARGET)
    done: list[str] = []

    def suspend_once() -> str | None:
        marker = store.load().in_progress
        if marker is not None and marker.stage and not done:
            done.append(marker.stage)
            suspend(client, TargetRef(TARGET), "alice (alice@laptop)", "mid-pass")
        return None

    reconciler.should_stop = suspend_once  # type: ignore[method-assign]
    result = reconciler.reconcile()
    assert done and result.outcome == Outcome.APPLIED, (result.message, result.records)
    state = store.load()
    assert state.suspended is not None and state.suspended.by == "alice (alice@laptop)"
    assert [r.operation for r in state.history[:2]] == ["apply", "suspend"]
    assert len({r.id for r in state.history}) == len(state.history)
    assert reconciler.reconcile().outcome == Outcome.SUSPENDED


def test_abort_stops_the_running_apply_at_a_stage_boundary_and_rolls_back(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    before = {k: v for k, v in live_specs(client).items() if not k.startswith(("Pod/", "ResourceClaim/"))}
    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=30"]),
    )
    bad = remote.commit_and_push("trainer: 30 epochs")
    store = StateStore(client, TARGET)
    asked: list[str] = []

    def abort_once() -> str | None:
        marker = store.load().in_progress
        if marker is not None and marker.operation == "apply" and marker.stage and not asked:
            asked.append(abort(client, TargetRef(TARGET), "bob (bob@laptop)"))
        return None

    reconciler.should_stop = abort_once  # type: ignore[method-assign]
    result = reconciler.reconcile()
    assert asked == [bad] and result.outcome == Outcome.ROLLED_BACK, (result.message, result.records)
    state = store.load()
    assert state.last_good == good and state.abort is None and state.in_progress is None
    assert state.last_attempted is not None and state.last_attempted.outcome == Outcome.ABORTED
    failed = state.history[0]
    assert (failed.sha, failed.outcome, failed.requested_by) == (bad, Outcome.ABORTED, "bob (bob@laptop)")
    after = {k: v for k, v in live_specs(client).items() if not k.startswith(("Pod/", "ResourceClaim/"))}
    assert after == before
    assert reconciler.reconcile().outcome == Outcome.HELD


def test_abort_with_nothing_in_progress_is_refused(client: ClusterClient) -> None:
    with pytest.raises(UserError, match="no apply in progress"):
        abort(client, TargetRef(TARGET), "bob")


def test_diff_shows_what_differs_from_the_head_and_from_any_revision(
    cluster: SimCluster, client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    first = remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == Outcome.APPLIED
    source = ["--repo", remote.url, "--target", TARGET, "--cache-dir", str(tmp_path / "diff-cache")]
    code, output = _cli(cluster, tmp_path, "diff", *source)
    assert code == 0, output
    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=40"]),
    )
    remote.commit_and_push("trainer: 40 epochs")
    code, output = _cli(cluster, tmp_path, "diff", *source)
    assert code == 3 and "Deployment/ml-team/trainer" in output and "--epochs=40" in output, output
    code, output = _cli(cluster, tmp_path, "diff", *source, "--revision", first)
    assert code == 0, output
