"""End-to-end harness: a real control plane (kube-apiserver, scheduler, controller-manager; no kubelet, no
nodes) named by $DRA_GITOPS_E2E_KUBECONFIG. The suite plays the parts a control plane lacks:

* `e2e_nodes`: Nodes with a Ready status (written through nodes/status) and a kubelet heartbeat (Lease);
* `FakeDriver`: the kubelet plugin of driver gpu.example.com, publishing one ResourceSlice per node once a
  Running+Ready pod of a DaemonSet annotated `dra-gitops.io/driver: gpu.example.com` runs there (or at
  once, "preinstalled");
* `FakeKubelet`: starts pods bound to the suite's nodes once their claims are allocated and reserved for
  them (pods/status: Running, Ready), and finishes the graceful deletion of terminating pods. A container
  whose image contains one of its `crash_images` substrings crash-loops as on a real kubelet:
  CrashLoopBackOff, restartCount growing with a back-off of 10 s doubling to 300 s (times `time_scale`),
  lastState.terminated exitCode 1 reason Error, the pod not Ready, a Warning BackOff event per crash.

The setup uses the official `kubernetes` client directly (not the code under test). Everything the suite
creates is deleted at the end, even on failure. The example's namespaces and cluster-scoped objects are
fixed names: if any already exists the suite skips rather than touch a real cluster's objects.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

E2E_ENV = "DRA_GITOPS_E2E_KUBECONFIG"
DRIVER = "gpu.example.com"
DRIVER_ANNOTATION = "dra-gitops.io/driver"
NODE_COUNT = 2
DEVICES_PER_NODE = 2
RESOURCE_API = "/apis/resource.k8s.io/v1"
RUN_LABEL = "e2e.dra-gitops.io/run"
POLL = 0.2
EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"

# What applying manifests-example creates under fixed names (checked absent before, deleted after).
EXAMPLE_NAMESPACES = ("gpu-system", "ml-team")
EXAMPLE_CLUSTER_OBJECTS = (
    ("/apis/resource.k8s.io/v1/deviceclasses", "gpu.example.com"),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", "gpu-example-driver"),
    ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "gpu-example-driver"),
)
# `apply` keeps its ApplySet parent and state in `--state-namespace`: the suite gives it one of its own.
STATE_TARGET = "e2e"

SKIP_MESSAGE = (
    f"e2e: skipped, {E2E_ENV} not set. To run tests/e2e against a control plane with kube-apiserver, "
    f"scheduler and controller-manager (no kubelet, no nodes needed): "
    f"{E2E_ENV}=/path/to/kubeconfig .venv/bin/pytest tests/e2e -q "
    f"(or against the simulated cluster, as .ci/run does: `python -m reconciler sim serve --nodes 0 "
    f"--components controller-manager,scheduler --kubeconfig-out FILE`)"
)


def e2e_kubeconfig() -> str | None:
    return os.environ.get(E2E_ENV) or None


# ---------------------------------------------------------------------------------------------- client


class KubeError(Exception):
    def __init__(self, method: str, path: str, status: int, body: dict[str, Any]) -> None:
        message = body.get("message") if isinstance(body, dict) else None
        super().__init__(f"{method} {path}: HTTP {status}: {message or body}")
        self.status = status
        self.body = body


class Kube:
    """A few raw JSON calls over the official client (its kubeconfig loading, TLS and auth)."""

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes import config as k8s_config

        self.kubeconfig = kubeconfig
        self.api = k8s_config.new_client_from_config(config_file=kubeconfig)

    def close(self) -> None:
        self.api.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = self.api.param_serialize(
            method,
            path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,  # the client serialises JSON bodies itself
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(*request, _request_timeout=timeout)
        data = response.read()
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"message": data.decode("utf-8", "replace")[:500]}
        if not 200 <= response.status < 300:
            raise KubeError(method, path, response.status, parsed)
        return parsed

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            return dict(self.request("GET", path))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, **query: str) -> list[dict[str, Any]]:
        return list(self.request("GET", path, query=query).get("items") or [])

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.request("POST", path, body=body))

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.request("PATCH", path, body=body, content_type="application/merge-patch+json"))

    def delete(self, path: str, *, grace: int | None = None, uid: str | None = None) -> bool:
        """Delete (background propagation); False when it was already gone."""
        options: dict[str, Any] = {"propagationPolicy": "Background"}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", path, body=options)
        except KubeError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def md(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


def condition(obj: dict[str, Any], ctype: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return str(cond.get("status"))
    return None


def pod_ready(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and condition(pod, "Ready") == "True"


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = POLL) -> Any:
    """Poll `check` until it returns something truthy; fail the test with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def selector(**fields: str) -> str:
    return ",".join(f"{k}={v}" for k, v in fields.items())


