"""Tests for reconciler.policy.inputdoc: the policy input document of docs/policy-input.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.model.loader import load_blobs, load_paths
from reconciler.model.objects import Manifest
from reconciler.model.plan import compute_plan
from reconciler.policy.inputdoc import ClusterFacts, Revision, build_index, build_input, object_doc

# --- the contract, spelled out -----------------------------------------------------------------------

TOP_KEYS = {
    "capacity",
    "class_changes",
    "revision",
    "base",
    "objects",
    "base_objects",
    "changes",
    "cluster",
    "index",
    "base_index",
    "release",
    "params",
}
REVISION_KEYS = {"sha", "parent", "message", "author", "signed"}
CHANGE_KEYS = {"op", "ref", "stage", "old", "new", "driver_change", "driver_workloads"}
CLUSTER_KEYS = {"version", "served", "deprecated", "kinds", "unavailable", "objects", "index"}
INDEX_KEYS = {
    "device_classes",
    "device_class_stages",
    "claim_templates",
    "claims",
    "namespaces",
    "drivers",
    "canaries",
    "crds",
    "extended_resources",
}
CRD_KEYS = {"ref", "versions"}
DRIVER_KEYS = {"workloads", "canaries", "classes", "slices", "devices"}
DRA_KEYS = {
    "ref",
    "group",
    "version",
    "kind",
    "namespace",
    "name",
    "path",
    "line",
    "stage",
    "role",
    "device_classes",
    "claim_templates",
    "claims",
    "pod_claims",
    "container_claims",
    "driver",
    "canary_for",
    "driver_template",
    "admin_access",
    "driver_role",
    "driver_config",
    "recognized_by",
    "extended_resources",
}
ROLES = {
    "namespace",
    "device-class",
    "claim-template",
    "claim",
    "slice",
    "taint-rule",
    "driver",
    "driver-canary",
    "workload",
    "other",
}

# --- a small realistic repository ---------------------------------------------------------------------

NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: gpu
  labels:
    dra.example.com/admin-access: "true"
    team: ml
"""

CLASSES = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClass
metadata:
  name: classic.example.com
driverName: classic.example.com
---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata:
  name: broken-gpu
spec:
  taint: {key: broken, effect: NoSchedule}
"""

CLAIMS = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata:
  name: one-gpu
  namespace: gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: gpu.example.com
        adminAccess: true
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: shared
  namespace: gpu
spec:
  devices:
    requests:
    - name: any
      firstAvailable:
      - {name: big, deviceClassName: big-gpu.example.com}
      - {name: small, deviceClassName: gpu.example.com}
"""

APP = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: gpu
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      resourceClaims:
      - name: accel
        resourceClaimTemplateName: one-gpu
      - name: shared
        resourceClaimName: shared
      containers:
      - name: server
        image: llm:1
        resources:
          claims:
          - name: accel
          - name: shared
            request: any
"""

DRIVER_TEMPLATE = """\
  template:
    metadata: {labels: {app: %(name)s}}
    spec:
      %(placement)s
      containers:
      - name: plugin
        image: drv:%(tag)s
        args: ["--driver-name=gpu.example.com"]
"""

DRIVER = (
    """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: drv
  namespace: drivers
  labels: {app.kubernetes.io/component: kubelet-plugin}
spec:
  selector: {matchLabels: {app: drv}}
"""
    + DRIVER_TEMPLATE % {"name": "drv", "placement": "priorityClassName: system-node-critical", "tag": "1"}
)

CANARY = (
    """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: drv-canary
  namespace: drivers
  labels: {app.kubernetes.io/component: kubelet-plugin}
  annotations: {dra-gitops.io/canary-for: drv}
spec:
  selector: {matchLabels: {app: drv-canary}}
"""
    + DRIVER_TEMPLATE % {"name": "drv-canary", "placement": "nodeSelector: {canary: 'true'}", "tag": "2"}
)

SLICE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-a-gpu
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: A}}
  - name: gpu-1
    attributes: {model: {string: A}}
"""


def load(files: dict[str, str]) -> list[Manifest]:
    return load_blobs([(path, text.encode()) for path, text in files.items()]).manifests


