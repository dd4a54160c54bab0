"""Workloads that ask extended resources backed by DRA (a DeviceClass's `extendedResourceName`, or the implicit
`deviceclass.resource.kubernetes.io/<class>`), applied and verified against the simulated cluster: the
scheduler's claim for each pod is the evidence, and a class no device matches fails verification with the
reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.verify import chain_of, verify_workloads
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

GPU = "gpu.example.com"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    """One node with two gpu.example.com devices; the driver runs already (its slices are published)."""
    with SimCluster() as cluster:
        plane = install(cluster, nodes=1, devices_per_node=2, driver_preinstalled=True)
        try:
            yield cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


def classes() -> list[dict[str, Any]]:
    """`gpu` backs example.com/gpu with the driver's devices; `h100` selects a model no device has."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "extendedResourceName": "example.com/gpu",
                "selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "h100"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.driver == "{GPU}" && '
                            f'device.attributes["{GPU}"].model == "H100"'
                        }
                    }
                ]
            },
        },
    ]


def deployment(name: str, resource: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example.com/trainer:1",
                            "resources": {"limits": {resource: 1}},
                        }
                    ]
                },
            },
        },
    }


def write_repo(tmp_path: Path, workload: dict[str, Any]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
    (repo / "classes.yaml").write_text(yaml.safe_dump_all(classes(), sort_keys=False))
    (repo / "app.yaml").write_text(yaml.safe_dump_all([namespace, workload], sort_keys=False))
    return repo


def apply(repo: Path, kubeconfig: Path, *extra: str) -> Result:
    args = ["apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "--stage-timeout", "60", *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_deployment_asking_a_class_extended_resource_is_applied_and_verified(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = sim
    workload = deployment("trainer", "example.com/gpu", 2)
    # the container sees the device of its request (the pod status maps the request to it)
    workload["metadata"]["annotations"] = {"dra-gitops.io/verify-exec": "printenv GPU_DEVICE_0"}
    repo = write_repo(tmp_path, workload)
    result = apply(repo, kubeconfig)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("Pod ml/trainer-")]
    assert len(lines) == 2, result.stdout
    devices = set()
    for line in lines:
        # the evidence is the claim the scheduler made for the pod, allocated, reserved, on the pod's node
        assert " claim ml/trainer-" in line and "-extended-resources-" in line, line
        assert "node sim-node-0  reserved  ready" in line, line
        devices.add(line.split(" device ")[1].split()[0])
    assert devices == {f"{GPU}/sim-node-0/gpu-0", f"{GPU}/sim-node-0/gpu-1"}
    assert "verified 1 workload(s), 2 claim(s)" in result.stdout

    with ClusterClient.for_url(cluster.url) as client:
        pods = client.list_kind("", "Pod", "ml")
        claims = {
            ("ml", c["metadata"]["name"]): c
            for c in client.list_kind("resource.k8s.io", "ResourceClaim", "ml")
        }
    assert len(pods) == 2 and len(claims) == 2
    for pod in pods:
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"] == [
            {
                "containerName": "main",
                "resourceName": "example.com/gpu",
                "requestName": "container-0-request-0",
            }
        ]
        (evidence,) = chain_of(pod, claims)
        assert evidence.ok and evidence.allocated and evidence.reserved
        assert evidence.claim == f"ml/{status['resourceClaimName']}"

    # capacity counts the devices those claims hold: a third replica has none left
    workload["spec"]["replicas"] = 3
    more = write_repo(tmp_path / "more", workload)
    done = CliRunner().invoke(
        cli, ["check", str(more), "--cluster", "--kubeconfig", str(kubeconfig), "-o", "json"]
    )
    findings = json.loads(done.stdout)["findings"]
    capacity = [f for f in findings if f["rule"] == "capacity"]
    assert [f["ref"] for f in capacity] == ["Deployment/ml/trainer"], findings
    assert "cannot be scheduled" in capacity[0]["msg"] and "claim extended-resources" in capacity[0]["msg"], (
        capacity
    )


def test_a_class_no_device_matches_fails_verification_with_the_reason(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    _, kubeconfig = sim
    repo = write_repo(tmp_path, deployment("h100-job", "deviceclass.resource.kubernetes.io/h100", 1))
    result = apply(repo, kubeconfig, "--grace", "1s", "--verify-timeout", "60s", "-o", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    text = json.dumps(report)
    assert "cannot allocate all claims" in text
    assert "no device in the cluster matches DeviceClass h100" in text, text
    assert "claim for extended resources deviceclass.resource.kubernetes.io/h100 not created yet" in text, (
        text
    )


def test_an_implicit_resource_of_a_missing_class_fails_verification_at_once(
    sim: tuple[SimCluster, Path],
) -> None:
    # the policy denies this before any write (class-before-template); applied by hand, verify says why
    cluster, _ = sim
    workload = deployment("typo", "deviceclass.resource.kubernetes.io/gpus", 1)
    with ClusterClient.for_url(cluster.url) as client:
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        client.apply(workload)
        result = verify_workloads(client, [workload], timeout=60, grace=60, poll=0.1)
    assert not result.ok
    assert result.terminal.startswith(
        "extended resource deviceclass.resource.kubernetes.io/gpus requests DeviceClass gpus, which does not exist"
    ), result.terminal
    assert result.elapsed < 30
