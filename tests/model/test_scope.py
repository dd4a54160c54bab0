"""Whether a kind is namespaced: the generated table of built-in kinds against its source (the Kubernetes
client's API surface), the DRA kinds of every version, CRDs of the desired state, discovery, unknown kinds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import kubernetes.client as k8s
import pytest

from reconciler.model.objects import Manifest, ObjRef, ref_of
from reconciler.model.scope import (
    Scopes,
    crd_scopes,
    live_ref,
    rescope,
    scoped_ref,
    unknown_scope_notice,
)
from reconciler.model.scope_table import NAMESPACED
from reconciler.model.served_table import KINDS

REPO = Path(__file__).resolve().parents[2]
DRA = "resource.k8s.io"

# The DRA reference (docs: "Scopes"): these resource.k8s.io kinds are cluster-scoped, every other one is
# namespaced, in every version that has them.
DRA_CLUSTER_SCOPED = {
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
    "ResourceClass",
    "ResourcePoolStatusRequest",
}
DRA_NAMESPACED = {
    "ResourceClaim",
    "ResourceClaimTemplate",
    "PodScheduling",
    "PodSchedulingContext",
    "ResourceClaimParameters",
    "ResourceClassParameters",
}


def crd(group: str, kind: str, scope: str, version: str = "v1alpha1") -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.lower()}s.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": f"{kind.lower()}s"},
            "scope": scope,
            "versions": [{"name": version, "served": True, "storage": True}],
        },
    }


def manifest(body: dict, rendered_by: str = "") -> Manifest:
    return Manifest(body=body, ref=ref_of(body), path="m.yaml", line=1, rendered_by=rendered_by)


RULE = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule", "metadata": {"name": "gpu"}}
POOL_REQUEST = {
    "apiVersion": "resource.k8s.io/v1alpha3",
    "kind": "ResourcePoolStatusRequest",
    "metadata": {"name": "pools"},
}


def test_the_generated_table_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "scope_table.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def _api_class(group: str, version: str) -> type | None:
    """The client's API class of a group version: CoreV1Api, ResourceV1alpha3Api, RbacAuthorizationV1Api."""
    prefix = (
        "".join(part.capitalize() for part in group.removesuffix(".k8s.io").split(".")) if group else "Core"
    )
    return getattr(k8s, f"{prefix}{version.capitalize()}Api", None)


