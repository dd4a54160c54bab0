"""The probe of a wave (issue 32, reconciler/cluster/probe.py) against the simulated cluster: a ResourceClaim of
the probe's class and a pod of its image on each wave node must allocate and run; the evidence names the node
and says why; what the probe created is deleted whatever the outcome."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.probe import PROBE_LABEL, TAINT_KEY, run_probe
from reconciler.model.driver_rollout import Probe
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

NS, DRIVER = "gpu-driver", "gpu.example.com"
GPU_NODES = ["sim-node-0", "sim-node-1", "sim-node-2"]  # sim-node-3 has no device of the driver
PROBE = Probe(DRIVER, "registry.example.com/gpu-probe:1")


@dataclass
class Env:
    sim: SimCluster
    plane: ControlPlane
    client: ClusterClient


def device_class(name: str, model: str | None = None) -> dict[str, Any]:
    expression = f'device.driver == "{DRIVER}"'
    if model is not None:
        expression += f' && device.attributes["{DRIVER}"].model == "{model}"'
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def start(served: tuple[str, ...] = ("v1", "v1beta2")) -> Iterator[Env]:
    sim = SimCluster(served_versions=served, audit=True).start()
    plane = install(
        sim,
        nodes=4,
        drivers=({"name": DRIVER, "nodes": GPU_NODES, "preinstalled": True},),
        # a node whose hostname label is not its name (--hostname-override): the probe pins by name
        node_labels={"sim-node-2": {"kubernetes.io/hostname": "gpu-host-2"}},
        time_scale=0.01,
    )
    client = ClusterClient.for_url(sim.url)
    try:
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        classes = client.resource_for(f"resource.k8s.io/{served[0]}", "DeviceClass")
        body = device_class(DRIVER)
        client.create(classes, {**body, "apiVersion": classes.api_version})
        wait_for(
            lambda: len(client.list_kind("resource.k8s.io", "ResourceSlice")) == len(GPU_NODES),
            30,
            "the driver's slices on its nodes",
        )
        yield Env(sim, plane, client)
    finally:
        plane.stop()
        sim.stop()
        client.close()


@pytest.fixture
def env() -> Iterator[Env]:
    yield from start()


def leftovers(env: Env) -> list[str]:
    """The probe's pods and claims still in the cluster (being deleted or not)."""
    selector = f"{PROBE_LABEL}={DRIVER}"
    pods = env.client.list_kind("", "Pod", NS, label_selector=selector)
    claims = env.client.list_kind("resource.k8s.io", "ResourceClaim", NS, label_selector=selector)
    return [f"{o['kind']}/{o['metadata']['name']}" for o in [*pods, *claims]]


