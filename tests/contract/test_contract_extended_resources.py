"""Extended resources backed by DRA, as kube-scheduler serves them (KEP-5004, DRAExtendedResource).

From the Kubernetes docs (Dynamic Resource Allocation, "Extended resource allocation by DRA") and the API
reference: every DeviceClass backs the extended resource ``deviceclass.resource.kubernetes.io/<class>``
and, when set, the one its ``spec.extendedResourceName`` names. A pod that asks such a resource in its
container resources, on a cluster where no node advertises it, is scheduled with a ResourceClaim the
scheduler creates for it: owned by the pod, annotated ``resource.kubernetes.io/extended-resource-claim:
"true"``, named after the pod (``<pod>-extended-resources-<suffix>``), allocated and reserved for the pod.
The pod's ``spec.resourceClaims`` stays as written; ``status.extendedResourceClaimStatus`` names the
claim and maps each container's resource to its device request (``requestMappings[]{containerName,
resourceName, requestName}``). Request names follow the scheduler's documented (informational) form
``container-<i>-request-<j>``: ``i`` the container's index among init containers then containers, ``j``
the resource's index among that container's requests sorted by name. When no device of the class can
be allocated the pod stays unschedulable and no claim is created.

The test publishes its own ResourceSlice (a driver name no real driver uses) on one schedulable node, so
it needs no DRA driver: it asserts the claim, its allocation and the binding, not that the pods run. It
needs a cluster with DRAExtendedResource on (beta on 1.36): a DeviceClass that loses
``extendedResourceName`` on create says the gate is off, and the tests skip.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from contract_support import until
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

IMAGE = "registry.k8s.io/pause:3.10"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT = "deviceclass.resource.kubernetes.io/"


def schedulable_node(dyn: DynamicClient) -> str:
    nodes = dyn.resources.get(api_version="v1", kind="Node").get().to_dict()["items"]
    for node in sorted(nodes, key=lambda n: str(n["metadata"]["name"])):
        blocking = [
            t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") != "PreferNoSchedule"
        ]
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )
        if ready and not blocking and not (node.get("spec") or {}).get("unschedulable"):
            return str(node["metadata"]["name"])
    pytest.skip("no schedulable node without taints")


def pod(dyn: DynamicClient, ns: str, name: str) -> dict[str, Any]:
    return dict(dyn.resources.get(api_version="v1", kind="Pod").get(name=name, namespace=ns).to_dict())


def allocated(dyn: DynamicClient, ns: str, name: str) -> list[str]:
    claim = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").get(
        name=name, namespace=ns
    )
    allocation = (claim.to_dict().get("status") or {}).get("allocation") or {}
    return [r["device"] for r in (allocation.get("devices") or {}).get("results") or []]


@pytest.fixture
def extended_setup(wdyn: DynamicClient) -> Iterator[dict[str, str]]:
    """Three devices of a made-up driver on one node; a DeviceClass selecting them that backs the extended
    resource `<tag>.example.com/dev`, and one selecting no device at all."""
    node = schedulable_node(wdyn)
    tag = f"kc-{uuid.uuid4().hex[:6]}"
    driver = f"{tag}.example.com"
    slices = wdyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    classes = wdyn.resources.get(api_version="resource.k8s.io/v1", kind="DeviceClass")
    made = {
        "node": node,
        "class": tag,
        "resource": f"{driver}/dev",
        "empty": f"{tag}-none",
        "slice": f"{tag}-{node}",
    }
    slices.create(
        body={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": made["slice"]},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"dev-{i}"} for i in range(3)],
            },
        }
    )
    try:
        created = classes.create(
            body={
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": tag},
                "spec": {
                    "extendedResourceName": made["resource"],
                    "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
                },
            }
        ).to_dict()
        classes.create(
            body={
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": made["empty"]},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "nobody.{driver}"'}}]},
            }
        )
        if (created.get("spec") or {}).get("extendedResourceName") != made["resource"]:
            pytest.skip("this cluster drops DeviceClass spec.extendedResourceName (DRAExtendedResource off)")
        yield made
    finally:
        for api, name in ((classes, tag), (classes, made["empty"]), (slices, made["slice"])):
            with contextlib.suppress(NotFoundError):
                api.delete(name=name)


def make_pod(
    dyn: DynamicClient,
    ns: str,
    name: str,
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
) -> None:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": containers}
    if init:
        spec["initContainers"] = init
    dyn.resources.get(api_version="v1", kind="Pod").create(
        namespace=ns, body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    )


def container(name: str, limits: dict[str, Any], requests: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": limits}
    if requests:
        resources["requests"] = requests
    return {"name": name, "image": IMAGE, "resources": resources}


def claims_in(dyn: DynamicClient, ns: str) -> list[dict[str, Any]]:
    api = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim")
    return list(api.get(namespace=ns).to_dict().get("items") or [])


def extended_status(dyn: DynamicClient, ns: str, name: str) -> dict[str, Any]:
    return dict((pod(dyn, ns, name).get("status") or {}).get("extendedResourceClaimStatus") or {})


def test_implicit_class_resource_gets_a_claim_of_its_own(
    wdyn: DynamicClient, wns: str, extended_setup: dict[str, str]
) -> None:
    resource = IMPLICIT + extended_setup["class"]
    # requests sorted by name: cpu, then the class's resource (index 1), memory
    main = container("main", {resource: 2, "cpu": "100m", "memory": "64Mi"}, {"cpu": "50m", "memory": "32Mi"})
    make_pod(wdyn, wns, "implicit", [main])
    status = until(
        lambda: extended_status(wdyn, wns, "implicit"), 60, "the pod's extendedResourceClaimStatus"
    )
    name = status["resourceClaimName"]
    assert name.startswith("implicit-extended-resources-")
    assert status["requestMappings"] == [
        {"containerName": "main", "resourceName": resource, "requestName": "container-0-request-1"}
    ]
    until(lambda: pod(wdyn, wns, "implicit")["spec"].get("nodeName"), 60, "the pod bound")
    bound = pod(wdyn, wns, "implicit")
    assert not bound["spec"].get("resourceClaims")  # the claim is not added to the spec
    assert bound["spec"]["nodeName"] == extended_setup["node"]

    (claim,) = claims_in(wdyn, wns)
    meta = claim["metadata"]
    assert meta["name"] == name
    assert (meta.get("annotations") or {}).get(ANNOTATION) == "true"
    (owner,) = meta["ownerReferences"]
    assert owner["kind"] == "Pod" and owner["name"] == "implicit" and owner["uid"] == bound["metadata"]["uid"]
    assert owner.get("controller") is True
    assert "resource.kubernetes.io/delete-protection" in (meta.get("finalizers") or [])
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-1",
            "exactly": {
                "deviceClassName": extended_setup["class"],
                "allocationMode": "ExactCount",
                "count": 2,
            },
        }
    ]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [r["request"] for r in results] == ["container-0-request-1"] * 2
    assert len({r["device"] for r in results}) == 2
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [bound["metadata"]["uid"]]


def test_class_extended_resource_name_maps_each_container_to_its_request(
    wdyn: DynamicClient, wns: str, extended_setup: dict[str, str]
) -> None:
    resource = extended_setup["resource"]
    make_pod(
        wdyn,
        wns,
        "explicit",
        [container("main", {resource: 1}), container("side", {resource: 1})],
        init=[container("setup", {resource: 1})],
    )
    status = until(
        lambda: extended_status(wdyn, wns, "explicit"), 60, "the pod's extendedResourceClaimStatus"
    )
    assert status["requestMappings"] == [
        {"containerName": "setup", "resourceName": resource, "requestName": "container-0-request-0"},
        {"containerName": "main", "resourceName": resource, "requestName": "container-1-request-0"},
        {"containerName": "side", "resourceName": resource, "requestName": "container-2-request-0"},
    ]
    claim = until(
        lambda: next((c for c in claims_in(wdyn, wns) if (c.get("status") or {}).get("allocation")), None),
        60,
        "the claim allocated",
    )
    requests = claim["spec"]["devices"]["requests"]
    assert [r["name"] for r in requests] == [
        "container-0-request-0",
        "container-1-request-0",
        "container-2-request-0",
    ]
    assert {r["exactly"]["deviceClassName"] for r in requests} == {extended_setup["class"]}
    assert sorted(allocated(wdyn, wns, claim["metadata"]["name"])) == ["dev-0", "dev-1", "dev-2"]


def test_class_without_devices_leaves_the_pod_unschedulable_and_creates_no_claim(
    wdyn: DynamicClient, wns: str, extended_setup: dict[str, str]
) -> None:
    make_pod(wdyn, wns, "nothing", [container("main", {IMPLICIT + extended_setup["empty"]: 1})])

    def message() -> str:
        conds = (pod(wdyn, wns, "nothing").get("status") or {}).get("conditions") or []
        return next(
            (
                str(c.get("message"))
                for c in conds
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            ),
            "",
        )

    text = until(message, 60, "the pod reported Unschedulable")
    assert "cannot allocate all claims" in text
    assert claims_in(wdyn, wns) == []
    assert not extended_status(wdyn, wns, "nothing")
    assert not pod(wdyn, wns, "nothing")["spec"].get("nodeName")


def test_the_claim_goes_with_its_pod(wdyn: DynamicClient, wns: str, extended_setup: dict[str, str]) -> None:
    make_pod(wdyn, wns, "short", [container("main", {extended_setup["resource"]: 1})])
    until(lambda: extended_status(wdyn, wns, "short"), 60, "the pod's extendedResourceClaimStatus")
    assert len(claims_in(wdyn, wns)) == 1
    wdyn.resources.get(api_version="v1", kind="Pod").delete(
        name="short", namespace=wns, body={"gracePeriodSeconds": 0}
    )
    until(lambda: not claims_in(wdyn, wns), 60, "the claim deleted with its pod")
