"""`dra-gitops apply` of a commit whose class selector fails at run time: it fails at once, diagnosed.

The simulated cluster (two nodes, two gpu.example.com devices each, the driver not yet deployed) runs the
example repository with its class reading `productName`, which the devices do not publish.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    with SimCluster() as cluster:
        plane = install(
            cluster, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}]
        )
        try:
            yield cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def copy_example(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLE, target)
    return target


H200_SELECTOR = (
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].productName == "H200"'
)
GUARD = '"productName" in device.attributes["gpu.example.com"]'


def test_a_selector_failing_at_run_time_fails_at_once_without_waiting_the_grace(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    """The class reads an attribute the devices do not publish: every pod fails with SchedulerError.

    The grace and the timeouts are far longer than the test may run: returning at all shows that
    verification did not wait for them (the failure is terminal at once, never "exhaustion"). The
    driver is installed by the same commit, so the offline prediction cannot see the devices yet.
    """
    _, kubeconfig = sim
    repo = copy_example(tmp_path)
    gpu_class = repo / "20-classes" / "gpu-class.yaml"
    gpu_class.write_text(
        gpu_class.read_text().replace(
            'expression: device.driver == "gpu.example.com"', f"expression: '{H200_SELECTOR}'"
        )
    )
    args = [
        "apply",
        str(repo),
        "--kubeconfig",
        str(kubeconfig),
        "--grace",
        "3600",
        "--verify-timeout",
        "3600",
    ]
    result = run(*args, "--stage-timeout", "120", "-q")
    assert result.exit_code == 1, result.output
    text = result.stdout
    assert (
        "verification failed: pod ml-team/" in text
        and ": selector error: class gpu.example.com: selector #0: CEL runtime error: no such key: productName"
        in text
    ), text
    assert "[selector-error] ResourceClaim/ml-team/" in text and "[exhaustion]" not in text, text
    assert "class gpu.example.com selector #0 fails at run time (no such key: productName)" in text
    assert f"DeviceClass gpu.example.com spec.selectors[0]: {H200_SELECTOR}" in text
    assert (
        f"guard the selector in DeviceClass gpu.example.com spec.selectors[0]: {GUARD} && ({H200_SELECTOR})"
        in text
    )
    assert "numbers: selector 0, key productName, class gpu.example.com" in text
