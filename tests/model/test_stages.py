"""Tests for reconciler.model.stages: default stage per kind (DESIGN.md "Stages"), overrides, canary steps."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.errors import ManifestError
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.stages import (
    CLAIMS,
    CLASSES,
    DRIVERS,
    FOUNDATION,
    STAGE_ANNOTATION,
    STAGE_NAMES,
    WORKLOADS,
    default_stage,
    stage_label,
    stage_of,
    step_of,
)


def body(api_version: str, kind: str, name: str = "x", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    for key in ("namespace", "labels", "annotations"):
        if key in extra:
            meta[key] = extra.pop(key)
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **extra}


def manifest(b: dict[str, Any], path: str = "m.yaml", line: int = 1) -> Manifest:
    return Manifest(body=b, ref=ref_of(b), path=path, line=line)


def pod_template(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d", **(labels or {})}},
            "spec": {"containers": [{"name": "plugin", "image": "drv:1"}]},
        },
    }


def driver_ds(name: str = "drv", **extra: Any) -> dict[str, Any]:
    labels = extra.pop("labels", {"app.kubernetes.io/component": "kubelet-plugin"})
    return body(
        "apps/v1", "DaemonSet", name, namespace="drivers", labels=labels, spec=pod_template(), **extra
    )


def test_stage_constants() -> None:
    assert (FOUNDATION, DRIVERS, CLASSES, CLAIMS, WORKLOADS) == (0, 1, 2, 3, 4)
    assert STAGE_NAMES == {0: "foundation", 1: "drivers", 2: "classes", 3: "claims", 4: "workloads"}
    assert STAGE_ANNOTATION == "dra-gitops.io/stage"


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("v1", "Namespace"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
        ("node.k8s.io/v1", "RuntimeClass"),
    ],
)
def test_foundation_kinds(api_version: str, kind: str) -> None:
    assert default_stage(body(api_version, kind)) == FOUNDATION
    assert stage_of(manifest(body(api_version, kind))) == FOUNDATION


@pytest.mark.parametrize(
    "labels",
    [
        {"app.kubernetes.io/component": "kubelet-plugin"},
        {"app.kubernetes.io/component": "kubeletplugin"},
        {"nvidia-dra-driver-gpu-component": "kubelet-plugin"},
    ],
)
def test_driver_daemonset_by_component_label(labels: dict[str, str]) -> None:
    assert default_stage(driver_ds(labels=labels)) == DRIVERS


def test_driver_by_pod_template_label() -> None:
    ds = body(
        "apps/v1", "DaemonSet", "drv", spec=pod_template({"app.kubernetes.io/component": "kubeletplugin"})
    )
    assert default_stage(ds) == DRIVERS


def test_driver_by_annotation_on_any_workload_kind() -> None:
    annotations = {"dra-gitops.io/driver": "gpu.example.com"}
    for kind in ("DaemonSet", "Deployment", "StatefulSet"):
        b = body("apps/v1", kind, "d", labels={}, annotations=annotations, spec=pod_template())
        assert default_stage(b) == DRIVERS, kind


def test_non_driver_component_label_is_a_workload() -> None:
    assert default_stage(driver_ds(labels={"app.kubernetes.io/component": "controller"})) == WORKLOADS
    assert default_stage(driver_ds(labels={})) == WORKLOADS


def test_driver_label_on_a_non_workload_kind_is_not_a_driver() -> None:
    svc = body("v1", "Service", "s", labels={"app.kubernetes.io/component": "kubelet-plugin"}, spec={})
    assert default_stage(svc) == WORKLOADS
    # A ConfigMap labelled like a driver is still foundation: kind decides first.
    cm = body("v1", "ConfigMap", "c", labels={"app.kubernetes.io/component": "kubelet-plugin"})
    assert default_stage(cm) == FOUNDATION


def test_driver_label_on_a_crd_named_daemonset_is_not_a_driver() -> None:
    fake = driver_ds()
    fake["apiVersion"] = "example.com/v1"
    assert default_stage(fake) == WORKLOADS


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1", "v1alpha3"])
@pytest.mark.parametrize("kind", ["DeviceClass", "DeviceTaintRule"])
def test_dra_classes(version: str, kind: str) -> None:
    assert default_stage(body(f"resource.k8s.io/{version}", kind)) == CLASSES


@pytest.mark.parametrize("version", ["v1alpha1", "v1alpha2"])
def test_classic_resource_class(version: str) -> None:
    assert default_stage(body(f"resource.k8s.io/{version}", "ResourceClass")) == CLASSES


@pytest.mark.parametrize("kind", ["DeviceClass", "ResourceClass", "DeviceTaintRule"])
def test_class_kinds_of_another_group_are_workloads(kind: str) -> None:
    assert default_stage(body("example.com/v1", kind)) == WORKLOADS
    assert default_stage(body("v1", kind)) == WORKLOADS


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1", "v1alpha3", "v1alpha2"])
@pytest.mark.parametrize("kind", ["ResourceClaim", "ResourceClaimTemplate"])
def test_claims(version: str, kind: str) -> None:
    assert default_stage(body(f"resource.k8s.io/{version}", kind)) == CLAIMS


def test_claim_kinds_of_another_group_are_workloads() -> None:
    assert default_stage(body("example.com/v1", "ResourceClaim")) == WORKLOADS


def test_resource_slice_is_not_a_class_or_claim() -> None:
    # Not in the table: slices are published by drivers, so the catch-all applies.
    assert default_stage(body("resource.k8s.io/v1", "ResourceSlice")) == WORKLOADS


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("v1", "Pod"),
        ("v1", "Service"),
        ("networking.k8s.io/v1", "Ingress"),
        ("example.com/v1", "Widget"),
    ],
)
def test_everything_else_is_a_workload(api_version: str, kind: str) -> None:
    assert default_stage(body(api_version, kind)) == WORKLOADS


def test_default_stage_of_an_empty_body() -> None:
    assert default_stage({}) == WORKLOADS


# --- override ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "stage"), [("0", 0), ("1", 1), ("2", 2), ("3", 3), ("4", 4), (" 3 ", 3)])
def test_stage_annotation_overrides_kind(value: str, stage: int) -> None:
    b = body("v1", "ConfigMap", annotations={STAGE_ANNOTATION: value})
    assert stage_of(manifest(b)) == stage


def test_override_moves_a_workload_earlier_and_a_class_later() -> None:
    svc = body("v1", "Service", annotations={STAGE_ANNOTATION: "0"})
    cls = body("resource.k8s.io/v1", "DeviceClass", annotations={STAGE_ANNOTATION: "4"})
    assert stage_of(manifest(svc)) == FOUNDATION
    assert stage_of(manifest(cls)) == WORKLOADS


def test_integer_annotation_value_is_accepted() -> None:
    # YAML `dra-gitops.io/stage: 2` loads as an int; the API would reject it, but the stage is clear.
    b = body("v1", "Service", annotations={STAGE_ANNOTATION: 2})
    assert stage_of(manifest(b)) == 2


def test_other_annotations_do_not_change_the_stage() -> None:
    b = body("v1", "Service", annotations={"dra-gitops.io/stages": "0", "stage": "0"})
    assert stage_of(manifest(b)) == WORKLOADS


@pytest.mark.parametrize("value", ["5", "-1", "abc", "", "1.5", "1a", "foundation", "10", True])
def test_invalid_override_is_a_manifest_error_with_location(value: Any) -> None:
    b = body("v1", "Service", "web", namespace="apps", annotations={STAGE_ANNOTATION: value})
    with pytest.raises(ManifestError) as info:
        stage_of(manifest(b, "apps/web.yaml", 17))
    message = str(info.value)
    assert info.value.where == "apps/web.yaml:17"
    assert message.startswith("apps/web.yaml:17: Service/apps/web: annotation dra-gitops.io/stage")
    assert "must be a number from 0 to 4" in message
    assert repr(value) in message


# --- steps and labels --------------------------------------------------------------------------------


def canary_ds(name: str = "drv-canary", main: str = "drv") -> dict[str, Any]:
    ds = driver_ds(name, annotations={"dra-gitops.io/canary-for": main})
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"canary": "true"}
    return ds


def test_canary_driver_goes_first_in_drivers_stage() -> None:
    canary = manifest(canary_ds())
    main = manifest(driver_ds())
    assert stage_of(canary) == stage_of(main) == DRIVERS
    assert step_of(canary, DRIVERS) == 0
    assert step_of(main, DRIVERS) == 1
    assert sorted([main, canary], key=lambda m: step_of(m, stage_of(m))) == [canary, main]


def test_canary_step_only_in_the_drivers_stage() -> None:
    canary = manifest(canary_ds())
    for stage in (FOUNDATION, CLASSES, CLAIMS, WORKLOADS):
        assert step_of(canary, stage) == 1


def test_canary_annotation_on_a_non_driver_is_not_a_canary() -> None:
    dep = manifest(body("apps/v1", "Deployment", "web", annotations={"dra-gitops.io/canary-for": "x"}))
    assert step_of(dep, DRIVERS) == 1
    blank = manifest(driver_ds("c", annotations={"dra-gitops.io/canary-for": "  "}))
    assert step_of(blank, DRIVERS) == 1


def test_overridden_canary_keeps_its_step_only_in_drivers() -> None:
    ds = canary_ds()
    ds["metadata"]["annotations"][STAGE_ANNOTATION] = "4"
    m = manifest(ds)
    stage = stage_of(m)
    assert stage == WORKLOADS
    assert step_of(m, stage) == 1


@pytest.mark.parametrize(
    ("stage", "step", "label"),
    [
        (0, 1, "0 foundation"),
        (1, 0, "1a drivers"),
        (1, 1, "1 drivers"),
        (2, 1, "2 classes"),
        (3, 1, "3 claims"),
        (4, 1, "4 workloads"),
        (0, 0, "0 foundation"),
        (4, 0, "4 workloads"),
    ],
)
def test_stage_label(stage: int, step: int, label: str) -> None:
    assert stage_label(stage, step) == label


def test_stage_label_default_step() -> None:
    assert stage_label(DRIVERS) == "1 drivers"


def test_stage_label_unknown_stage() -> None:
    with pytest.raises(KeyError):
        stage_label(5)
