"""`input.capacity` with the scheduler's ties: each pod's verdict, share and placements explored, the
range of Pending pods, the search, and at-risk failures with what removes the risk."""

from __future__ import annotations

from typing import Any

from reconciler.dra.capacity import capacity_input, render_capacity
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.plan import compute_plan

DRIVER = "gpu.example.com"


def manifest(body: dict[str, Any], path: str = "") -> Manifest:
    return Manifest(body=body, ref=ref_of(body), path=path, line=1 if path else 0)


def live(devices: dict[str, int]) -> list[Manifest]:
    out = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        }
    ]
    for name, count in devices.items():
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "8", "memory": "32Gi"},
                },
            }
        )
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpu"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"gpu-{i}"} for i in range(count)],
                },
            }
        )
    return [manifest(o) for o in out]


TWO = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "two", "namespace": "ml"},
    "spec": {
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}]}
        }
    },
}


def pod_spec(claims: list[str]) -> dict[str, Any]:
    return {
        "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": c} for c in claims]}}],
        "resourceClaims": [{"name": c, "resourceClaimTemplateName": "two"} for c in claims],
    }


def pod(name: str, claims: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": pod_spec(claims),
    }


def predict(devices: dict[str, int], head_objects: list[dict[str, Any]]) -> dict[str, Any]:
    head = [manifest(o, "change.yaml") for o in head_objects]
    return capacity_input(compute_plan([], head), head, live(devices))


def test_the_pod_whose_fate_the_ties_decide_is_at_risk() -> None:
    capacity = predict({"n1": 4, "n2": 2}, [TWO, pod("a-first", ["gpu"]), pod("b-second", ["x", "y"])])
    first, second = capacity["pods"]
    assert first["outcome"] == "fits" and first["nodes"] == ["n1", "n2"]
    assert first["explored"] == {"mode": "exact", "placements": 1}
    assert second["outcome"] == "at-risk"
    assert second["fits_in"] == {"share": 0.5, "fraction": "1/2"}
    assert second["decided_by"] == ["ml/a-first"]
    assert second["explored"] == {"mode": "exact", "placements": 2}
    assert second["reason"].startswith("fits in 1 of 2 equally likely placements; where it does not: ")
    assert capacity["pending"] == {
        "min": 0,
        "max": 1,
        "of": 2,
        "summary": "0\u20131 of 2 pods may stay Pending",
    }
    assert capacity["search"]["mode"] == "exact" and capacity["search"]["cut_by_budget"] is False
    assert capacity["search"]["pods_searched"] == 1
    (failure,) = capacity["failures"]
    assert failure["at_risk"] is True and failure["pods"] == ["ml/b-second"]
    assert failure["advice"].startswith("where the scheduler puts ml/a-first decides it (equal scores); ")
    assert "one more matching device on n1, n2" in failure["advice"]
    text = render_capacity(capacity)
    assert "  0\u20131 of 2 pods may stay Pending" in text
    assert "  pod ml/b-second: at-risk (where it fits: on n1)" in text


def test_a_deployment_spread_over_equal_nodes_with_room_stays_fits() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ml"},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec(["gpu"])},
        },
    }
    capacity = predict({"n1": 4, "n2": 4, "n3": 4}, [TWO, deployment])
    assert [p["outcome"] for p in capacity["pods"]] == ["fits"] * 6
    assert capacity["failures"] == []
    assert capacity["pending"]["summary"] == "all 6 pods get a node"
    assert capacity["search"] == {
        "mode": "exact",
        "placements": 1,
        "cut_by_budget": False,
        "budget": 256,
        "seed": 0,
        "pods_searched": 0,
    }
    # spread by default: each round of three pods takes one node each
    assert [p["ties"] for p in capacity["pods"][:3]] == [["n1", "n2", "n3"], ["n2", "n3"], ["n3"]]
