"""Diagnosis of selectors that fail at run time, and of free counts the model cannot know (pure classify)."""

from __future__ import annotations

from typing import Any

from reconciler.cluster.diagnose import Snapshot, classify

GPU = "gpu.example.com"
H200 = 'device.attributes["gpu.example.com"].productName == "H200"'
MESSAGE = (
    'running "DynamicResources" filter plugin: class big-gpu.example.com: selector #0: CEL runtime error: '
    "no such key: productName"
)
EXHAUSTED = (
    "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes "
    "are available: 1 Preemption is not helpful for scheduling."
)


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def slice_(devices: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"n1-{GPU}"},
        "spec": {
            "driver": GPU,
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": "A"}}} for i in range(devices)
            ],
        },
    }


def claim(cls: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train", "namespace": "ml", "uid": "c1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}},
    }


def pod(condition: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if condition is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", **condition}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml", "uid": "p1"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "train"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
        "status": status,
    }


def event(message: str, count: int = 1) -> dict[str, Any]:
    return {
        "kind": "Event",
        "metadata": {"name": "trainer.1", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "trainer", "uid": "p1"},
        "reason": "FailedScheduling",
        "type": "Warning",
        "message": message,
        "source": {"component": "default-scheduler"},
        "count": count,
    }


def snapshot(
    cls: dict[str, Any], pods: list[dict[str, Any]], events: list[dict[str, Any]], devices: int = 2
) -> Snapshot:
    return Snapshot(
        pods=pods,
        claims=[claim(cls["metadata"]["name"])],
        classes=[cls],
        slices=[slice_(devices)],
        nodes=[
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        ],
        events=events,
        served_versions=["v1"],
        scope_claims=[],
    )


def test_scheduler_error_is_diagnosed_as_selector_error_with_the_guard() -> None:
    cls = device_class("big-gpu.example.com", H200)
    snap = snapshot(cls, [pod({"reason": "SchedulerError", "message": MESSAGE})], [event(MESSAGE, 4)])
    (diag,) = classify(snap)
    assert diag.mode == "selector-error" and diag.ref == "ResourceClaim/ml/train"
    assert (
        "class big-gpu.example.com selector #0 fails at run time (no such key: productName)" in diag.summary
    )
    assert diag.numbers == {
        "class": "big-gpu.example.com",
        "selector": 0,
        "expression": H200,
        "error": "no such key: productName",
        "key": "productName",
        "guard": '"productName" in device.attributes["gpu.example.com"]',
        "failing": 2,
        "matching": 0,
        "request": "gpu",
    }
    assert any("FailedScheduling (x4)" in e and MESSAGE in e for e in diag.evidence)
    assert f"DeviceClass big-gpu.example.com spec.selectors[0]: {H200}" in diag.evidence
    assert "fails on 2 device(s) (n1/gpu-0, n1/gpu-1); matches 0" in diag.evidence
    assert diag.recovery[0] == (
        "guard the selector in DeviceClass big-gpu.example.com spec.selectors[0]: "
        f'"productName" in device.attributes["gpu.example.com"] && ({H200})'
    )


def test_a_selector_that_fails_on_every_device_is_foreseen_before_any_event() -> None:
    # An NVIDIA-style class without the driver guard, over devices of another driver: every device fails.
    cls = device_class("gpu.nvidia.com", 'device.attributes["gpu.nvidia.com"].type == "gpu"')
    (diag,) = classify(snapshot(cls, [pod()], [], devices=16))
    assert diag.mode == "selector-error"
    assert diag.numbers["key"] == "type" and diag.numbers["failing"] == 16
    assert (
        "foreseen from the published devices: class gpu.nvidia.com: selector #0: CEL runtime error: no such key: type"
        in diag.evidence
    )
    assert diag.recovery[0].endswith(
        '"type" in device.attributes["gpu.nvidia.com"] && (device.attributes["gpu.nvidia.com"].type == "gpu")'
    )


def test_an_unknown_free_count_is_reported_as_unknown_never_exhaustion() -> None:
    # 16 free devices the model cannot judge (a CEL function it does not have): not "all allocated".
    cls = device_class("gpu.nvidia.com", "ip('10.0.0.1').family() == 4 && device.driver == 'gpu.example.com'")
    snap = snapshot(
        cls, [pod({"reason": "Unschedulable", "message": EXHAUSTED})], [event(EXHAUSTED)], devices=16
    )
    (diag,) = classify(snap)
    assert diag.mode == "pending"
    numbers = diag.numbers["classes"]["gpu.nvidia.com"]
    assert numbers["free"] == numbers["total"] == "unknown"
    assert numbers["unknown_reason"].startswith("class gpu.nvidia.com: selector #0 (ip('10.0.0.1')")
    assert (
        "whether devices are free is unknown" in diag.summary
        and "Undefined variable or function: 'ip'" in diag.summary
    )
    assert not any("free devices" in r for r in diag.recovery)
