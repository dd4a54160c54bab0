"""
Kubernetes API contract: what a real kube-apiserver (>= 1.34, resource.k8s.io/v1 served) does
for each API operation our client code relies on, driven through the official `kubernetes`
Python client's DynamicClient.  Every test asserts real-server behaviour; a test double must
pass the whole suite.  See README.md for how to run it and for the current results.

Each test works in its own freshly created Namespace (fixture `ns`); cluster-scoped objects get
unique names and are deleted by the test.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pytest
from kubernetes import client, watch
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError, ForbiddenError, NotFoundError
from kubernetes.dynamic.resource import Resource, ResourceInstance

# Older kubernetes clients (seen with 34.1.0) call urllib3's deprecated getheaders() on errors;
# keep that from failing the suite under a project's "filterwarnings = error".
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kubernetes")

T = TypeVar("T")


def claim(
    name: str,
    ns: str | None,
    labels: dict[str, str] | None = None,
    device_class: str = "gpu.example.com",
    **meta: Any,
) -> dict[str, Any]:
    """A minimal valid ResourceClaim; ns=None omits metadata.namespace (URL only)."""
    md = {"name": name, **({"namespace": ns} if ns else {}), **meta}
    if labels:
        md["labels"] = labels
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": md,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }


def raw_get(dyn: DynamicClient, path: str) -> Any:
    # discovery documents have no "kind" (e.g. /version), so skip ResourceInstance wrapping
    return json.loads(dyn.request("get", path, serialize=False).data)


def merge_patch(res: Resource, name: str, ns: str, body: dict[str, Any], **kw: Any) -> ResourceInstance:
    return res.patch(name=name, namespace=ns, body=body, content_type="application/merge-patch+json", **kw)


def ssa(
    dyn: DynamicClient, res: Resource, body: dict[str, Any], ns: str, manager: str = "gitops", **kw: Any
) -> ResourceInstance:
    return dyn.server_side_apply(res, body=body, namespace=ns, field_manager=manager, **kw)


def minor(text: str) -> int:
    """The leading number of a `/version` minor ("34", or "34+" on some distributions)."""
    match = re.match(r"\d+", text)
    assert match, f"minor version {text!r} does not start with a number"
    return int(match.group())


def names(items: Iterable[Any]) -> list[str]:
    return sorted(i.metadata.name for i in items)  # LIST order is not part of the contract


# --------------------------------------------------------------------------- discovery


def test_discovery_version_endpoint(dyn: DynamicClient) -> None:
    v = raw_get(dyn, "/version")
    assert v["major"] == "1"
    assert minor(v["minor"]) >= 34  # resource.k8s.io/v1 is GA in 1.34
    assert v["gitVersion"].startswith("v1.")


def test_discovery_openapi_v2_and_v3(dyn: DynamicClient) -> None:
    # kubectl validates List files and falls back to /openapi/v2 for what v3 does not describe
    v2 = raw_get(dyn, "/openapi/v2")
    assert v2["swagger"] == "2.0"
    gvks = {
        (g.get("group"), g["version"], g["kind"])
        for d in v2["definitions"].values()
        for g in d.get("x-kubernetes-group-version-kind", [])
    }
    assert ("resource.k8s.io", "v1", "ResourceClaim") in gvks
    assert ("", "v1", "ConfigMap") in gvks and ("apps", "v1", "Deployment") in gvks
    v3 = raw_get(dyn, "/openapi/v3")
    assert "apis/resource.k8s.io/v1" in v3["paths"] and "api/v1" in v3["paths"]


def test_discovery_server_version_matches_served_apis(dyn: DynamicClient) -> None:
    # the DynamicClient's view of /version (some distributions report minor as e.g. "34+")
    assert minor(dyn.version["kubernetes"]["minor"]) >= 34


def test_discovery_core_api(dyn: DynamicClient) -> None:
    api = raw_get(dyn, "/api")
    assert api["kind"] == "APIVersions"
    assert "v1" in api["versions"]


def test_discovery_apis_lists_resource_k8s_io(dyn: DynamicClient) -> None:
    groups = {g["name"]: g for g in raw_get(dyn, "/apis")["groups"]}
    assert "resource.k8s.io" in groups
    assert "resource.k8s.io/v1" in {v["groupVersion"] for v in groups["resource.k8s.io"]["versions"]}


def test_discovery_preferred_version_is_stable(dyn: DynamicClient) -> None:
    from_apis = {g["name"]: g for g in raw_get(dyn, "/apis")["groups"]}["resource.k8s.io"]
    group = raw_get(dyn, "/apis/resource.k8s.io")
    assert from_apis["preferredVersion"]["version"] == "v1"
    assert group["preferredVersion"]["version"] == "v1"


def test_discovery_declared_dra_resources(dyn: DynamicClient, rc_api: Resource) -> None:
    assert rc_api.namespaced is True
    assert "status" in rc_api.subresources
    get = dyn.resources.get
    assert get(api_version="resource.k8s.io/v1", kind="DeviceClass").namespaced is False
    assert get(api_version="resource.k8s.io/v1", kind="ResourceSlice").namespaced is False
    assert get(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate").namespaced is True
    assert get(api_version="v1", kind="Pod").namespaced is True
    assert get(api_version="v1", kind="Event").namespaced is True
    assert get(api_version="v1", kind="Namespace").namespaced is False


def test_discovery_resource_list_has_status_subresource(dyn: DynamicClient) -> None:
    rl = raw_get(dyn, "/apis/resource.k8s.io/v1")
    assert rl["kind"] == "APIResourceList" and rl["groupVersion"] == "resource.k8s.io/v1"
    by_name = {r["name"]: r for r in rl["resources"]}
    assert by_name["resourceclaims"]["kind"] == "ResourceClaim"
    assert by_name["resourceclaims"]["namespaced"] is True
    assert "resourceclaims/status" in by_name
    assert by_name["deviceclasses"]["namespaced"] is False
    assert {"create", "get", "list", "watch", "patch", "update", "delete", "deletecollection"} <= set(
        by_name["resourceclaims"]["verbs"]
    )


# --------------------------------------------------------------------------- CRUD basics


def test_create_and_get(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    got = rc_api.get(name="c1", namespace=ns)
    assert got.spec.devices.requests[0].exactly.deviceClassName == "gpu.example.com"


def test_create_populates_server_metadata(rc_api: Resource, ns: str) -> None:
    obj = rc_api.create(body=claim("c1", None), namespace=ns).to_dict()
    md = obj["metadata"]
    assert md.get("namespace") == ns
    assert md.get("uid") and md.get("resourceVersion") and md.get("creationTimestamp")
    assert rc_api.get(name="c1", namespace=ns).metadata.uid == md["uid"]


def test_create_duplicate_is_409(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    with pytest.raises(ConflictError):
        rc_api.create(body=claim("c1", ns), namespace=ns)


def test_get_missing_is_404(rc_api: Resource, ns: str) -> None:
    with pytest.raises(NotFoundError):
        rc_api.get(name="nope", namespace=ns)


def test_cluster_scoped_deviceclass(dyn: DynamicClient) -> None:
    dc = dyn.resources.get(api_version="resource.k8s.io/v1", kind="DeviceClass")
    name = f"kc-{uuid.uuid4().hex[:8]}.example.com"  # cluster-scoped: a unique name, no namespace
    dc.create(
        body={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        }
    )
    try:
        got = dc.get(name=name)
        assert got.metadata.name == name and not got.metadata.namespace
        assert name in names(dc.get().items)
    finally:
        dc.delete(name=name)
    with pytest.raises(NotFoundError):
        dc.get(name=name)


def test_replace_put(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    rc_api.replace(body=claim("c1", ns, labels={"a": "1"}), namespace=ns)
    assert rc_api.get(name="c1", namespace=ns).metadata.labels["a"] == "1"


def test_replace_put_with_stale_resource_version_is_409(rc_api: Resource, ns: str) -> None:
    created = rc_api.create(body=claim("c1", ns), namespace=ns).to_dict()
    fresh = rc_api.get(name="c1", namespace=ns).to_dict()
    fresh["metadata"]["labels"] = {"writer": "first"}
    rc_api.replace(body=fresh, namespace=ns)  # current RV: accepted, RV moves on
    stale = dict(created, metadata=dict(created["metadata"], labels={"writer": "second"}))
    with pytest.raises(ConflictError):
        rc_api.replace(body=stale, namespace=ns)  # RV from before the first PUT
    assert rc_api.get(name="c1", namespace=ns).metadata.labels["writer"] == "first"


def test_stale_resource_version_is_409(rc_api: Resource, ns: str) -> None:
    rv = rc_api.create(body=claim("c1", ns), namespace=ns).metadata.resourceVersion
    merge_patch(rc_api, "c1", ns, {"metadata": {"labels": {"bump": "1"}}})  # object moves past rv
    with pytest.raises(ConflictError):
        merge_patch(rc_api, "c1", ns, {"metadata": {"resourceVersion": rv, "labels": {"a": "b"}}})


def test_update_bumps_resource_version(rc_api: Resource, ns: str) -> None:
    rv1 = rc_api.create(body=claim("c1", ns), namespace=ns).metadata.resourceVersion
    rv2 = merge_patch(rc_api, "c1", ns, {"metadata": {"labels": {"a": "b"}}}).metadata.resourceVersion
    assert rv1 and rv2 and rv1 != rv2


# --------------------------------------------------------------------------- LIST


def test_list_carries_kind_and_api_version(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    lst = rc_api.get(namespace=ns)
    assert lst.kind == "ResourceClaimList" and lst.apiVersion == "resource.k8s.io/v1"
    assert names(lst.items) == ["c1"]


def test_list_namespace_scoping(rc_api: Resource, ns: str, make_namespace: Callable[[], str]) -> None:
    ns2 = make_namespace()
    rc_api.create(body=claim("c1", ns), namespace=ns)
    rc_api.create(body=claim("c2", ns2), namespace=ns2)
    assert names(rc_api.get(namespace=ns).items) == ["c1"]
    everywhere = {(i.metadata.namespace, i.metadata.name) for i in rc_api.get().items}  # all namespaces
    assert {(ns, "c1"), (ns2, "c2")} <= everywhere


def test_list_label_selector(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("a", ns, labels={"app.kubernetes.io/managed-by": "gitops"}), namespace=ns)
    rc_api.create(body=claim("b", ns, labels={"app.kubernetes.io/managed-by": "someone-else"}), namespace=ns)
    rc_api.create(body=claim("c", ns), namespace=ns)
    got = rc_api.get(namespace=ns, label_selector="app.kubernetes.io/managed-by=gitops")
    assert names(got.items) == ["a"]
    got = rc_api.get(namespace=ns, label_selector="app.kubernetes.io/managed-by==gitops")
    assert names(got.items) == ["a"]


def test_list_label_selector_not_equal(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("a", ns, labels={"tier": "x"}), namespace=ns)
    rc_api.create(body=claim("b", ns, labels={"tier": "y"}), namespace=ns)
    rc_api.create(body=claim("c", ns), namespace=ns)
    # != also matches objects that do not have the label at all
    assert names(rc_api.get(namespace=ns, label_selector="tier!=x").items) == ["b", "c"]


def test_list_set_based_label_selector(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("a", ns, labels={"tier": "x"}), namespace=ns)
    rc_api.create(body=claim("b", ns, labels={"tier": "y", "legacy": "true"}), namespace=ns)
    rc_api.create(body=claim("c", ns, labels={"tier": "z"}), namespace=ns)
    got = rc_api.get(namespace=ns, label_selector="tier in (x,y),!legacy")
    assert names(got.items) == ["a"]


def test_list_label_selector_notin_and_exists(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("a", ns, labels={"tier": "x"}), namespace=ns)
    rc_api.create(body=claim("b", ns, labels={"tier": "y"}), namespace=ns)
    rc_api.create(body=claim("c", ns), namespace=ns)
    # notin also matches objects without the label; a bare key means "label exists"
    assert names(rc_api.get(namespace=ns, label_selector="tier notin (x)").items) == ["b", "c"]
    assert names(rc_api.get(namespace=ns, label_selector="tier").items) == ["a", "b"]
    assert names(rc_api.get(namespace=ns, label_selector="tier,tier notin (x)").items) == ["b"]


def test_list_has_resource_version(rc_api: Resource, ns: str) -> None:
    rv = rc_api.get(namespace=ns).metadata.resourceVersion
    assert rv and rv.isdigit()


# --------------------------------------------------------------------------- server-side apply


def meta_only(name: str, ns: str, **meta: Any) -> dict[str, Any]:
    """An apply configuration that manages metadata fields only (no spec)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, **meta},
    }


