"""Graceful pod deletion over real HTTP with the official client: deletionTimestamp first, then removal."""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.sim import controlplane
from reconciler.sim.server import SimCluster


def loaded(resp: Any) -> Any:
    """The JSON body of a call made with ``_preload_content=False``."""
    return json.loads(resp.data)


def wait_for(check: Any, what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def pod_body(name: str, node: str | None = "sim-node-0", **spec: Any) -> Any:
    body: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


def read(core: client.CoreV1Api, name: str) -> dict[str, Any] | None:
    try:
        return dict(loaded(core.read_namespaced_pod(name, "default", _preload_content=False)))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def delete(core: client.CoreV1Api, name: str, **options: Any) -> dict[str, Any]:
    return dict(loaded(core.delete_namespaced_pod(name, "default", _preload_content=False, **options)))


def test_deleting_a_bound_pod_schedules_its_deletion(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("bound"))
    answered = delete(core, "bound")
    assert answered["metadata"]["deletionGracePeriodSeconds"] == 30
    assert answered["metadata"]["deletionTimestamp"]
    stored = read(core, "bound")
    assert (
        stored is not None
        and stored["metadata"]["deletionTimestamp"] == answered["metadata"]["deletionTimestamp"]
    )
    # a longer grace period does not postpone it; a shorter one brings it forward; 0 removes the pod
    assert delete(core, "bound", grace_period_seconds=60)["metadata"]["deletionGracePeriodSeconds"] == 30
    assert delete(core, "bound", grace_period_seconds=5)["metadata"]["deletionGracePeriodSeconds"] == 5
    delete(core, "bound", grace_period_seconds=0)
    assert read(core, "bound") is None


def test_the_grace_period_defaults_to_the_pods_own(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("short", terminationGracePeriodSeconds=7))
    assert delete(core, "short")["metadata"]["deletionGracePeriodSeconds"] == 7


def test_unbound_pods_and_grace_zero_go_at_once(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("pending", node=None))
    core.create_namespaced_pod("default", pod_body("forced"))
    delete(core, "pending")
    delete(core, "forced", body=client.V1DeleteOptions(grace_period_seconds=0))
    assert read(core, "pending") is None and read(core, "forced") is None


def test_a_dry_run_delete_changes_nothing(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_body("kept"))
    answered = delete(core, "kept", dry_run="All")
    assert answered["metadata"]["deletionGracePeriodSeconds"] == 30
    stored = read(core, "kept")
    assert stored is not None and "deletionTimestamp" not in stored["metadata"]


def test_garbage_collection_deletes_owned_pods_gracefully(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "owner"}}, _preload_content=False
    )
    uid = loaded(owner)["metadata"]["uid"]
    body = pod_body("owned")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    ]
    core.create_namespaced_pod("default", body)
    core.delete_namespaced_config_map("owner", "default")
    owned = read(core, "owned")
    assert owned is not None and owned["metadata"]["deletionGracePeriodSeconds"] == 30


def test_the_kubelet_stops_a_deleted_pod_then_removes_it(
    sim_cluster: SimCluster, core: client.CoreV1Api
) -> None:
    plane = controlplane.install(sim_cluster, nodes=1)
    kubelet = plane.kubelet
    assert kubelet is not None
    kubelet.termination_delay = 3600.0  # hold the pod in Terminating to look at it
    core.create_namespaced_pod("default", pod_body("worker", node=None))

    def ready() -> bool:
        pod = read(core, "worker") or {}
        conditions = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}
        return conditions.get("Ready") == "True"

    wait_for(ready, "the pod Running and Ready")
    delete(core, "worker")

    def stopped() -> dict[str, Any] | None:
        pod = read(core, "worker") or {}
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        return pod if statuses and all("terminated" in s["state"] for s in statuses) else None

    pod = wait_for(stopped, "the containers terminated")
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["Ready"] == "False" and conditions["ContainersReady"] == "False"
    assert pod["metadata"]["deletionTimestamp"]
    kubelet.termination_delay = 0.0
    wait_for(lambda: read(core, "worker") is None, "the kubelet to remove the pod")


def test_a_finalizer_outlives_the_grace_period_then_the_pod_goes(core: client.CoreV1Api) -> None:
    body = pod_body("held")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod("default", body)
    delete(core, "held")
    delete(core, "held", grace_period_seconds=0)  # what the kubelet sends once the containers stopped
    held = read(core, "held")
    assert held is not None and held["metadata"]["deletionGracePeriodSeconds"] == 0
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})
    assert read(core, "held") is None
