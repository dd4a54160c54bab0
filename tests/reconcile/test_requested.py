"""`rollback` and `sync --revision` against the simulated cluster, following a real bare Git repository.

Passes run through `Reconciler` as `dra-gitops run` does; the verbs run as the command line runs them
(`--via local`: the command takes the target's Lease and delivers with its own rights). A rollback goes
only to a revision the history shows applied and verified, through the policies, under the Lease.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from helpers import GitRemote, wait_for
from pass_support import TARGET, edit, reconciler_for

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.lease import LeaseLock
from reconciler.loop.store.state import StateStore
from reconciler.sim.server import SimCluster

DRIVER = "10-driver/kubelet-plugin.yaml"
TRAINER = "40-workloads/trainer.yaml"


@pytest.fixture
def sim(cluster: SimCluster, tmp_path: Path) -> tuple[SimCluster, Path]:
    """The pass harness's cluster and a kubeconfig for it, for the verbs run as the command line does."""
    return cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig")


def driver_image(image: str) -> Any:
    return lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image=image)


def trainer_args(*args: str) -> Any:
    return lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=list(args))


def verb(kubeconfig: Path, remote: GitRemote, tmp_path: Path, *args: str) -> Result:
    """`dra-gitops <args> --via local` for the target, with its own Git cache."""
    base = ["--repo", remote.url, "--target", TARGET, "--kubeconfig", str(kubeconfig), "--grace", "5s"]
    cache = ["--cache-dir", str(tmp_path / "verb-cache"), "--via", "local"]
    return CliRunner().invoke(cli, [*args, *base, *cache])


def live_image(client: ClusterClient) -> str:
    ds = client.get(client.resource_for("apps/v1", "DaemonSet"), "gpu-system", "gpu-example-kubelet-plugin")
    assert ds is not None
    return str(ds["spec"]["template"]["spec"]["containers"][0]["image"])