HEAD_FILES = {
    "ns.yaml": NAMESPACE,
    "classes.yaml": CLASSES,
    "apps/claims.yaml": CLAIMS,
    "apps/llm.yaml": APP,
    "drivers/drv.yaml": DRIVER,
    "drivers/canary.yaml": CANARY,
}
BASE_FILES = {
    "ns.yaml": NAMESPACE,
    "classes.yaml": CLASSES.split("---\n")[0],
    "drivers/drv.yaml": DRIVER,
    "apps/old.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: gpu}\n",
}


def by_ref(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["_dra"]["ref"]: d for d in docs}


@pytest.fixture
def head() -> list[Manifest]:
    return load(HEAD_FILES)


@pytest.fixture
def base() -> list[Manifest]:
    return load(BASE_FILES)


@pytest.fixture
def doc(head: list[Manifest], base: list[Manifest]) -> dict[str, Any]:
    return build_input(
        head=head,
        base=base,
        plan=compute_plan(base, head),
        revision=Revision(
            sha="c0ffee", parent="beef", message="add llm", author="a@example.com", signed=True
        ),
        base_sha="beef",
        has_base=True,
        params={"capacity_deny": True},
    )


# --- shape -------------------------------------------------------------------------------------------


def check_index_shape(index: dict[str, Any]) -> None:
    assert set(index) == INDEX_KEYS
    for value in index["device_classes"].values():
        assert isinstance(value, str)
    for key, value in [*index["claim_templates"].items(), *index["claims"].items()]:
        assert "/" in key and isinstance(value, str)
    for entry in index["namespaces"].values():
        assert set(entry) == {"ref", "labels"}
    for entry in index["drivers"].values():
        assert set(entry) == DRIVER_KEYS
        assert isinstance(entry["slices"], int) and isinstance(entry["devices"], int)
    for refs in index["canaries"].values():
        assert isinstance(refs, list)
    for kinds in index["crds"].values():
        for entry in kinds.values():
            assert set(entry) == CRD_KEYS and isinstance(entry["versions"], list)


def check_obj_shape(obj: dict[str, Any]) -> None:
    info = obj["_dra"]
    assert set(info) == DRA_KEYS, set(info) ^ DRA_KEYS
    assert info["role"] in ROLES
    assert isinstance(info["line"], int) and info["line"] >= 1
    assert info["stage"] in range(5)
    for key in ("device_classes", "claim_templates", "claims", "pod_claims", "container_claims"):
        assert isinstance(info[key], list)
    for entry in info["pod_claims"]:
        assert set(entry) == {"name", "claim", "template"}
    for entry in info["container_claims"]:
        assert set(entry) == {"container", "name", "request"}
    assert isinstance(info["admin_access"], bool)


def test_top_level_shape(doc: dict[str, Any]) -> None:
    assert set(doc) == TOP_KEYS
    assert set(doc["revision"]) == REVISION_KEYS
    assert doc["base"] == {"sha": "beef"}
    assert doc["cluster"] is None
    assert doc["capacity"] is None  # computed only with cluster data
    assert doc["class_changes"] == []
    assert doc["params"] == {"capacity_deny": True}
    for change in doc["changes"]:
        assert set(change) == CHANGE_KEYS
        assert change["op"] in ("create", "update", "delete")
        assert isinstance(change["stage"], int) and isinstance(change["driver_change"], bool)
    for obj in [*doc["objects"], *doc["base_objects"]]:
        check_obj_shape(obj)
    check_index_shape(doc["index"])
    check_index_shape(doc["base_index"])


def test_revision_block(doc: dict[str, Any]) -> None:
    assert doc["revision"] == {
        "sha": "c0ffee",
        "parent": "beef",
        "message": "add llm",
        "author": "a@example.com",
        "signed": True,
    }


def test_default_revision_and_no_base() -> None:
    head = load({"ns.yaml": NAMESPACE})
    doc = build_input(head=head, base=[], plan=compute_plan([], head))
    assert doc["revision"] == {"sha": None, "parent": None, "message": None, "author": None, "signed": False}
    assert doc["base"] is None
    assert doc["base_objects"] == []
    assert doc["params"] == {}
    assert doc["cluster"] is None
    assert doc["base_index"] == {
        "device_classes": {},
        "device_class_stages": {},
        "claim_templates": {},
        "claims": {},
        "namespaces": {},
        "drivers": {},
        "canaries": {},
        "crds": {},
        "extended_resources": {},
    }


