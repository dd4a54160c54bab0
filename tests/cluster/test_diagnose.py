"""Diagnosis: pure `classify` on hand-built snapshots (the shared fixtures) and `diagnose` over real HTTP."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import load_documents as load
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.diagnose import (
    MODES,
    Diagnosis,
    Snapshot,
    classify,
    collect_snapshot,
    diagnose,
    render_diagnoses,
)
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

SHARED = Path(__file__).resolve().parents[1] / "data" / "dra-examples"
FIXTURES = SHARED / "fixtures"
GPU = "gpu.example.com"


def device_class(name: str = GPU, driver: str = GPU) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }


def node(name: str, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "" if ready else "Kubelet stopped posting node status.",
                }
            ]
        },
    }


def slice_(node_name: str, devices: int, driver: str = GPU) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": "LATEST-GPU-MODEL"}}}
                for i in range(devices)
            ],
        },
    }


def pod(
    name: str, ns: str, claim: str, *, node_name: str | None = None, uid: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}"},
        "spec": {
            "resourceClaims": [{"name": "accel", "resourceClaimName": claim}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "accel"}]}}],
        },
        "status": {"phase": "Pending"},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def fixture_claims() -> tuple[dict[str, Any], dict[str, Any]]:
    (allocated,) = load(FIXTURES / "claim-v1-allocated.yaml")
    (pending,) = load(FIXTURES / "claim-v1-pending.yaml")
    return allocated, pending


def fixture_events() -> dict[str, dict[str, Any]]:
    events = load(FIXTURES / "events-failed-scheduling.yaml")
    return {f"{e['involvedObject']['name']}:{e['reason']}:{i}": e for i, e in enumerate(events)}


def by_mode(diags: list[Diagnosis]) -> dict[str, list[Diagnosis]]:
    out: dict[str, list[Diagnosis]] = {}
    for d in diags:
        out.setdefault(d.mode, []).append(d)
    return out


# ---- pure classify on the shared fixtures --------------------------------------------------------------


def test_classify_exhaustion_from_fixture_event_and_claims() -> None:
    allocated, pending = fixture_claims()
    (event,) = [
        e for e in fixture_events().values() if e["involvedObject"]["name"] == "llm-server-7d9f8c6b5-fghij"
    ]
    waiting_pod = pod("llm-server-7d9f8c6b5-fghij", "inference", pending["metadata"]["name"])
    snap = Snapshot(
        pods=[waiting_pod],
        claims=[allocated, pending],
        classes=[device_class()],
        slices=[slice_("worker-a", 1)],
        nodes=[node("worker-a")],
        events=[event],
        served_versions=["v1"],
        scope_claims=[],
    )
    (diag,) = classify(snap)
    assert diag.mode == "exhaustion"
    assert diag.ref == f"ResourceClaim/inference/{pending['metadata']['name']}"
    assert diag.numbers == {"needed": 1, "free": 0, "total": 1, "class": GPU}
    assert "needs 1, 0 free of 1" in diag.summary
    assert any(
        "FailedScheduling (x1) from default-scheduler" in e and "cannot allocate all claims" in e
        for e in diag.evidence
    )
    assert any("pending (no status.allocation)" in e for e in diag.evidence)
    assert any("add nodes with gpu.example.com devices" in r for r in diag.recovery)
    assert any(r.startswith("free devices by deleting or scaling down") for r in diag.recovery)


def test_classify_unknown_free_count_is_pending_with_its_reason_never_exhaustion() -> None:
    _, pending = fixture_claims()
    pending = copy.deepcopy(pending)
    pending["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.nosuch()"}}
    ]
    (event,) = [
        e for e in fixture_events().values() if e["involvedObject"]["name"] == "llm-server-7d9f8c6b5-fghij"
    ]
    snap = Snapshot(
        pods=[pod("llm-server-7d9f8c6b5-fghij", "inference", pending["metadata"]["name"])],
        claims=[pending],
        classes=[device_class()],
        slices=[slice_("worker-a", 2)],
        nodes=[node("worker-a")],
        events=[event],
        scope_claims=[],
    )
    (diag,) = classify(snap)
    assert diag.mode == "pending"
    numbers = diag.numbers["classes"][GPU]
    assert numbers["free"] == "unknown" and numbers["total"] == "unknown"
    assert (
        "whether devices are free is unknown (class gpu.example.com: selector #0 (device.nosuch())"
        in diag.summary
    )
    assert "device.nosuch()" in numbers["unknown_reason"]
    assert not any("free devices by deleting" in r for r in diag.recovery)


def test_classify_missing_class_from_fixture_event_and_object() -> None:
    notebook_events = [e for e in fixture_events().values() if e["involvedObject"]["name"] == "notebook"]
    missing = [e for e in notebook_events if e["reason"] == "FailedScheduling"]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "nb-gpu", "namespace": "ml"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
        },
    }
    snap = Snapshot(
        pods=[pod("notebook", "ml", "nb-gpu")],
        claims=[claim],
        classes=[device_class()],
        slices=[slice_("worker-a", 2)],
        nodes=[node("worker-a")],
        events=missing,
        scope_claims=[],
    )
    (diag,) = classify(snap)
    assert diag.mode == "missing-class"
    assert diag.ref == "ResourceClaim/ml/nb-gpu"
    assert "DeviceClass gpu.nvidia.com, which does not exist" in diag.summary
    assert any("device class gpu.nvidia.com does not exist" in e for e in diag.evidence)
    assert any(r.startswith("create DeviceClass gpu.nvidia.com") for r in diag.recovery)
    # the scheduler's event alone is enough (claim object not visible, e.g. generated and gone)
    only_event = Snapshot(
        pods=[pod("notebook", "ml", "nb-gpu")],
        claims=[],
        classes=[device_class()],
        events=missing,
        scope_claims=[],
    )
    assert [d.mode for d in classify(only_event)] == ["missing-class"]


def test_classify_prepare_failure_from_fixture_event() -> None:
    prepare = [e for e in fixture_events().values() if e["reason"] == "FailedPrepareDynamicResources"]
    allocated, _ = fixture_claims()
    allocated = copy.deepcopy(allocated)
    allocated["metadata"]["namespace"] = "ml"
    name = allocated["metadata"]["name"]
    p = pod("notebook", "ml", name, node_name="worker-a")
    allocated["status"]["reservedFor"][0].update(name="notebook", uid="uid-notebook")
    snap = Snapshot(
        pods=[p],
        claims=[allocated],
        classes=[device_class()],
        slices=[slice_("worker-a", 1)],
        nodes=[node("worker-a")],
        events=prepare,
        scope_claims=[],
    )
    (diag,) = classify(snap)
    assert diag.mode == "prepare-failure"
    assert "node worker-b" in diag.summary and "DRA driver gpu.nvidia.com is not registered" in diag.summary
    assert any(e.startswith("event FailedPrepareDynamicResources (x1) from kubelet") for e in diag.evidence)


def test_classify_node_failure_on_fixture_claim() -> None:
    allocated, _ = fixture_claims()
    snap = Snapshot(
        pods=[],
        claims=[allocated],
        classes=[device_class()],
        slices=[slice_("worker-a", 1)],
        nodes=[node("worker-a", ready=False)],
    )
    (diag,) = classify(snap)
    assert diag.mode == "node-failure"
    assert diag.numbers == {"node": "worker-a"}
    assert "allocated on node worker-a, which is NotReady (KubeletNotReady" in diag.summary
    assert any("drain" in r and "worker-a" in r for r in diag.recovery)
    assert any("released when its pods are deleted" in r for r in diag.recovery)


def test_classify_driver_not_installed_and_crash_with_logs() -> None:
    _, pending = fixture_claims()
    snap = Snapshot(
        pods=[pod("p", "inference", pending["metadata"]["name"])],
        claims=[pending],
        classes=[device_class()],
        slices=[],
        nodes=[node("worker-a")],
        scope_claims=[],
    )
    modes = [d.mode for d in classify(snap)]
    assert modes[0] == "driver-not-installed" and "exhaustion" not in modes
    (d,) = [d for d in classify(snap) if d.mode == "driver-not-installed"]
    assert d.ref == "DeviceClass/gpu.example.com" and "not installed" in d.summary
    assert any("deploy the gpu.example.com kubelet-plugin DaemonSet" in r for r in d.recovery)

    (ds,) = load(SHARED / "driver" / "kubeletplugin-daemonset.yaml")
    ds["metadata"]["uid"] = "ds-uid"
    dpod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "plugin-x",
            "namespace": "dra-example-driver",
            "labels": dict(ds["spec"]["selector"]["matchLabels"]),
        },
        "spec": {"nodeName": "worker-a"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "plugin", "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ],
        },
    }
    crashed = Snapshot(
        claims=[],
        classes=[device_class()],
        slices=[slice_("worker-a", 2)],
        nodes=[node("worker-a")],
        driver_workloads=[ds],
        driver_pods=[dpod],
        driver_logs={
            "dra-example-driver/plugin-x": "starting\nE0101 failed to create CDI spec: permission denied\n"
        },
        all_classes=True,
    )
    (d,) = classify(crashed)
    assert d.mode == "driver-not-installed" and "CrashLoopBackOff" in d.summary
    assert any("7 restart(s), CrashLoopBackOff" in e for e in d.evidence)
    assert "  log: E0101 failed to create CDI spec: permission denied" in d.evidence
    assert any("--previous" in r for r in d.recovery)


def test_classify_version_mismatch_of_manifests_and_driver() -> None:
    (ds,) = load(SHARED / "driver" / "kubeletplugin-daemonset.yaml")
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = (
        "registry.k8s.io/dra-example-driver/dra-example-driver:v0.1.0"
    )
    snap = Snapshot(
        classes=[],
        driver_workloads=[ds],
        served_versions=["v1"],
        server_version="v1.36.2",
        manifest_versions=[
            ("ResourceClaimTemplate/ml/old", "resource.k8s.io/v1alpha2"),
            ("Deployment/ml/x", "apps/v1"),
        ],
    )
    diags = classify(snap)
    assert [(d.mode, d.ref) for d in diags] == [
        ("version-mismatch", "DaemonSet/dra-example-driver/dra-example-driver-kubeletplugin"),
        ("version-mismatch", "ResourceClaimTemplate/ml/old"),
    ]
    assert "resource.k8s.io/v1beta1" in diags[0].summary and "v1.36.2" in diags[0].summary
    assert "resource.k8s.io/v1alpha2" in diags[1].summary


def test_classify_healthy_snapshot_is_empty_and_render() -> None:
    allocated, _ = fixture_claims()
    p = pod("llm-server-7d9f8c6b5-abcde", "inference", allocated["metadata"]["name"], node_name="worker-a")
    p["metadata"]["uid"] = allocated["status"]["reservedFor"][0]["uid"]
    p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    snap = Snapshot(
        pods=[p],
        claims=[allocated],
        classes=[device_class()],
        slices=[slice_("worker-a", 1)],
        nodes=[node("worker-a")],
        scope_claims=[],
    )
    assert classify(snap) == []
    assert render_diagnoses([], "text") == "No DRA problems found.\n"


def test_render_formats() -> None:
    d = Diagnosis(
        "exhaustion", "ResourceClaim/a/b", "short", ["e1"], ["r1", "r2"], {"needed": 3, "free": 2, "total": 4}
    )
    text = render_diagnoses([d], "text")
    assert "[exhaustion] ResourceClaim/a/b: short" in text and "numbers: needed 3, free 2, total 4" in text
    assert "fix 2: r2" in text
    assert json.loads(render_diagnoses([d], "json"))[0]["numbers"] == {"needed": 3, "free": 2, "total": 4}
    md = render_diagnoses([d], "markdown")
    assert "### `exhaustion`: ResourceClaim/a/b" in md and "2. r2" in md
    assert set(MODES) == {
        "driver-not-installed",
        "exhaustion",
        "node-failure",
        "version-mismatch",
        "missing-class",
        "selector-error",
        "prepare-failure",
        "device-taint",
        "pending",
    }


# ---- over real HTTP against the simulated cluster --------------------------------------------------------


def template(name: str, ns: str, cls: str = GPU) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}},
    }


def template_pod(name: str, ns: str, tmpl: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "resourceClaims": [{"name": "accel", "resourceClaimTemplateName": tmpl}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "accel"}]}}
            ],
        },
    }


def ns_obj(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def get_pod(client: ClusterClient, ns: str, name: str) -> dict[str, Any] | None:
    res = client.find_kind("", "Pod")
    assert res is not None
    return client.get(res, ns, name)


def phase(client: ClusterClient, ns: str, name: str) -> str:
    p = get_pod(client, ns, name) or {}
    return str((p.get("status") or {}).get("phase"))


Sim = tuple[SimCluster, ControlPlane, ClusterClient]


@pytest.fixture
def sim() -> Iterator[Sim]:
    with SimCluster() as cluster:
        plane = install(cluster, nodes=1, devices_per_node=2, driver_preinstalled=True)
        client = ClusterClient.for_url(cluster.url)
        client.apply(ns_obj("ml"))
        wait_for(lambda: client.list_kind("", "ServiceAccount", "ml"), what="default ServiceAccount")
        yield cluster, plane, client
        client.close()


def test_diagnose_exhaustion_over_http(sim: Sim) -> None:
    _, _, client = sim
    client.apply(device_class())
    client.apply(template("one-gpu", "ml"))
    for i in range(3):
        client.apply(template_pod(f"p{i}", "ml", "one-gpu"))
    wait_for(
        lambda: phase(client, "ml", "p0") == "Running" and phase(client, "ml", "p1") == "Running",
        what="2 running",
    )
    wait_for(
        lambda: any(e.get("reason") == "FailedScheduling" for e in client.list_kind("", "Event", "ml")),
        what="FailedScheduling",
    )
    diags = diagnose(client, "ml/p2")
    (d,) = diags
    assert d.mode == "exhaustion" and d.ref.startswith("ResourceClaim/ml/p2-accel-")
    assert d.numbers == {"needed": 1, "free": 0, "total": 2, "class": GPU}
    assert any("cannot allocate all claims" in e for e in d.evidence)
    # the namespace view finds the same problem and nothing else
    assert [(x.mode, x.ref) for x in diagnose(client, namespace="ml")] == [(d.mode, d.ref)]
    # as does the claim itself
    claim_name = d.ref.rsplit("/", 1)[1]
    assert [x.mode for x in diagnose(client, f"claim/{claim_name}", namespace="ml")] == ["exhaustion"]
    assert "[exhaustion]" in render_diagnoses(diags)


def test_diagnose_missing_class_over_http(sim: Sim) -> None:
    _, _, client = sim
    client.apply(device_class())
    client.apply(template("nv", "ml", cls="gpu.nvidia.com"))
    client.apply(template_pod("nb", "ml", "nv"))
    wait_for(
        lambda: any("does not exist" in str(e.get("message")) for e in client.list_kind("", "Event", "ml")),
        what="missing class event",
    )
    (d,) = diagnose(client, "pod/ml/nb")
    assert d.mode == "missing-class"
    assert "gpu.nvidia.com" in d.summary
    assert any("request gpu: device class gpu.nvidia.com does not exist" in e for e in d.evidence)


def test_diagnose_driver_not_installed_over_http() -> None:
    with SimCluster() as cluster:
        install(cluster, nodes=1, devices_per_node=2, driver_preinstalled=False)
        client = ClusterClient.for_url(cluster.url)
        client.apply(ns_obj("ml"))
        client.apply(device_class())
        client.apply(template("one-gpu", "ml"))
        wait_for(lambda: client.list_kind("", "ServiceAccount", "ml"), what="default ServiceAccount")
        client.apply(template_pod("p", "ml", "one-gpu"))
        wait_for(lambda: client.list_kind("resource.k8s.io", "ResourceClaim", "ml"), what="generated claim")
        modes = wait_for(
            lambda: (found := by_mode(diagnose(client))).get("driver-not-installed") and found,
            what="the driver diagnosed as not installed",
        )
        (d,) = modes["driver-not-installed"]
        assert d.ref == "DeviceClass/gpu.example.com"
        assert "not installed" in d.summary
        assert "no DaemonSet/Deployment labelled as a DRA kubelet plugin for this driver" in d.evidence
        assert "exhaustion" not in modes
        client.close()


def test_diagnose_crashed_driver_over_http() -> None:
    with SimCluster() as cluster:
        plane = install(cluster, nodes=1, devices_per_node=2, driver_preinstalled=False)
        client = ClusterClient.for_url(cluster.url)
        client.apply(ns_obj("dra-example-driver"))
        (ds,) = load(SHARED / "driver" / "kubeletplugin-daemonset.yaml")
        client.apply(ds)
        client.apply(device_class())
        wait_for(lambda: client.list_kind("resource.k8s.io", "ResourceSlice"), what="slice")
        assert diagnose(client) == []
        plane.crash_driver(GPU)
        wait_for(lambda: not client.list_kind("resource.k8s.io", "ResourceSlice"), what="slices withdrawn")
        d = wait_for(
            lambda: next((x for x in diagnose(client) if "CrashLoopBackOff" in x.summary), None),
            what="crash seen",
        )
        assert d.mode == "driver-not-installed"
        assert any(
            "CrashLoopBackOff" in e and e.startswith("driver pod dra-example-driver/") for e in d.evidence
        )
        assert any(
            e.startswith("  log: ") for e in d.evidence
        )  # last log lines (or why they are unavailable)
        client.close()


def test_diagnose_node_failure_over_http(sim: Sim) -> None:
    _, plane, client = sim
    client.apply(device_class())
    client.apply(template("one-gpu", "ml"))
    client.apply(template_pod("p", "ml", "one-gpu"))
    wait_for(lambda: phase(client, "ml", "p") == "Running", what="pod running")
    plane.set_node_ready("sim-node-0", False)
    diags = diagnose(client, "ml/p")
    (d,) = [x for x in diags if x.mode == "node-failure"]
    assert d.ref.startswith("ResourceClaim/ml/p-accel-")
    assert "sim-node-0" in d.summary and "NotReady" in d.summary
    assert d.numbers == {"node": "sim-node-0"}


def test_diagnose_prepare_failure_over_http() -> None:
    with SimCluster() as cluster:
        # no kubelet: the pod is bound and its claim allocated, but nothing starts it
        install(
            cluster,
            nodes=1,
            devices_per_node=2,
            driver_preinstalled=True,
            components=("controller-manager", "scheduler", "driver"),
        )
        client = ClusterClient.for_url(cluster.url)
        client.apply(ns_obj("ml"))
        wait_for(lambda: client.list_kind("", "ServiceAccount", "ml"), what="default ServiceAccount")
        client.apply(device_class())
        client.apply(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "gpu", "namespace": "ml"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}},
            }
        )
        client.apply(pod("nb", "ml", "gpu") | {"metadata": {"name": "nb", "namespace": "ml"}, "status": {}})
        live = wait_for(
            lambda: (p := get_pod(client, "ml", "nb")) and p["spec"].get("nodeName") and p, what="bound"
        )
        events = client.find_kind("", "Event")
        assert events is not None
        client.create(
            events,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "nb.prepare", "namespace": "ml"},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "nb",
                    "namespace": "ml",
                    "uid": live["metadata"]["uid"],
                },
                "reason": "FailedPrepareDynamicResources",
                "message": "Failed to prepare dynamic resources: NodePrepareResources: rpc error: code = DeadlineExceeded",
                "type": "Warning",
                "source": {"component": "kubelet", "host": "sim-node-0"},
                "count": 4,
            },
        )
        (d,) = diagnose(client, "claim/ml/gpu")
        assert d.mode == "prepare-failure" and d.ref == "ResourceClaim/ml/gpu"
        assert "sim-node-0" in d.summary and "DeadlineExceeded" in d.summary
        assert any(
            e.startswith("event FailedPrepareDynamicResources (x4) from kubelet on Pod/ml/nb")
            for e in d.evidence
        )
        assert any(
            e.startswith("claim ml/gpu: allocated,reserved gpu.example.com/sim-node-0/gpu-")
            for e in d.evidence
        )
        client.close()


def test_collect_snapshot_scopes(sim: Sim) -> None:
    _, _, client = sim
    client.apply(device_class())
    wait_for(lambda: client.list_kind("resource.k8s.io", "ResourceSlice"), what="slice")
    snap = collect_snapshot(client, namespace="ml")
    assert snap.served_versions == ["v1"] and snap.server_version == "v1.36.2"
    assert [c["metadata"]["name"] for c in snap.classes] == [GPU]
    assert len(snap.slices) == 1 and len(snap.nodes) == 1 and snap.pods == [] and snap.scope_claims == []
