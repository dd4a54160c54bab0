"""Rollout windows, crash loops and node lifecycle of the simulated control plane, over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from test_controlplane import Kube, Sim, _start, cond, driver_daemonset, wait_for

NS = "dra-driver"
GOOD_IMAGE = "registry.example.com/gpu-driver:v1.0.0"
BAD_IMAGE = "registry.example.com/gpu-driver:v1.1.0-broken"
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


@pytest.fixture
def sim() -> Iterator[Sim]:
    # back-off 0.1 s, 0.2 s, ... instead of 10 s, 20 s, ...; a node is Unknown after 1.5 s of silence
    yield from _start(nodes=2, crash_images=["broken"], time_scale=0.01, node_monitor_grace_period=1.5)


def read_ds(kube: Kube, name: str = "gpu-driver") -> dict[str, Any]:
    return kube._j(kube.apps.read_namespaced_daemon_set(name, NS, _preload_content=False))


def node(kube: Kube, name: str) -> dict[str, Any]:
    return kube._j(kube.core.read_node(name, _preload_content=False))


def taints(kube: Kube, name: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in node(kube, name)["spec"].get("taints") or []}


def driver(image: str, **spec: Any) -> dict[str, Any]:
    ds = driver_daemonset()
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
    ds["spec"].pop("updateStrategy", None)  # the default: RollingUpdate, maxUnavailable 1, maxSurge 0
    ds["spec"].update(spec)
    return ds


def set_image(kube: Kube, image: str) -> None:
    ds = read_ds(kube)
    container = ds["spec"]["template"]["spec"]["containers"][0]["name"]
    kube.apps.patch_namespaced_daemon_set(
        "gpu-driver",
        NS,
        {"spec": {"template": {"spec": {"containers": [{"name": container, "image": image}]}}}},
    )


def healthy(kube: Kube, generation: int) -> dict[str, Any] | None:
    ds = read_ds(kube)
    st = ds.get("status") or {}
    done = (
        st.get("observedGeneration") == generation
        and st.get("updatedNumberScheduled")
        == st.get("numberAvailable")
        == st.get("desiredNumberScheduled")
        == 2
    )
    return ds if done else None


class PodWatch:
    """Records every pod event of a namespace (the order the window shows up in)."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.events: list[tuple[str, str, str, str]] = []  # (type, name, node, revision)
        self._stop = threading.Event()
        self._kube, self._ns = kube, namespace
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        w = watch.Watch()
        try:
            self._follow(w)
        except Exception:  # noqa: BLE001 - the server stops under the watch at the end of the test
            return

    def _follow(self, w: Any) -> None:
        for ev in w.stream(self._kube.core.list_namespaced_pod, self._ns, timeout_seconds=30):
            pod = ev["object"]
            self.events.append(
                (
                    ev["type"],
                    pod.metadata.name,
                    _target_node(pod.spec),
                    (pod.metadata.labels or {}).get("controller-revision-hash", ""),
                )
            )
            if self._stop.is_set():
                w.stop()

    def stop(self) -> None:
        self._stop.set()


def _target_node(spec: Any) -> str:
    terms = (
        spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    )
    return str(terms[0].match_fields[0].values[0])


