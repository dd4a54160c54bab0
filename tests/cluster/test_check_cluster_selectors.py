"""`check --cluster` foresees selectors that fail at run time, from the live ResourceSlices (real HTTP).

Two drivers publish on one node: accel.example.com (no productName) and gpu.example.com (productName
H200). A selector failing on every device it can select is denied; one failing on some devices is a
warning naming them, and the pod the placement predicts to hit them is what the simulated scheduler
then fails with SchedulerError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import wait_for

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.sim.controlplane import DriverConfig, install
from reconciler.sim.server import SimCluster

CHANGE = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: big-gpu}
spec:
  selectors:
  - cel: {expression: '%s'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: big-gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: big}
  containers:
  - name: main
    image: trainer:1
    resources: {claims: [{name: gpu}]}
"""


@pytest.fixture
def two_drivers(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    drivers = [
        DriverConfig("accel.example.com", devices_per_node=2, device_prefix="accel", preinstalled=True),
        DriverConfig(
            "gpu.example.com",
            devices_per_node=2,
            attributes={"productName": {"string": "H200"}},
            preinstalled=True,
        ),
    ]
    with SimCluster() as sim:
        plane = install(sim, nodes=1, drivers=drivers)
        try:
            with ClusterClient.for_url(sim.url) as client:
                wait_for(
                    lambda: len(client.list_kind("resource.k8s.io", "ResourceSlice")) == 2, what="slices"
                )
            yield sim, sim.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


def check(kubeconfig: Path, directory: Path) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, ["check", str(directory), "--kubeconfig", str(kubeconfig), "-o", "json", "-q"]
    )
    return result.exit_code, json.loads(result.stdout)


def write(tmp_path: Path, expression: str) -> Path:
    directory = tmp_path / "change"
    directory.mkdir()
    (directory / "change.yaml").write_text(CHANGE % expression)
    return directory


def capacity_findings(report: dict[str, Any], severity: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["rule"] == "capacity" and f["severity"] == severity]


def test_a_selector_failing_on_every_device_is_denied(
    two_drivers: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    _, kubeconfig = two_drivers
    expression = 'device.attributes["gpu.example.com"].memoryClock > 1000'
    code, report = check(kubeconfig, write(tmp_path, expression))
    assert code == 1
    (finding,) = capacity_findings(report, "deny")
    assert finding["ref"] == "DeviceClass/big-gpu" and finding["line"] == 1
    assert finding["msg"].startswith(
        f"DeviceClass/big-gpu: class big-gpu selector #0 ({expression}) fails at run time "
        "(no such key: memoryClock) on 4 device(s) (sim-node-0/accel-0, sim-node-0/accel-1, sim-node-0/gpu-0, "
        "sim-node-0/gpu-1) and matches none: pods default/trainer would stay Pending"
    )
    assert finding["msg"].endswith(
        f'guard it: "memoryClock" in device.attributes["gpu.example.com"] && ({expression})'
    )
    (entry,) = report["capacity"]["selector_errors"]
    assert entry["every"] is True and entry["key"] == "memoryClock" and entry["stuck"] == ["default/trainer"]
    (pod,) = report["capacity"]["pods"]
    assert pod["outcome"] == "error" and "CEL runtime error: no such key: memoryClock" in pod["reason"]


def test_a_selector_failing_on_some_devices_warns_and_the_scheduler_agrees(
    two_drivers: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, kubeconfig = two_drivers
    expression = 'device.attributes["gpu.example.com"].productName == "H200"'
    directory = write(tmp_path, expression)
    code, report = check(kubeconfig, directory)
    assert code == 0 and not capacity_findings(report, "deny")
    (finding,) = capacity_findings(report, "warn")
    assert (
        "fails at run time (no such key: productName) on 2 device(s) (sim-node-0/accel-0, sim-node-0/accel-1), "
        "matching 2 other(s)" in finding["msg"]
    )
    assert "(predicted for default/trainer)" in finding["msg"]
    # accel.example.com's devices come first: the scheduler reaches one and fails, as predicted
    result = CliRunner().invoke(
        cli,
        [
            "apply",
            str(directory),
            "--kubeconfig",
            str(kubeconfig),
            "--grace",
            "3600",
            "--verify-timeout",
            "3600",
            "-q",
        ],
    )
    assert result.exit_code == 1, result.output
    assert (
        "selector error: class big-gpu: selector #0: CEL runtime error: no such key: productName"
        in result.stdout
    )