class Seen:
    """A progress callback that keeps the probe's pods and claims as they are when it reports a node."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.lines: list[str] = []
        self.objects: dict[str, dict[str, Any]] = {}

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        selector = f"{PROBE_LABEL}={DRIVER}"
        for kind, group in (("Pod", ""), ("ResourceClaim", "resource.k8s.io")):
            for obj in self.env.client.list_kind(group, kind, NS, label_selector=selector):
                self.objects[f"{kind}/{obj['metadata']['name']}"] = obj

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for key, o in sorted(self.objects.items()) if key.startswith(f"{kind}/")]


def test_the_probe_allocates_and_runs_on_each_node_then_deletes_what_it_made(env: Env) -> None:
    seen = Seen(env)
    verdicts = run_probe(
        env.client, NS, DRIVER, ["sim-node-0", "sim-node-2"], PROBE, time.monotonic() + 30, progress=seen
    )
    assert verdicts == {"sim-node-0": None, "sim-node-2": None}
    assert any(line.startswith("probe sim-node-2: pod Running, claim ") for line in seen.lines), seen.lines
    assert any(f"allocated {DRIVER}/sim-node-0/gpu-" in line for line in seen.lines), seen.lines
    pods = seen.of_kind("Pod")
    assert len(pods) == 2
    for pod in pods:
        spec = pod["spec"]
        # through the scheduler (which allocates the claim), pinned by a required node affinity
        assert pod["status"]["phase"] == "Running" and spec["restartPolicy"] == "Never"
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (node,) = term["nodeSelectorTerms"][0]["matchFields"]
        assert node["key"] == "metadata.name" and node["values"][0] in ("sim-node-0", "sim-node-2")
        assert spec["containers"][0]["image"] == PROBE.image
    claims = seen.of_kind("ResourceClaim")
    assert len(claims) == 2 and all(c["status"]["allocation"] for c in claims)
    for claim in claims:
        request = claim["spec"]["devices"]["requests"][0]
        assert claim["apiVersion"] == "resource.k8s.io/v1"
        assert request["exactly"]["tolerations"] == [
            {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        ]
    wait_for(lambda: not leftovers(env), 30, "the probe's pods and claims gone")


def test_a_class_with_no_device_on_the_node_fails_that_node_with_the_evidence(env: Env) -> None:
    verdicts = run_probe(env.client, NS, DRIVER, ["sim-node-0", "sim-node-3"], PROBE, time.monotonic() + 3)
    assert verdicts["sim-node-0"] is None
    evidence = verdicts["sim-node-3"] or ""
    assert evidence.startswith("probe on sim-node-3: did not allocate and run within 3s"), evidence
    assert f"claim {NS}/dra-gitops-probe-sim-node-3-" in evidence and ": not allocated" in evidence
    # the scheduler's word for it (its FailedScheduling event says the same: not repeated)
    assert (
        "PodScheduled=False Unschedulable: 0/4 nodes are available: 1 cannot allocate all claims, "
        "3 node(s) didn't match Pod's node affinity/selector." in evidence
    ), evidence
    assert "event FailedScheduling" not in evidence
    wait_for(lambda: not leftovers(env), 30, "the failed probe's pods and claims gone too")


def test_a_probe_image_that_fails_fails_the_node_on_that_not_the_deadline(env: Env) -> None:
    env.plane.crash_image("gpu-probe:bad")
    bad = Probe(DRIVER, "registry.example.com/gpu-probe:bad")
    verdicts = run_probe(env.client, NS, DRIVER, ["sim-node-1"], bad, time.monotonic() + 120)
    evidence = verdicts["sim-node-1"] or ""
    assert evidence.startswith("probe on sim-node-1: phase Failed"), evidence
    assert "container probe terminated Error (exit code 1)" in evidence, evidence
    assert "bound to sim-node-1" in evidence  # it got there (and its device): the image failed
    wait_for(lambda: not leftovers(env), 30, "the probe's pods and claims gone")


def taint_rule(name: str, key: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": node},
            "taint": {"key": key, "value": "wave-1", "effect": "NoSchedule"},
        },
    }


def test_the_probe_lands_on_the_waves_drained_devices_and_only_tolerates_that_taint(env: Env) -> None:
    env.client.apply(taint_rule("wave", TAINT_KEY, "sim-node-0"))
    env.client.apply(taint_rule("maintenance", "example.com/maintenance", "sim-node-1"))
    verdicts = run_probe(env.client, NS, DRIVER, ["sim-node-0", "sim-node-1"], PROBE, time.monotonic() + 3)
    assert verdicts["sim-node-0"] is None
    evidence = verdicts["sim-node-1"] or ""
    assert "did not allocate and run" in evidence and "not allocated" in evidence, evidence


def test_leftovers_of_a_killed_probe_are_deleted_first(env: Env) -> None:
    labels = {PROBE_LABEL: DRIVER}
    claims = env.client.resource_for("resource.k8s.io/v1", "ResourceClaim")
    pods = env.client.resource_for("v1", "Pod")
    env.client.create(
        claims,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "old-probe", "namespace": NS, "labels": labels},
            "spec": {"devices": {"requests": [{"name": "probe", "exactly": {"deviceClassName": DRIVER}}]}},
        },
    )
    env.client.create(
        pods,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "old-probe",
                "namespace": NS,
                "labels": labels,
                "annotations": {"dra-gitops.io/probe-node": "sim-node-0"},
            },
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": "sim-node-0"},
                "resourceClaims": [{"name": "probe", "resourceClaimName": "old-probe"}],
                "containers": [{"name": "p", "image": "probe", "resources": {"claims": [{"name": "probe"}]}}],
            },
        },
    )
    assert run_probe(env.client, NS, DRIVER, ["sim-node-0"], PROBE, time.monotonic() + 30) == {
        "sim-node-0": None
    }
    wait_for(lambda: not leftovers(env), 30, "the old probe and the new one gone")


def test_an_older_served_version_gets_the_flat_request() -> None:
    for env in start(served=("v1beta1",)):
        seen = Seen(env)
        verdicts = run_probe(
            env.client, NS, DRIVER, ["sim-node-2"], PROBE, time.monotonic() + 30, progress=seen
        )
        assert verdicts == {"sim-node-2": None}
        (claim,) = seen.of_kind("ResourceClaim")
        assert claim["apiVersion"] == "resource.k8s.io/v1beta1"
        request = claim["spec"]["devices"]["requests"][0]
        assert request["deviceClassName"] == DRIVER and "exactly" not in request
        assert request["tolerations"] == [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
        wait_for(lambda e=env: not leftovers(e), 30, "the probe's pods and claims gone")