def test_daemonset_rolling_update_deletes_old_pod_before_creating_new_one(sim: Sim) -> None:
    _, _, kube = sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    kube.apply([driver(GOOD_IMAGE)])
    ds = wait_for(lambda: healthy(kube, 1), what="generation 1 rolled out")
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    first = kube.pods(NS)
    (rev1,) = {p["metadata"]["labels"]["controller-revision-hash"] for p in first}
    assert {p["metadata"]["labels"]["pod-template-generation"] for p in first} == {"1"}
    revisions = kube._j(kube.apps.list_namespaced_controller_revision(NS, _preload_content=False))["items"]
    assert [(r["metadata"]["name"], r["revision"]) for r in revisions] == [(f"gpu-driver-{rev1}", 1)]
    assert revisions[0]["metadata"]["labels"]["controller-revision-hash"] == rev1
    assert revisions[0]["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    assert all(
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"} in p["spec"]["tolerations"]
        for p in first
    )

    watcher = PodWatch(kube, NS)
    wait_for(lambda: len(watcher.events) >= 2, what="the watch to list the pods")
    set_image(kube, GOOD_IMAGE.replace("v1.0.0", "v1.0.1"))
    ds = wait_for(lambda: healthy(kube, 2), what="generation 2 rolled out")
    watcher.stop()
    pods = kube.pods(NS)
    (rev2,) = {p["metadata"]["labels"]["controller-revision-hash"] for p in pods}
    assert rev2 != rev1 and {p["metadata"]["labels"]["pod-template-generation"] for p in pods} == {"2"}
    st = ds["status"]
    assert st["currentNumberScheduled"] == st["numberReady"] == 2 and st["numberMisscheduled"] == 0
    assert "numberUnavailable" not in st
    # on each node the old pod's DELETED comes before the new pod's ADDED, and one node at a time
    changes = [(t, n, r) for t, _, n, r in watcher.events if t in ("ADDED", "DELETED") and r]
    changes = [c for c in changes if not (c[0] == "ADDED" and c[2] == rev1)]  # the initial listing
    for name in ("sim-node-0", "sim-node-1"):
        mine = [(t, r) for t, n, r in changes if n == name]
        assert mine == [("DELETED", rev1), ("ADDED", rev2)], mine
    assert [t for t, _, _ in changes][:2] == ["DELETED", "ADDED"]
    revisions = kube._j(kube.apps.list_namespaced_controller_revision(NS, _preload_content=False))["items"]
    assert sorted((r["metadata"]["name"], r["revision"]) for r in revisions) == sorted(
        [(f"gpu-driver-{rev1}", 1), (f"gpu-driver-{rev2}", 2)]
    )


def test_crash_looping_old_pods_stay_until_replaced_and_rollback_repairs(sim: Sim) -> None:
    _, cp, kube = sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    kube.apply([driver(GOOD_IMAGE)])
    wait_for(lambda: healthy(kube, 1), what="generation 1")
    wait_for(lambda: len(kube.slices()) == 2, what="slices on both nodes")
    set_image(kube, BAD_IMAGE)

    def crash_looping() -> list[dict[str, Any]] | None:
        pods = kube.pods(NS)
        bad = [
            p
            for p in pods
            if p["metadata"]["labels"]["pod-template-generation"] == "2"
            and p["status"].get("containerStatuses")
            and p["status"]["containerStatuses"][0]["state"].get("waiting", {}).get("reason")
            == "CrashLoopBackOff"
        ]
        return bad or None

    (bad,) = wait_for(crash_looping, what="the new pod crash-looping")
    # maxUnavailable 1: the first new pod never becomes available, so the other node keeps its old pod
    others = [p for p in kube.pods(NS) if p["metadata"]["uid"] != bad["metadata"]["uid"]]
    assert [p["metadata"]["labels"]["pod-template-generation"] for p in others] == ["1"]
    assert cond(bad, "Ready")["status"] == "False" and bad["status"]["phase"] == "Running"
    status = bad["status"]["containerStatuses"][0]
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert status["lastState"]["terminated"]["reason"] == "Error"
    assert re_backoff(status["state"]["waiting"]["message"], bad)
    wait_for(
        lambda: kube.pod(NS, bad["metadata"]["name"])["status"]["containerStatuses"][0]["restartCount"] >= 3,
        what="restartCount growing",
    )
    backoffs = [
        e
        for e in kube.events(NS)
        if e["reason"] == "BackOff" and e["involvedObject"]["name"] == bad["metadata"]["name"]
    ]
    assert backoffs and all(
        e["type"] == "Warning" and e["source"]["component"] == "kubelet" for e in backoffs
    )
    assert backoffs[0]["message"].startswith(
        f"Back-off restarting failed container {status['name']} in pod {bad['metadata']['name']}_{NS}("
    )
    bad_node = bad["spec"]["nodeName"]
    wait_for(
        lambda: {s["spec"]["nodeName"] for s in kube.slices()} == {"sim-node-0", "sim-node-1"} - {bad_node},
        what="no slice for the node whose driver pod crash-loops",
    )
    st = read_ds(kube)["status"]
    assert st["numberUnavailable"] == 1 and st["updatedNumberScheduled"] == 1

    # back to the good template (a rollback): the crash-looping pod is replaced at once
    set_image(kube, GOOD_IMAGE)
    ds = wait_for(lambda: healthy(kube, 3), what="rolled back")
    pods = kube.pods(NS)
    assert {p["metadata"]["labels"]["pod-template-generation"] for p in pods} <= {"1", "3"}
    assert bad["metadata"]["uid"] not in {p["metadata"]["uid"] for p in pods}
    revisions = kube._j(kube.apps.list_namespaced_controller_revision(NS, _preload_content=False))["items"]
    by_hash = {r["metadata"]["labels"]["controller-revision-hash"]: r["revision"] for r in revisions}
    good_hash = pods[0]["metadata"]["labels"]["controller-revision-hash"]
    assert by_hash[good_hash] == 3  # the good revision was renumbered as the newest
    wait_for(lambda: len(kube.slices()) == 2, what="slices back on both nodes")
    del ds, cp


