"""The simulated scheduler where kube-scheduler fails a pod: a selector's run-time error (reason
SchedulerError, an event per retry) and an extended resource no node has (Insufficient), over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

H200 = 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].productName == "H200"'
SELECTOR_ERROR = (
    'running "DynamicResources" filter plugin: class big-gpu.example.com: selector #0: CEL runtime error: '
    "no such key: productName"
)

Sim = tuple[ControlPlane, ClusterClient]


@pytest.fixture
def sim() -> Iterator[Sim]:
    with SimCluster() as cluster:
        plane = install(cluster, nodes=2, devices_per_node=2, driver_preinstalled=True)
        client = ClusterClient.for_url(cluster.url)
        try:
            yield plane, client
        finally:
            client.close()
            plane.stop()
        assert {n: c.errors for n, c in plane.components.items()} == dict.fromkeys(plane.components, 0)


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def claim(name: str, cls: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}},
    }


def pod(name: str, claim_name: str | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    spec: dict[str, Any] = {"containers": [container]}
    if claim_name:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    if limits:
        container.setdefault("resources", {})["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def scheduled_condition(client: ClusterClient, name: str) -> dict[str, Any] | None:
    found = client.get(client.find_kind("", "Pod"), "default", name) or {}  # type: ignore[arg-type]
    conditions = (found.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)


def failed_scheduling(client: ClusterClient, name: str, message: str) -> list[dict[str, Any]]:
    return [
        e
        for e in client.list_kind("", "Event", "default")
        if e["involvedObject"]["name"] == name
        and e["reason"] == "FailedScheduling"
        and e["message"] == message
    ]


def test_a_missing_attribute_is_a_scheduler_error_repeated_per_retry(sim: Sim) -> None:
    _, client = sim
    wait_for(lambda: len(client.list_kind("resource.k8s.io", "ResourceSlice")) == 2, what="the slices")
    client.apply(device_class("big-gpu.example.com", H200))
    client.apply(claim("big", "big-gpu.example.com"))
    client.apply(pod("trainer", "big"))
    c = wait_for(lambda: scheduled_condition(client, "trainer"), what="PodScheduled=False")
    assert c["reason"] == "SchedulerError" and c["message"] == SELECTOR_ERROR
    (event,) = wait_for(lambda: failed_scheduling(client, "trainer", SELECTOR_ERROR), what="the event")
    assert event["type"] == "Warning" and event["source"]["component"] == "default-scheduler"
    # every device stays free, and the scheduler keeps retrying (back-off 1 s, 2 s, ...)
    wait_for(
        lambda: failed_scheduling(client, "trainer", SELECTOR_ERROR)[0]["count"] >= 2,
        timeout=15,
        what="a retry",
    )
    assert (
        not (client.get(client.find_kind("resource.k8s.io", "ResourceClaim"), "default", "big") or {})
        .get(  # type: ignore[arg-type]
            "status", {}
        )
        .get("allocation")
    )
    # the guarded selector is plainly false for these devices: unschedulable, not an error
    guarded = '"productName" in device.attributes["gpu.example.com"] && ' + f"({H200})"
    client.apply(device_class("big-gpu.example.com", guarded))
    c = wait_for(
        lambda: (x := scheduled_condition(client, "trainer")) and x["reason"] == "Unschedulable" and x,
        timeout=15,
        what="Unschedulable after the fix",
    )
    assert "cannot allocate all claims" in c["message"]


def test_an_extended_resource_no_node_has_leaves_the_pod_pending(sim: Sim) -> None:
    _, client = sim
    client.apply(pod("plugin-gpu", limits={"example.com/gpu": "1"}))
    c = wait_for(lambda: scheduled_condition(client, "plugin-gpu"), what="PodScheduled=False")
    assert c["reason"] == "Unschedulable"
    assert c["message"] == (
        "0/2 nodes are available: 2 Insufficient example.com/gpu. no new claims to deallocate, preemption: "
        "0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    found = client.get(client.find_kind("", "Pod"), "default", "plugin-gpu") or {}  # type: ignore[arg-type]
    assert not found["spec"].get("nodeName") and found["status"]["phase"] == "Pending"
