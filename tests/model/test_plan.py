"""Tests for reconciler.model.plan: change detection, execution order, driver changes, rendering."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.errors import ManifestError
from reconciler.model.objects import Manifest, ObjRef, ref_of
from reconciler.model.plan import Change, Plan, compute_plan

# --- builders ----------------------------------------------------------------------------------------


def mf(b: dict[str, Any], path: str = "m.yaml", line: int = 1) -> Manifest:
    return Manifest(body=b, ref=ref_of(b), path=path, line=line)


def obj(
    api_version: str, kind: str, name: str, namespace: str | None = None, **fields: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    for key in ("labels", "annotations"):
        if key in fields:
            meta[key] = fields.pop(key)
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **fields}


def configmap(name: str, namespace: str = "drivers", data: dict[str, str] | None = None) -> dict[str, Any]:
    return obj("v1", "ConfigMap", name, namespace, data=data or {"k": "v"})


def secret(name: str, namespace: str = "drivers", data: dict[str, str] | None = None) -> dict[str, Any]:
    return obj("v1", "Secret", name, namespace, stringData=data or {"k": "v"})


def driver(
    name: str = "drv",
    image: str = "drv:1",
    *,
    canary_for: str | None = None,
    kind: str = "DaemonSet",
    volumes: list[dict[str, Any]] | None = None,
    container: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    annotations = {"dra-gitops.io/canary-for": canary_for} if canary_for else {}
    spec: dict[str, Any] = {"containers": [{"name": "plugin", "image": image, **(container or {})}]}
    if volumes is not None:
        spec["volumes"] = volumes
    if canary_for:
        spec["nodeSelector"] = {"dra-canary": "true"}
    return obj(
        "apps/v1",
        kind,
        name,
        "drivers",
        labels={"app.kubernetes.io/component": "kubelet-plugin", **(labels or {})},
        annotations=annotations,
        spec={
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    )


def deployment(name: str, namespace: str = "gpu", image: str = "app:1", **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "main", "image": image}], **spec}
    return obj(
        "apps/v1",
        "Deployment",
        name,
        namespace,
        spec={"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {}, "spec": pod}},
    )


def device_class(name: str, config: Any = None, api_version: str = "resource.k8s.io/v1") -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}
    if config is not None:
        spec["config"] = config
    return obj(api_version, "DeviceClass", name, spec=spec)


def opaque(value: str) -> list[dict[str, Any]]:
    return [{"opaque": {"driver": "gpu.example.com", "parameters": {"mode": value}}}]


def template(name: str, namespace: str = "gpu") -> dict[str, Any]:
    return obj(
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
        name,
        namespace,
        spec={
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}}]}
            }
        },
    )


def namespace(name: str) -> dict[str, Any]:
    return obj("v1", "Namespace", name)


def changed(b: dict[str, Any], *path: str, value: Any) -> dict[str, Any]:
    new = copy.deepcopy(b)
    cur = new
    for key in path[:-1]:
        cur = cur.setdefault(key, {})
    cur[path[-1]] = value
    return new


def ops(plan: Plan) -> list[tuple[str, str]]:
    return [(c.op, str(c.ref)) for c in plan.changes]


def only(plan: Plan) -> Change:
    assert len(plan.changes) == 1, ops(plan)
    return plan.changes[0]


def driver_change_of(
    old: dict[str, Any] | None, new: dict[str, Any] | None, *context: dict[str, Any]
) -> bool:
    """driver_change of the single change old -> new, with extra unchanged objects on both sides."""
    base = [mf(b) for b in context] + ([mf(old)] if old is not None else [])
    head = [mf(b) for b in context] + ([mf(new)] if new is not None else [])
    return only(compute_plan(base, head)).driver_change


# --- detection ---------------------------------------------------------------------------------------


def test_identical_sets_give_an_empty_plan() -> None:
    objects = [namespace("gpu"), configmap("c"), driver(), device_class("g"), template("t"), deployment("w")]
    plan = compute_plan([mf(b) for b in objects], [mf(copy.deepcopy(b), "other.yaml", 9) for b in objects])
    assert plan.empty
    assert plan.changes == ()
    assert plan.summary() == "0 to create, 0 to update, 0 to delete"
    assert plan.render() == "Plan: 0 to create, 0 to update, 0 to delete\n"


def test_both_empty() -> None:
    assert compute_plan([], []).empty


def test_create_update_delete_detection() -> None:
    base = [mf(configmap("same")), mf(configmap("edit")), mf(configmap("gone"))]
    head = [
        mf(configmap("same")),
        mf(configmap("edit", data={"k": "v2"})),
        mf(configmap("new")),
    ]
    plan = compute_plan(base, head)
    assert sorted(ops(plan)) == [
        ("create", "ConfigMap/drivers/new"),
        ("delete", "ConfigMap/drivers/gone"),
        ("update", "ConfigMap/drivers/edit"),
    ]
    assert (plan.count("create"), plan.count("update"), plan.count("delete")) == (1, 1, 1)
    assert plan.summary() == "1 to create, 1 to update, 1 to delete"
    assert not plan.empty


def test_everything_created_from_nothing() -> None:
    head = [mf(namespace("gpu")), mf(configmap("c"))]
    plan = compute_plan([], head)
    assert [c.op for c in plan.changes] == ["create", "create"]
    assert all(c.old is None and c.new is not None for c in plan.changes)


def test_everything_deleted() -> None:
    base = [mf(namespace("gpu")), mf(deployment("w"))]
    plan = compute_plan(base, [])
    assert ops(plan) == [("delete", "Deployment/gpu/w"), ("delete", "Namespace/gpu")]
    assert all(c.new is None and c.old is not None for c in plan.changes)


def test_change_carries_old_and_new_manifests() -> None:
    old, new = mf(configmap("c"), "a.yaml", 3), mf(configmap("c", data={"k": "2"}), "b.yaml", 7)
    change = only(compute_plan([old], [new]))
    assert change.old is old and change.new is new
    assert change.current is new
    assert change.ref == ObjRef("", "ConfigMap", "drivers", "c")
    created = only(compute_plan([], [new]))
    assert created.old is None and created.current is new
    deleted = only(compute_plan([old], []))
    assert deleted.new is None and deleted.current is old


def test_status_only_difference_is_ignored() -> None:
    claim = obj("resource.k8s.io/v1", "ResourceClaim", "c", "gpu", spec={"devices": {"requests": []}})
    with_status = changed(
        claim, "status", value={"allocation": {"devices": {"results": [{"device": "gpu-0"}]}}}
    )
    assert compute_plan([mf(claim)], [mf(with_status)]).empty
    assert compute_plan([mf(with_status)], [mf(claim)]).empty


def test_status_change_alongside_a_spec_change_is_an_update() -> None:
    a = changed(deployment("w"), "status", value={"replicas": 1})
    b = changed(deployment("w", image="app:2"), "status", value={"replicas": 3})
    assert ops(compute_plan([mf(a)], [mf(b)])) == [("update", "Deployment/gpu/w")]


def test_location_only_difference_is_not_a_change() -> None:
    assert compute_plan([mf(configmap("c"), "a.yaml", 1)], [mf(configmap("c"), "moved/b.yaml", 40)]).empty


@pytest.mark.parametrize(
    "edit",
    [
        lambda b: changed(b, "metadata", "labels", value={"x": "y"}),
        lambda b: changed(b, "metadata", "annotations", value={"note": "n"}),
        lambda b: changed(b, "data", value={"k": "v", "k2": "v"}),
        lambda b: changed(b, "immutable", value=True),
        lambda b: {k: v for k, v in b.items() if k != "data"},
    ],
)
def test_any_non_status_edit_is_an_update(edit: Any) -> None:
    b = configmap("c")
    assert ops(compute_plan([mf(b)], [mf(edit(b))])) == [("update", "ConfigMap/drivers/c")]


def test_api_version_change_is_an_update_of_the_same_object() -> None:
    old = device_class("g", api_version="resource.k8s.io/v1beta1")
    new = device_class("g", api_version="resource.k8s.io/v1")
    assert ops(compute_plan([mf(old)], [mf(new)])) == [("update", "DeviceClass/g")]


def test_implicit_and_explicit_default_namespace_are_the_same_object() -> None:
    implicit = obj("v1", "ConfigMap", "c", data={"a": "1"})
    explicit = obj("v1", "ConfigMap", "c", "default", data={"a": "1"})
    # Same ref, but the manifest text differs: an update (a harmless re-apply), never create+delete.
    assert ops(compute_plan([mf(implicit)], [mf(explicit)])) == [("update", "ConfigMap/default/c")]


def test_rename_is_a_create_and_a_delete() -> None:
    plan = compute_plan([mf(configmap("old"))], [mf(configmap("new"))])
    assert ops(plan) == [("create", "ConfigMap/drivers/new"), ("delete", "ConfigMap/drivers/old")]


def test_namespace_move_is_a_create_and_a_delete() -> None:
    plan = compute_plan([mf(deployment("w", "a"))], [mf(deployment("w", "b"))])
    assert ops(plan) == [("create", "Deployment/b/w"), ("delete", "Deployment/a/w")]


# --- order -------------------------------------------------------------------------------------------


def full_head() -> list[Manifest]:
    return [
        mf(deployment("web")),
        mf(obj("v1", "Service", "web", "gpu", spec={"ports": [{"port": 80}]})),
        mf(template("one-gpu")),
        mf(obj("resource.k8s.io/v1", "ResourceClaim", "shared", "gpu", spec={})),
        mf(device_class("gpu.example.com")),
        mf(obj("resource.k8s.io/v1", "DeviceTaintRule", "taint", spec={})),
        mf(driver("drv")),
        mf(driver("drv-canary", canary_for="drv")),
        mf(configmap("drv-config")),
        mf(namespace("gpu")),
        mf(obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com", spec={})),
    ]


EXPECTED_APPLY_ORDER = [
    ("create", "ConfigMap/drivers/drv-config", 0, 1),
    ("create", "Namespace/gpu", 0, 1),
    ("create", "CustomResourceDefinition/widgets.example.com", 0, 1),
    ("create", "DaemonSet/drivers/drv-canary", 1, 0),
    ("create", "DaemonSet/drivers/drv", 1, 1),
    ("create", "DeviceClass/gpu.example.com", 2, 1),
    ("create", "DeviceTaintRule/taint", 2, 1),
    ("create", "ResourceClaim/gpu/shared", 3, 1),
    ("create", "ResourceClaimTemplate/gpu/one-gpu", 3, 1),
    ("create", "Service/gpu/web", 4, 1),
    ("create", "Deployment/gpu/web", 4, 1),
]


def test_applies_run_in_stage_order_with_canary_first() -> None:
    plan = compute_plan([], full_head())
    # Inside a stage: canary step first, then by ref (group, kind, namespace, name): stable, not input order.
    assert [(c.op, str(c.ref), c.stage, c.step) for c in plan.changes] == EXPECTED_APPLY_ORDER


def test_order_does_not_depend_on_input_order() -> None:
    head = full_head()
    assert compute_plan([], head) == compute_plan([], list(reversed(head)))


def test_deletes_run_after_applies_in_reverse_stage_order() -> None:
    base = full_head()
    head = [mf(configmap("new-config")), mf(deployment("new-web"))]
    plan = compute_plan(base, head)
    applies = [(c.op, str(c.ref)) for c in plan.changes if c.op != "delete"]
    deletes = [(str(c.ref), c.stage, c.step) for c in plan.changes if c.op == "delete"]
    assert applies == [("create", "ConfigMap/drivers/new-config"), ("create", "Deployment/gpu/new-web")]
    assert [c.op for c in plan.changes] == ["create", "create"] + ["delete"] * len(base)
    assert deletes == [
        ("Service/gpu/web", 4, 1),
        ("Deployment/gpu/web", 4, 1),
        ("ResourceClaim/gpu/shared", 3, 1),
        ("ResourceClaimTemplate/gpu/one-gpu", 3, 1),
        ("DeviceClass/gpu.example.com", 2, 1),
        ("DeviceTaintRule/taint", 2, 1),
        ("DaemonSet/drivers/drv", 1, 1),
        ("DaemonSet/drivers/drv-canary", 1, 0),
        ("ConfigMap/drivers/drv-config", 0, 1),
        ("Namespace/gpu", 0, 1),
        ("CustomResourceDefinition/widgets.example.com", 0, 1),
    ]


def test_stage_annotation_moves_a_change() -> None:
    early = obj("v1", "Service", "early", "gpu", annotations={"dra-gitops.io/stage": "0"}, spec={})
    plan = compute_plan([], [mf(deployment("w")), mf(early), mf(namespace("gpu"))])
    assert [(str(c.ref), c.stage) for c in plan.changes] == [
        ("Namespace/gpu", 0),
        ("Service/gpu/early", 0),
        ("Deployment/gpu/w", 4),
    ]


def test_update_takes_the_stage_of_the_new_manifest_delete_of_the_old() -> None:
    old = obj("v1", "Service", "s", "gpu", annotations={"dra-gitops.io/stage": "2"}, spec={})
    new = obj("v1", "Service", "s", "gpu", annotations={"dra-gitops.io/stage": "3"}, spec={})
    assert only(compute_plan([mf(old)], [mf(new)])).stage == 3
    assert only(compute_plan([mf(old)], [])).stage == 2


def test_invalid_stage_annotation_fails_the_plan_with_location() -> None:
    bad = obj("v1", "Service", "s", "gpu", annotations={"dra-gitops.io/stage": "nine"}, spec={})
    with pytest.raises(ManifestError) as info:
        compute_plan([], [mf(bad, "apps/svc.yaml", 12)])
    assert str(info.value).startswith("apps/svc.yaml:12: Service/gpu/s")
    with pytest.raises(ManifestError):
        compute_plan([mf(bad, "apps/svc.yaml", 12)], [])


def test_changes_come_stage_by_stage() -> None:
    plan = compute_plan([mf(deployment("gone"))], full_head())
    grouped: dict[int, list[Change]] = {}
    for change in plan.changes:
        grouped.setdefault(change.stage, []).append(change)
    assert list(grouped) == [0, 1, 2, 3, 4]
    assert [str(c.ref) for c in grouped[1]] == ["DaemonSet/drivers/drv-canary", "DaemonSet/drivers/drv"]
    assert [(c.op, str(c.ref)) for c in grouped[4]] == [
        ("create", "Service/gpu/web"),
        ("create", "Deployment/gpu/web"),
        ("delete", "Deployment/gpu/gone"),
    ]
    assert sum(len(v) for v in grouped.values()) == len(plan.changes)


# --- driver_change -----------------------------------------------------------------------------------


def test_driver_pod_template_change_is_a_driver_change() -> None:
    assert driver_change_of(driver(image="drv:1"), driver(image="drv:2")) is True


@pytest.mark.parametrize(
    "path_value",
    [
        (
            ("spec", "template", "spec", "containers"),
            [{"name": "plugin", "image": "drv:1", "args": ["-v=5"]}],
        ),
        (("spec", "template", "spec", "nodeSelector"), {"pool": "a"}),
        (("spec", "template", "spec", "volumes"), [{"name": "cdi", "hostPath": {"path": "/var/run/cdi"}}]),
        (("spec", "template", "spec", "priorityClassName"), "system-node-critical"),
    ],
)
def test_any_pod_spec_change_of_a_driver_is_a_driver_change(path_value: tuple[tuple[str, ...], Any]) -> None:
    path, value = path_value
    assert driver_change_of(driver(), changed(driver(), *path, value=value)) is True


def test_driver_metadata_label_change_is_not_a_driver_change() -> None:
    new = driver(labels={"team": "gpu"})
    plan = compute_plan([mf(driver())], [mf(new)])
    change = only(plan)
    assert change.op == "update"
    assert change.driver_change is False


def test_driver_non_template_spec_change_is_not_a_driver_change() -> None:
    new = changed(driver(), "spec", "updateStrategy", value={"type": "OnDelete"})
    assert driver_change_of(driver(), new) is False


def test_driver_template_metadata_change_is_a_driver_change() -> None:
    # DESIGN.md: any change to the pod template; a template label or annotation restarts every driver pod.
    new = changed(driver(), "spec", "template", "metadata", "labels", value={"app": "drv", "extra": "1"})
    assert driver_change_of(driver(), new) is True


def test_driver_created_or_deleted_is_a_driver_change() -> None:
    assert driver_change_of(None, driver()) is True
    assert driver_change_of(driver(), None) is True
    assert driver_change_of(None, driver("c", canary_for="drv")) is True


def test_driver_deployment_is_a_driver_too() -> None:
    assert driver_change_of(driver(kind="Deployment"), driver(kind="Deployment", image="drv:2")) is True


def test_ordinary_workload_change_is_not_a_driver_change() -> None:
    assert driver_change_of(deployment("w"), deployment("w", image="app:2")) is False
    assert driver_change_of(None, deployment("w")) is False


def test_ordinary_configmap_is_not_a_driver_change() -> None:
    assert driver_change_of(configmap("c"), configmap("c", data={"k": "2"})) is False
    # Mounted by an ordinary workload, not a driver.
    app = deployment("w", "drivers", volumes=[{"name": "c", "configMap": {"name": "c"}}])
    assert driver_change_of(configmap("c"), configmap("c", data={"k": "2"}), app) is False


VOLUME_SOURCES: dict[str, tuple[str, dict[str, Any]]] = {
    "configMap volume": ("ConfigMap", {"volumes": [{"name": "v", "configMap": {"name": "drv-config"}}]}),
    "secret volume": ("Secret", {"volumes": [{"name": "v", "secret": {"secretName": "drv-config"}}]}),
    "projected configMap": (
        "ConfigMap",
        {"volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "drv-config"}}]}}]},
    ),
    "projected secret": (
        "Secret",
        {"volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": "drv-config"}}]}}]},
    ),
    "envFrom configMap": (
        "ConfigMap",
        {"container": {"envFrom": [{"configMapRef": {"name": "drv-config"}}]}},
    ),
    "envFrom secret": ("Secret", {"container": {"envFrom": [{"secretRef": {"name": "drv-config"}}]}}),
}


@pytest.mark.parametrize("source", sorted(VOLUME_SOURCES))
def test_config_mounted_by_a_driver_is_a_driver_change(source: str) -> None:
    kind, how = VOLUME_SOURCES[source]
    drv = driver(**how)
    make = configmap if kind == "ConfigMap" else secret
    assert driver_change_of(make("drv-config"), make("drv-config", data={"k": "2"}), drv) is True
    # Creating or deleting the mounted config changes what the driver runs as well.
    assert driver_change_of(None, make("drv-config"), drv) is True
    assert driver_change_of(make("drv-config"), None, drv) is True
    # The other kind of the same name is not mounted.
    other = secret if kind == "ConfigMap" else configmap
    assert driver_change_of(other("drv-config"), other("drv-config", data={"k": "2"}), drv) is False


def test_config_read_by_init_container_env_from() -> None:
    drv = driver()
    drv["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "init", "image": "i", "envFrom": [{"configMapRef": {"name": "init-config"}}]}
    ]
    assert driver_change_of(configmap("init-config"), configmap("init-config", data={"k": "2"}), drv) is True


def test_config_read_by_a_driver_env_value_from_is_a_driver_change() -> None:
    # `env[].valueFrom.configMapKeyRef` reads the ConfigMap into the driver's environment just like envFrom.
    drv = driver(
        container={
            "env": [
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "drv-config", "key": "mode"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "drv-token", "key": "t"}}},
            ]
        }
    )
    assert driver_change_of(configmap("drv-config"), configmap("drv-config", data={"mode": "b"}), drv) is True
    assert driver_change_of(secret("drv-token"), secret("drv-token", data={"t": "2"}), drv) is True


def test_mounted_config_of_the_same_name_in_another_namespace_is_not_a_driver_change() -> None:
    drv = driver(volumes=[{"name": "v", "configMap": {"name": "drv-config"}}])
    old, new = configmap("drv-config", "apps"), configmap("drv-config", "apps", data={"k": "2"})
    assert driver_change_of(old, new, drv) is False


def test_config_mounted_by_a_driver_only_in_base_still_counts() -> None:
    # The driver stops mounting the ConfigMap in this commit: the running pods still use the old data.
    mounting = driver(volumes=[{"name": "v", "configMap": {"name": "drv-config"}}])
    not_mounting = driver(volumes=[])
    base = [mf(mounting), mf(configmap("drv-config"))]
    head = [mf(not_mounting), mf(configmap("drv-config", data={"k": "2"}))]
    changes = {str(c.ref): c.driver_change for c in compute_plan(base, head).changes}
    assert changes == {"DaemonSet/drivers/drv": True, "ConfigMap/drivers/drv-config": True}


def test_config_mounted_by_a_driver_only_in_head_counts() -> None:
    mounting = driver(volumes=[{"name": "v", "configMap": {"name": "drv-config"}}])
    base = [mf(configmap("drv-config"))]
    head = [mf(mounting), mf(configmap("drv-config", data={"k": "2"}))]
    changes = {str(c.ref): c.driver_change for c in compute_plan(base, head).changes}
    assert changes == {"DaemonSet/drivers/drv": True, "ConfigMap/drivers/drv-config": True}


def test_malformed_volumes_do_not_crash() -> None:
    volumes: list[Any] = [
        "nonsense",
        {"name": "v", "projected": {"sources": ["x", {"configMap": {"name": "c"}}]}},
    ]
    drv = driver(volumes=volumes)
    drv["spec"]["template"]["spec"]["containers"].append("not a container")
    assert driver_change_of(configmap("c"), configmap("c", data={"k": "2"}), drv) is True


def test_device_class_config_change_is_a_driver_change() -> None:
    assert driver_change_of(device_class("g", opaque("a")), device_class("g", opaque("b"))) is True
    assert driver_change_of(device_class("g"), device_class("g", opaque("a"))) is True
    assert driver_change_of(device_class("g", opaque("a")), device_class("g")) is True


def test_device_class_change_without_config_change_is_not_a_driver_change() -> None:
    old = device_class("g", opaque("a"))
    new = changed(old, "spec", "selectors", value=[{"cel": {"expression": "true"}}])
    assert driver_change_of(old, new) is False
    assert (
        driver_change_of(
            device_class("g"), changed(device_class("g"), "metadata", "labels", value={"a": "b"})
        )
        is False
    )


def test_empty_config_equals_no_config() -> None:
    base = device_class("g")
    assert (
        driver_change_of(base, changed(device_class("g", []), "metadata", "labels", value={"a": "b"}))
        is False
    )


def test_device_class_created_or_deleted() -> None:
    assert driver_change_of(None, device_class("g", opaque("a"))) is True
    assert driver_change_of(device_class("g", opaque("a")), None) is True
    assert driver_change_of(None, device_class("g")) is False
    assert driver_change_of(device_class("g"), None) is False


def test_device_class_of_another_group_is_not_a_driver_change() -> None:
    old = device_class("g", opaque("a"), api_version="example.com/v1")
    new = device_class("g", opaque("b"), api_version="example.com/v1")
    assert driver_change_of(old, new) is False


# --- rendering ---------------------------------------------------------------------------------------


def realistic_plan() -> Plan:
    ns = namespace("gpu")
    drv_config = configmap("drv-config", data={"log": "info"})
    drv_volume = [{"name": "config", "configMap": {"name": "drv-config"}}]
    base = [
        mf(ns, "base/00-namespace.yaml", 1),
        mf(drv_config, "drivers/config.yaml", 1),
        mf(driver(image="drv:1.0", volumes=drv_volume), "drivers/daemonset.yaml", 1),
        mf(device_class("gpu.example.com"), "classes.yaml", 1),
        mf(template("old-tmpl"), "apps/old.yaml", 10),
        mf(deployment("old-app"), "apps/old.yaml", 1),
    ]
    head = [
        mf(ns, "base/00-namespace.yaml", 1),
        mf(configmap("drv-config", data={"log": "debug"}), "drivers/config.yaml", 1),
        mf(driver(image="drv:1.1", volumes=drv_volume), "drivers/daemonset.yaml", 1),
        mf(
            driver("drv-canary", image="drv:1.1", canary_for="drv", volumes=drv_volume),
            "drivers/canary.yaml",
            3,
        ),
        mf(device_class("gpu.example.com"), "classes.yaml", 1),
        mf(device_class("big-gpu.example.com", opaque("big")), "classes.yaml", 9),
        mf(template("one-gpu"), "apps/llm.yaml", 1),
        mf(deployment("llm-server"), "apps/llm.yaml", 17),
    ]
    return compute_plan(base, head)


GOLDEN = """\
Plan: 4 to create, 2 to update, 2 to delete
stage 0 foundation
  ~ update ConfigMap/drivers/drv-config  drivers/config.yaml:1  (driver change)
