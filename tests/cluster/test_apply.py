"""Dry-run and staged apply over real HTTP against the simulated cluster (and its control plane)."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.cluster.apply import DryRunResult, StageResult, apply_plan, dry_run, render_dry_run
from reconciler.cluster.applyset import (
    GROUP_KINDS_ANNOTATION,
    ID_LABEL,
    PART_OF_LABEL,
    applyset_id,
    ensure_parent,
    label_objects,
    prune_candidates,
)
from reconciler.cluster.client import ClusterClient
from reconciler.model.loader import load_paths, parse_documents
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan, compute_plan
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"
SET_ID = applyset_id("test", "dra-gitops")
DRIVER = "gpu.example.com"
CANARY_NODE_LABELS = {"dra-gitops.io/canary": "true"}


def example() -> list[Manifest]:
    return load_paths([EXAMPLE]).manifests


def manifests(text: str) -> list[Manifest]:
    return parse_documents(text, "inline.yaml")


@pytest.fixture
def client(sim_cluster: SimCluster) -> Iterator[ClusterClient]:
    with ClusterClient.for_url(sim_cluster.url) as c:
        yield c


@pytest.fixture
def gpu_cluster() -> Iterator[tuple[SimCluster, ControlPlane, ClusterClient]]:
    """Two nodes with two devices each: the example needs three (shared claim + two trainers). The first
    is a canary node, where the example's canary driver DaemonSet runs."""
    with SimCluster() as cluster:
        control = install(
            cluster, nodes=2, devices_per_node=2, drivers=[DRIVER], node_labels=[CANARY_NODE_LABELS, {}]
        )
        with ClusterClient.for_url(cluster.url) as c:
            yield cluster, control, c


def snapshot(cluster: SimCluster) -> str:
    return str(cluster.store.resource_version)


def stage(result: Any, label: str) -> StageResult:
    return next(s for s in result.stages if s.label == label)


# ---- dry-run ------------------------------------------------------------------------------------------


def test_dry_run_of_example_defers_namespaced_objects_and_writes_nothing(
    sim_cluster: SimCluster, client: ClusterClient
) -> None:
    plan = compute_plan([], example())
    before = snapshot(sim_cluster)
    result = dry_run(client, plan, applyset_id=SET_ID)
    assert result.ok, render_dry_run(result)
    assert snapshot(sim_cluster) == before
    assert client.writes_sent == 0
    assert sim_cluster.store.get("", "namespaces", "", "ml-team") is None
    ops = {r.ref: r.op for r in result.results}
    assert ops["Namespace/ml-team"] == "create"
    assert ops["DeviceClass/gpu.example.com"] == "create"
    assert ops["ResourceClaim/ml-team/shared-gpu"] == "deferred"
    assert ops["Deployment/ml-team/trainer"] == "deferred"
    assert ops["DaemonSet/gpu-system/gpu-example-kubelet-plugin-canary"] == "deferred"
    assert all(r.op in ("create", "deferred") and r.error is None for r in result.results)
    assert result.summary["3 claims"] == {
        "create": 2,
        "update": 0,
        "delete": 0,
        "unchanged": 0,
        "deferred": 2,
    }
    text = render_dry_run(result)
    assert "stage 3 claims: 2 create, 0 update, 0 delete" in text
    assert "stage 1a drivers: 1 create" in text
    assert "+ create DeviceClass/gpu.example.com  " in text
    assert "    +++ desired/DeviceClass/gpu.example.com\n" in text
    assert "    +  name: gpu.example.com\n" in text
    assert PART_OF_LABEL not in text  # the ApplySet label is ours, not a change worth showing
    assert result.changes_pending