def test_base_with_unknown_sha_is_still_a_base() -> None:
    doc = build_input(head=[], base=[], plan=compute_plan([], []), has_base=True)
    assert doc["base"] == {"sha": None}


def test_base_sha_without_has_base_is_null() -> None:
    doc = build_input(head=[], base=[], plan=compute_plan([], []), base_sha="abc")
    assert doc["base"] is None


def test_document_is_json_serialisable_and_round_trips(doc: dict[str, Any]) -> None:
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text) == doc


def test_objects_are_head_in_load_order_and_base_objects_are_base(doc: dict[str, Any]) -> None:
    head_refs = [str(m.ref) for m in load(HEAD_FILES)]
    assert [o["_dra"]["ref"] for o in doc["objects"]] == head_refs
    assert [o["_dra"]["ref"] for o in doc["base_objects"]] == [
        "Namespace/gpu",
        "DeviceClass/gpu.example.com",
        "DaemonSet/drivers/drv",
        "ConfigMap/gpu/old",
    ]


def test_objects_are_the_manifests_as_written_plus_dra(head: list[Manifest], doc: dict[str, Any]) -> None:
    for manifest, obj in zip(head, doc["objects"], strict=True):
        assert {k: v for k, v in obj.items() if k != "_dra"} == manifest.body
        assert "_dra" not in manifest.body  # building the input never alters the loaded manifests


def test_params_are_copied(head: list[Manifest]) -> None:
    params = {"a": 1}
    doc = build_input(head=head, base=[], plan=compute_plan([], head), params=params)
    doc["params"]["b"] = 2
    assert params == {"a": 1}


# --- _dra per object ---------------------------------------------------------------------------------


def test_dra_of_namespace(doc: dict[str, Any]) -> None:
    assert by_ref(doc["objects"])["Namespace/gpu"]["_dra"] == {
        "ref": "Namespace/gpu",
        "group": "",
        "version": "v1",
        "kind": "Namespace",
        "namespace": "",
        "name": "gpu",
        "path": "ns.yaml",
        "line": 1,
        "stage": 0,
        "role": "namespace",
        "device_classes": [],
        "claim_templates": [],
        "claims": [],
        "pod_claims": [],
        "container_claims": [],
        "driver": None,
        "canary_for": None,
        "driver_template": None,
        "admin_access": False,
        "driver_role": None,
        "driver_config": None,
        "recognized_by": None,
        "extended_resources": [],
    }


def test_dra_of_device_classes(doc: dict[str, Any]) -> None:
    objs = by_ref(doc["objects"])
    cls = objs["DeviceClass/gpu.example.com"]["_dra"]
    assert (cls["group"], cls["version"], cls["kind"], cls["namespace"], cls["name"]) == (
        "resource.k8s.io",
        "v1",
        "DeviceClass",
        "",
        "gpu.example.com",
    )
    assert (cls["path"], cls["line"], cls["stage"], cls["role"], cls["driver"]) == (
        "classes.yaml",
        1,
        2,
        "device-class",
        "gpu.example.com",
    )
    classic = objs["ResourceClass/classic.example.com"]["_dra"]
    assert (classic["version"], classic["role"], classic["driver"], classic["line"], classic["stage"]) == (
        "v1alpha2",
        "device-class",
        "classic.example.com",
        10,
        2,
    )
    taint = objs["DeviceTaintRule/broken-gpu"]["_dra"]
    assert (taint["role"], taint["stage"], taint["driver"], taint["line"]) == ("taint-rule", 2, None, 16)


def test_dra_of_claim_template(doc: dict[str, Any]) -> None:
    info = by_ref(doc["objects"])["ResourceClaimTemplate/gpu/one-gpu"]["_dra"]
    assert info == {
        "ref": "ResourceClaimTemplate/gpu/one-gpu",
        "group": "resource.k8s.io",
        "version": "v1beta1",
        "kind": "ResourceClaimTemplate",
        "namespace": "gpu",
        "name": "one-gpu",
        "path": "apps/claims.yaml",
        "line": 1,
        "stage": 3,
        "role": "claim-template",
        "device_classes": ["gpu.example.com"],
        "claim_templates": [],
        "claims": [],
        "pod_claims": [],
        "container_claims": [],
        "driver": None,
        "canary_for": None,
        "driver_template": None,
        "admin_access": True,
        "driver_role": None,
        "driver_config": None,
        "recognized_by": None,
        "extended_resources": [],
    }


