"""`collect_inventory` against the simulated cluster over real HTTP, and the pure rendering/helpers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.inventory import Inventory, build_inventory, collect_inventory, render_inventory
from reconciler.cluster.objects import NOT_SERVED_EXPLANATION, deprecated_versions, pod_health
from reconciler.errors import EnvironmentProblem
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "dra-examples"

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
}


def docs(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / path).read_text()) if d]


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def claim(name: str, ns: str, cls: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}},
    }


def pod_with_claim(name: str, ns: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def claims_of(client: ClusterClient, ns: str) -> list[dict[str, Any]]:
    return client.list_kind("resource.k8s.io", "ResourceClaim", ns)


@pytest.fixture
def preinstalled() -> Iterator[tuple[SimCluster, ControlPlane, ClusterClient]]:
    with SimCluster() as cluster:
        plane = install(cluster, nodes=2, devices_per_node=2, driver_preinstalled=True)
        client = ClusterClient.for_url(cluster.url)
        wait_for(lambda: len(client.list_kind("resource.k8s.io", "ResourceSlice")) == 2, what="2 slices")
        yield cluster, plane, client
        client.close()


def test_inventory_counts_devices_and_allocations(
    preinstalled: tuple[SimCluster, ControlPlane, ClusterClient],
) -> None:
    _, _, client = preinstalled
    for obj in (GPU_CLASS, namespace("ml"), claim("held", "ml"), claim("waiting", "ml")):
        client.apply(obj)
    client.apply(pod_with_claim("user", "ml", "held"))
    wait_for(
        lambda: any(c["status"].get("allocation") for c in claims_of(client, "ml") if c.get("status")),
        what="claim allocated",
    )

    inv = collect_inventory(client)

    assert inv.server_version == "v1.36.2"
    assert inv.served_versions == ["v1"] and inv.preferred_version == "v1" and inv.deprecated_versions == {}
    assert [(n.name, n.ready) for n in inv.nodes] == [("sim-node-0", True), ("sim-node-1", True)]
    assert [(c.name, c.driver) for c in inv.classes] == [("gpu.example.com", "gpu.example.com")]
    assert sorted((s.driver, s.pool, s.node, s.devices) for s in inv.slices) == [
        ("gpu.example.com", "sim-node-0", "sim-node-0", 2),
        ("gpu.example.com", "sim-node-1", "sim-node-1", 2),
    ]
    gpu = inv.drivers["gpu.example.com"]
    assert (gpu.devices, gpu.allocated, gpu.free, gpu.slices, gpu.pools) == (4, 1, 3, 2, 2)
    assert gpu.classes == ["gpu.example.com"]
    assert inv.claims == 2 and inv.allocated_claims == 1
    assert [(c.namespace, c.name, c.classes) for c in inv.pending_claims] == [
        ("ml", "waiting", ["gpu.example.com"])
    ]
    assert inv.pending_claims[0].age_seconds is not None and inv.pending_claims[0].age_seconds < 60

    data = json.loads(render_inventory(inv, "json"))
    assert set(data) == {
        "server_version",
        "resource_api",
        "nodes",
        "driver_pods",
        "classes",
        "slices",
        "drivers",
        "totals",
        "pending_claims",
        "taint_rules",
        "warnings",
    }
    assert data["resource_api"] == {"served": ["v1"], "preferred": "v1", "deprecated": {}}
    assert data["totals"] == {
        "devices": 4,
        "allocated": 1,
        "free": 3,
        "claims": 2,
        "allocated_claims": 1,
        "pending_claims": 1,
    }
    assert data["drivers"]["gpu.example.com"]["free"] == 3
    text = render_inventory(inv, "text")
    assert "gpu.example.com: 4 device(s), 1 allocated, 3 free" in text
    assert "pending ml/waiting" in text
    md = render_inventory(inv, "markdown")
    assert md.startswith("## DRA inventory") and "| gpu.example.com | 4 | 1 | 3 |" in md


def test_inventory_driver_pods_health_and_crash() -> None:
    with SimCluster() as cluster:
        plane = install(cluster, nodes=2, devices_per_node=2, driver_preinstalled=False)
        client = ClusterClient.for_url(cluster.url)
        client.apply(namespace("dra-example-driver"))
        (ds,) = docs("driver/kubeletplugin-daemonset.yaml")
        client.apply(ds)
        client.apply(GPU_CLASS)
        wait_for(
            lambda: len(client.list_kind("resource.k8s.io", "ResourceSlice")) == 2, what="slices published"
        )
        wait_for(
            lambda: all(p.ready for p in collect_inventory(client).driver_pods), what="driver pods ready"
        )
        inv = collect_inventory(client)
        assert len(inv.driver_pods) == 2
        assert {p.driver for p in inv.driver_pods} == {"gpu.example.com"}
        assert {p.node for p in inv.driver_pods} == {"sim-node-0", "sim-node-1"}
        assert all(
            p.workload == "DaemonSet/dra-example-driver/dra-example-driver-kubeletplugin"
            for p in inv.driver_pods
        )
        assert inv.drivers["gpu.example.com"].healthy_pods == 2
        assert inv.warnings == []

        plane.crash_driver("gpu.example.com")

        def all_crashed() -> Inventory | None:
            current = collect_inventory(client)
            return current if all(p.crash_loop for p in current.driver_pods) else None

        crashed = wait_for(all_crashed, what="driver pods in CrashLoopBackOff")
        assert all(not p.healthy and p.restarts >= 1 for p in crashed.driver_pods)
        assert any("CrashLoopBackOff" in w for w in crashed.warnings)
        wait_for(lambda: not client.list_kind("resource.k8s.io", "ResourceSlice"), what="slices withdrawn")
        crashed = collect_inventory(client)
        assert crashed.drivers["gpu.example.com"].devices == 0
        assert any("publishes no ResourceSlices" in w for w in crashed.warnings)
        client.close()


def test_inventory_marks_not_ready_nodes(
    preinstalled: tuple[SimCluster, ControlPlane, ClusterClient],
) -> None:
    _, plane, client = preinstalled
    plane.set_node_ready("sim-node-1", False)
    inv = collect_inventory(client)
    assert [(n.name, n.ready) for n in inv.nodes] == [("sim-node-0", True), ("sim-node-1", False)]
    assert any(w.startswith("node sim-node-1 is NotReady") for w in inv.warnings)
    assert "node.kubernetes.io/not-ready:NoSchedule" in inv.nodes[1].taints


def test_inventory_reports_deprecated_versions_and_taint_rules() -> None:
    with SimCluster(served_versions=("v1", "v1beta2", "v1beta1", "v1alpha3")) as cluster:
        client = ClusterClient.for_url(cluster.url)
        inv = collect_inventory(client)
        assert inv.served_versions == ["v1", "v1beta2", "v1beta1", "v1alpha3"]
        assert set(inv.deprecated_versions) == {"v1beta2", "v1beta1", "v1alpha3"}
        assert "v1 (preferred), v1beta2 (deprecated)" in render_inventory(inv, "text")
        assert inv.taint_rules == []
        client.close()


def test_inventory_on_a_v1beta1_cluster() -> None:
    with SimCluster(served_versions=("v1beta1",)) as cluster:
        install(cluster, nodes=1, devices_per_node=3, driver_preinstalled=True)
        client = ClusterClient.for_url(cluster.url)
        wait_for(lambda: client.list_kind("resource.k8s.io", "ResourceSlice"), what="slice")
        inv = collect_inventory(client)
        assert inv.server_version.startswith("v1.32")
        assert inv.served_versions == ["v1beta1"] and inv.deprecated_versions == {}
        assert inv.drivers["gpu.example.com"].devices == 3
        client.close()


def test_no_dra_api_over_http() -> None:
    try:
        cluster = SimCluster(served_versions=())
    except ValueError as exc:
        pytest.skip(f"the simulated cluster cannot switch resource.k8s.io off (served_versions=() -> {exc})")
    with cluster:
        client = ClusterClient.for_url(cluster.url)
        with pytest.raises(EnvironmentProblem) as err:
            collect_inventory(client)
        assert err.value.exit_code == 4


class _NoDraClient:
    """Just enough of ClusterClient for a cluster whose discovery has no resource.k8s.io group."""

    def server_version(self) -> str:
        return "v1.31.4"

    def served_versions(self, group: str) -> list[str]:
        return []


def test_no_dra_api_is_an_environment_problem_with_an_explanation() -> None:
    with pytest.raises(EnvironmentProblem) as err:
        collect_inventory(_NoDraClient())  # type: ignore[arg-type]
    message = str(err.value)
    assert err.value.exit_code == 4
    assert message.startswith("resource.k8s.io: Kubernetes v1.31.4:")
    assert NOT_SERVED_EXPLANATION in message
    for needle in (
        "1.34 and later serve resource.k8s.io/v1 by default",
        "--runtime-config=resource.k8s.io/v1beta1=true",
        "DynamicResourceAllocation",
        "v1alpha3=true",
    ):
        assert needle in message


# ---- pure ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served", "version", "expected"),
    [
        (["v1"], "v1.34.0", set()),
        (["v1", "v1beta1"], "v1.34.0", {"v1beta1"}),
        (["v1", "v1beta2", "v1beta1"], "v1.35.1", {"v1beta1"}),
        (["v1", "v1beta2", "v1beta1", "v1alpha3"], "v1.36.2", {"v1beta2", "v1beta1", "v1alpha3"}),
        (["v1beta1"], "v1.32.3", set()),
        (["v1beta2", "v1beta1"], "v1.33.0", set()),
        (["v1alpha3"], "v1.31.0", set()),
        (["v1beta1"], "garbage", set()),
    ],
)
def test_deprecated_versions(served: list[str], version: str, expected: set[str]) -> None:
    assert set(deprecated_versions(served, version)) == expected


def test_pod_health_crash_loop() -> None:
    pod = {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {"name": "a", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                {"name": "b", "restartCount": 1, "state": {"running": {}}},
            ],
        }
    }
    h = pod_health(pod)
    assert (h.phase, h.ready, h.restarts, h.crash_loop) == ("Running", False, 5, True)
    assert h.describe() == "Running, not ready, 5 restart(s), CrashLoopBackOff"


def _built() -> Inventory:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    old = (now - timedelta(minutes=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    classic = {
        "apiVersion": "resource.k8s.io/v1alpha2",
        "kind": "ResourceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "driverName": "gpu.resource.nvidia.com",
    }
    pending = claim("stuck", "ml")
    pending["metadata"]["creationTimestamp"] = old
    return build_inventory(
        server_version="v1.29.0",
        served=["v1alpha2"],
        preferred="v1alpha2",
        nodes=[{"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}],
        workloads=[],
        pods=[],
        classes=[classic],
        slices=[],
        claims=[pending],
        now=now,
    )


def test_build_inventory_classic_cluster_and_renderers() -> None:
    inv = _built()
    assert [(c.kind, c.driver) for c in inv.classes] == [("ResourceClass", "gpu.resource.nvidia.com")]
    assert inv.pending_claims[0].age_seconds == 420.0
    assert "age 7m" in render_inventory(inv, "text")
    assert "| ml/stuck | 7m | gpu.example.com |" in render_inventory(inv, "markdown")
    assert any("publishes no ResourceSlices" in w for w in inv.warnings)
    assert json.loads(render_inventory(inv, "json"))["classes"][0]["kind"] == "ResourceClass"
    with pytest.raises(ValueError):
        render_inventory(inv, "yaml")
