"""Verification of the DRA chain against the simulated cluster over real HTTP, plus the pure chain check."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from helpers import load_documents as load
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.verify import (
    VERIFY_EXEC_ANNOTATION,
    ClaimEvidence,
    VerifyResult,
    chain_of,
    evidence_line,
    render_evidence,
    verify_workloads,
)
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

SHARED = Path(__file__).resolve().parents[1] / "data" / "dra-examples"
GPU = "gpu.example.com"


def inference(replicas: int = 2, cls: str | None = None) -> list[dict[str, Any]]:
    """DeviceClasses + Namespace + template + Deployment of the shared v1 example."""
    objs = load(SHARED / "v1" / "01-deviceclasses.yaml") + load(
        SHARED / "v1" / "02-claimtemplate-deployment.yaml"
    )
    objs[-1]["spec"]["replicas"] = replicas
    if cls is not None:
        objs[-2]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = cls
    return objs


Sim = tuple[SimCluster, ControlPlane, ClusterClient]


def start(**kw: Any) -> Iterator[Sim]:
    with SimCluster() as cluster:
        plane = install(cluster, **kw)
        client = ClusterClient.for_url(cluster.url)
        yield cluster, plane, client
        client.close()


@pytest.fixture
def sim() -> Iterator[Sim]:
    yield from start(nodes=1, devices_per_node=2, driver_preinstalled=True)


def apply_all(client: ClusterClient, objs: Sequence[dict[str, Any]]) -> None:
    for obj in objs:
        client.apply(obj)
        if obj["kind"] == "Namespace":
            name = obj["metadata"]["name"]
            wait_for(partial(client.list_kind, "", "ServiceAccount", name), what="default ServiceAccount")


def test_deployment_with_template_verifies_with_device_and_node(sim: Sim) -> None:
    _, _, client = sim
    objs = inference(replicas=2)
    apply_all(client, objs)
    result = verify_workloads(client, [objs[-1]], timeout=30, grace=5, poll=0.1)
    assert result.ok, render_evidence(result)
    assert result.diagnoses == [] and result.message == "verified 1 workload(s), 2 claim(s)"
    assert len(result.evidence) == 2
    devices = set()
    for e in result.evidence:
        assert e.ok and e.reserved and e.pod_ready and e.allocated
        assert e.node == e.pod_node == "sim-node-0"
        assert e.claim.startswith("inference/llm-server-") and "-accel-" in e.claim
        (device,) = e.devices
        devices.add(device)
    assert devices == {f"{GPU}/sim-node-0/gpu-0", f"{GPU}/sim-node-0/gpu-1"}
    text = render_evidence(result)
    lines = text.splitlines()
    for e in result.evidence:
        assert (
            f"Pod {e.pod}  claim {e.claim}  device {e.devices[0]}  node sim-node-0  reserved  ready" in lines
        )
    assert lines[-1] == result.message


def test_exhaustion_fails_fast_with_diagnosis(sim: Sim) -> None:
    _, _, client = sim
    objs = inference(replicas=3)
    apply_all(client, objs)
    t0 = time.monotonic()
    result = verify_workloads(client, [objs[-1]], timeout=120, grace=1.0, poll=0.1)
    elapsed = time.monotonic() - t0
    assert not result.ok
    assert elapsed < 15, f"took {elapsed:.1f}s: should stop right after the grace period, not at the timeout"
    assert 1.0 <= result.elapsed < 15
    assert "cannot allocate all claims" in result.terminal and "grace 1s" in result.terminal
    assert result.message.startswith("verification failed: pod inference/llm-server-")
    (diag,) = [d for d in result.diagnoses if d.mode == "exhaustion"]
    assert diag.numbers == {"needed": 1, "free": 0, "total": 2, "class": GPU}
    ok = [e for e in result.evidence if e.ok]
    stuck = [e for e in result.evidence if not e.ok]
    assert len(ok) == 2 and len(stuck) == 1 and stuck[0].problem == "claim not allocated"
    text = render_evidence(result)
    assert "not-reserved  not-ready  (claim not allocated)" in text
    assert "[exhaustion]" in text and "needed 1, free 0, total 2" in text


def test_exhaustion_waits_for_the_grace_period(sim: Sim) -> None:
    _, _, client = sim
    objs = inference(replicas=3)
    apply_all(client, objs)
    # grace longer than the timeout: the verdict is a timeout, and still diagnosed
    result = verify_workloads(client, [objs[-1]], timeout=1.0, grace=30.0, poll=0.1)
    assert not result.ok and result.terminal == ""
    assert result.message.startswith("verification timed out after 1s")
    assert [d.mode for d in result.diagnoses] == ["exhaustion"]


def test_missing_class_fails_immediately(sim: Sim) -> None:
    _, _, client = sim
    objs = inference(replicas=1, cls="gpu.nvidia.com")
    apply_all(client, objs)
    t0 = time.monotonic()
    result = verify_workloads(client, [objs[-1]], timeout=60, grace=60, poll=0.1)
    assert not result.ok and time.monotonic() - t0 < 10
    assert "DeviceClass gpu.nvidia.com, which does not exist" in result.terminal
    assert [d.mode for d in result.diagnoses] == ["missing-class"]


def test_driver_crash_loop_is_terminal() -> None:
    for _, plane, client in start(nodes=1, devices_per_node=2, driver_preinstalled=False):
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra-example-driver"}})
        (ds,) = load(SHARED / "driver" / "kubeletplugin-daemonset.yaml")
        client.apply(ds)
        wait_for(partial(client.list_kind, "resource.k8s.io", "ResourceSlice"), what="slice")
        plane.crash_driver(GPU)
        objs = inference(replicas=1)
        apply_all(client, objs)
        result = verify_workloads(client, [objs[-1]], timeout=60, grace=60, poll=0.1)
        assert not result.ok
        assert "CrashLoopBackOff" in result.terminal and "driver gpu.example.com" in result.terminal
        assert any(
            d.mode == "driver-not-installed" and "CrashLoopBackOff" in d.summary for d in result.diagnoses
        )


def test_plain_pod_with_named_claim_and_verify_exec(sim: Sim) -> None:
    # verify-exec runs over the exec WebSocket; the simulated container sees its device as the example
    # driver's CDI spec shows it: GPU_DEVICE_0=<device>.
    _, _, client = sim
    apply_all(client, inference(replicas=0)[:3])
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "inference"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}},
    }

    def probe(command: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "probe",
                "namespace": "inference",
                "annotations": {VERIFY_EXEC_ANNOTATION: command},
            },
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}],
                "containers": [{"name": "cuda", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            },
        }

    pod = probe("printenv GPU_DEVICE_0")
    apply_all(client, [claim, pod])
    result = verify_workloads(client, [pod], timeout=30, poll=0.1)
    assert result.ok, render_evidence(result)
    (e,) = result.evidence
    assert e.claim == "inference/shared" and e.devices[0].startswith(f"{GPU}/sim-node-0/gpu-")
    device = e.devices[0].rsplit("/", 1)[1]
    (seen,) = result.exec_results
    assert (seen.pod, seen.container, seen.ok, seen.output) == (
        "inference/probe",
        "cuda",
        True,
        f"{device}\n",
    )
    assert f"exec inference/probe [cuda] 'printenv GPU_DEVICE_0': ok  {device}" in render_evidence(result)

    # A tool the image does not have: the command cannot start, and verification says so.
    missing = probe("nvidia-smi -L")
    apply_all(client, [missing])
    failed = verify_workloads(client, [missing], timeout=30, poll=0.1)
    assert not failed.ok and failed.exec_results[0].ok is False
    assert failed.message.startswith("verification failed: verify-exec in inference/probe")
    assert 'exec: "nvidia-smi": executable file not found in $PATH' in failed.exec_results[0].output

    # A device that is not there: the command runs and exits 1.
    absent = probe("printenv GPU_DEVICE_1")
    apply_all(client, [absent])
    failed = verify_workloads(client, [absent], timeout=30, poll=0.1)
    assert not failed.ok and "exited with status 1" in failed.exec_results[0].output


def test_missing_template_times_out_with_pending_diagnosis(sim: Sim) -> None:
    _, _, client = sim
    objs = inference(replicas=1)
    apply_all(client, [o for o in objs if o["kind"] != "ResourceClaimTemplate"])
    result = verify_workloads(client, [objs[-1]], timeout=0.5, poll=0.1)
    assert not result.ok and result.message.startswith("verification timed out")
    assert "from template one-gpu not created yet" in result.evidence[0].problem
    (d,) = result.diagnoses
    assert d.mode == "pending" and "ResourceClaimTemplate inference/one-gpu does not exist" in d.summary


# ---- pure ------------------------------------------------------------------------------------------


def _pod(ready: bool = True, node: str | None = "n1") -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"nodeName": node, "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]},
        "status": {
            "phase": "Running" if ready else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "resourceClaimStatuses": [{"name": "g", "resourceClaimName": "p-g-x"}],
        },
    }


def _claim(node: str = "n1", reserved_uid: str = "u1") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "p-g-x", "namespace": "ns"},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "g", "driver": GPU, "pool": node, "device": "gpu-3"}]},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": reserved_uid}],
        },
    }


@pytest.mark.parametrize(
    ("pod", "claim", "problem"),
    [
        (_pod(), _claim(), ""),
        (_pod(), _claim(reserved_uid="other"), "claim not reserved for the pod"),
        (_pod(), _claim(node="n2"), "pod on node n1 but claim allocated on n2"),
        (_pod(ready=False), _claim(), "pod not Ready"),
        (_pod(node=None, ready=False), _claim(), "pod not scheduled"),
        (_pod(), None, "claim ns/p-g-x does not exist"),
    ],
)
def test_chain_of(pod: dict[str, Any], claim: dict[str, Any] | None, problem: str) -> None:
    claims = {("ns", "p-g-x"): claim} if claim else {}
    (e,) = chain_of(pod, claims)
    assert e.problem == problem


def test_chain_of_unallocated_and_not_created() -> None:
    c = _claim()
    c["status"] = {}
    (e,) = chain_of(_pod(ready=False, node=None), {("ns", "p-g-x"): c})
    assert e.problem == "claim not allocated" and not e.allocated
    p = copy.deepcopy(_pod(ready=False, node=None))
    p["status"]["resourceClaimStatuses"] = []
    (e,) = chain_of(p, {})
    assert e.claim == "ns/(not created)" and "not created yet" in e.problem


def test_evidence_line_and_render() -> None:
    (e,) = chain_of(_pod(), {("ns", "p-g-x"): _claim()})
    assert evidence_line(e) == f"Pod ns/p  claim ns/p-g-x  device {GPU}/n1/gpu-3  node n1  reserved  ready"
    plain = ClaimEvidence("ns/web", "", [], "n1", False, True, pod_node="n1")
    assert evidence_line(plain) == "Pod ns/web  no claims  node n1  ready"
    text = render_evidence(VerifyResult(True, [e, plain], [], "verified 2 workload(s), 1 claim(s)"))
    assert text.splitlines()[-1] == "verified 2 workload(s), 1 claim(s)"