def node_ip(index: int) -> str:
    return f"10.250.0.{10 + index}"


# ---------------------------------------------------------------------------------------------- loops


class Loop(threading.Thread):
    """A background poller: `step()` every `interval` seconds until `stop()`. Errors are kept, not raised."""

    interval = POLL

    def __init__(self, kubeconfig: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.kube = Kube(kubeconfig)
        self._stop_event = threading.Event()
        self.errors: list[str] = []
        self.steps = 0

    def step(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - a poller must survive a flaky request
                self.errors.append(f"{type(exc).__name__}: {exc}")
                del self.errors[:-20]
            self.steps += 1
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)
        self.kube.close()


class FakeDriver(Loop):
    """Kubelet plugin of DRIVER on the suite's nodes: one ResourceSlice (one pool) per node."""

    def __init__(self, kubeconfig: str, run_id: str, nodes: list[str], *, preinstalled: bool = False) -> None:
        super().__init__(kubeconfig, f"fake-driver-{run_id}")
        self.run_id = run_id
        self.nodes = nodes
        self.preinstalled = preinstalled
        self.node_uids: dict[str, str] = {}

    def slice_name(self, node: str) -> str:
        return f"{node}-{DRIVER}"

    def slice_for(self, node: str) -> dict[str, Any]:
        devices = []
        for i in range(DEVICES_PER_NODE):
            uuid = hashlib.sha256(f"{node}/{i}".encode()).hexdigest()[:32]
            devices.append(
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "index": {"int": i},
                        "model": {"string": "E2E-GPU"},
                        "uuid": {"string": f"GPU-{uuid}"},
                        "driverVersion": {"version": "1.0.0"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
            )
        owner = []
        if node in self.node_uids:
            owner = [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node,
                    "uid": self.node_uids[node],
                    "controller": True,
                }
            ]
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {
                "name": self.slice_name(node),
                "labels": {RUN_LABEL: self.run_id},
                "ownerReferences": owner,
            },
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }

    def driver_nodes(self) -> set[str]:
        """Nodes where a Running+Ready pod of one of DRIVER's DaemonSets runs."""
        if self.preinstalled:
            return set(self.nodes)
        daemonsets = {
            str(md(ds).get("uid"))
            for ds in self.kube.list("/apis/apps/v1/daemonsets")
            if (md(ds).get("annotations") or {}).get(DRIVER_ANNOTATION) == DRIVER
        }
        if not daemonsets:
            return set()
        running = set()
        for node in self.nodes:
            for pod in self.kube.list("/api/v1/pods", fieldSelector=selector(**{"spec.nodeName": node})):
                owners = md(pod).get("ownerReferences") or []
                if md(pod).get("deletionTimestamp") or not pod_ready(pod):
                    continue
                if any(o.get("kind") == "DaemonSet" and o.get("uid") in daemonsets for o in owners):
                    running.add(node)
        return running

    def step(self) -> None:
        want = self.driver_nodes()
        have = {
            str((s.get("spec") or {}).get("nodeName")): s
            for s in self.kube.list(
                f"{RESOURCE_API}/resourceslices", labelSelector=f"{RUN_LABEL}={self.run_id}"
            )
        }
        for node, obj in have.items():
            if node not in want:
                self.kube.delete(f"{RESOURCE_API}/resourceslices/{md(obj)['name']}")
        for node in sorted(want - set(have)):
            if node not in self.node_uids:
                live = self.kube.get(f"/api/v1/nodes/{node}")
                if live is None:
                    continue
                self.node_uids[node] = str(md(live).get("uid"))
            self.kube.create(f"{RESOURCE_API}/resourceslices", self.slice_for(node))

    def published(self) -> set[str]:
        return {
            str((s.get("spec") or {}).get("nodeName"))
            for s in self.kube.list(
                f"{RESOURCE_API}/resourceslices", labelSelector=f"{RUN_LABEL}={self.run_id}"
            )
        }

    def cleanup(self) -> None:
        kube = Kube(self.kube.kubeconfig)
        try:
            for obj in kube.list(
                f"{RESOURCE_API}/resourceslices", labelSelector=f"{RUN_LABEL}={self.run_id}"
            ):
                kube.delete(f"{RESOURCE_API}/resourceslices/{md(obj)['name']}")
        finally:
            kube.close()