def test_dra_of_claim_lists_every_alternative(doc: dict[str, Any]) -> None:
    info = by_ref(doc["objects"])["ResourceClaim/gpu/shared"]["_dra"]
    assert (info["role"], info["stage"], info["line"], info["version"]) == ("claim", 3, 14, "v1")
    assert info["device_classes"] == ["big-gpu.example.com", "gpu.example.com"]
    assert info["admin_access"] is False


def test_dra_of_pod_workload(doc: dict[str, Any]) -> None:
    info = by_ref(doc["objects"])["Deployment/gpu/llm"]["_dra"]
    assert info == {
        "ref": "Deployment/gpu/llm",
        "group": "apps",
        "version": "v1",
        "kind": "Deployment",
        "namespace": "gpu",
        "name": "llm",
        "path": "apps/llm.yaml",
        "line": 1,
        "stage": 4,
        "role": "workload",
        "device_classes": [],
        "claim_templates": ["gpu/one-gpu"],
        "claims": ["gpu/shared"],
        "pod_claims": [
            {"name": "accel", "claim": None, "template": "one-gpu"},
            {"name": "shared", "claim": "shared", "template": None},
        ],
        "container_claims": [
            {"container": "server", "name": "accel", "request": None},
            {"container": "server", "name": "shared", "request": "any"},
        ],
        "driver": None,
        "canary_for": None,
        "driver_template": None,
        "admin_access": False,
        "driver_role": None,
        "driver_config": None,
        "recognized_by": None,
        "extended_resources": [],
    }


def test_dra_of_driver_and_canary(doc: dict[str, Any]) -> None:
    objs = by_ref(doc["objects"])
    main = objs["DaemonSet/drivers/drv"]["_dra"]
    canary = objs["DaemonSet/drivers/drv-canary"]["_dra"]
    assert (main["role"], main["stage"], main["driver"], main["canary_for"]) == (
        "driver",
        1,
        "gpu.example.com",
        None,
    )
    assert (canary["role"], canary["stage"], canary["driver"], canary["canary_for"]) == (
        "driver-canary",
        1,
        "gpu.example.com",
        "drv",
    )
    assert (canary["path"], canary["line"]) == ("drivers/canary.yaml", 1)
    assert (main["driver_role"], canary["driver_role"]) == ("kubelet-plugin", "kubelet-plugin")
    assert isinstance(main["recognized_by"], str) and main["recognized_by"]
    for info in (main, canary):
        assert isinstance(info["driver_template"], str) and len(info["driver_template"]) == 64
    # The canary runs drv:2, the main drv:1: different templates.
    assert main["driver_template"] != canary["driver_template"]


def test_driver_template_ignores_placement_names_and_labels() -> None:
    main_same = CANARY.replace("drv-canary", "drv").replace(
        "  annotations: {dra-gitops.io/canary-for: drv}\n", ""
    )
    main_same = main_same.replace("nodeSelector: {canary: 'true'}", "priorityClassName: system-node-critical")
    (canary,) = load({"c.yaml": CANARY})
    (main,) = load({"m.yaml": main_same})
    assert object_doc(canary)["_dra"]["driver_template"] == object_doc(main)["_dra"]["driver_template"]


def test_object_doc_stage_override_argument() -> None:
    (ns,) = load({"ns.yaml": NAMESPACE})
    assert object_doc(ns)["_dra"]["stage"] == 0
    assert object_doc(ns, stage=3)["_dra"]["stage"] == 3


def test_object_doc_honours_stage_annotation() -> None:
    text = APP.replace(
        "  namespace: gpu\n", "  namespace: gpu\n  annotations: {dra-gitops.io/stage: '2'}\n", 1
    )
    (dep,) = load({"a.yaml": text})
    assert object_doc(dep)["_dra"]["stage"] == 2


def test_default_namespace_is_filled_in_dra_not_in_the_manifest() -> None:
    (cm,) = load({"c.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"})
    out = object_doc(cm)
    assert out["_dra"]["namespace"] == "default"
    assert out["_dra"]["ref"] == "ConfigMap/default/c"
    assert "namespace" not in out["metadata"]
    assert (out["_dra"]["role"], out["_dra"]["stage"]) == ("other", 0)


