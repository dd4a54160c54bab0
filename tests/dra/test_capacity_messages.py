"""The capacity prediction says what is wrong: a missing claim template, a capacity the devices lack."""

from __future__ import annotations

from typing import Any

from reconciler.dra.capacity import capacity_input
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.plan import compute_plan

DRIVER = "gpu.example.com"


def manifest(body: dict[str, Any], path: str = "") -> Manifest:
    return Manifest(body=body, ref=ref_of(body), path=path, line=1 if path else 0)


def pod(template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        },
    }


def template(requests: dict[str, Any]) -> dict[str, Any]:
    exactly = {"deviceClassName": DRIVER, "capacity": {"requests": requests}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "compute", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


LIVE = [
    manifest(o)
    for o in (
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpu"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"gpu-{i}", "capacity": {"memory": {"value": "80Gi"}}} for i in range(8)
                ],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        },
    )
]


def predict(head_objects: list[dict[str, Any]]) -> dict[str, Any]:
    head = [manifest(o, "change.yaml") for o in head_objects]
    return capacity_input(compute_plan([], head), head, LIVE)


def test_a_missing_claim_template_is_named_with_its_fix() -> None:
    (failure,) = predict([pod("absent")])["failures"]
    assert failure["reason"] == "claim gpu: ResourceClaimTemplate ml/absent does not exist"
    assert failure["advice"] == "create the ResourceClaimTemplate or fix the pod's resourceClaims"
    assert "ResourceClaim ml/" not in failure["reason"]


def test_devices_without_the_requested_capacity_are_not_called_used_up() -> None:
    (failure,) = predict([template({"compute": "1"}), pod("compute")])["failures"]
    assert failure["reason"] == (
        "n1: claim gpu: none of the 8 matching devices has capacity compute (the request asks compute: 1)"
    )
    assert "capacity used up" not in failure["reason"]