class FakeKubelet(Loop):
    """The kubelet of the suite's nodes: heartbeats, starts pods whose claims are ready, ends deletions."""

    heartbeat_every = 10.0  # the kubelet's default lease renewal (lease duration 40 s / 4)

    def __init__(
        self,
        kubeconfig: str,
        run_id: str,
        nodes: list[str],
        *,
        crash_images: tuple[str, ...] = (),
        time_scale: float = 1.0,
    ) -> None:
        super().__init__(kubeconfig, f"fake-kubelet-{run_id}")
        self.nodes = nodes
        self._last_heartbeat = 0.0
        self.since = now()  # the nodes' conditions keep their lastTransitionTime
        self.started: list[str] = []  # ns/name of pods this kubelet started
        self.crash_images: set[str] = set(crash_images)  # tests may add or discard substrings
        self.time_scale = time_scale
        self._crashes: dict[tuple[str, str], tuple[int, float]] = {}  # (uid, container) → restarts, next

    # ---- node heartbeat (so the node lifecycle controller never marks the nodes NotReady)

    def heartbeat(self) -> None:
        for index, node in enumerate(self.nodes):
            renew_node(self.kube, node, index, self.since)

    # ---- pods

    def claim_names(self, pod: dict[str, Any]) -> list[str] | None:
        """Names of the pod's ResourceClaims; None while a generated claim is not known yet."""
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        names = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            if entry.get("resourceClaimName"):
                names.append(str(entry["resourceClaimName"]))
            elif entry.get("resourceClaimTemplateName"):
                name = generated.get(entry.get("name"))
                if not name:
                    return None
                names.append(str(name))
        return names

    def claims_ready(self, pod: dict[str, Any]) -> bool:
        names = self.claim_names(pod)
        if names is None:
            return False
        ns, uid = md(pod)["namespace"], md(pod).get("uid")
        for name in names:
            claim = self.kube.get(f"{RESOURCE_API}/namespaces/{ns}/resourceclaims/{name}")
            status = (claim or {}).get("status") or {}
            if not status.get("allocation"):
                return False
            if not any(r.get("uid") == uid for r in status.get("reservedFor") or []):
                return False
        return True

    def start_pod(self, pod: dict[str, Any], index: int) -> None:
        meta, spec = md(pod), pod.get("spec") or {}
        stamp = now()
        digest = hashlib.sha256(str(meta.get("uid")).encode()).digest()
        ip = f"10.244.{digest[0]}.{max(2, digest[1] % 254)}"
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]

        def container_status(c: dict[str, Any], state: dict[str, Any], ready: bool) -> dict[str, Any]:
            cid = hashlib.sha256(f"{meta.get('uid')}/{c.get('name')}".encode()).hexdigest()
            return {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": f"{c.get('image')}@sha256:{hashlib.sha256(str(c.get('image')).encode()).hexdigest()}",
                "containerID": f"containerd://{cid}",
                "ready": ready,
                "started": ready,
                "restartCount": 0,
                "state": state,
                "lastState": {},
            }

        running = {"running": {"startedAt": stamp}}
        done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp}}
        status: dict[str, Any] = {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": node_ip(index),
            "hostIPs": [{"ip": node_ip(index)}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": stamp,
            "containerStatuses": [container_status(c, running, True) for c in spec.get("containers") or []],
        }
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [
                container_status(c, running if c.get("restartPolicy") == "Always" else done, True)
                for c in spec["initContainers"]
            ]
        self.kube.merge_patch(
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", {"status": status}
        )
        self.started.append(f"{meta['namespace']}/{meta['name']}")

    def sync_pod(self, pod: dict[str, Any], index: int) -> None:
        meta = md(pod)
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        if meta.get("deletionTimestamp"):
            # the containers are "stopped": confirm the graceful deletion as a kubelet does
            self.kube.delete(path, grace=0, uid=str(meta.get("uid")))
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        crashing = self.crashing(pod)
        if crashing and (phase == "Running" or self.claims_ready(pod)):
            self.crash_loop(pod, index, crashing)
            return
        if pod_ready(pod):
            return
        if self.claims_ready(pod):
            self.start_pod(pod, index)

    # ---- crash loops

    def crashing(self, pod: dict[str, Any]) -> list[str]:
        images = set(self.crash_images)
        return [
            str(c.get("name"))
            for c in (pod.get("spec") or {}).get("containers") or []
            if any(i and i in str(c.get("image") or "") for i in images)
        ]

    def crash_loop(self, pod: dict[str, Any], index: int, crashing: list[str]) -> None:
        """Restart each crashing container when its back-off ends; write the status a kubelet shows."""
        meta = md(pod)
        uid, name, ns = str(meta.get("uid")), meta["name"], meta["namespace"]
        if (pod.get("status") or {}).get("phase") != "Running":
            self.start_pod(pod, index)
            pod = self.kube.get(f"/api/v1/namespaces/{ns}/pods/{name}") or pod
        statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
        changed = False
        clock = time.monotonic()
        for cname in crashing:
            restarts, due = self._crashes.get((uid, cname), (0, 0.0))
            if restarts and clock < due:
                continue
            restarts += 1
            backoff = min(300.0, 10.0 * 2 ** (restarts - 1))
            self._crashes[(uid, cname)] = (restarts, clock + backoff * self.time_scale)
            stamp = now()
            status = dict(statuses.get(cname) or {"name": cname})
            status.update(
                {
                    "ready": False,
                    "started": False,
                    "restartCount": restarts,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off {backoff:.0f}s restarting failed container={cname} "
                            f"pod={name}_{ns}({uid})",
                        }
                    },
                    "lastState": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "startedAt": stamp,
                            "finishedAt": stamp,
                        }
                    },
                }
            )
            statuses[cname] = status
            changed = True
            self.kube.create(
                f"/api/v1/namespaces/{ns}/events",
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {
                        "name": f"{name}.{hashlib.sha256(f'{uid}{restarts}{cname}'.encode()).hexdigest()[:16]}"
                    },
                    "involvedObject": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": name,
                        "namespace": ns,
                        "uid": uid,
                    },
                    "reason": "BackOff",
                    "message": f"Back-off restarting failed container {cname} in pod {name}_{ns}({uid})",
                    "type": "Warning",
                    "source": {"component": "kubelet", "host": (pod.get("spec") or {}).get("nodeName")},
                    "firstTimestamp": stamp,
                    "lastTimestamp": stamp,
                    "count": 1,
                },
            )
        if not changed:
            return
        unready = f"containers with unready status: [{' '.join(crashing)}]"
        conditions = [
            {
                **c,
                "status": "False",
                "reason": "ContainersNotReady",
                "message": unready,
                "lastTransitionTime": now(),
            }
            if c.get("type") in ("Ready", "ContainersReady") and c.get("status") != "False"
            else c
            for c in (pod.get("status") or {}).get("conditions") or []
        ]
        order = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
        self.kube.merge_patch(
            f"/api/v1/namespaces/{ns}/pods/{name}/status",
            {
                "status": {
                    "conditions": conditions,
                    "containerStatuses": [statuses[c] for c in order if c in statuses],
                }
            },
        )

    def step(self) -> None:
        if time.monotonic() - self._last_heartbeat > self.heartbeat_every:
            self.heartbeat()
            self._last_heartbeat = time.monotonic()
        for index, node in enumerate(self.nodes):
            for pod in self.kube.list("/api/v1/pods", fieldSelector=selector(**{"spec.nodeName": node})):
                self.sync_pod(pod, index)


