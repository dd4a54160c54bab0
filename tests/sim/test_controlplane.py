"""The simulated control plane over real HTTP with the official client (SimCluster + controlplane)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.sim import controlplane
from reconciler.sim.server import SimCluster

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "dra-examples"
EXHAUSTED = (
    "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes are "
    "available: 1 Preemption is not helpful for scheduling."
)
T = TypeVar("T")


def wait_for(cond: Callable[[], T | None], timeout: float = 5.0, what: str = "condition") -> T:
    """Poll ``cond`` until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except ApiException as exc:
            last = exc
        if last:
            return last  # type: ignore[no-any-return]
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Kube:
    """Thin dict-in/dict-out wrapper around the official typed clients."""

    def __init__(self, url: str) -> None:
        cfg = client.Configuration()
        cfg.host = url
        self.api = client.ApiClient(cfg)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.res = client.ResourceV1Api(self.api)

    @staticmethod
    def _j(resp: Any) -> Any:
        return json.loads(resp.data)

    def pods(self, ns: str) -> list[dict[str, Any]]:
        return self._j(self.core.list_namespaced_pod(ns, _preload_content=False))["items"]

    def pod(self, ns: str, name: str) -> dict[str, Any]:
        return self._j(self.core.read_namespaced_pod(name, ns, _preload_content=False))

    def claims(self, ns: str) -> list[dict[str, Any]]:
        return self._j(self.res.list_namespaced_resource_claim(ns, _preload_content=False))["items"]

    def slices(self) -> list[dict[str, Any]]:
        return self._j(self.res.list_resource_slice(_preload_content=False))["items"]

    def events(self, ns: str) -> list[dict[str, Any]]:
        return self._j(self.core.list_namespaced_event(ns, _preload_content=False))["items"]

    def apply(self, docs: list[dict[str, Any]]) -> None:
        for d in docs:
            kind, ns = d["kind"], d["metadata"].get("namespace", "default")
            if kind == "Namespace":
                self.core.create_namespace(d)
            elif kind == "DeviceClass":
                self.res.create_device_class(d)
            elif kind == "ResourceClaimTemplate":
                self.res.create_namespaced_resource_claim_template(ns, d)
            elif kind == "ResourceClaim":
                self.res.create_namespaced_resource_claim(ns, d)
            elif kind == "Deployment":
                self.apps.create_namespaced_deployment(ns, d)
            elif kind == "DaemonSet":
                self.apps.create_namespaced_daemon_set(ns, d)
            elif kind == "Pod":
                self.core.create_namespaced_pod(ns, d)
            else:  # pragma: no cover
                raise ValueError(kind)


def docs(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / path).read_text()) if d]


def running(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p.get("status", {}).get("phase") == "Running"]


def cond(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == ctype), None)


def gpu_pod(name: str, template: str = "one-gpu", ns: str = "inference") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "resourceClaims": [{"name": "accel", "resourceClaimTemplateName": template}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "accel"}]}}
            ],
        },
    }


Sim = tuple[SimCluster, controlplane.ControlPlane, Kube]


def _start(**kw: Any) -> Iterator[Sim]:
    cluster = SimCluster()
    cp = controlplane.install(cluster, **kw)
    cluster.start()
    try:
        yield cluster, cp, Kube(cluster.url)
    finally:
        cluster.stop()
    assert {name: c.errors for name, c in cp.components.items()} == dict.fromkeys(cp.components, 0)


@pytest.fixture
def sim() -> Iterator[Sim]:
    yield from _start(nodes=1, devices_per_node=2, driver_preinstalled=True)


@pytest.fixture
def sim_ds() -> Iterator[Sim]:
    yield from _start(nodes=2, devices_per_node=2, driver_preinstalled=False)


def setup_inference(kube: Kube, replicas: int | None = None) -> None:
    kube.apply(docs("v1/01-deviceclasses.yaml"))
    objs = docs("v1/02-claimtemplate-deployment.yaml")
    if replicas is not None:
        objs[-1]["spec"]["replicas"] = replicas
    kube.apply(objs)