# --- changes -----------------------------------------------------------------------------------------


def test_changes_follow_the_plan(doc: dict[str, Any], head: list[Manifest], base: list[Manifest]) -> None:
    plan = compute_plan(base, head)
    assert [(c["op"], c["ref"], c["stage"], c["driver_change"]) for c in doc["changes"]] == [
        (c.op, str(c.ref), c.stage, c.driver_change) for c in plan.changes
    ]
    assert [(c["op"], c["ref"]) for c in doc["changes"]] == [
        ("create", "DaemonSet/drivers/drv-canary"),
        ("create", "DeviceTaintRule/broken-gpu"),
        ("create", "ResourceClass/classic.example.com"),
        ("create", "ResourceClaim/gpu/shared"),
        ("create", "ResourceClaimTemplate/gpu/one-gpu"),
        ("create", "Deployment/gpu/llm"),
        ("delete", "ConfigMap/gpu/old"),
    ]


def test_change_old_and_new_are_the_object_docs(doc: dict[str, Any]) -> None:
    objects = by_ref(doc["objects"])
    base_objects = by_ref(doc["base_objects"])
    for change in doc["changes"]:
        if change["op"] == "create":
            assert change["old"] is None
            assert change["new"] is objects[change["ref"]]
        elif change["op"] == "delete":
            assert change["new"] is None
            assert change["old"] is base_objects[change["ref"]]
    delete = next(c for c in doc["changes"] if c["op"] == "delete")
    assert delete["old"]["_dra"]["path"] == "apps/old.yaml"


def test_update_change_old_from_base_new_from_head() -> None:
    base = load({"drivers/drv.yaml": DRIVER})
    head = load({"drivers/ds.yaml": "# moved and bumped\n" + DRIVER.replace("drv:1", "drv:3")})
    doc = build_input(head=head, base=base, plan=compute_plan(base, head), base_sha="b", has_base=True)
    (change,) = doc["changes"]
    assert (change["op"], change["ref"], change["stage"], change["driver_change"]) == (
        "update",
        "DaemonSet/drivers/drv",
        1,
        True,
    )
    assert change["old"] is doc["base_objects"][0]
    assert change["new"] is doc["objects"][0]
    assert change["old"]["spec"]["template"]["spec"]["containers"][0]["image"] == "drv:1"
    assert change["new"]["spec"]["template"]["spec"]["containers"][0]["image"] == "drv:3"
    assert (change["old"]["_dra"]["path"], change["old"]["_dra"]["line"]) == ("drivers/drv.yaml", 1)
    assert (change["new"]["_dra"]["path"], change["new"]["_dra"]["line"]) == ("drivers/ds.yaml", 2)


def test_no_changes_when_head_equals_base(base: list[Manifest]) -> None:
    doc = build_input(head=base, base=base, plan=compute_plan(base, base), has_base=True)
    assert doc["changes"] == []
    assert doc["index"] == doc["base_index"]


# --- indexes -----------------------------------------------------------------------------------------


def test_index_from_head(doc: dict[str, Any]) -> None:
    assert doc["index"] == {
        "device_classes": {
            "gpu.example.com": "DeviceClass/gpu.example.com",
            "classic.example.com": "ResourceClass/classic.example.com",
        },
        "device_class_stages": {"gpu.example.com": 2, "classic.example.com": 2},
        "claim_templates": {"gpu/one-gpu": "ResourceClaimTemplate/gpu/one-gpu"},
        "claims": {"gpu/shared": "ResourceClaim/gpu/shared"},
        "namespaces": {
            "gpu": {"ref": "Namespace/gpu", "labels": {"dra.example.com/admin-access": "true", "team": "ml"}}
        },
        "drivers": {
            "gpu.example.com": {
                "workloads": ["DaemonSet/drivers/drv"],
                "canaries": ["DaemonSet/drivers/drv-canary"],
                "classes": ["gpu.example.com"],
                "slices": 0,
                "devices": 0,
            },
            "classic.example.com": {
                "workloads": [],
                "canaries": [],
                "classes": ["classic.example.com"],
                "slices": 0,
                "devices": 0,
            },
        },
        "canaries": {"DaemonSet/drivers/drv": ["DaemonSet/drivers/drv-canary"]},
        "crds": {},
        "extended_resources": {},
    }