def renew_node(kube: Kube, node: str, index: int, since: str | None = None) -> None:
    """A kubelet heartbeat: renew the node's Lease in kube-node-lease (created, owned by the Node, if
    missing) and write its status (Ready) through nodes/status."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"
    if kube.get(path) is None:
        live = kube.get(f"/api/v1/nodes/{node}")
        owner = (
            [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": md(live).get("uid")}] if live else []
        )
        kube.create(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": node, "namespace": "kube-node-lease", "ownerReferences": owner},
                "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": stamp},
            },
        )
    else:
        kube.merge_patch(path, {"spec": {"holderIdentity": node, "renewTime": stamp}})
    kube.merge_patch(f"/api/v1/nodes/{node}/status", {"status": node_status(index, since)})


def node_status(index: int, since: str | None = None) -> dict[str, Any]:
    stamp = now()
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    healthy = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    return {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {
                "type": ctype,
                "status": value,
                "reason": reason,
                "message": "dra-gitops e2e fake kubelet",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": since or stamp,
            }
            for ctype, value, reason in healthy
        ],
        "addresses": [{"type": "InternalIP", "address": node_ip(index)}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": f"dra-e2e-{index}",
            "systemUUID": f"dra-e2e-{index}",
            "bootID": f"dra-e2e-{index}",
            "kernelVersion": "6.8.0",
            "osImage": "dra-gitops e2e",
            "containerRuntimeVersion": "containerd://2.0.0",
            "kubeletVersion": "v1.36.0",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


@dataclass
class E2ECluster:
    kubeconfig: str
    kube: Kube
    run_id: str
    nodes: list[str]
    driver: FakeDriver
    kubelet: FakeKubelet
    state_namespace: str
    extra_cleanup: list[Callable[[], None]] = field(default_factory=list)

    def health(self) -> str:
        """Background-loop errors, for assertion messages."""
        return f"driver errors: {self.driver.errors[-3:]}; kubelet errors: {self.kubelet.errors[-3:]}"


def delete_example_state(kube: Kube, *, state_namespace: str, timeout: float = 120.0) -> list[str]:
    """Delete everything applying the example creates; wait until it is gone. Returns what is left."""
    namespaces = [*EXAMPLE_NAMESPACES, state_namespace]
    for ns in namespaces:
        kube.delete(f"/api/v1/namespaces/{ns}")
    for path, name in EXAMPLE_CLUSTER_OBJECTS:
        kube.delete(f"{path}/{name}")
    deadline = time.monotonic() + timeout
    forced = False
    while True:
        left = [f"Namespace {ns}" for ns in namespaces if kube.get(f"/api/v1/namespaces/{ns}")]
        left += [f"{name}" for path, name in EXAMPLE_CLUSTER_OBJECTS if kube.get(f"{path}/{name}")]
        if not left or time.monotonic() > deadline:
            return left
        if not forced and time.monotonic() > deadline - timeout / 2:
            # pods on nodes our kubelet does not serve never finish a graceful deletion
            forced = True
            for ns in namespaces:
                for pod in kube.list(f"/api/v1/namespaces/{ns}/pods"):
                    kube.delete(f"/api/v1/namespaces/{ns}/pods/{md(pod)['name']}", grace=0)
        time.sleep(0.5)