def test_dry_run_diff_ignores_server_fields_and_shows_updates(client: ClusterClient) -> None:
    old = manifests(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {mode: fast}\n"
    )
    new = manifests(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {mode: safe}\n"
    )
    first = apply_plan(client, compute_plan([], old), applyset_id=SET_ID)
    assert first.ok
    result = dry_run(client, compute_plan(old, new), applyset_id=SET_ID)
    [obj] = result.results
    assert obj.op == "update"
    assert "-  mode: fast" in obj.diff and "+  mode: safe" in obj.diff
    for server_field in ("uid", "resourceVersion", "creationTimestamp", "managedFields", PART_OF_LABEL):
        assert server_field not in obj.diff
    assert "stage 0 foundation: 0 create, 1 update, 0 delete" in render_dry_run(result)


BAD_TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: bad, namespace: %s}
spec:
  spec:
    devices:
      foo: 1
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.example.com}
"""


def test_unknown_field_fails_dry_run_with_server_message(
    sim_cluster: SimCluster, client: ClusterClient
) -> None:
    before = snapshot(sim_cluster)
    result = dry_run(client, compute_plan([], manifests(BAD_TEMPLATE % "default")), applyset_id=SET_ID)
    assert not result.ok
    [obj] = result.results
    assert obj.error is not None and ".spec.spec.devices.foo: field not declared in schema" in obj.error
    assert (obj.path, obj.line) == ("inline.yaml", 2)
    assert "! error ResourceClaimTemplate/default/bad  inline.yaml:2" in render_dry_run(result)
    assert snapshot(sim_cluster) == before


def test_unknown_field_in_a_new_namespace_is_still_caught_before_anything_is_written(
    sim_cluster: SimCluster, client: ClusterClient
) -> None:
    text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: fresh}\n---" + BAD_TEMPLATE % "fresh"
    plan = compute_plan([], manifests(text))
    before = snapshot(sim_cluster)
    result = dry_run(client, plan, applyset_id=SET_ID)
    assert not result.ok
    bad = next(r for r in result.results if r.ref == "ResourceClaimTemplate/fresh/bad")
    assert bad.error is not None and "field not declared in schema" in bad.error
    assert snapshot(sim_cluster) == before
    # and apply_plan, given that answer or not, writes nothing either: the stage dry-run rejects it
    applied = apply_plan(client, compute_plan([], manifests(BAD_TEMPLATE % "default")), applyset_id=SET_ID)
    assert not applied.ok and applied.writes == 0
    assert "dry-run rejected" in (applied.error or "")
    assert snapshot(sim_cluster) == before


def test_dry_run_defers_custom_resources_of_a_new_crd_then_apply_creates_them(
    sim_cluster: SimCluster, client: ClusterClient
) -> None:
    text = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: default}
spec: {size: 3}
"""
    plan = compute_plan([], manifests(text))
    checked = dry_run(client, plan, applyset_id=SET_ID)
    assert checked.ok, render_dry_run(checked)
    widget = next(r for r in checked.results if r.ref.startswith("Widget/"))
    assert widget.op == "deferred" and "CustomResourceDefinition" in (widget.deferred_reason or "")
    result = apply_plan(client, plan, applyset_id=SET_ID, checked=checked, stage_timeout=10)
    assert result.ok, result.error
    assert sim_cluster.store.get("example.com", "widgets", "default", "w") is not None


# ---- staged apply -------------------------------------------------------------------------------------