def test_base_index_from_base(doc: dict[str, Any]) -> None:
    assert doc["base_index"] == {
        "device_classes": {"gpu.example.com": "DeviceClass/gpu.example.com"},
        "device_class_stages": {"gpu.example.com": 2},
        "claim_templates": {},
        "claims": {},
        "namespaces": {
            "gpu": {"ref": "Namespace/gpu", "labels": {"dra.example.com/admin-access": "true", "team": "ml"}}
        },
        "drivers": {
            "gpu.example.com": {
                "workloads": ["DaemonSet/drivers/drv"],
                "canaries": [],
                "classes": ["gpu.example.com"],
                "slices": 0,
                "devices": 0,
            }
        },
        "canaries": {},
        "crds": {},
        "extended_resources": {},
    }


def test_namespace_without_labels_indexes_empty_labels() -> None:
    (ns,) = load({"n.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: bare}\n"})
    assert build_index([object_doc(ns)])["namespaces"] == {"bare": {"ref": "Namespace/bare", "labels": {}}}


def test_index_counts_slices_and_devices_per_driver() -> None:
    second = SLICE.replace("node-a", "node-b").replace(
        "  - name: gpu-1\n    attributes: {model: {string: A}}\n", ""
    )
    other = SLICE.replace("node-a-gpu", "node-a-nic").replace(
        "driver: gpu.example.com", "driver: nic.example.com"
    )
    objs = load({"s1.yaml": SLICE, "s2.yaml": second, "s3.yaml": other})
    index = build_index(object_doc(m) for m in objs)
    assert index["drivers"] == {
        "gpu.example.com": {"workloads": [], "canaries": [], "classes": [], "slices": 2, "devices": 3},
        "nic.example.com": {"workloads": [], "canaries": [], "classes": [], "slices": 1, "devices": 2},
    }
    assert index["device_classes"] == {} and index["claims"] == {}


def test_index_of_a_v1alpha2_slice_uses_driver_name() -> None:
    text = (
        "apiVersion: resource.k8s.io/v1alpha2\nkind: ResourceSlice\nmetadata: {name: s}\n"
        "driverName: old.example.com\nnodeName: n\n"
        "namedResources:\n  instances:\n  - {name: d0}\n  - {name: d1}\n  - {name: d2}\n"
    )
    (m,) = load({"s.yaml": text})
    assert build_index([object_doc(m)])["drivers"] == {
        "old.example.com": {"workloads": [], "canaries": [], "classes": [], "slices": 1, "devices": 3}
    }


def test_driver_without_known_name_is_not_indexed_but_its_canary_mapping_is() -> None:
    nameless = DRIVER.replace('        args: ["--driver-name=gpu.example.com"]\n', "")
    canary = CANARY.replace('        args: ["--driver-name=gpu.example.com"]\n', "")
    objs = load({"d.yaml": nameless, "c.yaml": canary})
    docs = [object_doc(m) for m in objs]
    assert [d["_dra"]["driver"] for d in docs] == [None, None]
    index = build_index(docs)
    assert index["drivers"] == {}
    assert index["canaries"] == {"DaemonSet/drivers/drv": ["DaemonSet/drivers/drv-canary"]}


def test_driver_named_by_annotation() -> None:
    text = DRIVER.replace("  labels: {app.kubernetes.io/component: kubelet-plugin}\n", "").replace(
        "  namespace: drivers\n",
        "  namespace: drivers\n  annotations: {dra-gitops.io/driver: net.example.com}\n",
    )
    (m,) = load({"d.yaml": text})
    info = object_doc(m)["_dra"]
    assert (info["role"], info["driver"], info["stage"]) == ("driver", "net.example.com", 1)
    assert build_index([object_doc(m)])["drivers"]["net.example.com"]["workloads"] == [
        "DaemonSet/drivers/drv"
    ]


def test_class_without_a_clear_driver_is_indexed_without_driver() -> None:
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: any}\n"
        'spec:\n  selectors:\n  - cel: {expression: \'device.driver == "a" || device.driver == "b"\'}\n'
    )
    (m,) = load({"c.yaml": text})
    index = build_index([object_doc(m)])
    assert index["device_classes"] == {"any": "DeviceClass/any"}
    assert index["drivers"] == {}