def re_backoff(message: str, pod: dict[str, Any]) -> bool:
    md = pod["metadata"]
    container = pod["spec"]["containers"][0]["name"]
    return message.endswith(
        f"restarting failed container={container} pod={md['name']}_{NS}({md['uid']})"
    ) and (message.startswith("back-off "))


@pytest.fixture
def crash_sim() -> Iterator[Sim]:
    yield from _start(nodes=1, crash_images=["crashy"], time_scale=0.0005)


def test_crash_image_back_off_doubles_up_to_five_minutes(crash_sim: Sim) -> None:
    _, _, kube = crash_sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c"}}])
    kube.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "c"},
                "spec": {
                    "containers": [
                        {"name": "ok", "image": "busybox"},
                        {"name": "bad", "image": "example.com/crashy:1"},
                    ]
                },
            }
        ]
    )
    seen: dict[int, str] = {}

    def until_capped() -> bool:
        statuses = {s["name"]: s for s in kube.pod("c", "p")["status"].get("containerStatuses") or []}
        if "bad" not in statuses:
            return False
        bad = statuses["bad"]
        seen[bad["restartCount"]] = bad["state"]["waiting"]["message"].split(" ")[1]
        assert statuses["ok"]["ready"] is True and "running" in statuses["ok"]["state"]
        return bad["restartCount"] >= 7

    wait_for(until_capped, timeout=20, what="seven restarts")
    expected = {1: "10s", 2: "20s", 3: "40s", 4: "80s", 5: "160s", 6: "300s", 7: "300s"}
    assert {n: seen[n] for n in seen if n in expected} == {n: v for n, v in expected.items() if n in seen}
    assert seen[7] == "300s"
    pod = kube.pod("c", "p")
    assert cond(pod, "Ready")["status"] == "False"
    assert cond(pod, "ContainersReady")["message"] == "containers with unready status: [bad]"


