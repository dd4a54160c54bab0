"""`Controller.run_once` (what `run --once` runs): a pass per target whose Lease it takes, then released."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import GitRemote

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.controller import Controller, ControllerOptions
from reconciler.loop.targets import Target
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"
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
    other.leases.run_round()
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
