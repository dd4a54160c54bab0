"""Structured allocation (reconciler.dra.allocator) and device totals (reconciler.dra.simulate)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.dra import allocator as A
from reconciler.dra.nodematch import node_selector_for
from reconciler.dra.simulate import simulate

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "dra-examples" / "v1"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


CLASSES = _docs("01-deviceclasses.yaml")
(EXAMPLE_SLICE,) = _docs("07-resourceslice.yaml")
TEMPLATE = next(d for d in _docs("02-claimtemplate-deployment.yaml") if d["kind"] == "ResourceClaimTemplate")
SHARED = next(d for d in _docs("03-shared-claim-prioritized.yaml") if d["kind"] == "ResourceClaim")
ADMIN = next(d for d in _docs("06-admin-access.yaml") if d["kind"] == "ResourceClaimTemplate")


def make_slice(
    node: str, n: int, model: str = "LATEST-GPU-MODEL", memory: str = "80Gi", driver: str = "gpu.example.com"
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-x"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"model": {"string": model}, "index": {"int": i}},
                    "capacity": {"memory": {"value": memory}},
                }
                for i in range(n)
            ],
        },
    }


def claim(
    name: str, *requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"devices": devices},
    }


def exactly(name: str, cls: str = "gpu.example.com", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, **extra}}


def allocated(name: str, node: str, *devices: str, admin: bool = False) -> dict[str, Any]:
    c = claim(name, exactly("gpu"))
    results = []
    for d in devices:
        r: dict[str, Any] = {"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": d}
        if admin:
            r["adminAccess"] = True
        results.append(r)
    c["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": node_selector_for(node)}}
    return c


def test_exact_count_on_example_slice_matches_observed_shape() -> None:
    out = A.allocate([EXAMPLE_SLICE], CLASSES, [], TEMPLATE, "worker-a")
    assert out.ok
    assert out.allocation == {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "worker-a", "device": "gpu-0"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-a"]}]}
            ]
        },
    }


def test_allocated_devices_are_taken_and_exhaustion_fails() -> None:
    existing = [allocated("a", "worker-a", "gpu-0")]
    out = A.allocate([EXAMPLE_SLICE], CLASSES, existing, TEMPLATE, "worker-a")
    assert out.ok and out.devices == [("gpu.example.com", "worker-a", "gpu-1")]
    existing.append(allocated("b", "worker-a", "gpu-1"))
    out = A.allocate([EXAMPLE_SLICE], CLASSES, existing, TEMPLATE, "worker-a")
    assert not out.ok and out.reason == "cannot allocate all claims" and not out.unknown


def test_own_allocation_does_not_block_reallocation() -> None:
    mine = allocated("mine", "worker-a", "gpu-0", "gpu-1")
    out = A.allocate([EXAMPLE_SLICE], CLASSES, [mine], claim("mine", exactly("gpu", count=2)), "worker-a")
    assert out.ok


def test_wrong_node_has_no_devices() -> None:
    out = A.allocate([EXAMPLE_SLICE], CLASSES, [], TEMPLATE, "worker-b")
    assert not out.ok and out.reason == A.CANNOT_ALLOCATE


def test_count_larger_than_devices() -> None:
    out = A.allocate([EXAMPLE_SLICE], CLASSES, [], claim("c", exactly("gpu", count=3)), "worker-a")
    assert not out.ok


def test_allocation_mode_all_takes_every_matching_device() -> None:
    c = claim(
        "c", {"name": "all", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}}
    )
    out = A.allocate([make_slice("n1", 3)], CLASSES, [], c, "n1")
    assert out.ok and [r["device"] for r in out.allocation["devices"]["results"]] == [
        "gpu-0",
        "gpu-1",
        "gpu-2",
    ]
    busy = A.allocate([make_slice("n1", 3)], CLASSES, [allocated("x", "n1", "gpu-1")], c, "n1")
    assert not busy.ok


def test_admin_access_uses_allocated_devices_and_takes_nothing() -> None:
    taken = [allocated("a", "worker-a", "gpu-0"), allocated("b", "worker-a", "gpu-1")]
    out = A.allocate([EXAMPLE_SLICE], CLASSES, taken, ADMIN, "worker-a")
    assert out.ok
    results = out.allocation["devices"]["results"]
    assert [r["device"] for r in results] == ["gpu-0", "gpu-1"] and all(r["adminAccess"] for r in results)
    # admin results do not make devices unavailable
    admin_claim = allocated("adm", "worker-a", "gpu-0", "gpu-1", admin=True)
    assert A.allocate([EXAMPLE_SLICE], CLASSES, [admin_claim], TEMPLATE, "worker-a").ok


def test_first_available_falls_back_and_names_subrequest() -> None:
    small = make_slice("n1", 2, memory="16Gi")
    out = A.allocate([small], CLASSES, [], SHARED, "n1")
    assert out.ok
    assert {r["request"] for r in out.allocation["devices"]["results"]} == {"primary/any"}
    big = A.allocate([EXAMPLE_SLICE], CLASSES, [], SHARED, "worker-a")
    assert {r["request"] for r in big.allocation["devices"]["results"]} == {"primary/big"}
    config = big.allocation["devices"]["config"]
    assert {c["source"] for c in config} == {"FromClass", "FromClaim"}


def test_match_attribute_constraint() -> None:
    s = make_slice("n1", 4)
    s["spec"]["devices"][0]["attributes"]["model"] = {"string": "A"}
    s["spec"]["devices"][1]["attributes"]["model"] = {"string": "B"}
    s["spec"]["devices"][2]["attributes"]["model"] = {"string": "C"}
    s["spec"]["devices"][3]["attributes"]["model"] = {"string": "B"}
    c = claim(
        "c",
        exactly("gpu", count=2),
        constraints=[{"requests": ["gpu"], "matchAttribute": "gpu.example.com/model"}],
    )
    out = A.allocate([s], CLASSES, [], c, "n1")
    assert out.ok and [r["device"] for r in out.allocation["devices"]["results"]] == ["gpu-1", "gpu-3"]
    s["spec"]["devices"][3]["attributes"]["model"] = {"string": "D"}
    assert not A.allocate([s], CLASSES, [], c, "n1").ok
    d = claim("d", exactly("gpu", count=2), constraints=[{"distinctAttribute": "gpu.example.com/model"}])
    assert A.allocate([s], CLASSES, [], d, "n1").ok


def test_match_attribute_across_requests() -> None:
    s = make_slice("n1", 3)
    s["spec"]["devices"][0]["attributes"]["model"] = {"string": "A"}
    c = claim(
        "c",
        exactly("a", selectors=[{"cel": {"expression": "device.attributes['gpu.example.com'].index == 0"}}]),
        exactly("b"),
        constraints=[{"matchAttribute": "gpu.example.com/model"}],
    )
    assert not A.allocate([s], CLASSES, [], c, "n1").ok
    s["spec"]["devices"][2]["attributes"]["model"] = {"string": "A"}
    out = A.allocate([s], CLASSES, [], c, "n1")
    assert out.ok and [r["device"] for r in out.allocation["devices"]["results"]] == ["gpu-0", "gpu-2"]


def test_missing_device_class() -> None:
    c = claim("c", exactly("gpu", cls="nope.example.com"))
    out = A.allocate([EXAMPLE_SLICE], CLASSES, [], c, "worker-a")
    assert not out.ok and out.reason == "request gpu: device class nope.example.com does not exist"
    assert out.missing_class == "nope.example.com"
    fa = claim("c", {"name": "r", "firstAvailable": [{"name": "x", "deviceClassName": "gone"}]})
    assert (
        A.allocate([EXAMPLE_SLICE], CLASSES, [], fa, "worker-a").reason
        == "request r/x: device class gone does not exist"
    )


def test_capacity_class_selector_filters_small_devices() -> None:
    c = claim("c", exactly("gpu", cls="big-gpu.example.com"))
    assert not A.allocate([make_slice("n1", 2, memory="16Gi")], CLASSES, [], c, "n1").ok
    assert A.allocate([make_slice("n1", 2, memory="40Gi")], CLASSES, [], c, "n1").ok


def test_v1beta1_shapes_are_normalised() -> None:
    s = copy.deepcopy(EXAMPLE_SLICE)
    s["spec"]["devices"] = [
        {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
        for d in s["spec"]["devices"]
    ]
    c = claim("c", {"name": "gpu", "deviceClassName": "gpu.example.com", "count": 2})
    assert A.allocate([s], CLASSES, [], c, "worker-a").ok


def test_old_pool_generation_is_ignored() -> None:
    old, new = make_slice("n1", 2), make_slice("n1", 1)
    new["metadata"]["name"] = "newer"
    new["spec"]["pool"]["generation"] = 2
    assert len(A.Inventory([old, new], CLASSES).devices) == 1


def test_node_independent_devices_have_no_node_selector() -> None:
    s = make_slice("n1", 1)
    del s["spec"]["nodeName"]
    s["spec"]["allNodes"] = True
    out = A.allocate([s], CLASSES, [], TEMPLATE, "anything")
    assert out.ok and "nodeSelector" not in out.allocation


def test_tainted_device_needs_toleration() -> None:
    s = make_slice("n1", 1)
    s["spec"]["devices"][0]["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    assert not A.allocate([s], CLASSES, [], claim("c", exactly("gpu")), "n1").ok
    tol = claim("c", exactly("gpu", tolerations=[{"key": "broken", "operator": "Exists"}]))
    assert A.allocate([s], CLASSES, [], tol, "n1").ok


def test_unknown_selector_makes_allocation_unknown_not_denied() -> None:
    c = claim(
        "c",
        exactly(
            "gpu", selectors=[{"cel": {"expression": "device.attributes['gpu.example.com'].model.fancy()"}}]
        ),
    )
    out = A.allocate([EXAMPLE_SLICE], CLASSES, [], c, "worker-a")
    assert not out.ok and out.unknown
    assert out.unknown_reason == (
        "request gpu: selector #0 (device.attributes['gpu.example.com'].model.fancy()) cannot be evaluated "
        "here: Undefined variable or function: 'fancy' (device worker-a/gpu-0)"
    )


def test_allocate_many_is_all_or_nothing_on_one_node() -> None:
    inv = A.Inventory([make_slice("n1", 1), make_slice("n2", 2)], CLASSES)
    outs = inv.allocate_many([claim("a", exactly("gpu")), claim("b", exactly("gpu"))])
    assert all(o.ok for o in outs) and {o.node for o in outs} == {"n2"}
    assert len({tuple(o.devices) for o in outs}) == 2


def test_simulate_totals() -> None:
    live = [allocated("a", "worker-a", "gpu-0")]
    result = simulate([EXAMPLE_SLICE, make_slice("n2", 2, driver="other.example.com")], CLASSES, live)
    assert result.drivers["gpu.example.com"].devices == 2
    assert result.drivers["gpu.example.com"].allocated == 1
    assert result.drivers["gpu.example.com"].free == 1
    assert result.drivers["other.example.com"].nodes == ["n2"]
    assert (result.devices, result.allocated, result.free) == (4, 1, 3)
    assert result.to_dict()["totals"] == {"devices": 4, "allocated": 1, "free": 3}


@pytest.mark.parametrize("budget_claims", [8])
def test_search_is_bounded(budget_claims: int) -> None:
    s = make_slice("n1", 40)
    for i, d in enumerate(s["spec"]["devices"]):
        d["attributes"]["model"] = {"string": f"m{i}"}
    c = claim(
        "c", exactly("gpu", count=budget_claims), constraints=[{"matchAttribute": "gpu.example.com/model"}]
    )
    out = A.allocate([s], CLASSES, [], c, "n1")
    assert not out.ok
