"""One wave of a driver upgrade (issue 32, reconciler/cluster/wave.py) against the simulated cluster: a driver
DaemonSet delivered with OnDelete and a new template, four nodes, the wave takes two of them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import wait_for
from wave_fixtures import plugin_daemonset

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.probe import PROBE_LABEL
from reconciler.cluster.wave import WaveRunner, WaveTarget, release_wave, run_wave
from reconciler.model.driver_rollout import Probe
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.controlplane.heartbeat import NODE_NOT_READY_MESSAGE
from reconciler.sim.server import SimCluster

NS, DS, DRIVER = "gpu-driver", "gpu-plugin", "gpu.example.com"
NODES = [f"sim-node-{i}" for i in range(4)]
WAVE = ("sim-node-0", "sim-node-1")


@dataclass
class Env:
    sim: SimCluster
    plane: ControlPlane
    client: ClusterClient


def daemonset(image: str) -> dict[str, Any]:
    return plugin_daemonset(image, NS, DS, DRIVER)


DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model != ""'
                }
            }
        ]
    },
}


def plugin_pods(client: ClusterClient) -> dict[str, dict[str, Any]]:
    out = {}
    for pod in client.list_kind("", "Pod", NS):
        if not pod["metadata"].get("deletionTimestamp") and pod["spec"].get("nodeName"):
            out[pod["spec"]["nodeName"]] = pod
    return out


def slices_by_node(client: ClusterClient) -> dict[str, dict[str, Any]]:
    return {s["spec"]["nodeName"]: s for s in client.list_kind("resource.k8s.io", "ResourceSlice")}


def ready_everywhere(client: ClusterClient) -> bool:
    pods = plugin_pods(client)
    ready = all(
        any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
        for p in pods.values()
    )
    return set(pods) == set(NODES) and ready and set(slices_by_node(client)) == set(NODES)


def start(served: tuple[str, ...] = ("v1", "v1beta2")) -> Iterator[Env]:
    sim = SimCluster(served_versions=served, audit=True).start()
    plane = install(sim, nodes=4, devices_per_node=2, drivers=(DRIVER,), time_scale=0.01)
    client = ClusterClient.for_url(sim.url)
    try:
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        client.apply(DEVICE_CLASS)
        client.apply(daemonset("registry.example.com/gpu-plugin:1"))
        wait_for(lambda: ready_everywhere(client), 30, "the plugin Ready with its slices on every node")
        yield Env(sim, plane, client)
    finally:
        plane.stop()
        sim.stop()
        client.close()


@pytest.fixture
def env() -> Iterator[Env]:
    yield from start()


def upgrade(env: Env) -> dict[str, dict[str, Any]]:
    """Deliver the new template (OnDelete: nothing moves); the plugin pods as they were."""
    before = plugin_pods(env.client)
    env.client.apply(daemonset("registry.example.com/gpu-plugin:2"))
    return before


def images(env: Env) -> dict[str, str]:
    return {
        node: pod["spec"]["containers"][0]["image"].rsplit(":", 1)[1]
        for node, pod in plugin_pods(env.client).items()
    }


def target(drain: bool = True) -> WaveTarget:
    return WaveTarget(NS, DS, DRIVER, 1, WAVE, drain_devices=drain)


def test_a_good_wave_drains_replaces_verifies_and_undrains_only_its_nodes(env: Env) -> None:
    before = upgrade(env)
    slices_before = slices_by_node(env.client)
    env.sim.api.audit.clear()  # type: ignore[union-attr]
    result = run_wave(env.client, target(), timeout=30, poll=0.05)
    assert result.ok, result
    for node in WAVE:
        assert result.actions(node) == ["taint", "delete-pod", "pod-ready", "slices-republished", "untaint"]
    assert images(env) == {"sim-node-0": "2", "sim-node-1": "2", "sim-node-2": "1", "sim-node-3": "1"}
    after = plugin_pods(env.client)
    for node in ("sim-node-2", "sim-node-3"):
        assert after[node]["metadata"]["uid"] == before[node]["metadata"]["uid"]
    slices_after = slices_by_node(env.client)
    for node in WAVE:  # republished by the new plugin, with the same devices
        assert slices_after[node]["metadata"]["uid"] != slices_before[node]["metadata"]["uid"]
        assert [d["name"] for d in slices_after[node]["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    assert env.client.list_kind("resource.k8s.io", "DeviceTaintRule") == []
    # what the server saw, in order: the taints, the old pods deleted, the taints removed
    writes = [
        (e.request.verb, e.request.resource, e.request.name)
        for e in env.sim.api.audit.events  # type: ignore[union-attr]
        if e.request.verb in ("patch", "delete") and e.request.resource in ("pods", "devicetaintrules")
    ]
    kinds = [(verb, resource) for verb, resource, _ in writes]
    assert (
        kinds
        == [("patch", "devicetaintrules")] * 2
        + [("delete", "pods")] * 2
        + [("delete", "devicetaintrules")] * 2
    )
    assert {name for _, _, name in writes[2:4]} == {before[n]["metadata"]["name"] for n in WAVE}


def test_the_taint_keeps_new_claims_off_the_wave_until_it_is_removed(env: Env) -> None:
    upgrade(env)
    pods_api = env.client.resource_for("v1", "Pod")
    claims_api = env.client.resource_for("resource.k8s.io/v1", "ResourceClaim")
    seen: dict[str, Any] = {}

    def probe_when_tainted(line: str) -> None:
        if "taint sim-node-0" not in line or "untaint" in line or seen:
            return
        # the devices are still published (the old plugin runs): only the taint can keep the claim off them
        env.client.create(
            claims_api,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "probe", "namespace": NS},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
            },
        )
        env.client.create(
            pods_api,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "probe", "namespace": NS},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": "sim-node-0"},
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "probe"}],
                    "containers": [
                        {"name": "p", "image": "probe", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                },
            },
        )

        def rejected() -> bool:
            pod = env.client.get(pods_api, NS, "probe") or {}
            conds = (pod.get("status") or {}).get("conditions") or []
            assert not pod.get("spec", {}).get("nodeName"), "scheduled onto a drained device"
            return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds)

        wait_for(rejected, 20, "the scheduler to turn the probe away from the tainted devices")
        seen["rejected"] = True

    result = WaveRunner(env.client, target(), timeout=30, poll=0.05, progress=probe_when_tainted).run()
    assert result.ok and seen == {"rejected": True}
    # the taint gone and the new plugin's devices published, the probe gets one
    wait_for(
        lambda: (env.client.get(pods_api, NS, "probe") or {}).get("spec", {}).get("nodeName"),
        30,
        "probe bound",
    )


def test_a_crash_looping_plugin_fails_its_nodes_and_leaves_the_drain_for_the_revert(env: Env) -> None:
    upgrade(env)
    env.plane.crash_image("gpu-plugin:2")
    result = run_wave(env.client, target(), timeout=30, poll=0.05)
    assert not result.ok and set(result.failed_nodes) == set(WAVE)
    assert all("CrashLoopBackOff" in evidence for evidence in result.failed_nodes.values()), (
        result.failed_nodes
    )
    assert result.actions("sim-node-0") == ["taint", "delete-pod", "node-failed"]
    left = {r["metadata"]["name"] for r in env.client.list_kind("resource.k8s.io", "DeviceTaintRule")}
    assert left == set(result.taint_rules) and len(left) == 2
    assert sorted(release_wave(env.client, result)) == sorted(left)
    assert env.client.list_kind("resource.k8s.io", "DeviceTaintRule") == []


def test_a_device_that_disappears_fails_the_node(env: Env) -> None:
    upgrade(env)
    assert env.plane.driver is not None
    env.plane.driver.configs[DRIVER].devices_per_node = 1
    result = run_wave(env.client, target(drain=False), timeout=30, poll=0.05)
    assert set(result.failed_nodes) == set(WAVE)
    assert "device(s) gpu-1 of pool sim-node-0 disappeared" in result.failed_nodes["sim-node-0"]
    assert result.taint_rules == [] and "taint" not in result.actions()


def test_an_attribute_a_class_selects_on_must_stay_others_may_change(env: Env) -> None:
    upgrade(env)
    assert env.plane.driver is not None
    config = env.plane.driver.configs[DRIVER]
    config.driver_version = "2.0.0"  # driverVersion: no class selects on it
    result = run_wave(env.client, WaveTarget(NS, DS, DRIVER, 1, ("sim-node-0",)), timeout=30, poll=0.05)
    assert result.ok, result.failed_nodes
    config.attributes = {"model": {"string": "OTHER-MODEL"}}  # the class selects on `model`
    result = run_wave(env.client, WaveTarget(NS, DS, DRIVER, 2, ("sim-node-1",)), timeout=30, poll=0.05)
    assert "attribute gpu.example.com/model of device gpu-0" in result.failed_nodes["sim-node-1"]


def test_drain_on_a_cluster_without_device_taint_rules_touches_nothing() -> None:
    for env in start(served=("v1",)):
        before = upgrade(env)
        result = run_wave(env.client, target(), timeout=10, poll=0.05)
        assert result.problem is not None and "serves no DeviceTaintRule" in result.problem
        assert not result.ok and result.steps == []
        assert {n: p["metadata"]["uid"] for n, p in plugin_pods(env.client).items()} == {
            n: p["metadata"]["uid"] for n, p in before.items()
        }


PROBE = Probe(DRIVER, "registry.example.com/gpu-probe:1")


def probe_objects(env: Env) -> list[dict[str, Any]]:
    selector = f"{PROBE_LABEL}={DRIVER}"
    return [
        *env.client.list_kind("", "Pod", NS, label_selector=selector),
        *env.client.list_kind("resource.k8s.io", "ResourceClaim", NS, label_selector=selector),
    ]


def test_the_probe_runs_on_the_new_plugin_s_devices_before_the_taint_is_removed(env: Env) -> None:
    upgrade(env)
    lines: list[str] = []
    result = run_wave(
        env.client,
        WaveTarget(NS, DS, DRIVER, 1, WAVE, drain_devices=True, probe=PROBE),
        timeout=30,
        poll=0.05,
        progress=lines.append,
    )
    assert result.ok, result.failed_nodes
    for node in WAVE:
        assert result.actions(node) == [
            "taint",
            "delete-pod",
            "pod-ready",
            "slices-republished",
            "probe",
            "untaint",
        ]
    # the probe got a device of the node's drained pool (it tolerates the wave's own taint)
    assert any(f"wave 1: probe sim-node-0: pod Running, claim {NS}/" in line for line in lines), lines
    assert any(f"allocated {DRIVER}/sim-node-0/gpu-" in line for line in lines), lines
    wait_for(lambda: not probe_objects(env), 30, "the probe's pods and claims deleted")


def test_a_failing_probe_fails_its_nodes_and_leaves_the_drain_for_the_revert(env: Env) -> None:
    upgrade(env)
    env.plane.crash_image("gpu-probe:bad")
    bad = Probe(DRIVER, "registry.example.com/gpu-probe:bad")
    result = run_wave(env.client, WaveTarget(NS, DS, DRIVER, 1, WAVE, True, bad), timeout=30, poll=0.05)
    assert set(result.failed_nodes) == set(WAVE)
    assert result.actions("sim-node-1") == [
        "taint",
        "delete-pod",
        "pod-ready",
        "slices-republished",
        "probe-failed",
        "node-failed",
    ]
    evidence = result.failed_nodes["sim-node-1"]
    assert evidence.startswith("probe on sim-node-1: phase Failed"), evidence
    assert "container probe terminated Error (exit code 1)" in evidence
    assert len(result.taint_rules) == 2
    wait_for(lambda: not probe_objects(env), 30, "the failed probe's pods and claims deleted")


def test_a_node_that_goes_not_ready_mid_wave_fails_with_its_condition(env: Env) -> None:
    upgrade(env)

    def cut(line: str) -> None:
        # its new plugin just went Ready: the node goes NotReady before the wave is done with it
        if line.startswith("wave 1: pod-ready sim-node-1:"):
            env.plane.set_node_ready("sim-node-1", False)

    result = run_wave(env.client, target(), timeout=30, poll=0.05, progress=cut)
    assert set(result.failed_nodes) == {"sim-node-1"}
    evidence = result.failed_nodes["sim-node-1"]
    since = r"\d{4}-\d\d-\d\dT[\d:]+Z"
    assert re.fullmatch(
        rf"node sim-node-1 is not Ready since {since}: KubeletNotReady: {re.escape(NODE_NOT_READY_MESSAGE)}",
        evidence,
    ), evidence
    # failed whether or not its slices were already seen republished (the same poll may have read them)
    actions = result.actions("sim-node-1")
    assert actions[:3] == ["taint", "delete-pod", "pod-ready"] and actions[-1] == "node-failed", actions
    assert result.actions("sim-node-0") == ["taint", "delete-pod", "pod-ready", "slices-republished"]
    assert len(result.taint_rules) == 2 and "untaint" not in result.actions()  # kept for the revert


def test_a_node_not_ready_after_its_slices_fails_before_the_untaint(env: Env) -> None:
    upgrade(env)

    def cut(line: str) -> None:
        if line.startswith("wave 1: slices-republished sim-node-0:"):
            env.plane.set_node_ready("sim-node-0", False)

    result = run_wave(env.client, target(), timeout=30, poll=0.05, progress=cut)
    assert set(result.failed_nodes) == {"sim-node-0"}
    assert result.failed_nodes["sim-node-0"].startswith("node sim-node-0 is not Ready since ")
    assert result.actions("sim-node-0")[-2:] == ["slices-republished", "node-failed"]
    assert "untaint" not in result.actions()


def test_a_node_not_ready_when_the_wave_starts_is_failed_and_left_alone(env: Env) -> None:
    before = upgrade(env)
    env.plane.set_node_ready("sim-node-1", False)
    result = run_wave(env.client, target(), timeout=30, poll=0.05)
    assert set(result.failed_nodes) == {"sim-node-1"}
    assert result.failed_nodes["sim-node-1"].startswith("node sim-node-1 is not Ready since ")
    assert result.actions("sim-node-1") == ["node-failed"]  # no taint, no pod deleted
    assert result.actions("sim-node-0") == ["taint", "delete-pod", "pod-ready", "slices-republished"]
    assert plugin_pods(env.client)["sim-node-1"]["metadata"]["uid"] == before["sim-node-1"]["metadata"]["uid"]
    rules = env.client.list_kind("resource.k8s.io", "DeviceTaintRule")
    assert [r["spec"]["deviceSelector"]["pool"] for r in rules] == ["sim-node-0"]  # kept for the revert
    assert result.taint_rules == [r["metadata"]["name"] for r in rules]