def test_apply_example_completes_every_stage_and_reapply_sends_no_writes(
    gpu_cluster: tuple[SimCluster, ControlPlane, ClusterClient],
) -> None:
    cluster, _, client = gpu_cluster
    plan = compute_plan([], example())
    ensure_parent(client, "test", "dra-gitops", [])
    checked = dry_run(client, plan, applyset_id=SET_ID)
    seen: list[str] = []
    result = apply_plan(
        client,
        plan,
        applyset_id=SET_ID,
        checked=checked,
        stage_timeout=60,
        on_stage=lambda s: seen.append(s.label),
    )
    assert result.ok, result.error
    assert seen == ["0 foundation", "1a drivers", "1 drivers", "2 classes", "3 claims", "4 workloads"]
    assert all(s.ok for s in result.stages)
    assert stage(result, "3 claims").applied == 2
    assert all(r.outcome == "applied" for r in result.results)
    assert result.writes == len(plan.changes)
    pods = cluster.store.list("", "pods", "ml-team")
    assert len(pods) == 3
    assert all(p["status"]["phase"] == "Running" for p in pods)
    # every managed object carries the ApplySet label
    claim = cluster.store.get("resource.k8s.io", "resourceclaims", "ml-team", "shared-gpu")
    assert claim is not None and claim["metadata"]["labels"][PART_OF_LABEL] == SET_ID

    writes = client.writes_sent
    again = apply_plan(client, plan, applyset_id=SET_ID, stage_timeout=60)
    assert again.ok, again.error
    assert again.writes == 0 and client.writes_sent == writes
    assert all(r.op == "unchanged" and r.outcome == "unchanged" for r in again.results)
    assert sum(s.unchanged for s in again.stages) == len(plan.changes)
    recheck = dry_run(client, plan, applyset_id=SET_ID)
    assert {r.op for r in recheck.results} == {"unchanged"} and not recheck.changes_pending


def test_driver_stage_waits_for_resource_slices(
    gpu_cluster: tuple[SimCluster, ControlPlane, ClusterClient],
) -> None:
    cluster, _, client = gpu_cluster
    driver_only = [m for m in example() if m.kind in ("Namespace", "ServiceAccount", "DaemonSet")]
    slices_at_stage_end: dict[str, int] = {}

    def record(s: StageResult) -> None:
        slices = [
            x
            for x in cluster.store.list("resource.k8s.io", "resourceslices")
            if x["spec"]["driver"] == DRIVER
        ]
        slices_at_stage_end[s.label] = len(slices)

    result = apply_plan(
        client, compute_plan([], driver_only), applyset_id=SET_ID, stage_timeout=60, on_stage=record
    )
    assert result.ok, result.error
    assert slices_at_stage_end["0 foundation"] == 0
    # the canary runs on the canary node, the main driver on both nodes: slices of both nodes
    assert slices_at_stage_end["1 drivers"] == 2


def test_fail_fast_when_driver_crashes(gpu_cluster: tuple[SimCluster, ControlPlane, ClusterClient]) -> None:
    _, control, client = gpu_cluster
    control.crash_driver(DRIVER)
    started = time.monotonic()
    result = apply_plan(client, compute_plan([], example()), applyset_id=SET_ID, stage_timeout=120)
    assert time.monotonic() - started < 30
    assert not result.ok
    error = result.error or ""
    # The canary runs first (step 1a) on the canary node and catches the crash before the main driver.
    assert error.startswith("stage 1a drivers: fail fast") and "CrashLoopBackOff" in error
    failed = next(
        r for r in result.results if r.ref == "DaemonSet/gpu-system/gpu-example-kubelet-plugin-canary"
    )
    assert failed.error is not None and "CrashLoopBackOff" in failed.error
    later = [r for r in result.results if r.stage > 1]
    assert later and all(r.outcome == "not-attempted" for r in later)


def test_caller_fail_fast_stops_the_wait(sim_cluster: SimCluster, client: ClusterClient) -> None:
    calls: list[int] = []

    def stop(stage_number: int, changes: Any) -> str | None:
        calls.append(stage_number)
        return "claims cannot be allocated" if stage_number == 4 else None

    plan = compute_plan([], [m for m in example() if m.kind in ("Namespace", "Deployment")])
    result = apply_plan(client, plan, applyset_id=SET_ID, stage_timeout=60, fail_fast=stop)
    # Asked before each stage's writes too: stage 4 is stopped before it writes anything.
    assert result.error == "stage 4 workloads: claims cannot be allocated"
    assert 0 in calls and 4 in calls
    assert {r.outcome for r in result.results if r.stage == 4} == {"not-attempted"}