def test_ssa_creates_missing_object(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    out = ssa(dyn, rc_api, claim("c1", ns), ns)
    assert out.metadata.uid
    assert rc_api.get(name="c1", namespace=ns).metadata.name == "c1"


def test_ssa_on_existing_object_merges_new_fields(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns, labels={"a": "1"}), namespace=ns)
    out = ssa(dyn, rc_api, meta_only("c1", ns, labels={"b": "2"}), ns)
    assert dict(out.metadata.labels) == {"a": "1", "b": "2"}


def test_ssa_reapply_unchanged_is_noop(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rv = ssa(dyn, rc_api, claim("c1", ns, labels={"a": "1"}), ns).metadata.resourceVersion
    again = ssa(dyn, rc_api, claim("c1", ns, labels={"a": "1"}), ns)
    assert again.metadata.resourceVersion == rv


def test_ssa_removes_fields_dropped_from_manifest(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    ssa(dyn, rc_api, claim("c1", ns), ns)
    ssa(dyn, rc_api, claim("c1", ns, labels={"keep": "1", "drop": "2"}), ns)
    out = ssa(dyn, rc_api, claim("c1", ns, labels={"keep": "1"}), ns)
    assert dict(out.metadata.labels) == {"keep": "1"}


def test_ssa_conflict_without_force_is_409(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns, labels={"owner": "kubectl"}), namespace=ns, field_manager="kubectl")
    with pytest.raises(ConflictError):
        ssa(dyn, rc_api, meta_only("c1", ns, labels={"owner": "gitops"}), ns)
    assert rc_api.get(name="c1", namespace=ns).metadata.labels["owner"] == "kubectl"
    # applying the value the field already has is not a conflict (the field becomes co-owned)
    ssa(dyn, rc_api, meta_only("c1", ns, labels={"owner": "kubectl"}), ns)


def test_ssa_force_takes_over_field(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns, labels={"owner": "kubectl"}), namespace=ns, field_manager="kubectl")
    out = ssa(dyn, rc_api, claim("c1", ns, labels={"owner": "gitops"}), ns, force_conflicts=True)
    assert out.metadata.labels["owner"] == "gitops"
    # the field now belongs to gitops: kubectl's entry no longer lists it
    owned = {m["manager"]: m.get("fieldsV1", {}) for m in out.to_dict()["metadata"]["managedFields"]}
    assert "f:owner" in owned["gitops"]["f:metadata"]["f:labels"]
    assert "f:owner" not in owned.get("kubectl", {}).get("f:metadata", {}).get("f:labels", {})


