"""The served-version facts of the policy input: `cluster.kinds`, `index.crds` and the offline `release`."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.errors import UserError
from reconciler.model.loader import load_blobs
from reconciler.model.objects import Manifest
from reconciler.model.plan import compute_plan
from reconciler.policy.inputdoc import ClusterFacts, build_input

RULE = """apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: maintenance}
spec:
  taint: {key: example.com/maintenance, effect: NoSchedule}
"""
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - {name: v2, served: true, storage: true}
  - {name: v1, served: false, storage: false}
---
apiVersion: example.com/v2
kind: Widget
metadata: {name: w, namespace: ml}
"""


def load(text: str) -> list[Manifest]:
    return load_blobs([("m.yaml", text.encode())]).manifests


def doc_for(head: list[Manifest], **kwargs: Any) -> dict[str, Any]:
    return build_input(head=head, base=[], plan=compute_plan([], head), **kwargs)


def test_offline_release_block_judges_the_kinds_of_the_change() -> None:
    doc = doc_for(load(RULE + "---\n" + CRD))
    release = doc["release"]
    assert release["version"] == "1.36" and release["known"] is True
    kinds = release["kinds"]
    assert kinds["resource.k8s.io"]["DeviceTaintRule"]["versions"] == {
        "v1beta2": "opt-in",
        "v1alpha3": "opt-in",
    }
    assert kinds["apiextensions.k8s.io"]["CustomResourceDefinition"]["default"] == ["v1"]
    assert "example.com" not in kinds  # a CRD's kind is not the table's to judge


def test_the_release_comes_from_params() -> None:
    doc = doc_for(load(RULE), params={"kubernetes_version": "v1.37.0"})
    release = doc["release"]
    assert release["version"] == "1.37"
    assert release["kinds"]["resource.k8s.io"]["DeviceTaintRule"]["default"] == ["v1"]
    with pytest.raises(UserError) as error:
        doc_for(load(RULE), params={"kubernetes_version": 1.3})
    assert str(error.value).startswith("params.kubernetes_version: 1.3 is not a Kubernetes release")


def test_with_a_cluster_the_kinds_come_from_discovery() -> None:
    facts = ClusterFacts(
        version="v1.36.2",
        served={"resource.k8s.io": ["v1", "v1beta2"], "": ["v1"]},
        kinds={"resource.k8s.io": {"DeviceTaintRule": ["v1beta2"], "DeviceClass": ["v1", "v1beta2"]}},
        unavailable=["metrics.k8s.io/v1beta1"],
    )
    doc = doc_for(load(RULE), cluster=facts)
    assert doc["release"] is None
    cluster = doc["cluster"]
    assert cluster["kinds"]["resource.k8s.io"]["DeviceTaintRule"] == ["v1beta2"]
    assert cluster["unavailable"] == ["metrics.k8s.io/v1beta1"]
    assert cluster["served"][""] == ["v1"]


def test_crds_of_the_tree_are_indexed_with_their_served_versions() -> None:
    doc = doc_for(load(CRD))
    index = doc["index"]
    assert index["crds"] == {
        "example.com": {"Widget": {"ref": "CustomResourceDefinition/widgets.example.com", "versions": ["v2"]}}
    }


def test_a_crd_without_group_or_kind_is_left_out() -> None:
    broken = (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\nspec: {}\n"
    )
    index = doc_for(load(broken))["index"]
    assert index["crds"] == {}
