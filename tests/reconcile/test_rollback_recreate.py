"""A rollback puts back a claim whose immutable spec changed since: deleted and created again, verified."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import GitRemote

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.requested import RequestedDelivery, new_request
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"
SPARE = "30-claims/spare-claim.yaml"


def spare_claim(count: int) -> str:
    return f"""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: spare
  namespace: ml-team
spec:
  devices:
    requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          allocationMode: ExactCount
          count: {count}
"""


@pytest.fixture
def client() -> Iterator[ClusterClient]:
    with SimCluster() as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            with ClusterClient.for_url(sim.url) as c:
                yield c
        finally:
            plane.stop()


def test_rollback_recreates_a_claim_whose_spec_differs(client: ClusterClient, tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    (remote.work / SPARE).write_text(spare_claim(1))
    first = remote.commit_and_push("example with a spare claim for one device")
    source = GitSource(remote.url, tmp_path / "cache", branch="main")
    options = ReconcileOptions(
        DeliverOptions(target="gpu-cluster", grace=5.0, stage_timeout=60, verify_timeout=60)
    )
    reconciler = Reconciler(client, GitRevisions(source), options, CheckOptions())
    assert reconciler.reconcile().outcome == "applied"
    (remote.work / SPARE).unlink()
    remote.commit_and_push("no spare claim")
    assert reconciler.reconcile().outcome == "applied"  # pruned once verified
    (remote.work / SPARE).write_text(spare_claim(2))
    head = remote.commit_and_push("a spare claim for two devices, under the same name")
    assert reconciler.reconcile().outcome == "applied"

    result = RequestedDelivery(reconciler).run(new_request("rollback", first, False, "tester"), head)

    assert result.outcome == "rolled-back", result.message
    assert result.delivery is not None
    assert result.delivery.recreated == ["ResourceClaim/ml-team/spare"]
    live = client.get(client.resource_for("resource.k8s.io/v1", "ResourceClaim"), "ml-team", "spare")
    assert live is not None
    assert live["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
