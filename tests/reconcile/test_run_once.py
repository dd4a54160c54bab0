"""`Controller.run_once` (what `run --once` runs): a pass per target whose Lease it takes, then released."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import GitRemote, wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targets import Target
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests-example"
TARGET = "gpu-cluster"


@pytest.fixture
def client() -> Iterator[ClusterClient]:
    with SimCluster() as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            with ClusterClient.for_url(sim.url) as c:
                yield c
        finally:
            plane.stop()


def replica(client: ClusterClient, target: Target, tmp_path: Path, identity: str) -> Controller:
    options = ControllerOptions(
        cache_dir=tmp_path / identity,
        port=0,
        identity=identity,
        stage_timeout=60,
        verify_timeout=60,
        check=CheckOptions(),
    )
    return Controller(client, [target], options)


def lease_holder(client: ClusterClient, target: Target) -> Any:
    lease = client.get(
        client.resource_for("coordination.k8s.io/v1", "Lease"), target.state_namespace, target.lease_name
    )
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def test_run_once_passes_the_targets_it_can_hold_and_releases_their_leases(
    client: ClusterClient, tmp_path: Path
) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    sha = remote.commit_and_push("example")
    target = Target(name=TARGET, repo=remote.url, grace=5.0)

    other = replica(client, target, tmp_path, "replica-b")
    other.ensure_namespaces()
    other.leases.start()  # renews every retry period, as a live replica does
    assert lease_holder(client, target) == "replica-b"
    # Another replica holds the target: nothing runs here, and its Lease stays where it is.
    assert replica(client, target, tmp_path, "replica-a").run_once() == {}
    assert lease_holder(client, target) == "replica-b"
    other.leases.stop()
    other.close()

    results = replica(client, target, tmp_path, "replica-a").run_once()
    assert list(results) == [TARGET]
    result = results[TARGET]
    assert result is not None
    assert (result.outcome, result.sha, result.outcome.exit_code) == ("applied", sha, 0)
    assert lease_holder(client, target) in ("", None)


def test_a_killed_run_once_leaves_a_lease_the_next_run_once_takes_over(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    sha = remote.commit_and_push("example")
    with SimCluster() as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
            args = ["--repo", remote.url, "--target", TARGET, "--kubeconfig", str(kubeconfig)]

            def once(identity: str, **popen: Any) -> subprocess.Popen[str]:
                command = [sys.executable, "-m", "reconciler", "run", "--once", "--listen", "127.0.0.1:0"]
                env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
                extra = ["--identity", identity, "--lease-duration", "3s", "--grace", "5s"]
                return subprocess.Popen([*command, *args, *extra], env=env, text=True, **popen)

            with ClusterClient.for_url(sim.url) as client:
                target = Target(name=TARGET, repo=remote.url)
                first = once("first-once", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wait_for(lambda: lease_holder(client, target) == "first-once", timeout=60, interval=0.01)
                first.send_signal(signal.SIGKILL)
                first.wait(timeout=30)
                assert lease_holder(client, target) == "first-once"  # nobody released it

                second = once("second-once", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                out, err = second.communicate(timeout=120)
                assert second.returncode == 0, err
                assert "skipped" not in err
                # It waited out the dead holder's 3 s Lease, took it, converged and released it.
                assert out.split()[:3] == [f"{TARGET}:", "applied", sha]
                assert "taken over by second-once from first-once" in err
                assert lease_holder(client, target) in ("", None)
        finally:
            plane.stop()
