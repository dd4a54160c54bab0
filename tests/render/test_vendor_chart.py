"""A chart shaped like a vendor's (lookalikes.chart_named_after_itself): its workloads named after the chart,
a canary release told apart by `nameOverride`, a controller Deployment, a `.Capabilities` fallback, a
multi-line `fail`, `crds/`, a dependency. Helm renders it as the cluster would."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from lookalikes import CHART_DRIVER, chart_config, chart_named_after_itself, write

from reconciler.cli import cli
from reconciler.delivery.desired import load_directories
from reconciler.errors import DraGitopsError
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.model.objects import Manifest
from reconciler.sim.server import SimCluster

MAIN_PLUGIN = "DaemonSet/gpu-system/gpu-lookalike-kubelet-plugin"
CANARY_PLUGIN = "DaemonSet/gpu-system/gpu-lookalike-canary-kubelet-plugin"
MAIN_CONTROLLER = "Deployment/gpu-system/gpu-lookalike-controller"
CANARY_CONTROLLER = "Deployment/gpu-system/gpu-lookalike-canary-controller"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    write(root, chart_named_after_itself())
    write(root, {"dra-gitops.yaml": chart_config(canary={})})
    monkeypatch.chdir(root)
    return root


def objects(root: Path) -> dict[str, Manifest]:
    return {str(m.ref): m for m in load_directories([root], DEFAULT_LIMITS).manifests.manifests}


def set_config(root: Path, **releases: Any) -> None:
    write(root, {"dra-gitops.yaml": chart_config(**releases)})


def test_the_canary_release_pairs_by_kind_driver_and_role_whatever_the_names(repo: Path) -> None:
    found = objects(repo)
    assert found[CANARY_PLUGIN].annotations["dra-gitops.io/canary-for"] == "gpu-lookalike-kubelet-plugin"
    assert found[CANARY_CONTROLLER].annotations["dra-gitops.io/canary-for"] == "gpu-lookalike-controller"
    assert "dra-gitops.io/canary-for" not in found[MAIN_PLUGIN].annotations
    result = CliRunner().invoke(cli, ["check", str(repo), "-o", "json", "-v"])
    assert result.exit_code == 0, result.output
    assert f"driver workload {CANARY_CONTROLLER} (canary controller, driver {CHART_DRIVER})" in result.stderr


def test_a_canary_release_none_of_whose_workloads_pair_is_an_error_naming_both(repo: Path) -> None:
    set_config(repo, canary={"driverName": "other.example"})
    with pytest.raises(DraGitopsError) as error:
        objects(repo)
    message = str(error.value)
    assert "release gpu-canary (charts/gpu-lookalike) is the canary of release gpu" in message
    assert "none of its driver workloads" in message and MAIN_PLUGIN in message


def test_the_main_release_running_on_canary_nodes_too_is_warned(repo: Path) -> None:
    set_config(repo, main={"canaryNodes": "any"}, canary={})
    result = CliRunner().invoke(cli, ["check", str(repo), "-o", "json"])
    report = json.loads(result.stdout)
    warned = [f for f in report["findings"] if f["rule"] == "driver-canary" and f["severity"] == "warn"]
    assert any(
        f["ref"] == MAIN_PLUGIN and "can also run on the canary's nodes" in f["msg"] for f in warned
    ), warned


def test_capabilities_come_from_the_config_and_the_chart_falls_back(repo: Path) -> None:
    assert objects(repo)[f"DeviceClass/{CHART_DRIVER}"].api_version == "resource.k8s.io/v1"
    config = yaml.safe_load((repo / "dra-gitops.yaml").read_text())
    config["kubernetesVersion"] = "1.33"
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(config))
    # 1.33 serves DeviceClass in v1beta2 at most: the chart's own fallback fires, as `helm install` would.
    assert objects(repo)[f"DeviceClass/{CHART_DRIVER}"].api_version == "resource.k8s.io/v1beta2"


def test_the_charts_kube_version_constraint_is_checked(repo: Path) -> None:
    chart = repo / "charts/gpu-lookalike/Chart.yaml"
    chart.write_text(chart.read_text() + 'kubeVersion: ">= 1.34.0-0"\n')
    assert objects(repo)  # 1.36 by default
    config = yaml.safe_load((repo / "dra-gitops.yaml").read_text())
    config["kubernetesVersion"] = "1.33"
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(DraGitopsError, match=r"requires kubeVersion >= 1.34.0-0, which is incompatible"):
        objects(repo)


def test_a_missing_dependency_is_an_error(repo: Path) -> None:
    write(repo, chart_named_after_itself(dependency="gpu-common"))
    with pytest.raises(DraGitopsError) as error:
        objects(repo)
    assert "found in Chart.yaml, but missing in charts/ directory: gpu-common" in str(error.value)
    assert error.value.where == "charts/gpu-lookalike/Chart.yaml"


@pytest.mark.parametrize("output", ["text", "json", "sarif"])
def test_a_multi_line_fail_message_is_shown_whole(repo: Path, output: str) -> None:
    set_config(repo, main={"driverName": ""})
    result = CliRunner().invoke(cli, ["check", str(repo), "-q", "-o", output])
    assert result.exit_code == 1
    shown = result.output if output == "text" else result.stdout
    if output != "text":
        shown = json.dumps(json.loads(shown))  # the message's newlines, escaped
        assert "then render again." in shown and "driverName: gpu.chart.example" in shown
    else:
        assert (
            "Set it to the driver's name, for example:\n  driverName: gpu.chart.example\nthen render again."
            in shown
        )


def test_objects_of_crds_keep_their_folder(repo: Path) -> None:
    crd = objects(repo)["CustomResourceDefinition/gpusettings.chart.example"]
    assert crd.path == "charts/gpu-lookalike/crds/gpu-settings.yaml"
    assert os.path.isfile(repo / crd.path)


def test_a_release_namespace_nobody_creates_is_a_finding_until_create_namespace(
    repo: Path, cluster: SimCluster, tmp_path: Path
) -> None:
    kubeconfig = str(cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    result = CliRunner().invoke(cli, ["check", str(repo), "--kubeconfig", kubeconfig, "-q", "-o", "json"])
    report = json.loads(result.stdout)
    missing = [f for f in report["findings"] if f["rule"] == "namespace-missing"]
    assert result.exit_code == 1 and len(missing) == 1, report["findings"]
    assert "namespace gpu-system is created by no manifest and the cluster has none" in missing[0]["msg"]
    assert "set `createNamespace: true` on release gpu" in missing[0]["msg"]

    config = yaml.safe_load((repo / "dra-gitops.yaml").read_text())
    config["charts"][0]["createNamespace"] = True
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(config))
    assert objects(repo)["Namespace/gpu-system"].rendered_by.startswith("createNamespace of release gpu")
    result = CliRunner().invoke(cli, ["check", str(repo), "--kubeconfig", kubeconfig, "-q", "-o", "json"])
    report = json.loads(result.stdout)
    assert not [f for f in report["findings"] if f["rule"] == "namespace-missing"], report["findings"]


def test_plan_renders_the_chart_with_the_clusters_capabilities(repo: Path, tmp_path: Path) -> None:
    # A 1.33 cluster serving resource.k8s.io v1beta2 (and v1beta1) only: the chart's own fallback fires, as
    # `helm install` there would, and the dry-run accepts the class.
    with SimCluster(served_versions=("v1beta2", "v1beta1"), kube_version="v1.33.4") as old:
        kubeconfig = str(old.write_kubeconfig(tmp_path / "kubeconfig"))
        config = yaml.safe_load((repo / "dra-gitops.yaml").read_text())
        config["charts"][0]["createNamespace"] = True
        (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(config))
        result = CliRunner().invoke(cli, ["plan", str(repo), "--kubeconfig", kubeconfig, "-q", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "resource.k8s.io/v1beta2" in result.stdout and 'resource.k8s.io/v1"' not in result.stdout


def test_a_canary_release_named_like_the_main_one_says_to_use_name_override(repo: Path) -> None:
    set_config(repo, canary={"nameOverride": ""})
    with pytest.raises(DraGitopsError) as error:
        objects(repo)
    assert f"renders {MAIN_CONTROLLER} like release gpu" in str(error.value)
    assert "nameOverride" in str(error.value)