def test_deployment_with_claim_template_runs_with_allocated_reserved_claims(sim: Sim) -> None:
    _, _, kube = sim
    t0 = time.monotonic()
    setup_inference(kube)
    pods = wait_for(
        lambda: len(running(kube.pods("inference"))) == 2 and kube.pods("inference"), what="2 pods Running"
    )
    assert time.monotonic() - t0 < 2.0
    dep = wait_for(
        lambda: (
            (
                d := kube._j(
                    kube.apps.read_namespaced_deployment("llm-server", "inference", _preload_content=False)
                )
            )["status"].get("availableReplicas")
            == 2
            and d
        ),
        what="deployment available",
    )
    st = dep["status"]
    assert (
        st["observedGeneration"] == 1 and st["replicas"] == st["readyReplicas"] == st["updatedReplicas"] == 2
    )
    assert {c["type"]: c["status"] for c in st["conditions"]} == {"Available": "True", "Progressing": "True"}
    claims = {c["metadata"]["name"]: c for c in kube.claims("inference")}
    assert len(claims) == 2
    devices = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        assert re.fullmatch(
            r"llm-server-[bcdfghjklmnpqrstvwxz2456789]{10}-[bcdfghjklmnpqrstvwxz2456789]{5}", name
        )
        assert pod["metadata"]["labels"]["pod-template-hash"]
        (status,) = pod["status"]["resourceClaimStatuses"]
        assert status["name"] == "accel"
        claim = claims[status["resourceClaimName"]]
        assert re.fullmatch(rf"{name}-accel-[a-z0-9]{{5}}", claim["metadata"]["name"])
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "accel"
        assert claim["metadata"]["labels"] == {"app.kubernetes.io/part-of": "inference"}
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        (owner,) = claim["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": name,
            "uid": pod["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        alloc = claim["status"]["allocation"]
        (result,) = alloc["devices"]["results"]
        assert (
            result["request"] == "gpu"
            and result["driver"] == "gpu.example.com"
            and result["pool"] == "sim-node-0"
        )
        devices.add(result["device"])
        assert alloc["nodeSelector"] == {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["sim-node-0"]}]}
            ]
        }
        assert "allocationTimestamp" in alloc
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}
        ]
        assert pod["spec"]["nodeName"] == "sim-node-0"
        assert all(
            cond(pod, t)["status"] == "True"
            for t in ("Ready", "ContainersReady", "PodScheduled", "Initialized")
        )
        assert pod["status"]["containerStatuses"][0]["ready"] is True
        assert pod["status"]["podIP"] and pod["status"]["hostIP"] and pod["status"]["startTime"]
    assert devices == {"gpu-0", "gpu-1"}


def test_exhaustion_third_pod_pending_with_real_message_then_schedules(sim: Sim) -> None:
    _, _, kube = sim
    setup_inference(kube, replicas=0)
    kube.apply([gpu_pod("p1"), gpu_pod("p2")])
    wait_for(lambda: len(running(kube.pods("inference"))) == 2, what="two pods Running")
    kube.apply([gpu_pod("p3")])

    def unschedulable() -> dict[str, Any] | None:
        c = cond(kube.pod("inference", "p3"), "PodScheduled")
        return c if c and c["status"] == "False" else None

    c = wait_for(unschedulable, what="p3 unschedulable")
    assert c["reason"] == "Unschedulable" and c["message"] == EXHAUSTED
    p3 = kube.pod("inference", "p3")
    assert p3["status"]["phase"] == "Pending" and not p3["spec"].get("nodeName")
    (claim3,) = [c for c in kube.claims("inference") if c["metadata"]["ownerReferences"][0]["name"] == "p3"]
    assert "allocation" not in claim3.get("status", {})
    events = [
        e
        for e in kube.events("inference")
        if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "p3"
    ]
    assert [e["message"] for e in events] == [EXHAUSTED]
    (ev,) = events
    assert ev["type"] == "Warning" and ev["source"]["component"] == "default-scheduler"
    assert ev["involvedObject"]["kind"] == "Pod" and ev["involvedObject"]["name"] == "p3"

    p1_claim = kube.pod("inference", "p1")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    kube.core.delete_namespaced_pod("p1", "inference")
    wait_for(lambda: kube.pod("inference", "p3")["status"].get("phase") == "Running", what="p3 Running")
    names = {c["metadata"]["name"] for c in kube.claims("inference")}
    assert p1_claim not in names and len(names) == 2  # the deleted pod's claim was collected