def test_stage_timeout_is_reported_with_the_stage_name(
    sim_cluster: SimCluster, client: ClusterClient
) -> None:
    # API only: no controller ever reports the Deployment's rollout
    plan = compute_plan([], [m for m in example() if m.kind in ("Namespace", "Deployment")])
    started = time.monotonic()
    result = apply_plan(client, plan, applyset_id=SET_ID, stage_timeout=0.5)
    assert time.monotonic() - started < 10
    assert not result.ok
    error = result.error or ""
    assert error.startswith("stage 4 workloads: timed out waiting for Deployment/ml-team/")
    assert "(timeout 0.5s)" in error
    workloads = stage(result, "4 workloads")
    assert workloads.applied == 2 and workloads.error == error
    assert all(r.error and r.error.startswith("not ready") for r in result.results if r.stage == 4)


def test_deletions_run_in_reverse_stage_order_and_objects_are_gone(
    gpu_cluster: tuple[SimCluster, ControlPlane, ClusterClient],
) -> None:
    cluster, _, client = gpu_cluster
    head = example()
    assert apply_plan(client, compute_plan([], head), applyset_id=SET_ID, stage_timeout=60).ok
    kept = [m for m in head if m.kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    plan = compute_plan(head, kept)
    checked = dry_run(client, plan, applyset_id=SET_ID)
    assert checked.ok and {r.op for r in checked.results} == {"delete"}
    assert "stage 4 workloads: 0 create, 0 update, 2 delete" in render_dry_run(checked)
    assert (
        cluster.store.get("apps", "deployments", "ml-team", "trainer") is not None
    )  # dry-run deleted nothing
    client.request_log = []
    result = apply_plan(client, plan, applyset_id=SET_ID, stage_timeout=60)
    assert result.ok, result.error
    deleted = [path.rsplit("/", 2)[-2] for method, path, _ in client.request_log if method == "DELETE"]
    order = ["deployments", "resourceclaims", "resourceclaimtemplates", "deviceclasses", "daemonsets"]
    positions = [max(i for i, plural in enumerate(deleted) if plural == name) for name in order]
    assert positions == sorted(positions), deleted
    assert [s.label for s in result.stages] == [
        "4 workloads",
        "3 claims",
        "2 classes",
        "1 drivers",
        "1a drivers",
    ]
    assert all(s.direction == "delete" for s in result.stages)
    assert cluster.store.get("apps", "deployments", "ml-team", "trainer") is None
    assert cluster.store.get("resource.k8s.io", "resourceclaims", "ml-team", "shared-gpu") is None
    assert cluster.store.get("resource.k8s.io", "deviceclasses", "", DRIVER) is None
    assert all(r.outcome == "deleted" for r in result.results)


def test_apply_stops_at_a_rejected_stage_and_reports_every_object(
    sim_cluster: SimCluster, client: ClusterClient
) -> None:
    good = [m for m in example() if m.kind in ("Namespace", "DeviceClass", "Deployment")]
    plan = compute_plan([], good + manifests(BAD_TEMPLATE % "ml-team"))
    result = apply_plan(client, plan, applyset_id=SET_ID, stage_timeout=5, wait=False)
    assert not result.ok
    outcomes = {r.ref: r.outcome for r in result.results}
    assert outcomes["Namespace/ml-team"] == "applied"
    assert outcomes["DeviceClass/gpu.example.com"] == "applied"
    assert outcomes["ResourceClaimTemplate/ml-team/bad"] == "failed"
    assert outcomes["Deployment/ml-team/trainer"] == "not-attempted"
    assert (result.error or "").startswith(
        "stage 3 claims: dry-run rejected ResourceClaimTemplate/ml-team/bad"
    )
    assert sim_cluster.store.get("apps", "deployments", "ml-team", "trainer") is None


def test_stale_dry_run_answer_is_not_trusted(sim_cluster: SimCluster, client: ClusterClient) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\ndata: {k: v}\n"
    plan = compute_plan([], manifests(text))
    assert apply_plan(client, plan, applyset_id=SET_ID).ok
    checked = dry_run(client, plan, applyset_id=SET_ID)
    assert checked.results[0].op == "unchanged"

    def drift(obj: dict[str, Any]) -> None:
        obj["data"] = {"k": "changed by hand"}

    sim_cluster.store.mutate("", "configmaps", "default", "c", drift)
    result = apply_plan(client, plan, applyset_id=SET_ID, checked=checked)
    assert result.ok and result.writes == 1 and result.results[0].op == "update"
    live = sim_cluster.store.get("", "configmaps", "default", "c")
    assert live is not None and live["data"] == {"k": "v"}


def test_dry_run_result_counts() -> None:
    empty = DryRunResult([], {}, ok=True)
    assert not empty.changes_pending
    assert render_dry_run(empty).strip() == "dry-run ok: 0 create, 0 update, 0 delete, 0 unchanged"
    assert apply_plan.__name__ == "apply_plan" and Plan(()).empty


# ---- ApplySet -----------------------------------------------------------------------------------------


def test_applyset_id_follows_the_kep_formula() -> None:
    import base64
    import hashlib

    digest = hashlib.sha256(b"dra-gitops-default.dra-gitops.ConfigMap.").digest()
    expected = "applyset-" + base64.urlsafe_b64encode(digest).decode().rstrip("=") + "-v1"
    assert applyset_id() == expected


def test_label_objects_copies_and_labels() -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "y"}}}
    [labelled] = label_objects([body], SET_ID)
    assert labelled["metadata"]["labels"] == {"x": "y", PART_OF_LABEL: SET_ID}
    assert body["metadata"]["labels"] == {"x": "y"}


