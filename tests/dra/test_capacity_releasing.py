"""Devices held by claims of pods being deleted count as free in the capacity prediction.

A scale-down followed at once by a scale-up (or a rollback followed by the fix) finds the old pods still
terminating: their generated claims keep the devices for up to the grace period, then the resourceclaim
controller releases them and the scheduler hands them to the waiting pod.
"""

from __future__ import annotations

from typing import Any

from reconciler.dra.capacity import capacity_input, releasing_claims, render_capacity
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.plan import compute_plan

DRIVER = "gpu.example.com"


def manifest(body: dict[str, Any], path: str = "") -> Manifest:
    return Manifest(body=body, ref=ref_of(body), path=path, line=1 if path else 0)


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                },
            },
        },
    }


def pod(name: str, *, deleting: bool = False, phase: str = "Running") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "image": "x"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
        "status": {
            "phase": phase,
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
        },
    }


def claim(owner: str, device: str, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"{owner}-gpu",
        "namespace": "ml",
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": True}
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": owner, "uid": f"uid-{owner}"}],
        },
    }


def cluster(pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> list[Manifest]:
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
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
                "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}
            },
        },
        deployment(1),
        *pods,
        *claims,
    ]
    return [manifest(o) for o in objects]


def predict(live: list[Manifest]) -> dict[str, Any]:
    """The scale-up from 1 to 2 replicas: one more pod needing one GPU."""
    base = [manifest(deployment(1), "trainer.yaml")]
    head = [manifest(deployment(2), "trainer.yaml")]
    return capacity_input(compute_plan(base, head), head, live)


def test_a_pod_being_deleted_gives_its_device_to_the_new_pod() -> None:
    live = cluster([pod("a"), pod("b", deleting=True)], [claim("a", "gpu-0"), claim("b", "gpu-1")])
    capacity = predict(live)
    assert [p["outcome"] for p in capacity["pods"]] == ["fits"]
    assert capacity["claims"][0]["devices"] == [f"{DRIVER}/n1/gpu-1"]
    assert capacity["releasing"] == ["ml/b-gpu"]
    assert capacity["failures"] == []
    assert "counted as free (their pods are being deleted or finished): ml/b-gpu" in render_capacity(capacity)


def test_a_finished_pod_releases_its_claim() -> None:
    live = cluster([pod("a"), pod("b", phase="Succeeded")], [claim("a", "gpu-0"), claim("b", "gpu-1")])
    assert releasing_claims(live) == {("ml", "b-gpu")}
    assert predict(live)["pods"][0]["outcome"] == "fits"


def test_running_pods_keep_their_devices() -> None:
    live = cluster([pod("a"), pod("b")], [claim("a", "gpu-0"), claim("b", "gpu-1")])
    capacity = predict(live)
    assert releasing_claims(live) == set()
    assert [p["outcome"] for p in capacity["pods"]] == ["does-not-fit"]
    assert "0 of 2 matching devices free (2 allocated)" in capacity["pods"][0]["reason"]
    assert capacity["releasing"] == []


def test_an_owner_missing_from_the_list_is_not_taken_as_gone() -> None:
    # The pod may have been created between the LIST of pods and the LIST of claims.
    live = cluster([pod("a")], [claim("a", "gpu-0"), claim("b", "gpu-1")])
    assert releasing_claims(live) == set()
    assert predict(live)["pods"][0]["outcome"] == "does-not-fit"


def test_a_claim_being_deleted_whose_pod_is_gone_is_releasing() -> None:
    live = cluster([pod("a")], [claim("a", "gpu-0"), claim("b", "gpu-1", deleting=True)])
    assert releasing_claims(live) == {("ml", "b-gpu")}
    assert predict(live)["pods"][0]["outcome"] == "fits"


def test_a_claim_being_deleted_while_its_pod_runs_still_holds() -> None:
    live = cluster([pod("a"), pod("b")], [claim("a", "gpu-0"), claim("b", "gpu-1", deleting=True)])
    assert releasing_claims(live) == set()