def _snake(kind: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", kind).lower()


def test_the_table_says_what_the_clients_operations_say() -> None:
    """Independently of the generator's reading of paths: a namespaced kind has `list_namespaced_<kind>`, a
    cluster-scoped one `list_<kind>` only, on the API class of its group version."""
    compared = 0
    for (group, version, kind), namespaced in NAMESPACED.items():
        api = _api_class(group, version)
        snake = _snake(kind)
        in_namespaces = api is not None and hasattr(api, f"list_namespaced_{snake}")
        cluster_wide = api is not None and hasattr(api, f"list_{snake}")
        if not in_namespaces and not cluster_wide:
            continue  # a version the client no longer has (resource.k8s.io/v1alpha2): scoped by its kind
        assert in_namespaces is namespaced and cluster_wide is not namespaced, (group, version, kind)
        compared += 1
    assert compared > 80


@pytest.mark.parametrize(
    ("group", "kind"), sorted((g, k) for g, k in KINDS if (g, k) != ("", "APIGroup")), ids=str
)
def test_every_built_in_kind_of_every_release_has_a_scope(group: str, kind: str) -> None:
    for version in KINDS[(group, kind)]:
        assert (group, version, kind) in NAMESPACED


def test_the_dra_kinds_of_every_version_have_the_documented_scope() -> None:
    dra = {(v, k): namespaced for (g, v, k), namespaced in NAMESPACED.items() if g == DRA}
    assert {k for _, k in dra} == DRA_CLUSTER_SCOPED | DRA_NAMESPACED
    for (version, kind), namespaced in dra.items():
        assert namespaced is (kind in DRA_NAMESPACED), f"{version} {kind}"
    assert dra[("v1alpha3", "ResourcePoolStatusRequest")] is False
    assert dra[("v1alpha2", "ResourceClass")] is False
    assert dra[("v1alpha1", "PodScheduling")] is True


def test_a_built_in_kind_keeps_its_scope_in_a_version_the_table_does_not_have() -> None:
    body = {"apiVersion": "resource.k8s.io/v2", "kind": "DeviceClass", "metadata": {"name": "g"}}
    assert ref_of(body) == ObjRef(DRA, "DeviceClass", "", "g")
    assert ref_of(POOL_REQUEST) == ObjRef(DRA, "ResourcePoolStatusRequest", "", "pools")


def test_crd_scopes_read_spec_scope() -> None:
    found = crd_scopes(
        [
            crd("nfd.k8s-sigs.io", "NodeFeatureRule", "Cluster"),
            crd("nfd.k8s-sigs.io", "NodeFeature", "Namespaced"),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        ]
    )
    assert found == {("nfd.k8s-sigs.io", "NodeFeatureRule"): False, ("nfd.k8s-sigs.io", "NodeFeature"): True}


def test_a_cluster_scoped_crd_kind_in_the_desired_state_has_no_namespace() -> None:
    loaded = [manifest(crd("nfd.k8s-sigs.io", "NodeFeatureRule", "Cluster")), manifest(RULE)]
    assert loaded[1].ref.namespace == "default"  # what the load alone can say
    rescoped = rescope(loaded, Scopes())
    assert rescoped.changed and rescoped.unknown == []
    assert str(rescoped.manifests[1].ref) == "NodeFeatureRule/gpu"
    assert rescoped.manifests[1].body is RULE  # as written: the user's manifest is not rewritten


def test_a_namespaced_crd_kind_keeps_its_namespace() -> None:
    feature = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature", "metadata": {"name": "n"}}
    placed = {**feature, "metadata": {"name": "m", "namespace": "nfd"}}
    loaded = [
        manifest(crd("nfd.k8s-sigs.io", "NodeFeature", "Namespaced")),
        manifest(feature),
        manifest(placed),
    ]
    rescoped = rescope(loaded, Scopes())
    assert not rescoped.changed
    assert [str(m.ref) for m in rescoped.manifests[1:]] == ["NodeFeature/default/n", "NodeFeature/nfd/m"]


def test_discovery_scopes_a_kind_whose_crd_the_desired_state_lacks() -> None:
    scopes = Scopes(discovered={("nfd.k8s-sigs.io", "NodeFeatureRule"): False})
    rescoped = rescope([manifest(RULE)], scopes)
    assert str(rescoped.manifests[0].ref) == "NodeFeatureRule/gpu" and rescoped.unknown == []
    assert scoped_ref(RULE, scopes) == rescoped.manifests[0].ref


def test_a_kind_nothing_knows_is_namespaced_and_said_once() -> None:
    other = {**RULE, "metadata": {"name": "cpu"}}
    rescoped = rescope([manifest(RULE), manifest(other)], Scopes())
    assert [str(m.ref) for m in rescoped.manifests] == [
        "NodeFeatureRule/default/gpu",
        "NodeFeatureRule/default/cpu",
    ]
    assert rescoped.unknown == [("nfd.k8s-sigs.io", "NodeFeatureRule")]
    notice = unknown_scope_notice(rescoped.unknown)
    assert notice.count("NodeFeatureRule.nfd.k8s-sigs.io") == 1 and "taken as namespaced" in notice
    assert unknown_scope_notice([]) == ""


def test_a_rendered_cluster_scoped_object_loses_the_namespace_rendering_gave_it() -> None:
    body = {**RULE, "metadata": {"name": "gpu", "namespace": "nfd"}}
    scopes = Scopes(discovered={("nfd.k8s-sigs.io", "NodeFeatureRule"): False})
    [rendered] = rescope([manifest(body, rendered_by="kustomization k")], scopes).manifests
    assert "namespace" not in rendered.body["metadata"] and body["metadata"]["namespace"] == "nfd"
    assert str(rendered.ref) == "NodeFeatureRule/gpu"


def test_the_same_object_from_a_manifest_and_from_the_cluster_has_one_reference() -> None:
    scopes = Scopes(discovered={("nfd.k8s-sigs.io", "NodeFeatureRule"): False})
    live = {**RULE, "metadata": {"name": "gpu", "uid": "u1", "resourceVersion": "3"}}
    assert live_ref(live) == rescope([manifest(RULE)], scopes).manifests[0].ref
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
    }
    assert live_ref(claim) == ref_of(claim)
