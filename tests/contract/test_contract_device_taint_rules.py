"""DeviceTaintRules in scheduling, as kube-scheduler's DRA plugin applies them.

From the Kubernetes docs (Dynamic Resource Allocation, "Device taints and tolerations"): a DeviceTaintRule
adds its taint to every device its selector (driver, pool, device) picks; with ``NoSchedule`` "new pods
which don't tolerate the taint will not be scheduled" on those devices, while pods that already have them
allocated keep running (only ``NoExecute`` evicts); a request that lists a matching toleration may be
allocated a tainted device; once the rule is gone the devices are available again.

The test publishes its own ResourceSlice (a driver name no real driver uses) on one schedulable node, so it
needs no DRA driver: it asserts allocation and binding, not that the pods run. It needs a cluster that
serves DeviceTaintRule (v1 from 1.37; v1beta2 on 1.36 with DRADeviceTaintRules on) and schedules pods.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from contract_support import until
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

TAINT_KEY = "kube-contract.example.com/drain"
IMAGE = "registry.k8s.io/pause:3.10"


def taint_rule_api(dyn: DynamicClient) -> Resource:
    for version in ("v1", "v1beta2", "v1alpha3"):
        with contextlib.suppress(ResourceNotFoundError):
            return dyn.resources.get(api_version=f"resource.k8s.io/{version}", kind="DeviceTaintRule")
    pytest.skip("this cluster does not serve DeviceTaintRule (DRADeviceTaintRules off)")


def schedulable_node(dyn: DynamicClient) -> str:
    for node in sorted(dyn.resources.get(api_version="v1", kind="Node").get().to_dict()["items"], key=_name):
        blocking = [
            t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") != "PreferNoSchedule"
        ]
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )
        if ready and not blocking and not (node.get("spec") or {}).get("unschedulable"):
            return _name(node)
    pytest.skip("no schedulable node without taints")


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


@pytest.fixture
def driver_setup(wdyn: DynamicClient) -> Iterator[dict[str, str]]:
    """A ResourceSlice of three devices for a made-up driver on one node, and a DeviceClass selecting them."""
    rules = taint_rule_api(wdyn)
    node = schedulable_node(wdyn)
    tag = uuid.uuid4().hex[:6]
    driver = f"kc-{tag}.example.com"
    slices = wdyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    classes = wdyn.resources.get(api_version="resource.k8s.io/v1", kind="DeviceClass")
    slice_name, class_name = f"kc-{tag}-{node}", f"kc-{tag}"
    slices.create(
        body={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"dev-{i}"} for i in range(3)],
            },
        }
    )
    classes.create(
        body={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": class_name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
    )
    made = {"driver": driver, "node": node, "class": class_name, "rule": f"kc-{tag}-drain"}
    try:
        yield made
    finally:
        for api, name in ((rules, made["rule"]), (classes, class_name), (slices, slice_name)):
            with contextlib.suppress(NotFoundError):
                api.delete(name=name)


def claim_and_pod(dyn: DynamicClient, ns: str, name: str, device_class: str, tolerate: bool = False) -> None:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if tolerate:
        exactly["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").create(
        namespace=ns,
        body={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}},
        },
    )
    dyn.resources.get(api_version="v1", kind="Pod").create(
        namespace=ns,
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "dev", "resourceClaimName": name}],
                "containers": [{"name": "main", "image": IMAGE, "resources": {"claims": [{"name": "dev"}]}}],
            },
        },
    )


def allocated(dyn: DynamicClient, ns: str, name: str) -> list[str]:
    claim = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").get(
        name=name, namespace=ns
    )
    results = (((claim.to_dict().get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results"
    )
    return [r["device"] for r in results or []]


def pod(dyn: DynamicClient, ns: str, name: str) -> dict[str, Any]:
    return dict(dyn.resources.get(api_version="v1", kind="Pod").get(name=name, namespace=ns).to_dict())


def unschedulable(dyn: DynamicClient, ns: str, name: str) -> bool:
    conds = (pod(dyn, ns, name).get("status") or {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds)


def drain_rule(setup: dict[str, str], api: Resource) -> dict[str, Any]:
    return {
        "apiVersion": api.group_version,
        "kind": "DeviceTaintRule",
        "metadata": {"name": setup["rule"]},
        "spec": {
            "deviceSelector": {"driver": setup["driver"], "pool": setup["node"]},
            "taint": {"key": TAINT_KEY, "value": "upgrade", "effect": "NoSchedule"},
        },
    }


def test_noschedule_rule_blocks_new_allocations_and_keeps_running_ones(
    wdyn: DynamicClient, wns: str, driver_setup: dict[str, str]
) -> None:
    node, device_class = driver_setup["node"], driver_setup["class"]
    claim_and_pod(wdyn, wns, "before", device_class)
    held = until(lambda: allocated(wdyn, wns, "before"), 60, "the first claim allocated")
    until(lambda: pod(wdyn, wns, "before")["spec"].get("nodeName") == node, 60, "the first pod bound")

    rules = taint_rule_api(wdyn)
    rules.create(body=drain_rule(driver_setup, rules))

    # a request that does not tolerate the taint gets none of the tainted devices
    claim_and_pod(wdyn, wns, "blocked", device_class)
    until(lambda: unschedulable(wdyn, wns, "blocked"), 60, "the untolerating pod reported Unschedulable")
    assert allocated(wdyn, wns, "blocked") == []
    assert not pod(wdyn, wns, "blocked")["spec"].get("nodeName")

    # a request that tolerates it may have one
    claim_and_pod(wdyn, wns, "tolerating", device_class, tolerate=True)
    got = until(lambda: allocated(wdyn, wns, "tolerating"), 60, "the tolerating claim allocated")
    assert len(got) == 1 and got[0] not in held
    until(
        lambda: pod(wdyn, wns, "tolerating")["spec"].get("nodeName") == node, 60, "the tolerating pod bound"
    )

    # NoSchedule evicts nothing: the pod that had its device before the rule keeps it
    first = pod(wdyn, wns, "before")
    assert first["spec"].get("nodeName") == node and not first["metadata"].get("deletionTimestamp")
    assert allocated(wdyn, wns, "before") == held
    assert allocated(wdyn, wns, "blocked") == []

    # the rule gone, the device left is allocated to the pod that waited
    rules.delete(name=driver_setup["rule"])
    last = until(
        lambda: allocated(wdyn, wns, "blocked"), 90, "the waiting claim allocated once the rule is gone"
    )
    assert set(last).isdisjoint(set(held) | set(got))
    until(lambda: pod(wdyn, wns, "blocked")["spec"].get("nodeName") == node, 60, "the waiting pod bound")


def test_rule_selecting_one_device_leaves_the_others_allocatable(
    wdyn: DynamicClient, wns: str, driver_setup: dict[str, str]
) -> None:
    rules = taint_rule_api(wdyn)
    rule = drain_rule(driver_setup, rules)
    rule["spec"]["deviceSelector"]["device"] = "dev-0"
    rules.create(body=rule)
    for i in range(2):
        claim_and_pod(wdyn, wns, f"p{i}", driver_setup["class"])
    for i in range(2):
        until(lambda i=i: allocated(wdyn, wns, f"p{i}"), 60, f"claim p{i} allocated")  # type: ignore[misc]
    assert sorted(allocated(wdyn, wns, "p0") + allocated(wdyn, wns, "p1")) == ["dev-1", "dev-2"]
    claim_and_pod(wdyn, wns, "p2", driver_setup["class"])
    until(lambda: unschedulable(wdyn, wns, "p2"), 60, "the third pod reported Unschedulable")
    assert allocated(wdyn, wns, "p2") == []


def claim_and_pod_with(dyn: DynamicClient, ns: str, name: str, request: dict[str, Any]) -> None:
    """A claim with one request as given (`exactly` or `firstAvailable`) and a pod using it."""
    dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").create(
        namespace=ns,
        body={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "dev", **request}]}},
        },
    )
    dyn.resources.get(api_version="v1", kind="Pod").create(
        namespace=ns,
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "dev", "resourceClaimName": name}],
                "containers": [{"name": "main", "image": IMAGE, "resources": {"claims": [{"name": "dev"}]}}],
            },
        },
    )


def allocation_results(dyn: DynamicClient, ns: str, name: str) -> list[dict[str, Any]]:
    claim = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").get(
        name=name, namespace=ns
    )
    status = claim.to_dict().get("status") or {}
    return list(((status.get("allocation") or {}).get("devices") or {}).get("results") or [])


def test_a_toleration_matches_the_taint_by_key_value_and_effect(
    wdyn: DynamicClient, wns: str, driver_setup: dict[str, str]
) -> None:
    """DeviceToleration: `Equal` (the default) matches key and value, `Exists` any value, an empty key with
    `Exists` every taint, an empty effect every effect; a toleration of another key, value or effect does
    not tolerate the taint."""
    rules = taint_rule_api(wdyn)
    rules.create(body=drain_rule(driver_setup, rules))  # key TAINT_KEY, value "upgrade", NoSchedule
    device_class = driver_setup["class"]
    refused = {
        "other-value": {"key": TAINT_KEY, "operator": "Equal", "value": "other", "effect": "NoSchedule"},
        "other-key": {"key": "kube-contract.example.com/other", "operator": "Exists", "effect": "NoSchedule"},
        "other-effect": {"key": TAINT_KEY, "operator": "Exists", "effect": "NoExecute"},
    }
    for name, toleration in refused.items():
        claim_and_pod_with(
            wdyn, wns, name, {"exactly": {"deviceClassName": device_class, "tolerations": [toleration]}}
        )
    for name in refused:
        # every device is free: only the taint keeps these claims off them
        until(lambda n=name: unschedulable(wdyn, wns, n), 60, f"pod {name} reported Unschedulable")  # type: ignore[misc]
        assert allocated(wdyn, wns, name) == []
    accepted = {
        "equal": {"key": TAINT_KEY, "value": "upgrade", "effect": "NoSchedule"},  # operator defaults to Equal
        "any-effect": {"key": TAINT_KEY, "operator": "Exists"},
        "everything": {"operator": "Exists"},
    }
    for name, toleration in accepted.items():
        claim_and_pod_with(
            wdyn, wns, name, {"exactly": {"deviceClassName": device_class, "tolerations": [toleration]}}
        )
    got = [
        until(lambda n=name: allocated(wdyn, wns, n), 60, f"claim {name} allocated")  # type: ignore[misc]
        for name in accepted
    ]
    assert sorted(d for devices in got for d in devices) == ["dev-0", "dev-1", "dev-2"]
    for name in refused:
        assert allocated(wdyn, wns, name) == []


def test_a_first_available_subrequest_tolerates_on_its_own(
    wdyn: DynamicClient, wns: str, driver_setup: dict[str, str]
) -> None:
    """Tolerations belong to the subrequest: the first alternative, untolerating, cannot have the tainted
    devices; the second, tolerating, is allocated (its result names `<request>/<subrequest>`)."""
    rules = taint_rule_api(wdyn)
    rules.create(body=drain_rule(driver_setup, rules))
    toleration = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    claim_and_pod_with(
        wdyn,
        wns,
        "alternatives",
        {
            "firstAvailable": [
                {"name": "plain", "deviceClassName": driver_setup["class"]},
                {"name": "tolerant", "deviceClassName": driver_setup["class"], "tolerations": [toleration]},
            ]
        },
    )
    results = until(lambda: allocation_results(wdyn, wns, "alternatives"), 60, "the claim allocated")
    assert [r["request"] for r in results] == ["dev/tolerant"]
    # the result keeps a copy of the tolerations of the (sub)request it was allocated for
    assert results[0].get("tolerations") == [toleration]
    until(
        lambda: pod(wdyn, wns, "alternatives")["spec"].get("nodeName") == driver_setup["node"],
        60,
        "the pod bound",
    )