stage 1a drivers
  + create DaemonSet/drivers/drv-canary  drivers/canary.yaml:3  (driver change)
stage 1 drivers
  ~ update DaemonSet/drivers/drv  drivers/daemonset.yaml:1  (driver change)
stage 2 classes
  + create DeviceClass/big-gpu.example.com  classes.yaml:9  (driver change)
stage 3 claims
  + create ResourceClaimTemplate/gpu/one-gpu  apps/llm.yaml:1
stage 4 workloads
  + create Deployment/gpu/llm-server  apps/llm.yaml:17
stage 4 workloads (deletions)
  - delete Deployment/gpu/old-app  apps/old.yaml:1
stage 3 claims (deletions)
  - delete ResourceClaimTemplate/gpu/old-tmpl  apps/old.yaml:10
"""


def test_render_golden() -> None:
    assert realistic_plan().render() == GOLDEN


def test_render_is_deterministic() -> None:
    assert realistic_plan().render() == realistic_plan().render()


def test_summary_and_counts_of_the_realistic_plan() -> None:
    plan = realistic_plan()
    assert plan.summary() == "4 to create, 2 to update, 2 to delete"
    assert (plan.count("create"), plan.count("update"), plan.count("delete")) == (4, 2, 2)
    assert [c.driver_change for c in plan.changes] == [True, True, True, True, False, False, False, False]


def test_render_of_driver_deletions_keeps_canary_step_heading() -> None:
    base = [mf(driver(), "d.yaml", 1), mf(driver("drv-canary", canary_for="drv"), "d.yaml", 30)]
    assert compute_plan(base, []).render() == (
        "Plan: 0 to create, 0 to update, 2 to delete\n"
        "stage 1 drivers (deletions)\n"
        "  - delete DaemonSet/drivers/drv  d.yaml:1  (driver change)\n"
        "stage 1a drivers (deletions)\n"
        "  - delete DaemonSet/drivers/drv-canary  d.yaml:30  (driver change)\n"
    )


def test_render_same_stage_apply_and_delete_get_separate_headings() -> None:
    plan = compute_plan([mf(configmap("a"), "a.yaml", 1)], [mf(configmap("b"), "b.yaml", 2)])
    assert plan.render() == (
        "Plan: 1 to create, 0 to update, 1 to delete\n"
        "stage 0 foundation\n"
        "  + create ConfigMap/drivers/b  b.yaml:2\n"
        "stage 0 foundation (deletions)\n"
        "  - delete ConfigMap/drivers/a  a.yaml:1\n"
    )


def test_plan_is_a_value() -> None:
    assert realistic_plan() == realistic_plan()
    assert Plan(()) == compute_plan([], [])
    with pytest.raises(AttributeError):
        realistic_plan().changes = ()  # type: ignore[misc]
