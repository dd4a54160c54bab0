"""`dra-gitops run` end to end on the simulated cluster: webhooks, readiness, leases, crash recovery.

The controller runs as a real process (`python -m reconciler run`) against `SimCluster` through a
kubeconfig, following bare Git repositories made in tmp; tests talk to it over HTTP like GitHub would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from controller_support import (
    REPO,
    SECRET,
    Running,
    edit,
    example_remote,
    free_port,
    github_push,
    readyz,
    state_of,
)
from helpers import GitRemote, wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.leaseshard import HEARTBEAT_PREFIX
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    with SimCluster() as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            yield sim, sim.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


def test_webhook_push_applies_rolls_back_a_bad_commit_and_refuses_forgeries(
    cluster: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    remote = example_remote(tmp_path / "git")
    good = remote.commit_and_push("example")
    run = Running(
        [
            "--repo",
            remote.url,
            "--kubeconfig",
            str(kubeconfig),
            "--poll-interval",
            "1h",
            "--grace",
            "5s",
            "--webhook-secret",
            SECRET,
            "--cache-dir",
            str(tmp_path / "cache"),
            "--lease-duration",
            "6",
        ],
        free_port(),
        tmp_path / "run.log",
    )
    try:
        wait_for(lambda: run.get("/healthz") == 200, 30, "healthz")
        wait_for(lambda: run.get("/readyz") == 200, 60, "ready after the first pass")
        assert state_of(sim).last_good == good

        edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
        bad = remote.commit_and_push("4 trainers: more GPUs than exist")
        # A forged call changes nothing and is counted.
        body, headers = github_push(remote, secret="wrong")
        assert run.post("/hooks/github", body, headers) == 401
        assert 'result="unauthorized"' in run.text("/metrics")
        assert (attempted := state_of(sim).last_attempted) is not None and attempted.sha == good

        body, headers = github_push(remote)
        assert run.post("/hooks/github", body, headers) in (200, 202)
        state = wait_for(
            lambda: (
                (s := state_of(sim)).last_attempted
                and s.last_attempted.sha == bad
                and s.in_progress is None
                and s
            ),
            90,
            "the bad commit attempted and rolled back",
        )
        assert state.last_good == good
        assert state.last_attempted is not None and state.last_attempted.rolled_back is True
        metrics = run.text("/metrics")
        assert "dra_gitops_rollbacks_total" in metrics
    finally:
        assert run.stop() == 0, run.log.read_text()[-3000:]

    status = subprocess.run(
        [sys.executable, "-m", "reconciler", "status", "--kubeconfig", str(kubeconfig), "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    data = json.loads(status.stdout)
    assert set(data) >= {"lastGood", "lastAttempted", "inProgress", "history"}
    assert [(r["sha"], r["outcome"]) for r in data["history"][:3]] == [
        (bad, "verify-failed"),
        (good, "applied"),
        (good, "applied"),
    ]
    assert status.returncode == 1  # the last attempt failed (and was rolled back)


def test_two_replicas_share_three_targets_and_take_over_from_a_dead_one(
    cluster: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    targets = []
    for index in range(3):
        remote = GitRemote(tmp_path / f"git{index}")
        (remote.work / "cm.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"settings-{index}", "namespace": "default"},
                    "data": {"index": str(index)},
                }
            )
        )
        remote.commit_and_push(f"target {index}")
        targets.append({"name": f"t{index}", "repo": remote.url, "branch": "main", "pollInterval": "1s"})
    config = tmp_path / "targets.yaml"
    config.write_text(yaml.safe_dump({"targets": targets}))
    common = ["--config", str(config), "--kubeconfig", str(kubeconfig), "--lease-duration", "3"]
    first = Running(
        [*common, "--identity", "replica-a", "--cache-dir", str(tmp_path / "ca")],
        free_port(),
        tmp_path / "a.log",
    )
    second = Running(
        [*common, "--identity", "replica-b", "--cache-dir", str(tmp_path / "cb")],
        free_port(),
        tmp_path / "b.log",
    )
    try:

        def holders() -> dict[str, str]:
            with ClusterClient.for_url(sim.url) as client:
                leases = client.list_kind("coordination.k8s.io", "Lease", "dra-gitops")
            return {
                x["metadata"]["name"]: (x.get("spec") or {}).get("holderIdentity") or ""
                for x in leases
                if not x["metadata"]["name"].startswith(HEARTBEAT_PREFIX)  # the targets' Leases only
            }

        held = wait_for(
            lambda: (h := holders()) and len([v for v in h.values() if v]) == 3 and h, 30, "3 leases held"
        )
        assert set(held.values()) <= {"replica-a", "replica-b"}
        for index in range(3):
            wait_for(lambda i=index: state_of(sim, f"t{i}").last_good, 30, f"t{index} applied")
        # Exactly one replica reconciled each target: each state history names one applied record.
        for index in range(3):
            applied = [r for r in state_of(sim, f"t{index}").history if r.outcome == "applied"]
            assert len(applied) == 1
        # Sharded: each replica holds at most ceil(3 / 2) = 2 of the three targets.
        held = wait_for(
            lambda: (h := holders()) and set(h.values()) == {"replica-a", "replica-b"} and h,
            60,
            "the targets shared by both replicas",
        )
        # Kill -9 one replica: its targets move to the other within the lease duration.
        victim = first if "replica-a" in held.values() else second
        survivor = "replica-b" if victim is first else "replica-a"
        victim.stop(signal.SIGKILL)
        wait_for(lambda: set(holders().values()) == {survivor}, 30, "every lease held by the survivor")
    finally:
        for run in (first, second):
            run.stop()


def test_kill_9_between_stages_then_restart_converges_to_one_revision(
    cluster: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    remote = example_remote(tmp_path / "git")
    good = remote.commit_and_push("example")
    args = [
        "--repo",
        remote.url,
        "--kubeconfig",
        str(kubeconfig),
        "--poll-interval",
        "1s",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--lease-duration",
        "3",
    ]
    run = Running(args, free_port(), tmp_path / "run1.log")
    wait_for(lambda: state_of(sim).last_good == good, 60, "first commit applied")
    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=40"]),
    )
    newer = remote.commit_and_push("trainer: 40 epochs")
    # Kill the controller as soon as the new pass marked itself in progress (between two stages).
    wait_for(lambda: (p := state_of(sim).in_progress) and p.sha == newer, 60, "pass in progress", 0.01)
    run.stop(signal.SIGKILL)
    assert state_of(sim).in_progress is not None

    restarted = Running(args, free_port(), tmp_path / "run2.log")
    try:
        state = wait_for(
            lambda: (s := state_of(sim)).in_progress is None and s.last_good == newer and s, 90, "converged"
        )
        assert state.history[0].outcome == "applied" and state.history[0].sha == newer
        assert any(r.outcome == "interrupted" and r.sha == newer for r in state.history)
    finally:
        assert restarted.stop() == 0


def test_a_webhook_to_the_replica_without_the_lease_reaches_the_holder(
    cluster: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    # Behind the Service a push reaches either replica; polling once an hour, only the relay is fast.
    sim, kubeconfig = cluster
    remote = GitRemote(tmp_path / "git")
    settings = remote.work / "cm.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "s", "namespace": "default"},
                "data": {"v": "1"},
            }
        )
    )
    first = remote.commit_and_push("v1")
    common = [
        "--repo", remote.url, "--kubeconfig", str(kubeconfig), "--poll-interval", "1h",
        "--webhook-secret", SECRET, "--lease-duration", "6",
    ]  # fmt: skip
    replicas = {
        identity: Running(
            [*common, "--identity", identity, "--cache-dir", str(tmp_path / identity)],
            free_port(),
            tmp_path / f"{identity}.log",
        )
        for identity in ("replica-a", "replica-b")
    }
    try:
        wait_for(lambda: state_of(sim).last_good == first, 60, "the first commit applied")

        def holder() -> str:
            with ClusterClient.for_url(sim.url) as client:
                lease = client.get(
                    client.resource_for("coordination.k8s.io/v1", "Lease"), "dra-gitops", "dra-gitops-default"
                )
            return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

        leader = wait_for(holder, 30, "a holder")
        other = replicas["replica-b" if leader == "replica-a" else "replica-a"]
        # The standby serves its hooks once it has started (it may still be importing on a loaded machine).
        wait_for(lambda: other.get("/healthz") == 200, 60, "the standby serving")
        settings.write_text(settings.read_text().replace("v: '1'", "v: '2'"))
        second = remote.commit_and_push("v2")
        body, headers = github_push(remote)
        assert other.post("/hooks/github", body, headers) == 202
        wait_for(lambda: state_of(sim).last_good == second, 30, "the push applied by the holder")
        assert holder() == leader  # the relay did not move the Lease
        assert "requested by another replica" in replicas[leader].log.read_text()
    finally:
        for run in replicas.values():
            run.stop()


def test_a_deleted_state_namespace_turns_not_ready_and_is_created_again(
    cluster: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    remote = example_remote(tmp_path / "git")
    remote.commit_and_push("example")
    args = ["--repo", remote.url, "--kubeconfig", str(kubeconfig), "--poll-interval", "1h", "--grace", "5s"]
    run = Running([*args, "--lease-duration", "3", "--identity", "only"], free_port(), tmp_path / "run.log")
    with ClusterClient.for_url(sim.url) as client:
        namespaces = client.resource_for("v1", "Namespace")
        configmaps = client.resource_for("v1", "ConfigMap")
        leases = client.resource_for("coordination.k8s.io/v1", "Lease")
        try:
            wait_for(lambda: run.get("/readyz") == 200, 60, "ready after the first pass")
            # Another controller's object with a finalizer keeps the namespace terminating for a while.
            held = {"apiVersion": "v1", "kind": "ConfigMap"}
            held["metadata"] = {"name": "held", "namespace": "dra-gitops", "finalizers": ["example.com/hold"]}
            client.create(configmaps, held)
            client.delete(namespaces, None, "dra-gitops")
            status, text = wait_for(
                lambda: (answer := readyz(run))[0] == 503 and "must exist" in answer[1] and answer,
                30,
                "not ready while the state namespace is terminating",
            )
            assert "namespace dra-gitops must exist (it holds the Lease and state of default)" in text
            assert "it is being deleted" in text

            live = client.get(configmaps, "dra-gitops", "held")
            assert live is not None
            live["metadata"]["finalizers"] = []
            client.replace(configmaps, live)
            wait_for(lambda: run.get("/readyz") == 200, 60, "ready again once the namespace is back")
            recreated = client.get(namespaces, None, "dra-gitops")
            assert recreated is not None and not recreated["metadata"].get("deletionTimestamp")
            lease = wait_for(lambda: client.get(leases, "dra-gitops", "dra-gitops-default"), 30, "the Lease")
            assert lease["spec"]["holderIdentity"] == "only"
        finally:
            assert run.stop() == 0, run.log.read_text()[-3000:]
    log = run.log.read_text()
    assert "created namespace dra-gitops" in log
    # Said once while it lasts, not at every lease round.
    assert log.count("must exist") == 1, log


def test_readyz_reflects_a_target_whose_source_cannot_be_fetched(
    cluster: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    remote = example_remote(tmp_path / "git")
    remote.commit_and_push("example")
    args = ["--repo", remote.url, "--kubeconfig", str(kubeconfig), "--poll-interval", "1h", "--grace", "5s"]
    run = Running(
        [*args, "--webhook-token", SECRET, "--cache-dir", str(tmp_path / "c")], free_port(), tmp_path / "log"
    )
    trigger = {"Authorization": f"Bearer {SECRET}"}
    try:
        wait_for(lambda: run.get("/readyz") == 200, 60, "ready after the first pass")
        moved = remote.bare.with_name("moved.git")
        remote.bare.rename(moved)  # the Git server is gone
        assert run.post("/hooks/generic", b"", trigger) == 202
        status, text = wait_for(lambda: (a := readyz(run))[0] == 503 and a, 60, "not ready: no source")
        assert text.startswith("not ready: target default: ")
        moved.rename(remote.bare)
        assert run.post("/hooks/generic", b"", trigger) == 202
        wait_for(lambda: run.get("/readyz") == 200, 60, "ready again once the source answers")
    finally:
        assert run.stop() == 0, run.log.read_text()[-3000:]