def test_missing_device_class_leaves_pod_pending_with_scheduler_message(sim: Sim) -> None:
    _, _, kube = sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}])
    tmpl = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "nv", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
            }
        },
    }
    kube.apply([tmpl, gpu_pod("notebook", template="nv", ns="ml")])
    expected = (
        "0/1 nodes are available: request gpu: device class gpu.nvidia.com does not exist. no new claims to "
        "deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    c = wait_for(
        lambda: (x := cond(kube.pod("ml", "notebook"), "PodScheduled")) and x["status"] == "False" and x
    )
    assert c["message"] == expected
    # The Event is recorded after the status write (the scheduler's recorder is asynchronous too).
    wait_for(
        lambda: any(
            e["reason"] == "FailedScheduling" and e["message"] == expected for e in kube.events("ml")
        ),
        what="the FailedScheduling event",
    )
    # creating the class lets it schedule (the retry happens on the DeviceClass event)
    kube.apply(
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
            }
        ]
    )
    wait_for(lambda: kube.pod("ml", "notebook")["status"].get("phase") == "Running", what="notebook Running")


def driver_daemonset(name: str = "gpu-driver", **annotations: str) -> dict[str, Any]:
    (ds,) = docs("driver/kubeletplugin-daemonset.yaml")
    ds["metadata"]["namespace"] = "dra-driver"
    ds["metadata"]["name"] = name
    ds["metadata"]["annotations"] = dict(annotations)
    return ds


def test_driver_daemonset_publishes_slices_and_crash_withdraws_them(sim_ds: Sim) -> None:
    _, cp, kube = sim_ds
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra-driver"}}])
    assert kube.slices() == []
    kube.apply([driver_daemonset()])  # env DRIVER_NAME=gpu.example.com names the driver
    slices = wait_for(lambda: len(kube.slices()) == 2 and kube.slices(), what="two slices")
    for s in slices:
        spec = s["spec"]
        assert spec["driver"] == "gpu.example.com" and spec["pool"]["name"] == spec["nodeName"]
        assert spec["pool"] == {"name": spec["nodeName"], "generation": 1, "resourceSliceCount": 1}
        assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
        assert s["metadata"]["name"].startswith(f"{spec['nodeName']}-gpu.example.com-")
        assert s["metadata"]["ownerReferences"][0]["kind"] == "Node"
    ds = wait_for(
        lambda: (
            (
                d := kube._j(
                    kube.apps.read_namespaced_daemon_set("gpu-driver", "dra-driver", _preload_content=False)
                )
            )["status"].get("numberReady")
            == 2
            and d
        )
    )
    assert ds["status"]["desiredNumberScheduled"] == 2 and ds["status"]["updatedNumberScheduled"] == 2

    cp.crash_driver("gpu.example.com")
    wait_for(lambda: kube.slices() == [], what="slices withdrawn")

    def crashing() -> bool:
        pods = kube.pods("dra-driver")
        states = [p["status"]["containerStatuses"][0] for p in pods]
        return len(pods) == 2 and all(
            s["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff" and s["restartCount"] >= 1
            for s in states
        )

    wait_for(crashing, what="CrashLoopBackOff")
    cp.restore_driver("gpu.example.com")
    wait_for(lambda: len(kube.slices()) == 2, what="slices republished")


def test_driver_by_annotation_and_pod_deletion_withdraws_slice(sim_ds: Sim) -> None:
    _, _, kube = sim_ds
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra-driver"}}])
    ds = driver_daemonset("annotated", **{"dra-gitops.io/driver": "gpu.example.com"})
    ds["spec"]["template"]["spec"]["containers"][0]["env"] = []
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "sim-node-1"}
    kube.apply([ds])
    (s,) = wait_for(lambda: kube.slices(), what="slice on sim-node-1")
    assert s["spec"]["nodeName"] == "sim-node-1"
    # a DaemonSet that names another driver publishes nothing
    other = driver_daemonset("other", **{"dra-gitops.io/driver": "other.example.com"})
    other["spec"]["template"]["spec"]["containers"][0]["env"] = []
    kube.apply([other])
    kube.apps.delete_namespaced_daemon_set("annotated", "dra-driver")
    wait_for(lambda: kube.slices() == [], what="slice withdrawn after the DaemonSet is gone")