def test_parent_and_prune_candidates(sim_cluster: SimCluster, client: ClusterClient) -> None:
    parent = ensure_parent(client, "test", "dra-gitops", ["ConfigMap"])
    assert parent["metadata"]["labels"][ID_LABEL] == SET_ID
    assert sim_cluster.store.get("", "namespaces", "", "dra-gitops") is not None
    # the state store's data in the same ConfigMap survives the parent's metadata updates
    sim_cluster.store.mutate(
        "", "configmaps", "dra-gitops", "dra-gitops-test", lambda o: o.update(data={"lastGood": "abc"})
    )
    parent = ensure_parent(client, "test", "dra-gitops", ["DeviceClass.resource.k8s.io"])
    assert (
        parent["metadata"]["annotations"][GROUP_KINDS_ANNOTATION] == "ConfigMap,DeviceClass.resource.k8s.io"
    )
    assert parent.get("data") == {"lastGood": "abc"}
    writes = client.writes_sent
    ensure_parent(client, "test", "dra-gitops", ["ConfigMap"])
    assert client.writes_sent == writes  # nothing new: no write

    text = "".join(
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: default}}\n"
        for i in range(3)
    )
    objs = manifests(text)
    assert apply_plan(client, compute_plan([], objs), applyset_id=SET_ID).ok
    leftovers = prune_candidates(
        client, SET_ID, [m.ref for m in objs[:2]], ["ConfigMap", "Widget.example.com"]
    )
    assert [o["metadata"]["name"] for o in leftovers] == ["c2"]
    # without group-kinds, the parent's recorded ones are used
    assert [o["metadata"]["name"] for o in prune_candidates(client, SET_ID, [m.ref for m in objs[:2]])] == [
        "c2"
    ]


def test_apply_does_not_modify_the_plan(client: ClusterClient) -> None:
    objs = manifests("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata: {k: v}\n")
    original = copy.deepcopy(objs[0].body)
    assert apply_plan(client, compute_plan([], objs), applyset_id=SET_ID).ok
    assert objs[0].body == original