def test_index_ignores_non_dra_objects() -> None:
    objs = load({"c.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "a.yaml": APP})
    index = build_index(object_doc(m) for m in objs)
    assert index == {
        "device_classes": {},
        "device_class_stages": {},
        "claim_templates": {},
        "claims": {},
        "namespaces": {},
        "drivers": {},
        "canaries": {},
        "crds": {},
        "extended_resources": {},
    }


# --- cluster facts -----------------------------------------------------------------------------------


def test_cluster_facts(head: list[Manifest], base: list[Manifest]) -> None:
    live = load({"live/ns.yaml": NAMESPACE, "live/slice.yaml": SLICE, "live/drv.yaml": DRIVER})
    cluster = ClusterFacts(
        version="v1.34.1",
        served={"resource.k8s.io": ["v1", "v1beta2", "v1beta1"]},
        deprecated={"resource.k8s.io": ["v1beta1"]},
        objects=live,
    )
    doc = build_input(head=head, base=base, plan=compute_plan(base, head), cluster=cluster, has_base=True)
    cluster_doc = doc["cluster"]
    assert set(cluster_doc) == CLUSTER_KEYS
    assert cluster_doc["version"] == "v1.34.1"
    assert cluster_doc["served"] == {"resource.k8s.io": ["v1", "v1beta2", "v1beta1"]}
    assert cluster_doc["deprecated"] == {"resource.k8s.io": ["v1beta1"]}
    assert [o["_dra"]["ref"] for o in cluster_doc["objects"]] == [
        "Namespace/gpu",
        "ResourceSlice/node-a-gpu",
        "DaemonSet/drivers/drv",
    ]
    for obj in cluster_doc["objects"]:
        check_obj_shape(obj)
    assert cluster_doc["objects"][1]["_dra"]["role"] == "slice"
    assert cluster_doc["index"] == {
        "device_classes": {},
        "device_class_stages": {},
        "claim_templates": {},
        "claims": {},
        "namespaces": {
            "gpu": {"ref": "Namespace/gpu", "labels": {"dra.example.com/admin-access": "true", "team": "ml"}}
        },
        "drivers": {
            "gpu.example.com": {
                "workloads": ["DaemonSet/drivers/drv"],
                "canaries": [],
                "classes": [],
                "slices": 1,
                "devices": 2,
            }
        },
        "canaries": {},
        "crds": {},
        "extended_resources": {},
    }
    # The desired-state index is not mixed with the live one.
    assert doc["index"]["drivers"]["gpu.example.com"]["slices"] == 0
    json.dumps(doc, allow_nan=False)


def test_cluster_facts_defaults() -> None:
    facts = ClusterFacts(version="v1.31.0", served={"resource.k8s.io": ["v1alpha3"]})
    doc = build_input(head=[], base=[], plan=compute_plan([], []), cluster=facts)
    assert doc["cluster"] == {
        "version": "v1.31.0",
        "served": {"resource.k8s.io": ["v1alpha3"]},
        "deprecated": {},
        "kinds": {},
        "unavailable": [],
        "objects": [],
        "index": {
            "device_classes": {},
            "device_class_stages": {},
            "claim_templates": {},
            "claims": {},
            "namespaces": {},
            "drivers": {},
            "canaries": {},
            "crds": {},
            "extended_resources": {},
        },
    }


# --- every shared example goes through ----------------------------------------------------------------


def test_shared_examples_build_a_valid_json_document() -> None:
    examples = Path(__file__).resolve().parents[1] / "data" / "dra-examples"
    files = sorted(examples.rglob("*.yaml"))
    assert len(files) >= 19, f"DRA examples missing at {examples}"
    for file in files:
        # One file at a time: the examples reuse names across versions and files.
        manifests = load_paths([file], display_root=examples).manifests
        doc = build_input(head=manifests, base=[], plan=compute_plan([], manifests))
        assert json.loads(json.dumps(doc, allow_nan=False)) == doc
        for obj in doc["objects"]:
            check_obj_shape(obj)
            assert obj["_dra"]["path"] == file.relative_to(examples).as_posix()
        check_index_shape(doc["index"])
        assert len(doc["changes"]) == len(manifests) == len(doc["objects"])