def test_ssa_defaulted_atomic_list_conflicts_with_other_manager(
    dyn: DynamicClient, rc_api: Resource, ns: str
) -> None:
    # spec.devices.requests is an atomic list and the server defaults allocationMode/count
    # inside it, so the stored value differs from a manifest that omits them.  The sole
    # owner may re-apply it; any other manager applying the very same manifest conflicts.
    ssa(dyn, rc_api, claim("c1", ns), ns)
    ssa(dyn, rc_api, claim("c1", ns), ns)
    stored = rc_api.get(name="c1", namespace=ns).to_dict()["spec"]["devices"]["requests"][0]
    assert stored["exactly"]["allocationMode"] == "ExactCount" and stored["exactly"]["count"] == 1
    with pytest.raises(ConflictError):
        ssa(dyn, rc_api, claim("c1", ns), ns, manager="other")
    with_defaults = claim("c1", ns)
    with_defaults["spec"]["devices"]["requests"][0]["exactly"].update(allocationMode="ExactCount", count=1)
    ssa(dyn, rc_api, with_defaults, ns, manager="other")  # same value as stored: co-owned


def test_ssa_records_managed_fields(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    out = ssa(dyn, rc_api, claim("c1", ns, labels={"a": "1"}), ns).to_dict()
    entries = {(m["manager"], m["operation"]): m for m in out["metadata"].get("managedFields") or []}
    assert ("gitops", "Apply") in entries
    fields = entries["gitops", "Apply"]["fieldsV1"]
    assert "f:a" in fields["f:metadata"]["f:labels"] and "f:spec" in fields


def test_ssa_requires_field_manager(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    with pytest.raises(DynamicApiError) as e:
        dyn.server_side_apply(rc_api, body=meta_only("c1", ns, labels={"a": "1"}), namespace=ns)
    assert e.value.status in (400, 422)


def test_ssa_set_list_is_merged_across_managers(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    ssa(dyn, rc_api, meta_only("c1", ns, finalizers=["a.example.com/x"]), ns, manager="controller-a")
    out = ssa(dyn, rc_api, meta_only("c1", ns, finalizers=["b.example.com/y"]), ns, manager="controller-b")
    assert sorted(out.metadata.finalizers) == ["a.example.com/x", "b.example.com/y"]
    merge_patch(rc_api, "c1", ns, {"metadata": {"finalizers": None}})


def test_resourceclaim_spec_is_immutable(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    with pytest.raises(DynamicApiError) as e:
        ssa(dyn, rc_api, claim("c1", ns, device_class="other.example.com"), ns, force_conflicts=True)
    assert e.value.status == 422
    changed = claim("c1", ns, device_class="other.example.com")
    with pytest.raises(DynamicApiError) as e:
        merge_patch(rc_api, "c1", ns, {"spec": changed["spec"]})
    assert e.value.status == 422
    assert (
        rc_api.get(name="c1", namespace=ns).spec.devices.requests[0].exactly.deviceClassName
        == "gpu.example.com"
    )


# --------------------------------------------------------------------------- dry run


def test_dry_run_create_not_persisted(rc_api: Resource, ns: str) -> None:
    out = rc_api.create(body=claim("dry", ns), namespace=ns, dry_run="All")
    assert out.metadata.name == "dry"
    with pytest.raises(NotFoundError):
        rc_api.get(name="dry", namespace=ns)


def test_dry_run_apply_not_persisted(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns, labels={"v": "1"}), namespace=ns)
    # force: label v is owned by the create's manager; without force a real server says 409
    out = ssa(dyn, rc_api, claim("c1", ns, labels={"v": "2"}), ns, dry_run="All", force_conflicts=True)
    assert out.metadata.labels["v"] == "2"  # the would-be result...
    assert rc_api.get(name="c1", namespace=ns).metadata.labels["v"] == "1"  # ...not stored


def test_dry_run_delete_keeps_object(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    rc_api.delete(name="c1", namespace=ns, dry_run="All")
    assert rc_api.get(name="c1", namespace=ns).metadata.name == "c1"


def test_dry_run_reports_validation_errors(rc_api: Resource, ns: str) -> None:
    with pytest.raises(DynamicApiError) as e:
        rc_api.create(body=claim("Not_A_DNS_Name", ns), namespace=ns, dry_run="All")
    assert e.value.status == 422


# --------------------------------------------------------------------------- status subresource

ALLOCATION = {
    "devices": {
        "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}]
    }
}


def test_read_claim_status_allocation(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    rc_api.status.patch(
        name="c1",
        namespace=ns,
        content_type="application/merge-patch+json",
        body={"status": {"allocation": ALLOCATION}},
    )
    st = rc_api.status.get(name="c1", namespace=ns)
    assert st.status.allocation.devices.results[0].device == "gpu-0"


def test_status_patch_sets_status(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    rc_api.status.patch(
        name="c1",
        namespace=ns,
        content_type="application/merge-patch+json",
        body={"status": {"allocation": ALLOCATION}},
    )
    assert rc_api.get(name="c1", namespace=ns).status.allocation is not None


def test_main_resource_write_ignores_status(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    merge_patch(rc_api, "c1", ns, {"status": {"allocation": ALLOCATION}})
    assert not rc_api.get(name="c1", namespace=ns).to_dict().get("status")


def test_status_write_ignores_metadata(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    rc_api.status.patch(
        name="c1",
        namespace=ns,
        content_type="application/merge-patch+json",
        body={"metadata": {"labels": {"sneaky": "1"}}, "status": {"allocation": ALLOCATION}},
    )
    got = rc_api.get(name="c1", namespace=ns)
    assert not (got.metadata.labels or {})
    assert got.status.allocation is not None


def _create_pod(pods: Resource, body: dict[str, Any], ns: str, timeout: float = 20) -> ResourceInstance:
    # A real server admits Pods only once the namespace's "default" ServiceAccount exists;
    # it is created asynchronously right after the Namespace.
    deadline = time.time() + timeout
    while True:
        try:
            return pods.create(body=body, namespace=ns)
        except ForbiddenError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def test_read_pod_conditions(dyn: DynamicClient, ns: str) -> None:
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    _create_pod(
        pods,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "namespace": ns},
            # a scheduler name nobody serves: no scheduler or kubelet touches this Pod
            "spec": {
                "schedulerName": "kube-contract-no-scheduler",
                "containers": [{"name": "c", "image": "registry.example/x:1"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}],
            },
        },
        ns,
    )
    pods.status.patch(
        name="p1",
        namespace=ns,
        content_type="application/merge-patch+json",
        body={
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/1 nodes are available: cannot allocate all claims",
                    }
                ],
            }
        },
    )
    conds = {c.type: c for c in pods.status.get(name="p1", namespace=ns).status.conditions}
    assert conds["PodScheduled"].reason == "Unschedulable"
    pods.delete(name="p1", namespace=ns, grace_period_seconds=0)


# --------------------------------------------------------------------------- delete


def test_delete_then_404(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns), namespace=ns)
    rc_api.delete(name="c1", namespace=ns)
    with pytest.raises(NotFoundError):
        rc_api.get(name="c1", namespace=ns)


def test_delete_missing_is_404(rc_api: Resource, ns: str) -> None:
    with pytest.raises(NotFoundError):
        rc_api.delete(name="nope", namespace=ns)


def test_delete_with_finalizer_sets_deletion_timestamp(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("c1", ns, finalizers=["gitops.example.com/protect"]), namespace=ns)
    rc_api.delete(name="c1", namespace=ns)
    assert rc_api.get(name="c1", namespace=ns).metadata.deletionTimestamp
    merge_patch(rc_api, "c1", ns, {"metadata": {"finalizers": []}})
    with pytest.raises(NotFoundError):
        rc_api.get(name="c1", namespace=ns)


def test_delete_collection_by_label(rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("a", ns, labels={"x": "1"}), namespace=ns)
    rc_api.create(body=claim("b", ns), namespace=ns)
    rc_api.delete(namespace=ns, label_selector="x=1")
    assert names(rc_api.get(namespace=ns).items) == ["b"]


# --------------------------------------------------------------------------- events


def _event(name: str, ns: str, involved: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "name": involved,
            "namespace": ns,
        },
        "reason": "Allocated",
        "message": "m",
        "type": "Normal",
        "source": {"component": "kube-contract"},
    }


def test_list_events_in_namespace(dyn: DynamicClient, ns: str, make_namespace: Callable[[], str]) -> None:
    other = make_namespace()
    ev = dyn.resources.get(api_version="v1", kind="Event")
    ev.create(body=_event("e1", ns, "c1"), namespace=ns)
    ev.create(body=_event("e2", ns, "c2"), namespace=ns)
    ev.create(body=_event("e3", other, "c1"), namespace=other)
    got = {(i.metadata.namespace, i.metadata.name) for i in ev.get(namespace=ns).items}
    assert {(ns, "e1"), (ns, "e2")} <= got and all(n == ns for n, _ in got)


def test_list_events_field_selector(dyn: DynamicClient, ns: str) -> None:
    ev = dyn.resources.get(api_version="v1", kind="Event")
    ev.create(body=_event("e1", ns, "c1"), namespace=ns)
    ev.create(body=_event("e2", ns, "c2"), namespace=ns)
    got = ev.get(namespace=ns, field_selector="involvedObject.name=c1")
    assert names(got.items) == ["e1"]


def test_events_visible_in_both_event_apis(dyn: DynamicClient, ns: str) -> None:
    dyn.resources.get(api_version="v1", kind="Event").create(body=_event("e1", ns, "c1"), namespace=ns)
    ev2 = dyn.resources.get(api_version="events.k8s.io/v1", kind="Event")
    got = ev2.get(namespace=ns).items
    assert names(got) == ["e1"]
    assert got[0].regarding.name == "c1"  # involvedObject is called "regarding" there


# --------------------------------------------------------------------------- watch


class Watcher:
    """Consumes dyn.watch(...) in a background thread (the client is synchronous)."""

    def __init__(self, dyn: DynamicClient, res: Resource, timeout: int = 10, **kw: Any) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.done, self.w = threading.Event(), watch.Watch()

        def run() -> None:
            try:
                for ev in dyn.watch(res, watcher=self.w, timeout=timeout, **kw):
                    self.events.append((ev["type"], ev["raw_object"]))
            except Exception as e:  # noqa: BLE001
                self.events.append(("EXC", {"error": repr(e), "status": getattr(e, "status", None)}))
            finally:
                self.done.set()

        threading.Thread(target=run, daemon=True).start()
        time.sleep(0.3)

    def wait_for(self, n: int, timeout: float = 5.0) -> list[tuple[str, str | None]]:
        end = time.time() + timeout
        while len(self.events) < n and time.time() < end:
            time.sleep(0.05)
        return [(t, o.get("metadata", {}).get("name")) for t, o in self.events]


def test_watch_added_modified_deleted(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rv = rc_api.get(namespace=ns).metadata.resourceVersion
    w = Watcher(dyn, rc_api, namespace=ns, resource_version=rv)
    rc_api.create(body=claim("c1", ns), namespace=ns)
    merge_patch(rc_api, "c1", ns, {"metadata": {"labels": {"a": "1"}}})
    rc_api.delete(name="c1", namespace=ns)
    assert w.wait_for(3) == [("ADDED", "c1"), ("MODIFIED", "c1"), ("DELETED", "c1")]
    w.w.stop()


def test_watch_timeout_seconds_ends_stream(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    # A fresh kube-apiserver may answer 429 or 504 (reason Timeout) while its watch cache initialises;
    # clients retry.
    for _ in range(10):
        t0 = time.time()
        w = Watcher(dyn, rc_api, namespace=ns, timeout=1)
        assert w.done.wait(5)
        errors = [e for e in w.events if e[0] == "EXC"]
        if not (errors and errors[0][1]["status"] in (429, 504)):
            break
        time.sleep(1)
    assert 0.8 <= time.time() - t0 < 5
    assert not errors


def test_watch_resumes_from_list_resource_version(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    rc_api.create(body=claim("old", ns), namespace=ns)
    rv = rc_api.get(namespace=ns).metadata.resourceVersion
    w = Watcher(dyn, rc_api, namespace=ns, resource_version=rv)
    rc_api.create(body=claim("new", ns), namespace=ns)
    assert w.wait_for(1)[0] == ("ADDED", "new")
    w.w.stop()


def test_watch_without_resource_version_starts_with_existing_objects(
    dyn: DynamicClient, rc_api: Resource, ns: str
) -> None:
    rc_api.create(body=claim("old", ns), namespace=ns)
    w = Watcher(dyn, rc_api, namespace=ns)
    assert w.wait_for(1)[0] == ("ADDED", "old")
    w.w.stop()


def test_watch_label_selector(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    w = Watcher(dyn, rc_api, namespace=ns, label_selector="app=a")
    rc_api.create(body=claim("b", ns, labels={"app": "b"}), namespace=ns)
    rc_api.create(body=claim("a", ns, labels={"app": "a"}), namespace=ns)
    assert w.wait_for(1)[0] == ("ADDED", "a")
    time.sleep(0.3)
    assert [n for _, n in w.wait_for(1)] == ["a"]
    w.w.stop()


def test_watch_events_carry_resource_version(dyn: DynamicClient, rc_api: Resource, ns: str) -> None:
    w = Watcher(dyn, rc_api, namespace=ns)
    rc_api.create(body=claim("c1", ns), namespace=ns)
    w.wait_for(1)
    assert w.events and w.events[0][1]["metadata"].get("resourceVersion")
    w.w.stop()


def test_watch_sees_objects_whose_namespace_came_from_url(
    dyn: DynamicClient, rc_api: Resource, ns: str
) -> None:
    w = Watcher(dyn, rc_api, namespace=ns)
    rc_api.create(body=claim("c1", None), namespace=ns)
    assert w.wait_for(1, timeout=3) == [("ADDED", "c1")]
    w.w.stop()


# --------------------------------------------------------------------------- RBAC on server-side apply


def _restricted_client(
    kube_configuration: client.Configuration, dyn: DynamicClient, ns: str, verbs: list[str]
) -> DynamicClient:
    """A DynamicClient authenticated as a fresh ServiceAccount of `ns` that may do `verbs` on
    ConfigMaps in `ns` only (Role + RoleBinding, token from the TokenRequest API)."""
    sa = f"kc-sa-{uuid.uuid4().hex[:6]}"
    dyn.resources.get(api_version="v1", kind="ServiceAccount").create(
        namespace=ns, body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}}
    )
    dyn.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="Role").create(
        namespace=ns,
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": sa},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}],
        },
    )
    dyn.resources.get(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding").create(
        namespace=ns,
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        },
    )
    token = json.loads(
        dyn.request(
            "post",
            f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600},
            },
            serialize=False,
        ).data
    )["status"]["token"]
    cfg = copy.copy(kube_configuration)
    cfg.cert_file = cfg.key_file = None
    cfg.api_key = {"authorization": "Bearer " + token}
    cfg.api_key_prefix = {}
    cfg.username = cfg.password = None
    return DynamicClient(client.ApiClient(cfg))


