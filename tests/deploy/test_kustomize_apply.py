"""deploy/ applies cleanly with `kubectl apply -k` to `dra-gitops sim serve` (a real process, the real
kubectl), the reconciler's Deployment rolls out there, and applying again changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from deploy_support import DEPLOY, KUBECTL, NAMESPACE, NO_KUBECTL, ROOT, kubectl, kustomize

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)


@dataclass
class Served:
    kubeconfig: Path
    audit_log: Path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    kubeconfig = tmp_path / "sim.kubeconfig"
    audit_log = tmp_path / "audit.jsonl"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "reconciler", "sim", "serve",
            "--kubeconfig-out", str(kubeconfig),
            "--audit-log", str(audit_log),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield Served(kubeconfig, audit_log)
    finally:
        process.terminate()
        process.wait(timeout=10)


def apply(served: Served, *args: str) -> list[str]:
    done = kubectl(served.kubeconfig, "apply", *args)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    return done.stdout.splitlines()


def test_base_applies_rolls_out_and_reapplies_unchanged(served: Served) -> None:
    objects = kustomize("base")
    first = apply(served, "-k", str(DEPLOY / "base"))
    assert len(first) == len(objects) and all(line.endswith(" created") for line in first), first
    rollout = kubectl(
        served.kubeconfig, "-n", NAMESPACE, "rollout", "status", "deployment/dra-gitops", "--timeout=60s"
    )
    assert rollout.returncode == 0, rollout.stderr + rollout.stdout
    pods = json.loads(kubectl(served.kubeconfig, "-n", NAMESPACE, "get", "pods", "-o", "json").stdout)
    assert len(pods["items"]) == 2
    again = apply(served, "-k", str(DEPLOY / "base"))
    assert all(line.endswith(" unchanged") for line in again), again


def test_opa_overlay_adds_the_sidecar(served: Served) -> None:
    apply(served, "-k", str(DEPLOY / "base"))
    changed = apply(served, "-k", str(DEPLOY / "overlays" / "opa"))
    assert "deployment.apps/dra-gitops configured" in changed
    deployment = json.loads(
        kubectl(served.kubeconfig, "-n", NAMESPACE, "get", "deployment", "dra-gitops", "-o", "json").stdout
    )
    spec = deployment["spec"]["template"]["spec"]
    build, opa = spec["initContainers"]
    # The bundle is built first, from the reconciler's own image: the same policies by construction.
    assert build["image"] == spec["containers"][0]["image"]
    assert build["args"][:2] == ["policy", "bundle"] and "--output=/bundle/dra-gitops.tar.gz" in build["args"]
    assert opa["name"] == "opa" and opa["restartPolicy"] == "Always"
    assert opa["image"].startswith("openpolicyagent/opa:") and not opa["image"].endswith(":latest")
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["DRA_GITOPS_OPA_URL"] == "http://127.0.0.1:8181"
    assert "--addr=127.0.0.1:8181" in opa["args"]
    assert opa["args"][opa["args"].index("--bundle") + 1] == "/bundle/dra-gitops.tar.gz"
    assert opa["readinessProbe"]["httpGet"]["path"] == "/health?bundles"


def test_signed_opa_overlay_verifies_a_bundle_from_a_configmap(served: Served) -> None:
    apply(served, "-k", str(DEPLOY / "base"))
    apply(served, "-k", str(DEPLOY / "overlays" / "opa-signed"))
    deployment = json.loads(
        kubectl(served.kubeconfig, "-n", NAMESPACE, "get", "deployment", "dra-gitops", "-o", "json").stdout
    )
    spec = deployment["spec"]["template"]["spec"]
    (opa,) = spec["initContainers"]
    assert "--verification-key=/keys/public.pem" in opa["args"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["opa-bundle"]["configMap"]["name"] == "dra-gitops-opa-bundle"
    assert "emptyDir" not in volumes["opa-bundle"]


def test_server_side_apply_of_everything(served: Served) -> None:
    """What a GitOps tool (or the reconciler itself) would do with these manifests."""
    for kustomization in ("base", "overlays/opa", "reader"):
        out = apply(
            served, "--server-side", "--field-manager=dra-gitops-install", "-k", str(DEPLOY / kustomization)
        )
        assert out and all(line.endswith(("serverside-applied", "unchanged")) for line in out), out


def test_the_sim_audit_log_names_who_applied_what(served: Served) -> None:
    apply(served, "-k", str(DEPLOY / "reader"))
    events = [json.loads(line) for line in served.audit_log.read_text().splitlines()]
    created = {
        (e["objectRef"]["resource"], e["objectRef"].get("name", ""))
        for e in events
        if e["verb"] == "create" and e["responseStatus"]["code"] == 201
    }
    assert {("namespaces", ""), ("serviceaccounts", ""), ("clusterroles", "")} <= created
    assert {e["user"]["username"] for e in events} == {"kubernetes-admin"}
    assert all(e["annotations"]["authorization.k8s.io/decision"] == "allow" for e in events)
