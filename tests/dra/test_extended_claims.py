"""The claim kube-scheduler makes for extended resources backed by DRA (reconciler/dra/extended.py)."""

from __future__ import annotations

from typing import Any

from reconciler.dra.extended import (
    class_mapping,
    device_requests,
    pending_extended_claim,
    request_mappings,
)


def _class(name: str, resource: str | None = None, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    spec = {"extendedResourceName": resource} if resource else {}
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def test_every_class_backs_its_implicit_name_and_the_newest_wins_an_explicit_one() -> None:
    mapping = class_mapping(
        [
            _class("old", "example.com/gpu", "2026-01-01T00:00:00Z"),
            _class("new", "example.com/gpu", "2026-02-01T00:00:00Z"),
            _class("b-same", "example.com/fpga"),
            _class("a-same", "example.com/fpga"),
        ]
    )
    assert mapping["example.com/gpu"] == "new"
    assert mapping["example.com/fpga"] == "a-same"  # same age: the first by name
    assert mapping["deviceclass.resource.kubernetes.io/old"] == "old"
    assert mapping["deviceclass.resource.kubernetes.io/b-same"] == "b-same"


def _spec() -> dict[str, Any]:
    return {
        "initContainers": [{"name": "setup", "resources": {"limits": {"example.com/gpu": 1}}}],
        "containers": [
            {
                "name": "main",
                "resources": {
                    "limits": {"example.com/gpu": 2, "cpu": "1", "vendor.example.com/nic": 1},
                    "requests": {"cpu": "500m"},
                },
            },
            {"name": "half", "resources": {"limits": {"example.com/gpu": "500m"}}},
        ],
    }


def test_one_request_per_container_and_resource_named_by_their_indexes() -> None:
    requests = device_requests(_spec(), {"example.com/gpu": "gpu"})
    assert requests == [
        {
            "name": "container-0-request-0",
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
        },
        {
            "name": "container-1-request-1",  # cpu sorts first in main's requests
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        },
    ]  # a fraction of a device is no request; what no class maps is a device plugin's
    assert request_mappings(_spec(), requests) == [
        {"containerName": "setup", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"},
        {"containerName": "main", "resourceName": "example.com/gpu", "requestName": "container-1-request-1"},
    ]


def test_a_resource_a_node_advertises_needs_no_claim() -> None:
    assert device_requests(_spec(), {"example.com/gpu": "gpu"}, advertised={"example.com/gpu"}) == []


def test_a_waiting_pod_is_owed_its_claim_until_the_scheduler_names_it() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ml"}, "spec": _spec()}
    owed = pending_extended_claim(pod, {"example.com/gpu": "gpu"})
    assert owed is not None and owed["metadata"]["name"] == "p-extended-resources"
    assert owed["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    pod["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-x7k2q"}}
    assert pending_extended_claim(pod, {"example.com/gpu": "gpu"}) is None