def live_args(client: ClusterClient) -> list[str]:
    trainer = client.get(client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
    assert trainer is not None
    return list(trainer["spec"]["template"]["spec"]["containers"][0]["args"])


def test_a_rollback_to_a_denied_commit_is_refused_and_with_force_recorded(
    sim: tuple[SimCluster, Path], client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(remote, DRIVER, driver_image("registry.example.com/gpu-example-driver:v0.4.0"))
    denied = remote.commit_and_push("driver v0.4.0 straight to main")
    assert reconciler.reconcile().outcome == "denied"
    store = StateStore(client, TARGET)
    before = store.load()

    refused = verb(sim[1], remote, tmp_path, "rollback", denied)

    assert refused.exit_code == 1, refused.output
    assert f"{denied[:12]} was never applied and verified here (its last record, " in refused.output
    assert "apply denied)" in refused.output
    assert "--force" in refused.output
    assert live_image(client).endswith("v0.3.0")
    after = store.load()
    assert (after.last_good, after.history) == (before.last_good, before.history)

    forced = verb(sim[1], remote, tmp_path, "rollback", denied, "--force", "-o", "json")

    assert forced.exit_code == 0, forced.output
    assert live_image(client).endswith("v0.4.0")
    state = store.load()
    record = state.history[0]
    assert (record.sha, record.operation, record.outcome) == (denied, "rollback", "applied")
    assert record.requested_by and record.from_sha == good
    assert record.forced is not None and len(record.forced) == 2
    assert record.forced[0].startswith(f"{denied[:12]} was never applied and verified")
    assert record.forced[1].startswith("policy denied: 10-driver/kubelet-plugin.yaml:")
    assert "driver-canary" in record.forced[1]
    assert any(d["rule"] == "driver-canary" for d in record.decisions or [])
    # status agrees with itself: the last good revision is the last attempt, applied.
    assert state.last_good == denied
    assert state.last_attempted is not None
    assert (state.last_attempted.sha, state.last_attempted.outcome) == (denied, "applied")
    shown = CliRunner().invoke(cli, ["status", "--target", TARGET, "--kubeconfig", str(sim[1])])
    assert shown.exit_code == 0
    assert f"requested by {record.requested_by} with --force" in shown.output


def test_a_rollback_to_a_commit_never_applied_is_refused_and_one_by_history_id_holds(
    sim: tuple[SimCluster, Path], client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    first = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(remote, TRAINER, trainer_args("--epochs=20"))
    skipped = remote.commit_and_push("20 epochs (never delivered: the next commit came first)")
    edit(remote, TRAINER, trainer_args("--epochs=30"))
    head = remote.commit_and_push("30 epochs")
    assert reconciler.reconcile().outcome == "applied"
    store = StateStore(client, TARGET)
    state = store.load()
    ids = [(r.id, r.sha, r.operation) for r in state.history]
    assert ids == [(2, head, "apply"), (1, first, "apply")]

    refused = verb(sim[1], remote, tmp_path, "rollback", skipped[:10])
    assert refused.exit_code == 1, refused.output
    assert "no revision of the history" in refused.output
    refused = verb(sim[1], remote, tmp_path, "rollback", skipped)
    assert refused.exit_code == 1, refused.output
    assert "never applied and verified" in refused.output
    assert live_args(client) == ["--epochs=30"]

    done = verb(sim[1], remote, tmp_path, "rollback", "1")

    assert done.exit_code == 0, done.output
    assert live_args(client) == ["--epochs=10"]
    state = store.load()
    assert state.last_good == first and state.hold == head
    assert [(r.id, r.sha, r.operation, r.outcome) for r in state.history[:1]] == [
        (3, first, "rollback", "applied")
    ]
    # status shows the ids `rollback ID` takes.
    shown = CliRunner().invoke(cli, ["status", "--target", TARGET, "--kubeconfig", str(sim[1])])
    assert f"    3  {state.history[0].at}  rollback {first[:12]}  applied" in shown.output
    # The pass holds there: the head is not delivered again until a newer commit or `retry`.
    assert reconciler.reconcile().outcome == "held"
    assert live_args(client) == ["--epochs=10"]


def test_sync_delivers_an_older_and_a_newer_revision_through_the_policies(
    sim: tuple[SimCluster, Path], client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    older = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(remote, TRAINER, trainer_args("--epochs=20"))
    head = remote.commit_and_push("20 epochs")
    assert reconciler.reconcile().outcome == "applied"

    done = verb(sim[1], remote, tmp_path, "sync", "--revision", older)
    assert done.exit_code == 0, done.output
    assert live_args(client) == ["--epochs=10"]
    state = StateStore(client, TARGET).load()
    assert (state.last_good, state.hold) == (older, head)
    assert (state.history[0].operation, state.history[0].requested_by is not None) == ("sync", True)
    assert reconciler.reconcile().outcome == "held"

    # A newer commit on another branch, not followed: delivered by sha, checked like any other.
    remote.git("checkout", "--quiet", "-b", "feature")
    edit(remote, TRAINER, trainer_args("--epochs=40"))
    newer = remote.commit("40 epochs, on a branch")
    remote.git("push", "--quiet", "origin", "feature")
    done = verb(sim[1], remote, tmp_path, "sync", "--revision", newer)
    assert done.exit_code == 0, done.output
    assert live_args(client) == ["--epochs=40"]
    assert StateStore(client, TARGET).load().last_good == newer

    edit(remote, DRIVER, driver_image("registry.example.com/gpu-example-driver:v0.4.0"))
    denied = remote.commit("driver v0.4.0 straight to main, on a branch")
    remote.git("push", "--quiet", "origin", "feature")
    writes = client.writes_sent
    refused = verb(sim[1], remote, tmp_path, "sync", "--revision", denied)
    assert refused.exit_code == 1, refused.output
    assert "driver-canary" in refused.output
    assert live_image(client).endswith("v0.3.0")
    state = StateStore(client, TARGET).load()
    assert state.last_good == newer
    assert (state.history[0].sha, state.history[0].operation, state.history[0].outcome) == (
        denied,
        "sync",
        "denied",
    )
    assert client.writes_sent == writes  # the verb's own client wrote; this one did not

    # A newer commit on the followed branch ends the hold: the loop delivers it.
    remote.git("checkout", "--quiet", "main")
    edit(remote, TRAINER, trainer_args("--epochs=50"))
    remote.commit_and_push("50 epochs")
    assert reconciler.reconcile().outcome == "applied"
    assert live_args(client) == ["--epochs=50"]


def test_a_rollback_takes_the_lease_so_it_never_races_a_pass(
    sim: tuple[SimCluster, Path], client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    first = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(remote, TRAINER, trainer_args("--epochs=20"))
    remote.commit_and_push("20 epochs")
    assert reconciler.reconcile().outcome == "applied"
    lease = "dra-gitops-" + TARGET
    replica = LeaseLock(
        client, "dra-gitops", lease, "replica-a", duration=15, renew_deadline=10, retry_period=2
    )
    assert replica.try_acquire_or_renew()  # a replica holds the target: a pass may be running

    refused = verb(sim[1], remote, tmp_path, "rollback", first, "--lease-wait", "1s")

    assert refused.exit_code == 1, refused.output
    assert "the target's Lease is held by replica-a" in refused.output
    assert live_args(client) == ["--epochs=20"]
    assert replica.release()

    # While the rollback runs, a replica trying for the Lease never gets it in the middle of it.
    store = StateStore(client, TARGET)
    done = threading.Event()
    overlaps: list[str] = []

    def contend() -> None:
        other = LeaseLock(
            client, "dra-gitops", lease, "replica-b", duration=15, renew_deadline=10, retry_period=2
        )
        while not done.is_set():
            if other.try_acquire_or_renew():
                marker = store.load().in_progress
                if marker is not None:
                    overlaps.append(f"replica-b took the Lease during {marker.operation} of {marker.sha}")
                other.release()
            done.wait(0.2)

    thread = threading.Thread(target=contend)
    thread.start()
    try:
        rolled = verb(sim[1], remote, tmp_path, "rollback", first)
    finally:
        done.set()
        thread.join()
    assert rolled.exit_code == 0, rolled.output
    assert overlaps == []
    assert live_args(client) == ["--epochs=10"]
    assert store.load().history[0].operation == "rollback"


def test_a_rollback_that_fails_verification_puts_the_last_good_revision_back(
    sim: tuple[SimCluster, Path], client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    first = remote.commit_and_push("example: two trainers and a notebook, 3 of the 4 devices")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(remote, TRAINER, lambda d: d["spec"].update(replicas=1))
    good = remote.commit_and_push("one trainer")
    assert reconciler.reconcile().outcome == "applied"
    # Someone else's pods take the two devices left: two trainers no longer fit. One device each, as the
    # two free devices may be on different nodes (which trainer the scale-down removed is not fixed).
    claims = client.resource_for("resource.k8s.io/v1", "ResourceClaim")
    for index in range(2):
        name = f"hog-{index}"
        client.apply(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
                    }
                },
            }
        )
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                },
            }
        )
    for index in range(2):
        wait_for(
            lambda n=f"hog-{index}": ((client.get(claims, "default", n) or {}).get("status") or {}).get(
                "allocation"
            ),
            30,
            f"hog-{index} allocated",
        )

    done = verb(sim[1], remote, tmp_path, "rollback", first)

    assert done.exit_code == 1, done.output
    state = StateStore(client, TARGET).load()
    assert state.last_good == good
    # As a pass records a failed commit: the failure (newest), then the rollback that put back last good.
    assert [(r.sha, r.operation, r.outcome) for r in state.history[:2]] == [
        (first, "rollback", "verify-failed"),
        (good, "rollback", "applied"),
    ]
    failed, put_back = state.history[:2]
    assert failed.rolled_back_to == good and failed.rollback == "applied" and failed.requested_by
    assert put_back.requested_by == failed.requested_by and put_back.from_sha == first
    assert state.last_attempted is not None and state.last_attempted.rolled_back is True
    trainer = client.get(client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
    assert trainer is not None and trainer["spec"]["replicas"] == 1