def test_rolling_update_replaces_replicaset(sim: Sim) -> None:
    cluster, _, kube = sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}])
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            },
        },
    }
    kube.apply([dep])
    wait_for(lambda: len(running(kube.pods("web"))) == 3)
    kube.apps.patch_namespaced_deployment(
        "web", "web", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}}
    )

    def rolled() -> bool:
        d = kube._j(kube.apps.read_namespaced_deployment("web", "web", _preload_content=False))
        pods = [p for p in running(kube.pods("web")) if not p["metadata"].get("deletionTimestamp")]
        return (
            d["status"].get("observedGeneration") == 2
            and d["status"].get("updatedReplicas") == 3
            and d["status"].get("availableReplicas") == 3
            and d["status"].get("replicas") == 3
            and len(pods) == 3
            and all(p["spec"]["containers"][0]["image"] == "nginx:2" for p in pods)
        )

    wait_for(rolled, what="rollout")
    rs = kube._j(kube.apps.list_namespaced_replica_set("web", _preload_content=False))["items"]
    assert sorted(r["spec"]["replicas"] for r in rs) == [0, 3]
    del cluster


def test_namespace_deletion_removes_its_objects(sim: Sim) -> None:
    cluster, _, kube = sim
    setup_inference(kube)
    wait_for(lambda: len(running(kube.pods("inference"))) == 2)
    kube.core.delete_namespace("inference")

    def gone() -> bool:
        try:
            kube.core.read_namespace("inference")
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, what="namespace gone")
    assert cluster.store.list("resource.k8s.io", "resourceclaims") == []
    assert cluster.store.list("", "pods", "inference") == []


def test_node_not_ready_blocks_scheduling_and_fail_pods(sim: Sim) -> None:
    _, cp, kube = sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "f"}}])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "a", "namespace": "f", "labels": {"x": "1"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    kube.apply([pod])
    wait_for(lambda: kube.pod("f", "a")["status"].get("phase") == "Running")
    cp.fail_pods({"x": "1"}, mode="Failed")
    wait_for(lambda: kube.pod("f", "a")["status"].get("phase") == "Failed", what="pod Failed")
    cp.clear_pod_faults()
    cp.set_node_ready("sim-node-0", False)
    kube.apply([{**pod, "metadata": {"name": "b", "namespace": "f"}}])
    c = wait_for(lambda: (x := cond(kube.pod("f", "b"), "PodScheduled")) and x["status"] == "False" and x)
    assert c["message"].startswith(
        "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."
    )
    cp.set_node_ready("sim-node-0", True)
    wait_for(
        lambda: kube.pod("f", "b")["status"].get("phase") == "Running", what="b Running after node recovers"
    )


def test_job_completes(sim: Sim) -> None:
    _, _, kube = sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobs"}}])
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once", "namespace": "jobs"},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}
        },
    }
    client.BatchV1Api(kube.api).create_namespaced_job("jobs", job)

    def complete() -> bool:
        j = kube._j(client.BatchV1Api(kube.api).read_namespaced_job("once", "jobs", _preload_content=False))
        st = j.get("status") or {}
        return st.get("succeeded") == 1 and any(c["type"] == "Complete" for c in st.get("conditions") or [])

    wait_for(complete, what="job complete")


def test_install_without_components_creates_nodes_only() -> None:
    with SimCluster() as cluster:
        cp = controlplane.install(cluster, nodes=3, components=(), node_labels={"sim-node-1": {"gpu": "yes"}})
        nodes = cluster.store.list("", "nodes")
        assert [n["metadata"]["name"] for n in nodes] == ["sim-node-0", "sim-node-1", "sim-node-2"]
        assert nodes[1]["metadata"]["labels"]["gpu"] == "yes"
        assert all(
            c["status"] == "True" for n in nodes for c in n["status"]["conditions"] if c["type"] == "Ready"
        )
        assert cp.components == {}
    with pytest.raises(ValueError):
        controlplane.install(SimCluster(), components=("etcd",))
