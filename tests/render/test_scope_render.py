"""Scope of rendered and loaded objects: a Helm chart rendering a cluster-scoped CRD kind puts no namespace on
it, a namespaced one gets the release's; `check` shows cluster-scoped kinds without a namespace."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from helpers import crd_of

from reconciler.cli import cli
from reconciler.delivery.desired import load_directories
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.render.capabilities import cluster_capabilities, from_served

NFD = "nfd.k8s-sigs.io"


RULE = {
    "apiVersion": f"{NFD}/v1alpha1",
    "kind": "NodeFeatureRule",
    "metadata": {"name": "gpu-labels"},
    "spec": {},
}
FEATURE = {"apiVersion": f"{NFD}/v1alpha1", "kind": "NodeFeature", "metadata": {"name": "node-a"}, "spec": {}}
POOL_REQUEST = {
    "apiVersion": "resource.k8s.io/v1alpha3",
    "kind": "ResourcePoolStatusRequest",
    "metadata": {"name": "gpu-pools"},
    "spec": {"driver": "gpu.example.com"},
}


def write(path: Path, *docs: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))


def chart_repo(root: Path, *, crds_in_chart: bool) -> Path:
    chart = root / "charts" / "nfd-rules"
    (chart / "Chart.yaml").parent.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: nfd-rules\nversion: 0.1.0\n")
    write(chart / "templates" / "rule.yaml", RULE)
    write(chart / "templates" / "feature.yaml", FEATURE)
    write(
        chart / "templates" / "config.yaml",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
    )
    crds = [crd_of(NFD, "NodeFeatureRule", "Cluster"), crd_of(NFD, "NodeFeature", "Namespaced")]
    if crds_in_chart:
        write(chart / "crds" / "nfd.yaml", *crds)
    else:
        write(root / "cluster" / "crds.yaml", *crds)
    write(
        root / "cluster" / "ns.yaml", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nfd"}}
    )
    config = {
        "paths": ["cluster"],
        "charts": [{"releaseName": "nfd-rules", "chart": "charts/nfd-rules", "namespace": "nfd"}],
    }
    (root / "dra-gitops.yaml").write_text(yaml.safe_dump(config))
    return root


def loaded(root: Path) -> dict[str, dict]:
    return {str(m.ref): m.body for m in load_directories([root], DEFAULT_LIMITS).manifests.manifests}


def test_a_chart_rendering_a_cluster_scoped_crd_kind_injects_no_namespace(tmp_path: Path) -> None:
    found = loaded(chart_repo(tmp_path, crds_in_chart=True))
    assert "namespace" not in found["NodeFeatureRule/gpu-labels"]["metadata"]
    assert found["NodeFeature/nfd/node-a"]["metadata"]["namespace"] == "nfd"  # a namespaced CRD kind
    assert found["ConfigMap/nfd/c"]["metadata"]["namespace"] == "nfd"


def test_a_crd_elsewhere_in_the_desired_state_scopes_the_charts_objects(tmp_path: Path) -> None:
    found = loaded(chart_repo(tmp_path, crds_in_chart=False))
    assert "namespace" not in found["NodeFeatureRule/gpu-labels"]["metadata"]
    assert found["NodeFeature/nfd/node-a"]["metadata"]["namespace"] == "nfd"


def test_the_clusters_discovery_scopes_a_kind_whose_crd_is_only_on_the_cluster(tmp_path: Path) -> None:
    write(tmp_path / "rule.yaml", RULE)
    served = {NFD: {"NodeFeatureRule": ["v1alpha1"]}}
    capabilities = from_served("v1.36.0", served, "the cluster", {(NFD, "NodeFeatureRule"): False})
    with cluster_capabilities(capabilities):
        assert list(loaded(tmp_path)) == ["NodeFeatureRule/gpu-labels"]
    assert list(loaded(tmp_path)) == ["NodeFeatureRule/default/gpu-labels"]  # offline: nothing knows it


def test_check_shows_cluster_scoped_kinds_without_a_namespace(tmp_path: Path) -> None:
    write(
        tmp_path / "crds.yaml",
        crd_of(NFD, "NodeFeatureRule", "Cluster"),
        crd_of(NFD, "NodeFeature", "Namespaced"),
    )
    write(tmp_path / "objects.yaml", RULE, FEATURE, POOL_REQUEST)
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "-v", "-o", "json"])
    assert result.exit_code == 0, result.output
    plan = result.stderr
    assert "+ create NodeFeatureRule/gpu-labels " in plan
    assert "+ create ResourcePoolStatusRequest/gpu-pools " in plan
    assert "+ create NodeFeature/default/node-a " in plan
    assert "/default/gpu-labels" not in plan and "/default/gpu-pools" not in plan
    assert "scope unknown" not in plan
    report = json.loads(result.stdout)
    unvalidated = {u["ref"] for u in report["not_validated"]}
    assert "ResourcePoolStatusRequest/gpu-pools" in unvalidated


def test_check_says_once_per_kind_when_nothing_knows_its_scope(tmp_path: Path) -> None:
    write(tmp_path / "objects.yaml", RULE, {**RULE, "metadata": {"name": "other"}})
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "-v"])
    assert result.stderr.count("scope unknown for NodeFeatureRule.nfd.k8s-sigs.io") == 1, result.stderr
    assert "+ create NodeFeatureRule/default/gpu-labels " in result.stderr


def test_a_kustomization_namespace_leaves_a_cluster_scoped_crd_kind_without_one(tmp_path: Path) -> None:
    write(
        tmp_path / "crds.yaml",
        crd_of(NFD, "NodeFeatureRule", "Cluster"),
        crd_of(NFD, "NodeFeature", "Namespaced"),
    )
    write(tmp_path / "objects.yaml", RULE, FEATURE)
    (tmp_path / "kustomization.yaml").write_text("namespace: nfd\nresources: [crds.yaml, objects.yaml]\n")
    found = loaded(tmp_path)
    assert "namespace" not in found["NodeFeatureRule/gpu-labels"]["metadata"]  # kustomize had put nfd there
    assert found["NodeFeature/nfd/node-a"]["metadata"]["namespace"] == "nfd"