def test_a_crashing_container_of_a_never_restarted_pod_exits_once(crash_sim: Sim) -> None:
    """restartPolicy Never: the kubelet does not restart it; one container still running keeps the pod
    Running, and when every container has exited (1) the pod is Failed, with no restart and no BackOff."""
    _, _, kube = crash_sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}])
    for name, containers in (
        ("mixed", [{"name": "ok", "image": "busybox"}, {"name": "bad", "image": "example.com/crashy:1"}]),
        ("all", [{"name": "bad", "image": "example.com/crashy:1"}]),
    ):
        kube.apply(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": "n"},
                    "spec": {"restartPolicy": "Never", "containers": containers},
                }
            ]
        )

    def failed() -> dict[str, Any] | None:
        pod = kube.pod("n", "all")
        return pod if pod["status"].get("phase") == "Failed" else None

    pod = wait_for(failed, timeout=20, what="the pod whose only container crashed Failed")
    (bad,) = pod["status"]["containerStatuses"]
    assert bad["state"]["terminated"]["exitCode"] == 1 and bad["state"]["terminated"]["reason"] == "Error"
    assert bad["restartCount"] == 0 and cond(pod, "Ready")["status"] == "False"

    def one_exited() -> dict[str, Any] | None:
        pod = kube.pod("n", "mixed")
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses") or []}
        return statuses if "terminated" in (statuses.get("bad") or {}).get("state", {}) else None

    statuses = wait_for(one_exited, timeout=20, what="the crashing container terminated")
    assert kube.pod("n", "mixed")["status"]["phase"] == "Running"
    assert "running" in statuses["ok"]["state"] and statuses["bad"]["restartCount"] == 0
    events = kube.core.list_namespaced_event("n").items
    assert not [e for e in events if e.reason == "BackOff"]


def test_node_that_stops_heartbeating_goes_unknown_gets_taints_and_pods_are_evicted(sim: Sim) -> None:
    _, cp, kube = sim
    leases = client.CoordinationV1Api(kube.api)

    def lease_of_node_1() -> dict[str, Any] | None:
        try:
            return kube._j(
                leases.read_namespaced_lease("sim-node-1", "kube-node-lease", _preload_content=False)
            )
        except ApiException:
            return None

    lease = wait_for(lease_of_node_1, what="the kubelet's Lease")
    assert lease["spec"]["holderIdentity"] == "sim-node-1" and lease["spec"]["renewTime"]
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "w"}}])
    for name, seconds in (("short", 1), ("default", None)):
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "w"},
            "spec": {"nodeName": "sim-node-1", "containers": [{"name": "c", "image": "i"}]},
        }
        if seconds is not None:
            pod["spec"]["tolerations"] = [
                {
                    "key": UNREACHABLE,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": seconds,
                }
            ]
        kube.apply([pod])
    default = kube.pod("w", "default")
    assert {
        "key": UNREACHABLE,
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    } in default["spec"]["tolerations"]
    assert {
        "key": NOT_READY,
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    } in default["spec"]["tolerations"]
    short = kube.pod("w", "short")
    assert [t["key"] for t in short["spec"]["tolerations"]] == [UNREACHABLE, NOT_READY]
    wait_for(lambda: kube.pod("w", "short")["status"].get("phase") == "Running", what="pods Running")

    cp.set_node_heartbeat("sim-node-1", False)
    ready = wait_for(
        lambda: (c := cond(node(kube, "sim-node-1"), "Ready")) and c["status"] == "Unknown" and c,
        what="Ready=Unknown",
    )
    assert (
        ready["reason"] == "NodeStatusUnknown" and ready["message"] == "Kubelet stopped posting node status."
    )
    n1 = node(kube, "sim-node-1")
    assert {c["type"]: c["status"] for c in n1["status"]["conditions"]} == dict.fromkeys(
        ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready"), "Unknown"
    )
    wait_for(
        lambda: {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= taints(kube, "sim-node-1"),
        what="unreachable taints",
    )
    no_execute = [t for t in node(kube, "sim-node-1")["spec"]["taints"] if t["effect"] == "NoExecute"]
    assert no_execute[0]["timeAdded"]
    assert taints(kube, "sim-node-0") == set()
    assert cond(kube.pod("w", "default"), "Ready")["status"] == "False"

    def evicted() -> bool:
        # Evicted = deleted; with no kubelet on the unreachable node to confirm it, the pod stays Terminating
        # (deletionTimestamp set) as on a real cluster.
        pods = {p["metadata"]["name"]: p for p in kube.pods("w")}
        return "short" not in pods or bool(pods["short"]["metadata"].get("deletionTimestamp"))

    wait_for(evicted, what="the pod tolerating 1 s evicted")
    assert "default" in {p["metadata"]["name"] for p in kube.pods("w")}  # 300 s have not passed
    assert any(
        e["reason"] == "TaintManagerEviction" and e["message"] == "Marking for deletion Pod w/short"
        for e in kube.events("w")
    )
    # new pods do not go to the unreachable node
    kube.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"n{i}", "namespace": "w"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            }
            for i in range(3)
        ]
    )
    wait_for(
        lambda: all(kube.pod("w", f"n{i}")["spec"].get("nodeName") == "sim-node-0" for i in range(3)),
        what="new pods on sim-node-0",
    )

    cp.set_node_heartbeat("sim-node-1", True)
    wait_for(lambda: cond(node(kube, "sim-node-1"), "Ready")["status"] == "True", what="Ready again")
    wait_for(lambda: taints(kube, "sim-node-1") == set(), what="taints removed")


