"""The simulated API server over real HTTP with the official client: what the contract suite leaves out."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from helpers import kubectl_binary
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from reconciler.sim.server import SimCluster

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "dra-examples" / "v1"


def api_client(cluster: SimCluster, token: str | None = None) -> client.ApiClient:
    cfg = client.Configuration(host=cluster.url)
    cfg.retries = 0
    if token:
        cfg.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(cfg)


@pytest.fixture
def api(sim_cluster: SimCluster) -> Iterator[client.ApiClient]:
    c = api_client(sim_cluster)
    yield c
    c.close()


@pytest.fixture
def dyn(api: client.ApiClient, tmp_path: Path) -> DynamicClient:
    return DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))


def raw(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    ctype: str = "application/json",
    **query: str,
) -> tuple[int, Any, dict[str, str]]:
    """One request without the client's models: (status, parsed body, headers)."""
    http = urllib3.PoolManager()
    url = api.configuration.host + path
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    data = body if isinstance(body, bytes | str) or body is None else json.dumps(body)
    r = http.request(method, url, body=data, headers={"Content-Type": ctype})
    text = r.data.decode()
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = text
    return r.status, parsed, dict(r.headers)


def claim(name: str, ns: str = "default", cls: str = "gpu.example.com", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, **extra}}]}},
    }


# ---------------------------------------------------------------------- discovery and versions


def test_older_versions_are_converted_both_ways(tmp_path: Path) -> None:
    with SimCluster(served_versions=("v1", "v1beta1")) as cluster, api_client(cluster) as api:
        status, group, _ = raw(api, "GET", "/apis/resource.k8s.io")
        assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
        assert group["preferredVersion"]["version"] == "v1"
        beta = claim("c1")
        beta["apiVersion"] = "resource.k8s.io/v1beta1"
        beta["spec"]["devices"]["requests"] = [{"name": "gpu", "deviceClassName": "gpu.example.com"}]
        status, created, headers = raw(
            api, "POST", "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaims", beta
        )
        assert status == 201, created
        assert "deprecated in v1.35+" in headers.get("Warning", "")
        assert created["spec"]["devices"]["requests"][0]["deviceClassName"] == "gpu.example.com"
        _, as_v1, _ = raw(api, "GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c1")
        assert as_v1["apiVersion"] == "resource.k8s.io/v1"
        assert as_v1["spec"]["devices"]["requests"][0]["exactly"] == {
            "deviceClassName": "gpu.example.com",
            "allocationMode": "ExactCount",
            "count": 1,
        }
        sl = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "s1"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {"model": {"string": "a100"}},
                        "capacity": {"memory": {"value": "40Gi"}},
                    }
                ],
            },
        }
        assert raw(api, "POST", "/apis/resource.k8s.io/v1/resourceslices", sl)[0] == 201
        _, beta_slice, _ = raw(api, "GET", "/apis/resource.k8s.io/v1beta1/resourceslices/s1")
        assert beta_slice["spec"]["devices"][0] == {
            "name": "gpu-0",
            "basic": {"attributes": {"model": {"string": "a100"}}, "capacity": {"memory": {"value": "40Gi"}}},
        }


def test_v1beta1_only_cluster_plays_1_32(tmp_path: Path) -> None:
    with SimCluster(served_versions=("v1beta1",)) as cluster, api_client(cluster) as api:
        assert raw(api, "GET", "/version")[1]["minor"] == "32"
        assert raw(api, "GET", "/apis/resource.k8s.io/v1/deviceclasses")[0] == 404
        assert raw(api, "GET", "/apis/resource.k8s.io/v1beta1/deviceclasses")[0] == 200


def test_discovery_lists_core_and_workload_kinds(api: client.ApiClient) -> None:
    core = {r["name"]: r for r in raw(api, "GET", "/api/v1")[1]["resources"]}
    assert {"pods", "pods/status", "nodes", "configmaps", "events", "namespaces"} <= set(core)
    assert core["pods"]["shortNames"] == ["po"]
    groups = {g["name"] for g in raw(api, "GET", "/apis")[1]["groups"]}
    assert {
        "apps",
        "batch",
        "events.k8s.io",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
    } <= groups


