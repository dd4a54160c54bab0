"""The harness of the reconcile-pass tests: a simulated cluster with the example driver, a bare Git
repository seeded with `manifests-example/`, and a `Reconciler` following it through `GitSource` (the path
`dra-gitops run` takes)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import GitRemote

from reconciler.cluster import applyset
from reconciler.cluster.apply import strip_server_fields
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.keep import KeptRevision
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "manifests-example"
TARGET = "gpu-cluster"


BROKEN_DRIVER = "registry.example.com/gpu-example-driver:v0.4.0-broken"


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    """Two nodes with two devices each (4 in all; the example needs 3); the first node is a canary node.

    Its kubelet crash-loops BROKEN_DRIVER, with the restart back-off sped up 20 times.
    """
    with SimCluster() as sim:
        plane = install(
            sim,
            nodes=2,
            devices_per_node=2,
            node_labels=[{"dra-gitops.io/canary": "true"}, {}],
            crash_images=[BROKEN_DRIVER],
            time_scale=0.05,
        )
        try:
            yield sim
        finally:
            plane.stop()


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    return remote


@pytest.fixture
def client(cluster: SimCluster) -> Iterator[ClusterClient]:
    with ClusterClient.for_url(cluster.url) as c:
        yield c


def reconciler_for(
    client: ClusterClient, remote: GitRemote, tmp_path: Path, grace: float = 5.0
) -> Reconciler:
    source = GitSource(remote.url, tmp_path / "cache", branch="main")
    options = ReconcileOptions(
        DeliverOptions(target=TARGET, grace=grace, stage_timeout=60, verify_timeout=60)
    )
    revisions = GitRevisions(source, kept=KeptRevision(client, TARGET))  # as the controller builds it
    return Reconciler(client, revisions, options, CheckOptions())


def edit(remote: GitRemote, relative: str, change: Any) -> None:
    path = remote.work / relative
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(docs[0])
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def live_specs(client: ClusterClient) -> dict[str, Any]:
    """Every managed object's spec-like content as the cluster has it (server fields stripped)."""
    set_id = applyset.applyset_id(TARGET, applyset.DEFAULT_NAMESPACE)
    found: dict[str, Any] = {}
    for group, kind in [
        ("apps", "Deployment"),
        ("apps", "DaemonSet"),
        ("resource.k8s.io", "DeviceClass"),
        ("resource.k8s.io", "ResourceClaimTemplate"),
        ("resource.k8s.io", "ResourceClaim"),
        ("", "Pod"),
        ("", "ConfigMap"),
    ]:
        for item in client.list_kind(group, kind, label_selector=f"{applyset.PART_OF_LABEL}={set_id}"):
            meta = item["metadata"]
            body = strip_server_fields(item)
            body["metadata"] = {
                k: v for k, v in body["metadata"].items() if k in ("name", "namespace", "labels")
            }
            found[f"{kind}/{meta.get('namespace', '')}/{meta['name']}"] = body
    return found