def test_not_ready_node_gets_not_ready_taints_and_new_nodes_start_tainted(sim: Sim) -> None:
    cluster, cp, kube = sim
    cp.set_node_ready("sim-node-0", False)
    wait_for(
        lambda: taints(kube, "sim-node-0") == {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")},
        what="not-ready taints",
    )
    ready = cond(node(kube, "sim-node-0"), "Ready")
    assert ready["status"] == "False" and ready["reason"] == "KubeletNotReady"
    cp.set_node_ready("sim-node-0", True)
    wait_for(lambda: taints(kube, "sim-node-0") == set(), what="taints removed")

    # a Node registered without status keeps admission's not-ready taint, then goes Unknown
    kube.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}})
    assert taints(kube, "bare") == {(NOT_READY, "NoSchedule")}
    ready = wait_for(
        lambda: (c := cond(node(kube, "bare"), "Ready")) and c["status"] == "Unknown" and c,
        what="bare node Unknown",
    )
    assert (
        ready["reason"] == "NodeStatusNeverUpdated"
        and ready["message"] == "Kubelet never posted node status."
    )
    wait_for(lambda: (UNREACHABLE, "NoExecute") in taints(kube, "bare"), what="bare node unreachable")
    # nodes the control plane registered (kubelet posting Ready) lost the taint at once
    name = cp.add_node()
    assert taints(kube, name) == set()
    del cluster


def test_daemonset_surge_brings_the_new_pod_up_before_deleting_the_old(sim: Sim) -> None:
    _, _, kube = sim
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    surge = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    kube.apply([driver(GOOD_IMAGE, updateStrategy=surge)])
    wait_for(lambda: healthy(kube, 1), what="generation 1")
    (rev1,) = {p["metadata"]["labels"]["controller-revision-hash"] for p in kube.pods(NS)}
    watcher = PodWatch(kube, NS)
    wait_for(lambda: len(watcher.events) >= 2, what="the watch to list the pods")
    set_image(kube, GOOD_IMAGE.replace("v1.0.0", "v1.0.1"))
    wait_for(lambda: healthy(kube, 2) and len(kube.pods(NS)) == 2, what="generation 2 rolled out")
    # The LIST can show the old pods gone before the watch has delivered their DELETED events.
    wait_for(
        lambda: sum(1 for e in watcher.events if e[0] == "DELETED") >= 2, what="the deletions on the watch"
    )
    watcher.stop()
    changes = [(t, n, r) for t, _, n, r in watcher.events if t in ("ADDED", "DELETED")]
    changes = [c for c in changes if not (c[0] == "ADDED" and c[2] == rev1)]
    for name in ("sim-node-0", "sim-node-1"):
        assert [t for t, n, _ in changes if n == name] == ["ADDED", "DELETED"]