# ---------------------------------------------------------------------- validation and errors


def test_validation_messages_match_a_real_server(api: client.ApiClient) -> None:
    status, body, _ = raw(
        api,
        "POST",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
        claim("c1", allocationMode="Sometimes"),
    )
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'ResourceClaim.resource.k8s.io "c1" is invalid: spec.devices.requests[0].exactly.allocationMode: '
        'Unsupported value: "Sometimes": supported values: "All", "ExactCount"'
    )
    assert body["details"]["causes"][0]["field"] == "spec.devices.requests[0].exactly.allocationMode"
    status, body, _ = raw(
        api,
        "POST",
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "Bad_Name"},
            "spec": {},
        },
    )
    assert status == 422
    assert 'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain' in body["message"]
    status, body, _ = raw(
        api, "POST", "/apis/resource.k8s.io/v1/namespaces/nowhere/resourceclaims", claim("c1", ns="nowhere")
    )
    assert (status, body["message"]) == (404, 'namespaces "nowhere" not found')


def test_pod_container_claim_must_be_declared(api: client.ApiClient) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }
    status, body, _ = raw(api, "POST", "/api/v1/namespaces/default/pods", pod)
    assert status == 422
    assert (
        'spec.containers[0].resources.claims[0]: Not found: "gpus": must be one of the names in '
        "pod.spec.resourceClaims: gpu"
    ) in body["message"]


def test_unknown_fields(api: client.ApiClient) -> None:
    bad = claim("c1")
    bad["spec"]["devices"]["foo"] = 1
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    status, body, _ = raw(api, "POST", path, bad, fieldValidation="Strict")
    assert (status, body["message"]) == (400, 'strict decoding error: unknown field "spec.devices.foo"')
    status, body, _ = raw(
        api,
        "PATCH",
        path + "/c1",
        bad,
        "application/apply-patch+yaml",
        fieldManager="m",
        fieldValidation="Strict",
    )
    assert status == 500
    assert body["message"] == (
        "failed to create typed patch object (default/c1; resource.k8s.io/v1, Kind=ResourceClaim): "
        ".spec.devices.foo: field not declared in schema"
    )
    status, body, headers = raw(api, "POST", path, bad)  # default Warn: dropped, with a warning
    assert status == 201 and "foo" not in body["spec"]["devices"]
    assert 'unknown field \\"spec.devices.foo\\"' in headers["Warning"]


# ---------------------------------------------------------------------- writes


def test_ssa_conflict_message_and_managed_fields(dyn: DynamicClient) -> None:
    cm = dyn.resources.get(api_version="v1", kind="ConfigMap")
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
        "data": {"a": "1", "b": "2"},
    }
    dyn.server_side_apply(cm, body=body, namespace="default", field_manager="one")
    body["data"] = {"a": "other"}
    with pytest.raises(Exception) as e:
        dyn.server_side_apply(cm, body=body, namespace="default", field_manager="two")
    status = json.loads(e.value.body)  # type: ignore[attr-defined]
    assert status["code"] == 409
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "one": .data.a'
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "one"', "field": ".data.a"}
    ]
    out = dyn.server_side_apply(cm, body=body, namespace="default", field_manager="two", force_conflicts=True)
    assert dict(out.data) == {"a": "other", "b": "2"}
    managers = {m["manager"]: m["fieldsV1"] for m in out.to_dict()["metadata"]["managedFields"]}
    assert managers == {"one": {"f:data": {"f:b": {}}}, "two": {"f:data": {"f:a": {}}}}


