"""`dra-gitops apply` of the tree it last delivered: the live objects compared, no dry-run, no write.

Over real HTTP against the simulated cluster, whose audit log says which requests each apply sent.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.desired import load_directories
from reconciler.delivery.pipeline import DeliverHooks, DeliverOptions, deliver
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    with SimCluster(audit=True) as cluster:
        plane = install(
            cluster, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}]
        )
        try:
            yield cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


def apply(kubeconfig: Path, repo: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(
        cli,
        ["apply", str(repo), "--kubeconfig", str(kubeconfig), "-o", "json", "--stage-timeout", "60", *extra],
    )
    return result.exit_code, json.loads(result.stdout), result.stderr


def writes_sent(cluster: SimCluster, since: int) -> list[str]:
    """Every write request (a dry-run is one too: a PATCH) served since the audit log held `since` events."""
    assert cluster.api.audit is not None
    events = cluster.api.audit.events[since:]
    return [f"{e.request.verb} {e.request.path}" for e in events if e.request.verb in WRITE_VERBS]


def audited(cluster: SimCluster) -> int:
    assert cluster.api.audit is not None
    return len(cluster.api.audit.events)


def test_reapplying_the_delivered_tree_sends_no_dry_run_and_no_write(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = sim
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    code, first, _ = apply(kubeconfig, repo)
    assert code == 0 and first["outcome"] == "applied", first

    before = audited(cluster)
    code, again, progress = apply(kubeconfig, repo)
    assert code == 0 and again["outcome"] == "applied", again
    assert writes_sent(cluster, before) == []
    assert again["counts"]["unchanged"] == first["counts"]["create"] and again["writes"] == 0
    assert "as last delivered: live objects compared, no dry-run" in progress
    assert again["evidence"], "the workloads are verified as after any apply"
    stages = again["stages"]
    assert [s["label"] for s in stages] == [s["label"] for s in first["stages"] if s["applied"]]
    assert all(s["applied"] == 0 and s["deleted"] == 0 and not s["error"] for s in stages)
    assert sum(s["unchanged"] for s in stages) == again["counts"]["unchanged"]


def test_an_object_edited_by_hand_takes_the_full_dry_run_and_is_put_back(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = sim
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    assert apply(kubeconfig, repo)[0] == 0
    trainer = cluster.store.get("apps", "deployments", "ml-team", "trainer")
    assert trainer is not None
    trainer["spec"]["replicas"] = 1
    cluster.store.update("apps", "deployments", trainer)

    code, again, progress = apply(kubeconfig, repo)
    assert code == 0, again
    assert "(server-side dry-run)" in progress and "as last delivered" not in progress
    assert again["counts"]["update"] == 1
    live = cluster.store.get("apps", "deployments", "ml-team", "trainer")
    assert live is not None and live["spec"]["replicas"] == 2


class Killed(Exception):
    """The process dies mid-apply (as kill -9 would): nothing after this stage runs."""


def test_after_a_delivery_of_another_tree_died_mid_apply_the_first_one_is_dry_run_again(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    """The dead delivery wrote part of its tree (a label on the class): re-applying the first tree must
    remove it, which only a real apply does (a comparison of live copies cannot see a field to drop)."""
    cluster, kubeconfig = sim
    good = tmp_path / "good"
    shutil.copytree(EXAMPLE, good)
    assert apply(kubeconfig, good)[0] == 0

    bad = tmp_path / "bad"
    shutil.copytree(EXAMPLE, bad)
    gpu_class = bad / "20-classes" / "gpu-class.yaml"
    gpu_class.write_text(
        gpu_class.read_text().replace(
            "  name: gpu.example.com\n", "  name: gpu.example.com\n  labels: {tier: gpu}\n", 1
        )
    )

    def die_after_classes(label: str) -> None:
        if label.startswith("2"):
            raise Killed(label)

    with ClusterClient.from_kubeconfig(str(kubeconfig), None) as client, pytest.raises(Killed):
        deliver(
            client,
            load_directories([bad], DEFAULT_LIMITS),
            CheckOptions(),
            DeliverOptions(),
            lambda _line: None,
            hooks=DeliverHooks(after_stage=die_after_classes),
        )
    live = cluster.store.get("resource.k8s.io", "deviceclasses", "", "gpu.example.com")
    assert live is not None and live["metadata"]["labels"].get("tier") == "gpu"

    code, again, progress = apply(kubeconfig, good)
    assert code == 0, again
    assert "as last delivered" not in progress
    live = cluster.store.get("resource.k8s.io", "deviceclasses", "", "gpu.example.com")
    assert live is not None and "tier" not in (live["metadata"].get("labels") or {})
