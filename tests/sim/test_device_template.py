"""`sim serve --device-template`: vendor attributes and capacities on the simulated devices."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from helpers import wait_for

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.sim.devicetemplate import TemplateError, parse_device_template

TEMPLATE = """\
gpu.nvidia.com:
  devicesPerNode: 3
  attributes:
    type: gpu
    productName: NVIDIA H100 80GB HBM3
    cudaComputeCapability: {version: 9.0.0}
    index: 7
  capacity:
    memory: 80Gi
    compute: 8
"""


def test_the_template_becomes_driver_configs() -> None:
    (config,) = parse_device_template(yaml.safe_load(TEMPLATE), "t.yaml")
    assert config == {
        "name": "gpu.nvidia.com",
        "devices_per_node": 3,
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "index": {"int": 7},
        },
        "capacity": {"memory": {"value": "80Gi"}, "compute": {"value": "8"}},
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "t.yaml: a device template maps driver names to their devices"),
        ({"d": {"attrs": {}}}, "t.yaml: d: unknown key(s) attrs"),
        ({"d": {"capacity": {"memory": "lots"}}}, "t.yaml: d.capacity.memory: not a quantity: 'lots'"),
        ({"d": {"attributes": {"v": {"version": "nine"}}}}, "t.yaml: d.attributes.v: invalid semver"),
        ({"d": {"attributes": {"x": [1]}}}, "t.yaml: d.attributes.x: an attribute is a string"),
        ({"d": {"devicesPerNode": -1}}, "t.yaml: d.devicesPerNode: a count of devices"),
    ],
)
def test_bad_templates_name_the_entry(data: Any, message: str) -> None:
    with pytest.raises(TemplateError) as err:
        parse_device_template(data, "t.yaml")
    assert str(err.value).startswith(message)


def test_a_bad_template_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("gpu.nvidia.com:\n  capacity: {memory: lots}\n")
    result = CliRunner().invoke(cli, ["sim", "serve", "--device-template", str(path)])
    assert result.exit_code == 2
    assert f"{path}: gpu.nvidia.com.capacity.memory: not a quantity" in result.output


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ClusterClient]:
    template = tmp_path / "nvidia.yaml"
    template.write_text(TEMPLATE)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "sim",
            "serve",
            "--nodes",
            "1",
            "--driver-preinstalled",
            "--driver",
            "gpu.example.com",
            "--device-template",
            str(template),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        with ClusterClient.for_url(url) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_served_devices_carry_the_template_and_nvidia_style_classes_allocate(served: ClusterClient) -> None:
    client = served
    slices = wait_for(
        lambda: len(s := client.list_kind("resource.k8s.io", "ResourceSlice")) == 2 and s, what="two slices"
    )
    nvidia = next(s for s in slices if s["spec"]["driver"] == "gpu.nvidia.com")
    devices = nvidia["spec"]["devices"]
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1", "gpu-2"]
    assert devices[0]["attributes"]["type"] == {"string": "gpu"}
    assert devices[0]["attributes"]["index"] == {"int": 7}  # the template wins over the default
    assert "model" not in devices[0]["attributes"] and "uuid" in devices[0]["attributes"]
    assert devices[0]["capacity"] == {"memory": {"value": "80Gi"}, "compute": {"value": "8"}}
    example = next(s for s in slices if s["spec"]["driver"] == "gpu.example.com")
    assert example["spec"]["devices"][0]["attributes"]["model"] == {"string": "LATEST-GPU-MODEL"}

    client.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
                        }
                    }
                ]
            },
        }
    )
    client.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "h100", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "capacity": {"requests": {"compute": "4"}},
                            },
                        }
                    ]
                }
            },
        }
    )
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "cuda", "namespace": "default"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "h100"}],
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
                ],
            },
        }
    )
    claims = client.find_kind("resource.k8s.io", "ResourceClaim")
    assert claims is not None
    claim = wait_for(
        lambda: (
            ((c := client.get(claims, "default", "h100")) or {}).get("status", {}).get("allocation") and c
        ),
        what="the claim allocated",
    )
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "gpu.nvidia.com" and result["device"] == "gpu-0"