def test_strategic_merge_patch_merges_containers_by_name(dyn: DynamicClient) -> None:
    deploy = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    deploy.create(
        namespace="default",
        body={
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {
                        "containers": [
                            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                            {"name": "b", "image": "b:1"},
                        ]
                    },
                },
            },
        },
    )
    out = deploy.patch(
        name="d",
        namespace="default",
        content_type="application/strategic-merge-patch+json",
        body={
            "metadata": {"finalizers": ["x/y"]},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "b", "image": "b:2"},
                            {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                        ]
                    }
                }
            },
        },
    )
    containers = {c.name: c for c in out.spec.template.spec.containers}
    assert containers["a"].image == "a:1" and containers["b"].image == "b:2"
    assert [e.name for e in containers["a"].env] == ["X", "Y"]
    assert out.metadata.generation == 2
    out = deploy.patch(
        name="d",
        namespace="default",
        content_type="application/json-patch+json",
        body=[{"op": "replace", "path": "/spec/replicas", "value": 3}],
    )
    assert out.spec.replicas == 3


def test_dry_run_on_every_write(dyn: DynamicClient) -> None:
    cm = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cm.create(namespace="default", body={"metadata": {"name": "c"}, "data": {"a": "1"}})
    rv = cm.get(name="c", namespace="default").metadata.resourceVersion
    cm.replace(namespace="default", body={"metadata": {"name": "c"}, "data": {"a": "2"}}, dry_run="All")
    cm.patch(
        name="c",
        namespace="default",
        body={"data": {"a": "3"}},
        dry_run="All",
        content_type="application/merge-patch+json",
    )
    cm.delete(name="c", namespace="default", dry_run="All")
    got = cm.get(name="c", namespace="default")
    assert got.data.a == "1" and got.metadata.resourceVersion == rv


def test_garbage_collection_by_owner_reference(dyn: DynamicClient) -> None:
    cm = dyn.resources.get(api_version="v1", kind="ConfigMap")
    owner = cm.create(namespace="default", body={"metadata": {"name": "owner"}})

    def dependent(name: str) -> None:
        cm.create(
            namespace="default",
            body={
                "metadata": {
                    "name": name,
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
                    ],
                }
            },
        )

    dependent("dep1")
    cm.delete(name="owner", namespace="default", propagation_policy="Orphan")
    assert not cm.get(name="dep1", namespace="default").metadata.ownerReferences
    owner = cm.create(namespace="default", body={"metadata": {"name": "owner"}})
    dependent("dep2")
    cm.delete(name="owner", namespace="default")  # Background
    names = {i.metadata.name for i in cm.get(namespace="default").items}
    assert "dep2" not in names and "dep1" in names


def test_watch_sends_410_for_a_compacted_resource_version(
    api: client.ApiClient, sim_cluster: SimCluster
) -> None:
    sim_cluster.store._history.clear()  # as if etcd had compacted
    status, text, _ = raw(
        api,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        watch="true",
        resourceVersion="1",
        timeoutSeconds="1",
    )
    event = text if isinstance(text, dict) else json.loads(str(text).splitlines()[0])
    assert status == 200 and event["type"] == "ERROR" and event["object"]["code"] == 410


def test_events_are_served_by_both_apis(dyn: DynamicClient) -> None:
    new = dyn.resources.get(api_version="events.k8s.io/v1", kind="Event")
    new.create(
        namespace="default",
        body={
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "e1"},
            "regarding": {"kind": "Pod", "name": "p1", "namespace": "default"},
            "note": "hello",
            "reason": "Started",
            "type": "Normal",
            "reportingController": "sim",
            "reportingInstance": "sim-1",
            "action": "Start",
            "eventTime": "2026-01-01T00:00:00.000000Z",
        },
    )
    old = (
        dyn.resources.get(api_version="v1", kind="Event")
        .get(namespace="default", field_selector="involvedObject.name=p1")
        .items
    )
    assert [(e.message, e.involvedObject.kind, e.reportingComponent) for e in old] == [
        ("hello", "Pod", "sim")
    ]
    assert [
        e.metadata.name for e in new.get(namespace="default", field_selector="regarding.name=p1").items
    ] == ["e1"]


