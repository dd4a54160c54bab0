"""Cluster-scoped custom kinds against the simulated cluster: the desired state and the live objects give the
same reference, so `apply` prunes what left the tree and nothing else, whether the CRD is in the desired
state or only on the cluster (discovery); `plan` shows them without a namespace."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from helpers import crd_of
from test_apply_command import run, sim  # noqa: F401  (fixture)

from reconciler.cluster.client import ClusterClient
from reconciler.sim.server import SimCluster

NFD = "nfd.k8s-sigs.io"


def rule(name: str) -> dict:
    return {
        "apiVersion": f"{NFD}/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": name},
        "spec": {},
    }


FEATURE = {"apiVersion": f"{NFD}/v1alpha1", "kind": "NodeFeature", "metadata": {"name": "node-a"}, "spec": {}}


def write(path: Path, *docs: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))


def apply(repo: Path, kubeconfig: Path) -> dict:
    result = run(
        "apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json", "--stage-timeout", "60"
    )
    report = json.loads(result.stdout)
    assert result.exit_code == 0, report
    return report


def live(cluster: SimCluster, kind: str) -> dict[str, str]:
    with ClusterClient.for_url(cluster.url) as client:
        return {
            item["metadata"]["name"]: item["metadata"].get("namespace", "")
            for item in client.list_kind(NFD, kind)
        }


def test_cluster_scoped_crd_objects_are_kept_while_desired_and_pruned_when_gone(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster, kubeconfig = sim
    repo = tmp_path / "repo"
    write(
        repo / "00-crds.yaml",
        crd_of(NFD, "NodeFeatureRule", "Cluster"),
        crd_of(NFD, "NodeFeature", "Namespaced"),
    )
    write(repo / "10-rules.yaml", rule("gpu-labels"), rule("nic-labels"), FEATURE)
    apply(repo, kubeconfig)
    assert live(cluster, "NodeFeatureRule") == {"gpu-labels": "", "nic-labels": ""}
    assert live(cluster, "NodeFeature") == {"node-a": "default"}
    again = apply(repo, kubeconfig)
    assert again["counts"]["delete"] == 0, again
    assert live(cluster, "NodeFeatureRule") == {"gpu-labels": "", "nic-labels": ""}
    write(repo / "10-rules.yaml", rule("gpu-labels"), FEATURE)
    pruned = apply(repo, kubeconfig)
    assert pruned["counts"]["delete"] == 1, pruned
    assert live(cluster, "NodeFeatureRule") == {"gpu-labels": ""}
    assert live(cluster, "NodeFeature") == {"node-a": "default"}


def test_a_crd_only_on_the_cluster_scopes_the_desired_objects_by_discovery(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster, kubeconfig = sim
    operator = tmp_path / "operator"  # the CRD comes from another tool (NFD's own chart)
    write(operator / "crd.yaml", crd_of(NFD, "NodeFeatureRule", "Cluster"))
    apply_other = run(
        "apply",
        str(operator),
        "--kubeconfig",
        str(kubeconfig),
        "--target",
        "nfd",
        "-q",
        "--stage-timeout",
        "60",
    )
    assert apply_other.exit_code == 0, apply_other.output
    repo = tmp_path / "repo"
    write(repo / "rules.yaml", rule("gpu-labels"))
    plan = run("plan", str(repo), "--kubeconfig", str(kubeconfig), "-q")
    assert "NodeFeatureRule/gpu-labels" in plan.stdout and "default/gpu-labels" not in plan.stdout, (
        plan.stdout
    )
    apply(repo, kubeconfig)
    again = apply(repo, kubeconfig)
    assert again["counts"]["delete"] == 0, again
    assert live(cluster, "NodeFeatureRule") == {"gpu-labels": ""}
