"""Selectors that fail at run time, as kube-scheduler's structured allocator meets them (pure).

A missing key is an error, not false: it stops the allocation when the search reaches a free device it
fails on, names the class (or claim), the selector's index and the key, and suggests the guard.
"""

from __future__ import annotations

from typing import Any

from reconciler.dra import allocator as A
from reconciler.dra.placement import NodeInfo, Placement, PodClaim, PodInfo
from reconciler.dra.selectors import SelectorError

GPU = "gpu.example.com"
H200 = 'device.attributes["gpu.example.com"].productName == "H200"'
GUARDED = f'"productName" in device.attributes["gpu.example.com"] && ({H200})'


def device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


def slice_(node: str, *products: str | None, driver: str = GPU) -> dict[str, Any]:
    """One device per entry: with that productName, or without one (None)."""
    devices = []
    for i, product in enumerate(products):
        attrs: dict[str, Any] = {"index": {"int": i}}
        if product is not None:
            attrs["productName"] = {"string": product}
        devices.append({"name": f"gpu-{i}", "attributes": attrs})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(name: str, cls: str = "big-gpu", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, "count": count, **extra}}]
            }
        },
    }


def held(name: str, node: str, device: str) -> dict[str, Any]:
    c = claim(name)
    result = {"request": "gpu", "driver": GPU, "pool": node, "device": device}
    c["status"] = {"allocation": {"devices": {"results": [result]}}}
    return c


CLASSES = [device_class("big-gpu", H200), device_class("guarded-gpu", GUARDED)]
NOT_PUBLISHED = "class big-gpu: selector #0: CEL runtime error: no such key: productName"


def test_missing_key_on_every_device_is_an_error_not_exhaustion() -> None:
    out = A.allocate([slice_("n1", None, None)], CLASSES, [], claim("c"), "n1")
    assert not out.ok and not out.unknown
    assert out.error == out.reason == NOT_PUBLISHED
    assert out.error_device == (GPU, "n1", "gpu-0")
    error = out.selector_error
    assert isinstance(error, SelectorError)
    assert (error.class_name, error.index, error.expression, error.key) == ("big-gpu", 0, H200, "productName")
    assert error.guard == '"productName" in device.attributes["gpu.example.com"]'
    assert error.guarded == GUARDED


def test_the_guarded_selector_is_plainly_false() -> None:
    out = A.allocate([slice_("n1", None, None)], CLASSES, [], claim("c", "guarded-gpu"), "n1")
    assert not out.ok and out.error is None and out.reason == A.CANNOT_ALLOCATE


def test_devices_found_before_the_failing_one_suffice() -> None:
    slices = [slice_("n1", "H200", None)]
    assert A.allocate(slices, CLASSES, [], claim("c"), "n1").ok
    # a second device makes the search reach gpu-1
    assert A.allocate(slices, CLASSES, [], claim("c", count=2), "n1").error == NOT_PUBLISHED


def test_a_device_in_use_is_skipped_before_its_selectors() -> None:
    slices = [slice_("n1", None, "H200")]
    assert A.allocate(slices, CLASSES, [], claim("c"), "n1").error == NOT_PUBLISHED
    out = A.allocate(slices, CLASSES, [held("other", "n1", "gpu-0")], claim("c"), "n1")
    assert out.ok and out.devices == [(GPU, "n1", "gpu-1")]


def test_all_mode_evaluates_every_device_even_in_use() -> None:
    slices = [slice_("n1", "H200", None)]
    out = A.allocate(slices, CLASSES, [held("other", "n1", "gpu-1")], claim("c", allocationMode="All"), "n1")
    assert out.error == NOT_PUBLISHED and out.error_device == (GPU, "n1", "gpu-1")


def test_request_selector_error_names_the_claim() -> None:
    classes = [device_class("gpu", f'device.driver == "{GPU}"')]
    selectors = [
        {"cel": {"expression": "true"}},
        {"cel": {"expression": "device.capacity['gpu.example.com'].compute.isGreaterThan(quantity('1'))"}},
    ]
    out = A.allocate([slice_("n1", "H200")], classes, [], claim("c", "gpu", selectors=selectors), "n1")
    assert out.error == "claim ns/c: selector #1: CEL runtime error: no such key: compute"
    assert out.selector_error is not None and out.selector_error.class_name is None
    assert out.selector_error.guard == '"compute" in device.capacity["gpu.example.com"]'


def test_short_circuit_keeps_other_drivers_out() -> None:
    classes = [
        device_class(
            "nic", 'device.driver == "nic.example.com" && device.attributes["nic.example.com"].speed > 1'
        )
    ]
    out = A.allocate([slice_("n1", None)], classes, [], claim("c", "nic"), "n1")
    assert out.error is None and out.reason == A.CANNOT_ALLOCATE


def test_unknown_before_an_error_stays_unknown() -> None:
    classes = [device_class("odd", "ip('10.0.0.1').family() == 4", H200)]
    out = A.allocate([slice_("n1", None)], classes, [], claim("c", "odd"), "n1")
    assert out.error is None and out.unknown


def test_placement_fails_the_pod_when_any_node_errors() -> None:
    """kube-scheduler filters every node: one node failing its Filter fails the pod, even where another fits."""
    inv = A.Inventory([slice_("a", "H200"), slice_("b", None)], CLASSES)
    placement = Placement(inv, [NodeInfo("a"), NodeInfo("b")])
    pod = PodInfo("ns", "p", {}, [PodClaim("gpu", ("ns", "c"), claim("c"))])
    result = placement.attempt(pod)
    assert result.outcome == "error" and result.node is None
    assert result.scheduler_error == f'running "DynamicResources" filter plugin: {NOT_PUBLISHED}'
    assert result.reason() == NOT_PUBLISHED
    # the node that fails is kept out by the pod's nodeSelector: the pod fits on the other
    pinned = PodInfo("ns", "p", {"nodeSelector": {"pick": "a"}}, pod.claims)
    placement = Placement(inv, [NodeInfo("a", labels={"pick": "a"}), NodeInfo("b")])
    assert placement.attempt(pinned).outcome == "fits"