# ---------------------------------------------------------------------- CRDs


def test_crd_registers_custom_resources(dyn: DynamicClient, api: client.ApiClient) -> None:
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(
        body={
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "computedomains.resource.nvidia.com"},
            "spec": {
                "group": "resource.nvidia.com",
                "scope": "Namespaced",
                "names": {"plural": "computedomains", "singular": "computedomain", "kind": "ComputeDomain"},
                "versions": [
                    {
                        "name": "v1beta1",
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object"}},
                    }
                ],
            },
        }
    )
    crd = crds.get(name="computedomains.resource.nvidia.com")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    rl = raw(api, "GET", "/apis/resource.nvidia.com/v1beta1")[1]
    assert {r["name"] for r in rl["resources"]} == {"computedomains", "computedomains/status"}
    status, obj, _ = raw(
        api,
        "POST",
        "/apis/resource.nvidia.com/v1beta1/namespaces/default/computedomains",
        {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomain",
            "metadata": {"name": "cd"},
            "spec": {"numNodes": 2},
        },
    )
    assert status == 201 and obj["spec"] == {"numNodes": 2}
    items = raw(api, "GET", "/apis/resource.nvidia.com/v1beta1/computedomains")[1]["items"]
    assert [(i["kind"], i["metadata"]["name"]) for i in items] == [("ComputeDomain", "cd")]
    crds.delete(name="computedomains.resource.nvidia.com")
    assert raw(api, "GET", "/apis/resource.nvidia.com/v1beta1/computedomains")[0] == 404


# ---------------------------------------------------------------------- faults and auth


def test_fault_injection_and_restart(sim_cluster: SimCluster) -> None:
    with api_client(sim_cluster) as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map("default", {"metadata": {"name": "keep"}})
        sim_cluster.fail_next(2, status=503, match="/configmaps")
        for _ in range(2):
            with pytest.raises(ApiException) as e:
                core.read_namespaced_config_map("keep", "default")
            assert e.value.status == 503
        assert core.read_namespaced_config_map("keep", "default").metadata.name == "keep"
        sim_cluster.timeout_next(1, seconds=2)
        t0 = time.monotonic()
        with pytest.raises((urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.MaxRetryError)):
            core.read_namespaced_config_map("keep", "default", _request_timeout=0.3)
        assert time.monotonic() - t0 < 1.5
        port = sim_cluster.port
        sim_cluster.restart()
        assert sim_cluster.port == port
    with api_client(sim_cluster) as api:
        assert client.CoreV1Api(api).read_namespaced_config_map("keep", "default").metadata.name == "keep"


def test_bearer_token_is_required_when_configured() -> None:
    with SimCluster(token="s3cret") as cluster:
        with api_client(cluster) as api, pytest.raises(ApiException) as e:
            client.CoreV1Api(api).list_namespace()
        assert e.value.status == 401
        with api_client(cluster, token="s3cret") as api:
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"


# ---------------------------------------------------------------------- kubectl


@pytest.mark.skipif(kubectl_binary() is None, reason="kubectl is not installed")
def test_kubectl_server_side_apply(sim_cluster: SimCluster, tmp_path: Path) -> None:
    kubeconfig = sim_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    shutil.copy(EXAMPLES / "01-deviceclasses.yaml", manifests)

    def kubectl(*args: str) -> str:
        proc = subprocess.run(
            [str(kubectl_binary()), "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = kubectl("apply", "--server-side", "-f", str(manifests))
    assert "deviceclass.resource.k8s.io/gpu.example.com serverside-applied" in out
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(manifests))
    assert "gpu.example.com" in kubectl("get", "deviceclasses", "-o", "name")
    mf = json.loads(kubectl("get", "deviceclass", "gpu.example.com", "-o", "json", "--show-managed-fields"))[
        "metadata"
    ]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in mf] == [("kubectl", "Apply")]
