"""A driver is known by what it runs: a kubelet-plugin DaemonSet with none of our labels (it mounts the
plugin registration directory), a controller Deployment whose env names a DeviceClass's driver, a workload
declared in `drivers:`. Their upgrades, and a change of the ConfigMap a driver reads, need the canary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from helpers import GitRemote
from lookalikes import CONTROLLER_DRIVER, controller_files, plugin_driver_files, write

from reconciler.cli import cli

MAIN = "DaemonSet/cpu-dra/cpu-dra-kubelet-plugin"
CONFIG = "ConfigMap/cpu-dra/cpu-dra-mode"


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    return GitRemote(tmp_path / "git")


def commit(remote: GitRemote, files: dict[str, str], message: str) -> str:
    write(remote.work, files)
    return remote.commit_and_push(message)


def check(remote: GitRemote, base: str, head: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(
        cli, ["check", "--repo", str(remote.work), "--base", base, "--head", head, "-o", "json", *extra]
    )
    return result.exit_code, json.loads(result.stdout), result.stderr


def denials(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["rule"], f["ref"]) for f in report["findings"] if f["severity"] == "deny"]


def test_an_unlabelled_kubelet_plugin_upgrade_of_every_node_is_denied(remote: GitRemote) -> None:
    base = commit(remote, plugin_driver_files(), "driver v1")
    head = commit(remote, plugin_driver_files(image="cpu-dra:v2"), "every node to v2")
    code, report, stderr = check(remote, base, head, "-v")
    assert code == 1
    assert denials(report) == [("driver-canary", MAIN)]
    assert (
        f"driver workload {MAIN} (kubelet-plugin, driver ?): recognized by mounts the kubelet plugin "
        "directory /var/lib/kubelet/plugins_registry" in stderr
    )
    # Through the canary first, then promoted: both pass.
    canary = commit(remote, plugin_driver_files(canary_image="cpu-dra:v2"), "canary to v2")
    assert check(remote, base, canary)[0] == 0
    promoted = commit(remote, plugin_driver_files(image="cpu-dra:v2", canary_image="cpu-dra:v2"), "promote")
    assert check(remote, canary, promoted)[0] == 0


def test_a_driver_configmap_change_without_the_canary_running_that_content_is_denied(
    remote: GitRemote,
) -> None:
    base = commit(remote, plugin_driver_files(), "mode grouped")
    head = commit(remote, plugin_driver_files(mode="individual"), "mode individual everywhere")
    code, report, _ = check(remote, base, head)
    assert code == 1
    [finding] = [f for f in report["findings"] if f["severity"] == "deny"]
    assert (finding["rule"], finding["ref"]) == ("driver-canary", CONFIG)
    assert f"changes the config driver {MAIN} reads" in finding["msg"]
    assert "canary DaemonSet/cpu-dra/cpu-dra-kubelet-plugin-canary reads different content" in finding["msg"]

    # The canary's own copy gets the new content first; then the main ConfigMap may follow.
    canary = commit(remote, plugin_driver_files(canary_mode="individual"), "canary mode individual")
    assert check(remote, base, canary)[0] == 0
    promoted = commit(remote, plugin_driver_files(mode="individual", canary_mode="individual"), "promote")
    code, report, _ = check(remote, canary, promoted)
    assert code == 0, report
    # Both changed in one commit: the canary has not run it yet.
    both = commit(remote, plugin_driver_files(mode="x", canary_mode="x"), "both at once")
    assert check(remote, promoted, both)[0] == 1


def test_a_controller_deployment_naming_a_known_driver_is_part_of_the_driver(remote: GitRemote) -> None:
    base = commit(remote, controller_files(canary_image="gpu-controller:v1"), "controller v1 and its canary")
    head = commit(remote, controller_files(image="gpu-controller:v2", canary_image="gpu-controller:v1"), "v2")
    code, report, stderr = check(remote, base, head, "-v")
    assert code == 1
    assert denials(report) == [("driver-canary", "Deployment/gpu-operator/gpu-controller")]
    assert (
        f"driver workload Deployment/gpu-operator/gpu-controller (controller, driver {CONTROLLER_DRIVER}): "
        f"recognized by container controller names driver {CONTROLLER_DRIVER}" in stderr
    )
    canary = commit(remote, controller_files(canary_image="gpu-controller:v2"), "canary controller v2")
    assert check(remote, base, canary)[0] == 0


def test_a_workload_declared_in_drivers_is_a_driver(remote: GitRemote) -> None:
    files = controller_files()
    # No DeviceClass names the driver: only the declaration makes the Deployment a driver's.
    docs = [d for d in yaml.safe_load_all(files["cluster/gpu.yaml"]) if d["kind"] != "DeviceClass"]
    files["cluster/gpu.yaml"] = yaml.safe_dump_all(docs, sort_keys=False)
    files["dra-gitops.yaml"] = yaml.safe_dump(
        {
            "paths": ["cluster"],
            "drivers": [
                {
                    "name": CONTROLLER_DRIVER,
                    "workloads": [
                        {"kind": "Deployment", "namespace": "gpu-operator", "name": "gpu-controller"}
                    ],
                }
            ],
        }
    )
    base = commit(remote, files, "declared")
    files["cluster/gpu.yaml"] = files["cluster/gpu.yaml"].replace("gpu-controller:v1", "gpu-controller:v2")
    head = commit(remote, files, "v2")
    code, report, stderr = check(remote, base, head, "-v")
    assert code == 1, report
    assert denials(report) == [("driver-canary", "Deployment/gpu-operator/gpu-controller")]
    assert f"recognized by declared in `drivers` of dra-gitops.yaml (driver {CONTROLLER_DRIVER})" in stderr


def test_a_config_typo_is_an_error_at_its_line_with_the_closest_key(
    remote: GitRemote, tmp_path: Path
) -> None:
    write(tmp_path / "repo", {"dra-gitops.yaml": "params: {}\npath: [cluster]\n", **plugin_driver_files()})
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "repo"), "-q"])
    assert result.exit_code == 1
    assert "dra-gitops.yaml:2: unknown key `path`; did you mean `paths`?" in result.stderr
    write(tmp_path / "repo", {"dra-gitops.yaml": "config:\n  paths: [cluster]\n"})
    result = CliRunner().invoke(cli, ["check", str(tmp_path / "repo"), "-q"])
    assert result.exit_code == 1 and "a `config` block is read only in the List form" in result.stderr
