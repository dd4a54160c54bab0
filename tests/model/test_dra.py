"""Tests for reconciler.model.dra against the example manifests of every resource.k8s.io version (tests/data)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.model import dra
from reconciler.model.dra import ContainerClaimRef, DeviceRequest, PodClaim, RequestAlternative

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "dra-examples"


def load(rel: str) -> list[dict[str, Any]]:
    with (EXAMPLES / rel).open() as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def obj(rel: str, kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in load(rel) if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, (rel, kind, name)
    return matches[0]


ALL_FILES = sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.yaml"))


def test_examples_are_present() -> None:
    # Guards against the examples moving: every other test would otherwise be vacuous.
    assert len(ALL_FILES) >= 19
    assert "v1/01-deviceclasses.yaml" in ALL_FILES


# --- every object of every file: role and that nothing crashes ----------------------------------------

ROLES: dict[str, list[tuple[str, str, str]]] = {
    "driver/kubeletplugin-daemonset.yaml": [("DaemonSet", "dra-example-driver-kubeletplugin", "driver")],
    "fixtures/claim-v1-allocated.yaml": [
        ("ResourceClaim", "llm-server-7d9f8c6b5-abcde-accel-q2w4r", "claim")
    ],
    "fixtures/claim-v1-pending.yaml": [("ResourceClaim", "llm-server-7d9f8c6b5-fghij-accel-z8x6c", "claim")],
    "fixtures/events-failed-scheduling.yaml": [
        ("Event", "llm-server-7d9f8c6b5-fghij.18a2f0c1d2e3f4a5", "other"),
        ("Event", "trainer-0.18a2f0c1d2e3f4b6", "other"),
        ("Event", "notebook.18a2f0c1d2e3f4c7", "other"),
        ("Event", "notebook.18a2f0c1d2e3f4d8", "other"),
    ],
    "v1/01-deviceclasses.yaml": [
        ("DeviceClass", "gpu.example.com", "device-class"),
        ("DeviceClass", "big-gpu.example.com", "device-class"),
    ],
    "v1/02-claimtemplate-deployment.yaml": [
        ("Namespace", "inference", "namespace"),
        ("ResourceClaimTemplate", "one-gpu", "claim-template"),
        ("Deployment", "llm-server", "workload"),
    ],
    "v1/03-shared-claim-prioritized.yaml": [
        ("ResourceClaim", "training-pair", "claim"),
        ("Pod", "trainer-0", "workload"),
        ("Pod", "trainer-1", "workload"),
    ],
    "v1/04-nvidia-gpu.yaml": [
        ("ResourceClaimTemplate", "mps-shared-gpu", "claim-template"),
        ("Pod", "notebook", "workload"),
    ],
    "v1/05-compute-domain.yaml": [("ComputeDomain", "nvl-job", "other"), ("Pod", "nvl-worker-0", "workload")],
    "v1/06-admin-access.yaml": [
        ("Namespace", "gpu-monitoring", "namespace"),
        ("ResourceClaimTemplate", "all-gpus-admin", "claim-template"),
    ],
    "v1/07-resourceslice.yaml": [("ResourceSlice", "worker-a-gpu.example.com-x7k2q", "slice")],
    "v1/08-device-taint-rule.yaml": [("DeviceTaintRule", "drain-worker-a-gpu-1", "taint-rule")],
    "v1alpha1/classic-1.26.yaml": [
        ("ResourceClass", "gpu.example.com", "device-class"),
        ("ResourceClaim", "shared-gpu", "claim"),
        ("Pod", "legacy-pod", "workload"),
    ],
    "v1alpha2/claim-allocated-status.yaml": [("ResourceClaim", "legacy-job-gpus-7mz2k", "claim")],
    "v1alpha2/classic-dra.yaml": [
        ("ResourceClass", "gpu.example.com", "device-class"),
        ("GpuClaimParameters", "two-gpus", "other"),
        ("ResourceClaimTemplate", "two-gpus", "claim-template"),
        ("Pod", "legacy-job", "workload"),
    ],
    "v1alpha2/structured-1.30.yaml": [
        ("ResourceClass", "gpu.example.com", "device-class"),
        ("ResourceSlice", "worker-a-gpu.resource.example.com-p9d2s", "slice"),
    ],
    "v1alpha3/claim-pod.yaml": [
        ("DeviceClass", "gpu.example.com", "device-class"),
        ("ResourceClaimTemplate", "one-gpu", "claim-template"),
        ("Pod", "worker", "workload"),
    ],
    "v1beta1/claimtemplate-pod.yaml": [
        ("DeviceClass", "gpu.example.com", "device-class"),
        ("ResourceClaimTemplate", "one-gpu", "claim-template"),
        ("Pod", "worker", "workload"),
        ("ResourceSlice", "worker-a-gpu.example.com-4hq8m", "slice"),
    ],
    "v1beta2/claim.yaml": [("ResourceClaim", "pair", "claim")],
}


def test_roles_cover_every_example_file() -> None:
    assert sorted(ROLES) == ALL_FILES


@pytest.mark.parametrize("rel", ALL_FILES)
def test_role_of_every_object(rel: str) -> None:
    got = [(d["kind"], d["metadata"]["name"], dra.role_of(d)) for d in load(rel)]
    assert got == ROLES[rel]


@pytest.mark.parametrize("rel", ALL_FILES)
def test_every_accessor_runs_on_every_object(rel: str) -> None:
    for body in load(rel):
        before = copy.deepcopy(body)
        info = dra.describe(body, "ns")
        json_doc = info.to_json()
        assert json_doc["role"] == dra.role_of(body)
        dra.slice_devices(body)
        dra.claim_allocation(body)
        dra.device_requests(body)
        dra.class_selectors(body)
        assert body == before  # accessors never mutate the manifest


# --- claims and templates: requested classes ----------------------------------------------------------

CLASSES = [
    ("v1/02-claimtemplate-deployment.yaml", "ResourceClaimTemplate", "one-gpu", ["gpu.example.com"]),
    (
        "v1/03-shared-claim-prioritized.yaml",
        "ResourceClaim",
        "training-pair",
        ["big-gpu.example.com", "gpu.example.com"],
    ),
    ("v1/04-nvidia-gpu.yaml", "ResourceClaimTemplate", "mps-shared-gpu", ["gpu.nvidia.com"]),
    ("v1/06-admin-access.yaml", "ResourceClaimTemplate", "all-gpus-admin", ["gpu.example.com"]),
    ("v1alpha1/classic-1.26.yaml", "ResourceClaim", "shared-gpu", ["gpu.example.com"]),
    ("v1alpha2/classic-dra.yaml", "ResourceClaimTemplate", "two-gpus", ["gpu.example.com"]),
    ("v1alpha2/claim-allocated-status.yaml", "ResourceClaim", "legacy-job-gpus-7mz2k", ["gpu.example.com"]),
    ("v1alpha3/claim-pod.yaml", "ResourceClaimTemplate", "one-gpu", ["gpu.example.com"]),
    ("v1beta1/claimtemplate-pod.yaml", "ResourceClaimTemplate", "one-gpu", ["gpu.example.com"]),
    ("v1beta2/claim.yaml", "ResourceClaim", "pair", ["gpu.example.com"]),
    (
        "fixtures/claim-v1-allocated.yaml",
        "ResourceClaim",
        "llm-server-7d9f8c6b5-abcde-accel-q2w4r",
        ["gpu.example.com"],
    ),
    (
        "fixtures/claim-v1-pending.yaml",
        "ResourceClaim",
        "llm-server-7d9f8c6b5-fghij-accel-z8x6c",
        ["gpu.example.com"],
    ),
]


@pytest.mark.parametrize(("rel", "kind", "name", "classes"), CLASSES)
def test_requested_classes(rel: str, kind: str, name: str, classes: list[str]) -> None:
    body = obj(rel, kind, name)
    assert dra.requested_classes(body) == classes
    assert list(dra.describe(body, "x").device_classes) == classes


def test_requested_classes_none_for_non_claims() -> None:
    assert dra.requested_classes(obj("v1/01-deviceclasses.yaml", "DeviceClass", "gpu.example.com")) == []
    assert dra.requested_classes(obj("v1/03-shared-claim-prioritized.yaml", "Pod", "trainer-0")) == []


def test_requested_classes_dedup_and_order() -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "a", "exactly": {"deviceClassName": "z"}},
                    {"name": "b", "firstAvailable": [{"name": "s", "deviceClassName": "a"}, {"name": "t"}]},
                    {"name": "c", "exactly": {"deviceClassName": "z"}},
                ]
            }
        },
    }
    assert dra.requested_classes(body) == ["z", "a"]


def test_v1beta1_first_available_is_read() -> None:
    # 1.33 added firstAvailable to v1beta1 beside the flat deviceClassName.
    body = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "r", "firstAvailable": [{"name": "x", "deviceClassName": "c1"}]},
                        {"name": "q", "deviceClassName": "c2", "adminAccess": True},
                    ]
                }
            }
        },
    }
    assert dra.requested_classes(body) == ["c1", "c2"]
    assert dra.requests_admin_access(body) is True


def test_claim_spec_of() -> None:
    template = obj("v1/02-claimtemplate-deployment.yaml", "ResourceClaimTemplate", "one-gpu")
    assert dra.claim_spec_of(template) == template["spec"]["spec"]
    claim = obj("v1beta2/claim.yaml", "ResourceClaim", "pair")
    assert dra.claim_spec_of(claim) == claim["spec"]
    assert dra.claim_spec_of(obj("v1/03-shared-claim-prioritized.yaml", "Pod", "trainer-0")) is None
    # Same kind name in another group is not a DRA claim.
    assert dra.claim_spec_of({"apiVersion": "example.com/v1", "kind": "ResourceClaim", "spec": {}}) is None


# --- device requests --------------------------------------------------------------------------------


def test_device_requests_v1_exactly() -> None:
    body = obj("v1/02-claimtemplate-deployment.yaml", "ResourceClaimTemplate", "one-gpu")
    sel = "device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'"
    assert dra.device_requests(body) == [
        DeviceRequest("gpu", (RequestAlternative("gpu", "gpu.example.com", (sel,), 1, False),))
    ]


def test_device_requests_first_available() -> None:
    body = obj("v1/03-shared-claim-prioritized.yaml", "ResourceClaim", "training-pair")
    assert dra.device_requests(body) == [
        DeviceRequest(
            "primary",
            (
                RequestAlternative("big", "big-gpu.example.com", (), 2, False),
                RequestAlternative("any", "gpu.example.com", (), 2, False),
            ),
        )
    ]


def test_device_requests_admin_all() -> None:
    body = obj("v1/06-admin-access.yaml", "ResourceClaimTemplate", "all-gpus-admin")
    (req,) = dra.device_requests(body)
    assert req.name == "every-gpu"
    assert req.alternatives == (RequestAlternative("every-gpu", "gpu.example.com", (), 0, True),)
    assert dra.requests_admin_access(body) is True
    assert dra.describe(body, "gpu-monitoring").admin_access is True


@pytest.mark.parametrize(
    ("rel", "kind", "name"),
    [(r, k, n) for r, k, n, _ in CLASSES if not n.startswith("all-gpus-admin")],
)
def test_no_admin_access_elsewhere(rel: str, kind: str, name: str) -> None:
    assert dra.requests_admin_access(obj(rel, kind, name)) is False


def test_device_requests_flat_versions() -> None:
    v1beta1 = obj("v1beta1/claimtemplate-pod.yaml", "ResourceClaimTemplate", "one-gpu")
    sel = "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"
    assert dra.device_requests(v1beta1) == [
        DeviceRequest("gpu", (RequestAlternative("gpu", "gpu.example.com", (sel,), 1, False),))
    ]
    v1alpha3 = obj("v1alpha3/claim-pod.yaml", "ResourceClaimTemplate", "one-gpu")
    assert dra.device_requests(v1alpha3) == [
        DeviceRequest("gpu", (RequestAlternative("gpu", "gpu.example.com", (), 1, False),))
    ]


def test_device_requests_v1beta2_count() -> None:
    (req,) = dra.device_requests(obj("v1beta2/claim.yaml", "ResourceClaim", "pair"))
    assert req.alternatives[0].count == 2


@pytest.mark.parametrize(
    ("rel", "kind", "name"),
    [
        ("v1alpha2/classic-dra.yaml", "ResourceClaimTemplate", "two-gpus"),
        ("v1alpha1/classic-1.26.yaml", "ResourceClaim", "shared-gpu"),
    ],
)
def test_device_requests_classic(rel: str, kind: str, name: str) -> None:
    assert dra.device_requests(obj(rel, kind, name)) == [
        DeviceRequest(
            "gpu.example.com",
            (RequestAlternative("gpu.example.com", "gpu.example.com", (), 1, False),),
        )
    ]


# --- pod side --------------------------------------------------------------------------------------

POD_CLAIMS = [
    ("v1/02-claimtemplate-deployment.yaml", "Deployment", "llm-server", [PodClaim("accel", None, "one-gpu")]),
    ("v1/03-shared-claim-prioritized.yaml", "Pod", "trainer-0", [PodClaim("gpus", "training-pair", None)]),
    ("v1/03-shared-claim-prioritized.yaml", "Pod", "trainer-1", [PodClaim("gpus", "training-pair", None)]),
    ("v1/04-nvidia-gpu.yaml", "Pod", "notebook", [PodClaim("shared-gpu", None, "mps-shared-gpu")]),
    ("v1/05-compute-domain.yaml", "Pod", "nvl-worker-0", [PodClaim("imex", None, "nvl-job-channel")]),
    ("v1alpha1/classic-1.26.yaml", "Pod", "legacy-pod", [PodClaim("gpu", "shared-gpu", None)]),
    ("v1alpha2/classic-dra.yaml", "Pod", "legacy-job", [PodClaim("gpus", None, "two-gpus")]),
    ("v1alpha3/claim-pod.yaml", "Pod", "worker", [PodClaim("accel", None, "one-gpu")]),
    ("v1beta1/claimtemplate-pod.yaml", "Pod", "worker", [PodClaim("accel", None, "one-gpu")]),
    ("driver/kubeletplugin-daemonset.yaml", "DaemonSet", "dra-example-driver-kubeletplugin", []),
]


@pytest.mark.parametrize(("rel", "kind", "name", "claims"), POD_CLAIMS)
def test_pod_claims(rel: str, kind: str, name: str, claims: list[PodClaim]) -> None:
    body = obj(rel, kind, name)
    assert dra.pod_claims(dra.pod_spec_of(body)) == claims
    info = dra.describe(body, "the-ns")
    assert list(info.claim_templates) == [f"the-ns/{c.template}" for c in claims if c.template]
    assert list(info.claims) == [f"the-ns/{c.claim}" for c in claims if c.claim]
    assert list(info.pod_claims) == claims


CONTAINER_CLAIMS = [
    (
        "v1/02-claimtemplate-deployment.yaml",
        "Deployment",
        "llm-server",
        [ContainerClaimRef("server", "accel", None)],
    ),
    (
        "v1/03-shared-claim-prioritized.yaml",
        "Pod",
        "trainer-0",
        [ContainerClaimRef("main", "gpus", "primary")],
    ),
    ("v1/03-shared-claim-prioritized.yaml", "Pod", "trainer-1", [ContainerClaimRef("main", "gpus", None)]),
    (
        "v1/04-nvidia-gpu.yaml",
        "Pod",
        "notebook",
        [
            ContainerClaimRef("jupyter", "shared-gpu", None),
            ContainerClaimRef("sidecar-metrics", "shared-gpu", None),
        ],
    ),
    ("v1/05-compute-domain.yaml", "Pod", "nvl-worker-0", [ContainerClaimRef("worker", "imex", None)]),
    ("v1alpha1/classic-1.26.yaml", "Pod", "legacy-pod", [ContainerClaimRef("main", "gpu", None)]),
    ("v1alpha2/classic-dra.yaml", "Pod", "legacy-job", [ContainerClaimRef("main", "gpus", None)]),
    ("v1alpha3/claim-pod.yaml", "Pod", "worker", [ContainerClaimRef("app", "accel", None)]),
    ("v1beta1/claimtemplate-pod.yaml", "Pod", "worker", [ContainerClaimRef("app", "accel", None)]),
]


@pytest.mark.parametrize(("rel", "kind", "name", "refs"), CONTAINER_CLAIMS)
def test_container_claim_refs(rel: str, kind: str, name: str, refs: list[ContainerClaimRef]) -> None:
    body = obj(rel, kind, name)
    assert dra.container_claim_refs(dra.pod_spec_of(body)) == refs
    assert list(dra.describe(body, "n").container_claims) == refs


def test_init_containers_come_first() -> None:
    spec = {
        "containers": [{"name": "c", "resources": {"claims": [{"name": "a"}]}}],
        "initContainers": [{"name": "i", "resources": {"claims": [{"name": "b", "request": "r"}]}}],
    }
    assert dra.container_claim_refs(spec) == [
        ContainerClaimRef("i", "b", "r"),
        ContainerClaimRef("c", "a", None),
    ]


POD_SPEC = {"containers": [{"name": "c"}], "resourceClaims": [{"name": "x", "resourceClaimName": "y"}]}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"apiVersion": "v1", "kind": "Pod", "spec": POD_SPEC}, POD_SPEC),
        ({"apiVersion": "v1", "kind": "PodTemplate", "template": {"spec": POD_SPEC}}, POD_SPEC),
        (
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"template": {"spec": POD_SPEC}}},
            POD_SPEC,
        ),
        ({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"template": {"spec": POD_SPEC}}}, POD_SPEC),
        ({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": POD_SPEC}}}, POD_SPEC),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "spec": {"jobTemplate": {"spec": {"template": {"spec": POD_SPEC}}}},
            },
            POD_SPEC,
        ),
        ({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"template": {"spec": POD_SPEC}}}, None),
        (
            {"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {"template": {"spec": POD_SPEC}}},
            None,
        ),
        ({"apiVersion": "v1", "kind": "Service", "spec": {}}, None),
        ({"apiVersion": "v1", "kind": "Pod", "spec": "oops"}, None),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": ["x"]}}, None),
    ],
)
def test_pod_spec_of(body: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert dra.pod_spec_of(body) == expected


def test_pod_template_kinds() -> None:
    assert set(dra.POD_TEMPLATE_KINDS) == {
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CronJob",
        "Pod",
        "PodTemplate",
    }


def test_pod_claims_source_and_flat_forms_and_junk() -> None:
    spec = {
        "resourceClaims": [
            {"name": "a", "source": {"resourceClaimTemplateName": "t"}},
            {"name": "b", "resourceClaimName": "c"},
            {"name": "both", "resourceClaimName": "c", "resourceClaimTemplateName": "t"},
            {"name": "neither"},
            {"resourceClaimName": "no-name"},
            "junk",
            {"name": "bad-source", "source": "x"},
        ]
    }
    assert dra.pod_claims(spec) == [
        PodClaim("a", None, "t"),
        PodClaim("b", "c", None),
        PodClaim("both", "c", "t"),
        PodClaim("neither", None, None),
        PodClaim("bad-source", None, None),
    ]


@pytest.mark.parametrize("bad", [None, {}, {"resourceClaims": "x"}, {"resourceClaims": None}, "str", [1]])
def test_pod_claims_malformed(bad: Any) -> None:
    assert dra.pod_claims(bad) == []
    assert dra.container_claim_refs(bad) == []


def test_container_claims_malformed() -> None:
    spec = {
        "containers": [
            "junk",
            {"name": "a", "resources": "x"},
            {"name": "b", "resources": {"claims": "x"}},
            {"name": "c", "resources": {"claims": ["x", {"request": "r"}, {"name": "ok", "request": 3}]}},
        ],
        "initContainers": "nope",
    }
    assert dra.container_claim_refs(spec) == [ContainerClaimRef("c", "ok", None)]


def test_describe_workload_uses_given_namespace_and_dedups() -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ignored"},
        "spec": {
            "resourceClaims": [
                {"name": "a", "resourceClaimTemplateName": "t"},
                {"name": "b", "resourceClaimTemplateName": "t"},
                {"name": "c", "resourceClaimName": "shared"},
            ],
            "containers": [{"name": "m", "resources": {"claims": [{"name": "a"}]}}],
        },
    }
    info = dra.describe(body, "team")
    assert info.to_json() == {
        "role": "workload",
        "device_classes": [],
        "claim_templates": ["team/t"],
        "claims": ["team/shared"],
        "pod_claims": [
            {"name": "a", "claim": None, "template": "t"},
            {"name": "b", "claim": None, "template": "t"},
            {"name": "c", "claim": "shared", "template": None},
        ],
        "container_claims": [{"container": "m", "name": "a", "request": None}],
        "driver": None,
        "canary_for": None,
        "driver_template": None,
        "admin_access": False,
        "driver_role": None,
        "driver_config": None,
        "recognized_by": None,
        "extended_resources": [],
    }


# --- classes ---------------------------------------------------------------------------------------

CLASS_DRIVERS = [
    ("v1/01-deviceclasses.yaml", "DeviceClass", "gpu.example.com", "gpu.example.com"),
    ("v1/01-deviceclasses.yaml", "DeviceClass", "big-gpu.example.com", "gpu.example.com"),
    ("v1alpha3/claim-pod.yaml", "DeviceClass", "gpu.example.com", "gpu.example.com"),
    ("v1beta1/claimtemplate-pod.yaml", "DeviceClass", "gpu.example.com", "gpu.example.com"),
    # Classic: the class name and the driver name differ.
    ("v1alpha1/classic-1.26.yaml", "ResourceClass", "gpu.example.com", "gpu.resource.example.com"),
    ("v1alpha2/classic-dra.yaml", "ResourceClass", "gpu.example.com", "gpu.resource.example.com"),
    ("v1alpha2/structured-1.30.yaml", "ResourceClass", "gpu.example.com", "gpu.resource.example.com"),
]


@pytest.mark.parametrize(("rel", "kind", "name", "driver"), CLASS_DRIVERS)
def test_class_driver(rel: str, kind: str, name: str, driver: str) -> None:
    body = obj(rel, kind, name)
    assert dra.class_driver(body) == driver
    assert dra.describe(body, "").driver == driver


def test_class_selectors() -> None:
    big = obj("v1/01-deviceclasses.yaml", "DeviceClass", "big-gpu.example.com")
    assert dra.class_selectors(big) == [
        "device.driver == 'gpu.example.com' && "
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"
    ]
    assert dra.class_selectors(obj("v1alpha2/classic-dra.yaml", "ResourceClass", "gpu.example.com")) == []


def _class(selectors: Any = None, config: Any = None, api: str = "resource.k8s.io/v1") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selectors is not None:
        spec["selectors"] = selectors
    if config is not None:
        spec["config"] = config
    return {"apiVersion": api, "kind": "DeviceClass", "metadata": {"name": "c"}, "spec": spec}


def _cel(*exprs: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": e}} for e in exprs]


@pytest.mark.parametrize(
    ("body", "driver"),
    [
        (_class(_cel('device.driver == "dq.example.com"')), "dq.example.com"),
        (_class(_cel("device.driver=='tight.example.com'")), "tight.example.com"),
        (_class(_cel("'rev.example.com' == device.driver")), "rev.example.com"),
        (
            _class(_cel("device.attributes['x.io'].model == 'm'", "device.driver == 'second.io'")),
            "second.io",
        ),
        (_class(_cel("device.driver == 'a.io' || device.driver == 'b.io'")), None),
        (_class(_cel("device.driver != 'a.io'")), None),
        (_class(_cel("device.attributes['x.io'].model == 'm'")), None),
        (_class(_cel("true"), [{"opaque": {"driver": "cfg.io", "parameters": {}}}]), "cfg.io"),
        (_class(None, [{"opaque": {"driver": "a.io"}}, {"opaque": {"driver": "b.io"}}]), None),
        (_class(_cel("device.driver == 'sel.io'"), [{"opaque": {"driver": "cfg.io"}}]), "sel.io"),
        (_class("not-a-list", "nor-this"), None),
        (_class([{"cel": "x"}, "y", {"cel": {"expression": 5}}]), None),
        ({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "spec": "x"}, None),
        ({"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClass"}, None),
        ({"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClass", "driverName": 7}, None),
    ],
)
def test_class_driver_patterns(body: dict[str, Any], driver: str | None) -> None:
    assert dra.class_driver(body) == driver


# --- driver workloads ------------------------------------------------------------------------------

DRIVER_DS = "driver/kubeletplugin-daemonset.yaml"


def driver_ds() -> dict[str, Any]:
    return obj(DRIVER_DS, "DaemonSet", "dra-example-driver-kubeletplugin")


def test_example_driver_daemonset() -> None:
    body = driver_ds()
    assert dra.is_driver_workload(body)
    assert dra.workload_driver(body) == "gpu.example.com"  # from env DRIVER_NAME
    assert dra.canary_for(body) is None
    digest = dra.driver_template_digest(body)
    assert digest is not None and len(digest) == 64
    info = dra.describe(body, "dra-example-driver")
    assert (info.role, info.driver, info.driver_template) == ("driver", "gpu.example.com", digest)


def _workload(
    kind: str = "DaemonSet",
    labels: dict[str, str] | None = None,
    tmpl_labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    containers: Any = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "template": {
                "metadata": {"labels": tmpl_labels or {}},
                "spec": {
                    "containers": containers if containers is not None else [{"name": "c", "image": "i"}]
                },
            }
        },
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_workload(labels={"app.kubernetes.io/component": "kubelet-plugin"}), True),
        (_workload(labels={"app.kubernetes.io/component": "kubeletplugin"}), True),
        (_workload(tmpl_labels={"app.kubernetes.io/component": "kubelet-plugin"}), True),
        (_workload("Deployment", annotations={"dra-gitops.io/driver": "x.io"}), True),
        (_workload("StatefulSet", labels={"app.kubernetes.io/component": "kubeletplugin"}), True),
        (_workload(labels={"nvidia-dra-driver-gpu-component": "kubelet-plugin"}), True),
        (_workload(labels={"app.kubernetes.io/component": "controller"}), False),
        (_workload(labels={"other": "kubelet-plugin"}), False),
        (_workload(annotations={"dra-gitops.io/driver": ""}), False),
        (_workload("ReplicaSet", labels={"app.kubernetes.io/component": "kubelet-plugin"}), False),
        (_workload("Job", annotations={"dra-gitops.io/driver": "x.io"}), False),
        (_workload(), False),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": "x",
                "spec": {"template": {"spec": {}}},
            },
            False,
        ),
    ],
)
def test_is_driver_workload(body: dict[str, Any], expected: bool) -> None:
    assert dra.is_driver_workload(body) is expected
    assert (dra.role_of(body) == "driver") is expected


DRIVER_LABELS = {"app.kubernetes.io/component": "kubelet-plugin"}


@pytest.mark.parametrize(
    ("container", "driver"),
    [
        ({"name": "p", "args": ["--driver-name=eq.io"]}, "eq.io"),
        ({"name": "p", "args": ["-v=4", "--driver-name", "sp.io"]}, "sp.io"),
        ({"name": "p", "args": ["--driver=short.io"]}, "short.io"),
        ({"name": "p", "command": ["/plugin", "--driver-name=cmd.io"]}, "cmd.io"),
        ({"name": "p", "env": [{"name": "DRIVER_NAME", "value": "env.io"}]}, "env.io"),
        ({"name": "p", "env": [{"name": "DRA_DRIVER_NAME", "value": "env2.io"}]}, "env2.io"),
        (
            {
                "name": "p",
                "args": ["--driver-name=flag.io"],
                "env": [{"name": "DRIVER_NAME", "value": "e.io"}],
            },
            "flag.io",
        ),
        ({"name": "p", "env": [{"name": "DRIVER_NAME", "valueFrom": {"fieldRef": {}}}]}, None),
        ({"name": "p", "args": ["--driver-name"]}, None),
        ({"name": "p", "args": ["--driver-name", "--other"]}, None),
        ({"name": "p", "args": "--driver-name=str.io", "env": "x"}, None),
        ({"name": "p", "args": ["--driver-namespace=ns"]}, None),
    ],
)
def test_workload_driver_from_container(container: dict[str, Any], driver: str | None) -> None:
    assert dra.workload_driver(_workload(labels=DRIVER_LABELS, containers=[container])) == driver


def test_workload_driver_annotation_wins() -> None:
    body = _workload(
        annotations={"dra-gitops.io/driver": "ann.io"},
        containers=[{"name": "p", "args": ["--driver-name=flag.io"]}],
    )
    assert dra.workload_driver(body) == "ann.io"


def test_workload_driver_none_for_non_driver() -> None:
    # A DRIVER_NAME env on an ordinary app (a database driver, say) says nothing about DRA.
    body = _workload(
        "Deployment", containers=[{"name": "p", "env": [{"name": "DRIVER_NAME", "value": "pg"}]}]
    )
    assert dra.workload_driver(body) is None


def test_canary() -> None:
    body = driver_ds()
    body["metadata"]["name"] = "dra-example-driver-kubeletplugin-canary"
    body["metadata"]["annotations"] = {"dra-gitops.io/canary-for": "dra-example-driver-kubeletplugin"}
    assert dra.canary_for(body) == "dra-example-driver-kubeletplugin"
    assert dra.role_of(body) == "driver-canary"
    info = dra.describe(body, "dra-example-driver")
    assert info.canary_for == "dra-example-driver-kubeletplugin"
    assert info.driver == "gpu.example.com"
    # The annotation means nothing on an ordinary workload.
    plain = _workload("Deployment", annotations={"dra-gitops.io/canary-for": "x"})
    assert dra.canary_for(plain) is None
    assert dra.role_of(plain) == "workload"


def _template_spec(body: dict[str, Any]) -> dict[str, Any]:
    spec = dra.pod_spec_of(body)
    assert spec is not None
    return spec


def test_digest_ignores_placement_names_labels_and_key_order() -> None:
    main = driver_ds()
    canary = driver_ds()
    canary["metadata"]["name"] = "canary"
    canary["metadata"]["labels"]["extra"] = "yes"
    canary["metadata"]["annotations"] = {"dra-gitops.io/canary-for": "dra-example-driver-kubeletplugin"}
    canary["spec"]["template"]["metadata"] = {"labels": {"app": "canary"}}
    spec = _template_spec(canary)
    spec["nodeSelector"] = {"canary": "true"}
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
    spec["tolerations"] = [{"key": "canary", "operator": "Exists"}]
    spec["priorityClassName"] = "other"
    spec["containers"][0] = dict(reversed(list(spec["containers"][0].items())))
    spec["containers"][0]["livenessProbe"] = {"grpc": {"port": 1}}
    assert dra.driver_template_digest(canary) == dra.driver_template_digest(main)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["containers"][0].update(
            image="registry.k8s.io/dra-example-driver/dra-example-driver:v0.5.0"
        ),
        lambda s: s["containers"][0].update(args=["--v=6"]),
        lambda s: s["containers"][0]["env"].append({"name": "X", "value": "1"}),
        lambda s: s["containers"][0].update(command=["other"]),
        lambda s: s["volumes"].pop(),
        lambda s: s["containers"][0]["volumeMounts"].pop(),
        lambda s: s["containers"][0].update(securityContext={"privileged": False}),
        lambda s: s.update(initContainers=[{"name": "init", "image": "busybox"}]),
    ],
)
def test_digest_changes_with_what_runs(change: Any) -> None:
    before = dra.driver_template_digest(driver_ds())
    body = driver_ds()
    change(_template_spec(body))
    assert dra.driver_template_digest(body) != before


def test_digest_changes_with_the_template_annotations() -> None:
    # A changed template annotation (a config checksum, a restart stamp) restarts every driver pod.
    before = dra.driver_template_digest(driver_ds())
    body = driver_ds()
    body["spec"]["template"].setdefault("metadata", {})["annotations"] = {"checksum/config": "abc"}
    assert dra.driver_template_digest(body) != before


def test_digest_none_for_non_driver() -> None:
    assert (
        dra.driver_template_digest(obj("v1/02-claimtemplate-deployment.yaml", "Deployment", "llm-server"))
        is None
    )


# --- roles edge cases --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "role"),
    [
        ({"apiVersion": "example.com/v1", "kind": "DeviceClass"}, "other"),
        ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimParameters"}, "other"),
        ({"apiVersion": "resource.k8s.io/v1alpha2", "kind": "PodSchedulingContext"}, "other"),
        ({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule"}, "taint-rule"),
        ({"apiVersion": "v1", "kind": "Namespace"}, "namespace"),
        ({"apiVersion": "example.com/v1", "kind": "Namespace"}, "other"),
        ({"apiVersion": "v1", "kind": "Service", "spec": {}}, "other"),
        ({"kind": "Pod", "spec": {}}, "workload"),
        ({}, "other"),
    ],
)
def test_role_edges(body: dict[str, Any], role: str) -> None:
    assert dra.role_of(body) == role


@pytest.mark.parametrize(
    ("api_version", "expected"),
    [
        ("resource.k8s.io/v1", True),
        ("resource.k8s.io/v1alpha2", True),
        ("resource.k8s.io/v9", True),
        ("v1", False),
        ("apps/v1", False),
        ("resource.k8s.io", False),
        ("gpu.resource.k8s.io/v1", False),
        ("", False),
    ],
)
def test_is_dra_group(api_version: str, expected: bool) -> None:
    assert dra.is_dra_group(api_version) is expected


def test_constants() -> None:
    assert dra.DRA_GROUP == "resource.k8s.io"
    assert dra.DRA_VERSIONS == ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1", "v1beta2", "v1")
    assert dra.DRIVER_ANNOTATION == "dra-gitops.io/driver"
    assert dra.CANARY_ANNOTATION == "dra-gitops.io/canary-for"


# --- slices -----------------------------------------------------------------------------------------


def test_slice_v1() -> None:
    body = obj("v1/07-resourceslice.yaml", "ResourceSlice", "worker-a-gpu.example.com-x7k2q")
    assert dra.slice_driver(body) == "gpu.example.com"
    assert dra.slice_node(body) == "worker-a"
    assert dra.slice_pool(body) == "worker-a"
    devices = dra.slice_devices(body)
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert devices[1] == {
        "name": "gpu-1",
        "attributes": {
            "gpu.example.com/model": {"string": "LATEST-GPU-MODEL"},
            "gpu.example.com/index": {"int": 1},
            "gpu.example.com/uuid": {"string": "gpu-5a7e1b90-2d4f-4c8e-8f61-0e9d3b7c2a44"},
            "gpu.example.com/driverVersion": {"version": "1.0.0"},
        },
        "capacity": {"gpu.example.com/memory": {"value": "80Gi"}},
    }


def test_slice_v1beta1_basic() -> None:
    body = obj("v1beta1/claimtemplate-pod.yaml", "ResourceSlice", "worker-a-gpu.example.com-4hq8m")
    assert (dra.slice_driver(body), dra.slice_node(body), dra.slice_pool(body)) == (
        "gpu.example.com",
        "worker-a",
        "worker-a",
    )
    assert dra.slice_devices(body) == [
        {
            "name": "gpu-0",
            "attributes": {"gpu.example.com/model": {"string": "LATEST-GPU-MODEL"}},
            "capacity": {"gpu.example.com/memory": {"value": "80Gi"}},
        }
    ]


def test_slice_v1alpha3_plain_quantity_and_qualified_names() -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "d.io",
            "nodeName": "n1",
            "pool": {"name": "p1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "dev",
                    "basic": {
                        "attributes": {"other.io/x": {"bool": True}, "n": {"int": 2}, "junk": "x", "e": {}},
                        "capacity": {"mem": "16Gi", "cores": 8, "bad": None},
                    },
                },
                {"basic": {}},
            ],
        },
    }
    assert dra.slice_devices(body) == [
        {
            "name": "dev",
            "attributes": {"other.io/x": {"bool": True}, "d.io/n": {"int": 2}},
            "capacity": {"d.io/mem": {"value": "16Gi"}, "d.io/cores": {"value": "8"}},
        }
    ]


def test_slice_v1alpha2_named_resources() -> None:
    body = obj("v1alpha2/structured-1.30.yaml", "ResourceSlice", "worker-a-gpu.resource.example.com-p9d2s")
    assert dra.slice_driver(body) == "gpu.resource.example.com"
    assert dra.slice_node(body) == "worker-a"
    assert dra.slice_pool(body) is None
    assert dra.slice_devices(body) == [
        {
            "name": "gpu-0",
            "attributes": {},
            "capacity": {"gpu.resource.example.com/memory": {"value": "80Gi"}},
        }
    ]


def test_slice_v1alpha2_typed_attributes() -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1alpha2",
        "kind": "ResourceSlice",
        "driverName": "d.io",
        "nodeName": "n",
        "namedResources": {
            "instances": [{"name": "i", "attributes": [{"name": "m", "string": "A"}, "x", {}]}]
        },
    }
    assert dra.slice_devices(body) == [
        {"name": "i", "attributes": {"d.io/m": {"string": "A"}}, "capacity": {}}
    ]


@pytest.mark.parametrize(
    "spec",
    [
        {"driver": "d", "allNodes": True, "devices": "x"},
        {"driver": "d", "nodeSelector": {}, "devices": None},
        {"driver": "d", "devices": ["x", 1]},
        "not-a-dict",
    ],
)
def test_slice_malformed_or_not_node_local(spec: Any) -> None:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": spec}
    assert dra.slice_devices(body) == []
    assert dra.slice_node(body) is None
    assert dra.slice_pool(body) is None


# --- allocation summary ------------------------------------------------------------------------------


def test_allocation_v1_allocated() -> None:
    body = obj("fixtures/claim-v1-allocated.yaml", "ResourceClaim", "llm-server-7d9f8c6b5-abcde-accel-q2w4r")
    assert dra.claim_allocation(body) == {
        "allocated": True,
        "devices": [{"request": "gpu", "driver": "gpu.example.com", "pool": "worker-a", "device": "gpu-0"}],
        "reserved_for": ["llm-server-7d9f8c6b5-abcde"],
        "node": "worker-a",
    }


def test_allocation_v1_pending() -> None:
    body = obj("fixtures/claim-v1-pending.yaml", "ResourceClaim", "llm-server-7d9f8c6b5-fghij-accel-z8x6c")
    assert dra.claim_allocation(body) == {"allocated": False, "devices": [], "reserved_for": [], "node": None}


def test_allocation_classic() -> None:
    body = obj("v1alpha2/claim-allocated-status.yaml", "ResourceClaim", "legacy-job-gpus-7mz2k")
    assert dra.claim_allocation(body) == {
        "allocated": True,
        "devices": [],
        "reserved_for": ["legacy-job"],
        "node": "worker-a",
    }


def test_allocation_no_status() -> None:
    body = obj("v1beta2/claim.yaml", "ResourceClaim", "pair")
    assert dra.claim_allocation(body)["allocated"] is False


def test_allocation_verbatim_live_status() -> None:
    # The status recorded on a live v1.36 API server (DRA.md, "Observed on a real ... control plane").
    status = {
        "allocation": {
            "allocationTimestamp": "2026-11-30T03:32:20Z",
            "devices": {
                "results": [
                    {"device": "gpu-0", "driver": "gpu.example.com", "pool": "node1", "request": "gpu"}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node1"]}]}
                ]
            },
        },
        "reservedFor": [{"name": "pod1", "resource": "pods", "uid": "fd1e358f"}],
    }
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "status": status}
    summary = dra.claim_allocation(body)
    assert summary["allocated"] is True
    assert summary["node"] == "node1"
    assert summary["reserved_for"] == ["pod1"]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"allocation": {"devices": {"results": "x"}}, "reservedFor": "y"}, (False, None, [])),
        ({"allocation": "x"}, (False, None, [])),
        ("junk", (False, None, [])),
        # Multi-node allocations (nodeSelector by label) have no single node.
        (
            {
                "allocation": {
                    "devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]},
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                        ]
                    },
                },
                "reservedFor": [{"name": "a"}, {"uid": "no-name"}, "junk"],
            },
            (True, None, ["a"]),
        ),
        (
            {
                "allocation": {
                    "devices": {"config": [{"source": "FromClass"}]},
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": ["a", "b"]}
                                ]
                            }
                        ]
                    },
                }
            },
            (True, None, []),
        ),
    ],
)
def test_allocation_edges(status: Any, expected: tuple[bool, str | None, list[str]]) -> None:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "status": status}
    s = dra.claim_allocation(body)
    assert (s["allocated"], s["node"], s["reserved_for"]) == expected


# --- malformed claims/templates ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "string",
        {"devices": "x"},
        {"devices": {"requests": "x"}},
        {"devices": {"requests": ["x", 3]}},
        {"devices": {"requests": [{"name": "r", "firstAvailable": "x"}]}},
        {"devices": {"requests": [{"name": "r", "exactly": "x"}]}},
        {"resourceClassName": 5},
    ],
)
def test_claim_malformed(spec: Any) -> None:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "spec": spec}
    assert dra.requested_classes(body) == []
    assert dra.requests_admin_access(body) is False
    assert all(not alt.device_class for r in dra.device_requests(body) for alt in r.alternatives)


def test_request_field_oddities() -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "spec": {
            "devices": {
                "requests": [
                    {"name": "a", "exactly": {"deviceClassName": "c", "count": "3", "adminAccess": "true"}},
                    {"name": "b", "exactly": {"deviceClassName": "c", "count": True, "selectors": "x"}},
                ]
            }
        },
    }
    a, b = dra.device_requests(body)
    assert (a.alternatives[0].count, a.alternatives[0].admin_access) == (3, False)
    assert (b.alternatives[0].count, b.alternatives[0].selectors) == (1, ())


def test_describe_template_json_keys_match_contract() -> None:
    body = obj("v1/03-shared-claim-prioritized.yaml", "ResourceClaim", "training-pair")
    doc = dra.describe(body, "research").to_json()
    assert set(doc) == {
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
    assert doc["role"] == "claim"
    assert doc["device_classes"] == ["big-gpu.example.com", "gpu.example.com"]
    assert doc["driver"] is None
    assert isinstance(doc["device_classes"], list)
