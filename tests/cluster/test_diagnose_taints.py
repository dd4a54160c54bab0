"""Diagnosis names a device taint (from a DeviceTaintRule or the slice) as the cause, with where it comes from."""

from __future__ import annotations

from typing import Any

from helpers import wait_for
from test_diagnose import GPU, device_class, node, ns_obj, pod, slice_, template, template_pod

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.diagnose import Snapshot, classify, diagnose
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

RULE = {
    "apiVersion": "resource.k8s.io/v1beta2",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "gpu-maintenance"},
    "spec": {
        "deviceSelector": {"driver": GPU},
        "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"},
    },
}


def _claim(name: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": GPU}
    if tolerations:
        exactly["tolerations"] = tolerations
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def _snapshot(claim: dict[str, Any], rules: list[dict[str, Any]], slices: list[dict[str, Any]]) -> Snapshot:
    return Snapshot(
        pods=[pod("trainer", "ml", claim["metadata"]["name"])],
        claims=[claim],
        classes=[device_class()],
        slices=slices,
        taint_rules=rules,
        nodes=[node("node-a")],
        served_versions=["v1"],
        scope_claims=[],
    )


def test_a_taint_rule_over_every_free_device_is_the_cause_named_with_the_rule() -> None:
    [diag] = classify(_snapshot(_claim("big"), [RULE], [slice_("node-a", 2)]))
    assert diag.mode == "device-taint"
    assert diag.ref == "ResourceClaim/ml/big"
    assert "class gpu.example.com: needs 1, 2 free of 2, 2 of them tainted" in diag.summary
    assert "DeviceTaintRule/gpu-maintenance: example.com/maintenance=true:NoSchedule" in diag.summary
    assert any("kubectl delete devicetaintrule gpu-maintenance" in r for r in diag.recovery)
    assert diag.numbers["classes"][GPU]["tainted"] == 2


def test_a_taint_the_driver_publishes_in_its_slice_is_named_too() -> None:
    tainted = slice_("node-a", 1)
    tainted["spec"]["devices"][0]["taints"] = [{"key": "gpu.example.com/unhealthy", "effect": "NoExecute"}]
    [diag] = classify(_snapshot(_claim("big"), [], [tainted]))
    assert diag.mode == "device-taint"
    assert "ResourceSlice/node-a-gpu.example.com: gpu.example.com/unhealthy:NoExecute" in diag.summary
    assert any("the driver taints these devices" in r for r in diag.recovery)


def test_a_tolerated_taint_or_an_untainted_free_device_is_no_cause() -> None:
    tolerating = _claim(
        "big", [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]
    )
    assert [d.mode for d in classify(_snapshot(tolerating, [RULE], [slice_("node-a", 2)]))] == ["pending"]
    narrow = {**RULE, "spec": {**RULE["spec"], "deviceSelector": {"driver": GPU, "device": "gpu-0"}}}
    assert [d.mode for d in classify(_snapshot(_claim("big"), [narrow], [slice_("node-a", 2)]))] == [
        "pending"
    ]


def test_diagnose_over_http_names_the_rule() -> None:
    with SimCluster(served_versions=("v1", "v1beta2")) as cluster:
        plane = install(cluster, nodes=1, devices_per_node=2, driver_preinstalled=True)
        try:
            with ClusterClient.for_url(cluster.url) as client:
                client.apply(ns_obj("ml"))
                wait_for(lambda: client.list_kind("", "ServiceAccount", "ml"), what="default ServiceAccount")
                client.apply(device_class())
                client.apply(RULE)
                client.apply(template("one-gpu", "ml"))
                client.apply(template_pod("p0", "ml", "one-gpu"))
                wait_for(
                    lambda: any(
                        e.get("reason") == "FailedScheduling" for e in client.list_kind("", "Event", "ml")
                    ),
                    what="FailedScheduling",
                )
                [diag] = diagnose(client, "ml/p0")
        finally:
            plane.stop()
    assert diag.mode == "device-taint"
    assert "DeviceTaintRule/gpu-maintenance: example.com/maintenance=true:NoSchedule" in diag.summary
