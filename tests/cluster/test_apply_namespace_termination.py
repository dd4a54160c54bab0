"""A pruned Namespace is waited for only until its claims gave their devices back; re-creating a Namespace
that is still terminating waits for it to be gone. Against the simulated cluster and its control plane.

A ConfigMap that another controller made in the namespace, with a finalizer of its own, keeps the
Namespace terminating after its pods and claims are gone: the window a real namespace controller leaves
for seconds after a rollback's prune.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from reconciler.cluster.apply import apply_plan, dry_run
from reconciler.cluster.applyset import applyset_id
from reconciler.cluster.client import ClusterClient
from reconciler.model.loader import parse_documents
from reconciler.model.objects import Manifest
from reconciler.model.plan import compute_plan
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

SET_ID = applyset_id("test", "dra-gitops")
HOLD = "example.com/hold"

BURST = """
apiVersion: v1
kind: Namespace
metadata: {name: burst}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: burst}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: burst, namespace: burst}
spec:
  replicas: 2
  selector: {matchLabels: {app: burst}}
  template:
    metadata: {labels: {app: burst}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers:
        - name: main
          image: registry.example/burst:1
          resources: {claims: [{name: gpu}]}
"""


def burst() -> list[Manifest]:
    return parse_documents(BURST, "burst.yaml")


@pytest.fixture
def cluster() -> Iterator[tuple[SimCluster, ClusterClient]]:
    with SimCluster() as sim:
        plane = install(sim, nodes=1, devices_per_node=2, driver_preinstalled=True)
        try:
            with ClusterClient.for_url(sim.url) as client:
                yield sim, client
        finally:
            plane.stop()


def apply_with_held_content(sim: SimCluster, client: ClusterClient, desired: list[Manifest]) -> None:
    assert apply_plan(client, compute_plan([], desired), applyset_id=SET_ID, stage_timeout=30).ok
    held = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": "burst", "finalizers": [HOLD]},
        "data": {"k": "v"},
    }
    sim.store.create("", "configmaps", held)


def allocated_claims(sim: SimCluster, namespace: str) -> list[str]:
    claims = sim.store.list("resource.k8s.io", "resourceclaims", namespace)
    return [c["metadata"]["name"] for c in claims if (c.get("status") or {}).get("allocation")]


def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not callable(condition) or not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def release(sim: SimCluster, after: float) -> threading.Thread:
    """Drop the ConfigMap's finalizer after a while, as its (imagined) controller would."""

    def run() -> None:
        time.sleep(after)
        held = sim.store.get("", "configmaps", "burst", "held")
        assert held is not None
        held["metadata"]["finalizers"] = []
        sim.store.update("", "configmaps", held)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_pruned_namespace_is_done_once_its_claims_released_their_devices(
    cluster: tuple[SimCluster, ClusterClient],
) -> None:
    sim, client = cluster
    desired = burst()
    apply_with_held_content(sim, client, desired)
    wait_for(lambda: len(allocated_claims(sim, "burst")) == 2)
    # The rollback's prune: everything of the namespace goes, the DeviceClass stays.
    kept = [m for m in desired if m.kind == "DeviceClass"]
    result = apply_plan(client, compute_plan(desired, kept), applyset_id=SET_ID, stage_timeout=20)
    assert result.ok, [s.error for s in result.stages]
    # Not held up until the stage timeout by the namespace's remaining content:
    assert not any(r.outcome == "pending-deletion" for r in result.results), result.results
    namespace = next(r for r in result.results if r.ref == "Namespace/burst")
    assert namespace.outcome == "deleted"
    assert namespace.warning and "terminating in the background" in namespace.warning
    assert allocated_claims(sim, "burst") == []  # the devices are back
    live = sim.store.get("", "namespaces", "", "burst")
    assert live is not None and live["metadata"].get("deletionTimestamp")  # still terminating


def test_creating_a_namespace_again_waits_until_its_termination_ended(
    cluster: tuple[SimCluster, ClusterClient],
) -> None:
    sim, client = cluster
    desired = burst()
    apply_with_held_content(sim, client, desired)
    kept = [m for m in desired if m.kind == "DeviceClass"]
    assert apply_plan(client, compute_plan(desired, kept), applyset_id=SET_ID, stage_timeout=20).ok
    old = sim.store.get("", "namespaces", "", "burst")
    assert old is not None and old["metadata"].get("deletionTimestamp")

    again = compute_plan(kept, desired)
    checked = dry_run(client, again, applyset_id=SET_ID)
    assert checked.ok, [r.error for r in checked.results if r.error]
    by_ref = {r.ref: r for r in checked.results}
    assert by_ref["Namespace/burst"].op == "deferred"
    assert "terminating" in (by_ref["Namespace/burst"].deferred_reason or "")
    assert by_ref["Deployment/burst/burst"].op == "deferred"  # its namespace is created again

    releaser = release(sim, after=0.5)
    result = apply_plan(client, again, applyset_id=SET_ID, stage_timeout=30, checked=checked)
    releaser.join()
    assert result.ok, [s.error for s in result.stages]
    new = sim.store.get("", "namespaces", "", "burst")
    assert new is not None and not new["metadata"].get("deletionTimestamp")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert sim.store.get("apps", "deployments", "burst", "burst") is not None


def test_a_namespace_still_terminating_at_the_stage_timeout_is_an_error(
    cluster: tuple[SimCluster, ClusterClient],
) -> None:
    sim, client = cluster
    desired = burst()
    apply_with_held_content(sim, client, desired)
    kept = [m for m in desired if m.kind == "DeviceClass"]
    assert apply_plan(client, compute_plan(desired, kept), applyset_id=SET_ID, stage_timeout=20).ok
    result = apply_plan(client, compute_plan(kept, desired), applyset_id=SET_ID, stage_timeout=1)
    assert not result.ok
    namespace = next(r for r in result.results if r.ref == "Namespace/burst")
    assert namespace.error and "still terminating" in namespace.error
    assert sim.store.get("apps", "deployments", "burst", "burst") is None  # nothing else was written
