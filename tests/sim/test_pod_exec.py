"""`pods/NAME/exec` on the simulated cluster, through the official client's WebSocket stream."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from helpers import wait_for

from reconciler.cluster.client import ApiError, ClusterClient, exec_outcome
from reconciler.sim.controlplane import install
from reconciler.sim.podexec import container_env, run_command
from reconciler.sim.server import SimCluster

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "app:1",
                "env": [
                    {"name": "MODE", "value": "train"},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                ],
            },
            {"name": "side", "image": "side:1"},
        ]
    },
}


@pytest.fixture
def running() -> Iterator[tuple[SimCluster, ClusterClient]]:
    with SimCluster() as sim:
        plane = install(sim, nodes=1, devices_per_node=1, driver_preinstalled=True)
        try:
            client = ClusterClient.for_url(sim.url, retries=0)
            client.apply(POD)
            pods = client.resource_for("v1", "Pod")

            def is_running() -> bool:
                pod = client.get(pods, "default", "p") or {}
                return (pod.get("status") or {}).get("phase") == "Running"

            wait_for(is_running, timeout=15, what="the pod Running")
            yield sim, client
            client.close()
        finally:
            plane.stop()


def test_exec_runs_in_the_container_with_its_environment(running: tuple[SimCluster, ClusterClient]) -> None:
    _, client = running
    assert client.exec("default", "p", ["printenv", "MODE", "NODE"]) == "train\nsim-node-0\n"
    assert client.exec("default", "p", ["sh", "-c", "echo hello 'dra world'"]) == "hello dra world\n"
    assert "HOSTNAME=p\n" in client.exec("default", "p", ["env"], container="side")
    with pytest.raises(ApiError, match="exited with status 1"):
        client.exec("default", "p", ["false"])
    with pytest.raises(ApiError, match='could not run: .*exec: "nvidia-smi": executable file not found'):
        client.exec("default", "p", ["nvidia-smi"])
    with pytest.raises(ApiError, match="container nope is not valid for pod p"):
        client.exec("default", "p", ["env"], container="nope")
    with pytest.raises(ApiError, match="not found"):
        client.exec("default", "missing", ["env"])


def test_exec_needs_a_websocket_upgrade(running: tuple[SimCluster, ClusterClient]) -> None:
    sim, _ = running
    url = urlsplit(sim.url)
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=5) as conn:
        conn.sendall(
            b"POST /api/v1/namespaces/default/pods/p/exec?command=env HTTP/1.1\r\nHost: sim\r\n"
            b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and json.loads(body)["message"] == "Upgrade request required"


def test_discovery_lists_pods_exec(running: tuple[SimCluster, ClusterClient]) -> None:
    _, client = running
    core = client.request("GET", "/api/v1")
    exec_entry = next(r for r in core["resources"] if r["name"] == "pods/exec")
    assert exec_entry["verbs"] == ["create", "get"]


def test_devices_of_the_containers_claims_are_in_its_environment() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}}
    container = {"name": "c", "resources": {"claims": [{"name": "gpus"}, {"name": "nic", "request": "vf"}]}}
    gpus = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-3"},
                        {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-1"},
                    ]
                }
            }
        }
    }
    nic = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "pf", "driver": "nic.example.com", "pool": "n1", "device": "pf-0"},
                        {"request": "vf", "driver": "nic.example.com", "pool": "n1", "device": "vf-7"},
                    ]
                }
            }
        }
    }
    env = container_env(pod, container, {"gpus": gpus, "nic": nic})
    assert (env["GPU_DEVICE_0"], env["GPU_DEVICE_1"], env["NIC_DEVICE_0"]) == ("gpu-3", "gpu-1", "vf-7")
    assert "NIC_DEVICE_1" not in env  # only the request the container names
    assert run_command(["printenv", "GPU_DEVICE_0", "GPU_DEVICE_9"], env).code == 1
    assert run_command([], env).code is None
    assert run_command(["sh", "-c", "echo 'unclosed"], env).code == 2


def test_exec_outcome_reads_the_final_status() -> None:
    assert exec_outcome('{"metadata":{},"status":"Success"}') == (0, None)
    assert exec_outcome("") == (0, None)
    failed = {
        "status": "Failure",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }
    assert exec_outcome(json.dumps(failed)) == (3, None)
    assert exec_outcome('{"status":"Failure","message":"Internal error occurred: no such file"}') == (
        0,
        "Internal error occurred: no such file",
    )
    assert exec_outcome("not json")[1] == "unreadable exec status: not json"