def _cm(name: str, ns: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {"k": value},
    }


def _eventually(fn: Callable[[], T], seconds: float = 10) -> T:
    """RBAC changes reach a real server's authorizer through an informer: allow a short delay."""
    deadline = time.time() + seconds
    while True:
        try:
            return fn()
        except ForbiddenError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def test_rbac_ssa_that_creates_needs_create_verb(
    dyn: DynamicClient, kube_configuration: client.Configuration, ns: str
) -> None:
    cm_admin = dyn.resources.get(api_version="v1", kind="ConfigMap")
    restricted = _restricted_client(kube_configuration, dyn, ns, ["get", "list", "patch"])
    cm = restricted.resources.get(api_version="v1", kind="ConfigMap")
    # updating an existing object with an apply patch needs only `patch`
    cm_admin.create(namespace=ns, body=_cm("exists", ns, "a"))
    out = _eventually(
        lambda: restricted.server_side_apply(
            cm, body=_cm("exists", ns, "b"), namespace=ns, field_manager="gitops", force_conflicts=True
        )
    )
    assert out.data.k == "b"
    # an apply patch that would create the object also needs `create`: 403, nothing written
    with pytest.raises(ForbiddenError) as err:
        restricted.server_side_apply(cm, body=_cm("new", ns, "a"), namespace=ns, field_manager="gitops")
    message = json.loads(err.value.body or "{}")["message"]
    assert 'cannot create resource "configmaps"' in message, message
    with pytest.raises(ForbiddenError):
        restricted.server_side_apply(
            cm, body=_cm("new", ns, "a"), namespace=ns, field_manager="gitops", dry_run="All"
        )
    with pytest.raises(NotFoundError):
        cm_admin.get(name="new", namespace=ns)


def test_rbac_ssa_create_allowed_with_create_and_patch(
    dyn: DynamicClient, kube_configuration: client.Configuration, ns: str
) -> None:
    restricted = _restricted_client(kube_configuration, dyn, ns, ["get", "list", "patch", "create"])
    cm = restricted.resources.get(api_version="v1", kind="ConfigMap")
    out = _eventually(
        lambda: restricted.server_side_apply(
            cm, body=_cm("new", ns, "a"), namespace=ns, field_manager="gitops"
        )
    )
    assert out.metadata.uid
    # and no further than its Role: another namespace is forbidden
    with pytest.raises(ForbiddenError):
        restricted.server_side_apply(
            cm, body=_cm("new", "default", "a"), namespace="default", field_manager="gitops"
        )
