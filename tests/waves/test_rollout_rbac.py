"""A whole driver rollout in waves and its revert (reconciler/cluster/waverollout.py), with nothing but the
reconciler's ServiceAccount token: deploy/base applied with kubectl to the simulated cluster (RBAC enforced as
kube-apiserver does), an admin delivers a new template to an OnDelete driver DaemonSet, the rollout runs its
waves (drain, probe in the reconciler's namespace), then the admin puts the old template back and the revert
runs. Besides what one wave needs (tests/deploy/test_wave_rbac.py), the rollout reads the DaemonSet, its
ControllerRevisions, its canaries, the Nodes, and lists and removes its DeviceTaintRules: none is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deploy_support import (
    KUBECTL,
    NAMESPACE,
    NO_KUBECTL,
    RECONCILER_USER,
    SERVICE_ACCOUNT,
    kubectl,
    request_token,
    token_kubeconfig,
)
from helpers import wait_for
from wave_fixtures import plugin_daemonset

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.waverollout import WaveControl, run_rollout
from reconciler.model.driver_rollout import Probe, RolloutSpec, Wave
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)

DRIVER_NS, DS, DRIVER = "gpu-system", "gpu-plugin", "gpu.example.com"
NODES = [f"sim-node-{i}" for i in range(3)]
SPEC = RolloutSpec(
    waves=(Wave(1, False), Wave(100, True)),
    drain_devices=True,
    probe=Probe(DRIVER, "registry.example.com/gpu-probe:1"),
)


def daemonset(image: str) -> dict[str, Any]:
    return plugin_daemonset(image, DRIVER_NS, DS, DRIVER)


def images(client: ClusterClient) -> dict[str, str]:
    return {
        p["spec"]["nodeName"]: p["spec"]["containers"][0]["image"].rsplit(":", 1)[1]
        for p in client.list_kind("", "Pod", DRIVER_NS)
        if p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])
        )
    }


def test_a_rollout_and_its_revert_with_the_reconcilers_roles(tmp_path: Path) -> None:
    with SimCluster(served_versions=("v1", "v1beta2"), audit=True) as sim:
        plane = install(sim, nodes=len(NODES), devices_per_node=2, drivers=(DRIVER,), time_scale=0.01)
        admin = ClusterClient.for_url(sim.url)
        try:
            admin_config = sim.write_kubeconfig(tmp_path / "admin.kubeconfig")
            base = Path(__file__).resolve().parents[2] / "deploy/base"
            applied = kubectl(admin_config, "apply", "-k", str(base))
            assert applied.returncode == 0, applied.stderr
            token = request_token(admin_config, NAMESPACE, SERVICE_ACCOUNT)["status"]["token"]
            kubeconfig = token_kubeconfig(admin_config, token, tmp_path / "reconciler.kubeconfig")
            admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DRIVER_NS}})
            admin.apply(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": DRIVER},
                    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
                }
            )
            admin.apply(daemonset("registry.example.com/gpu-plugin:1"))
            wait_for(lambda: images(admin) == dict.fromkeys(NODES, "1"), 60, "the plugin Ready everywhere")
            assert sim.api.audit is not None
            with ClusterClient.from_kubeconfig(str(kubeconfig), retries=0) as client:
                resource = client.resource_for("apps/v1", "DaemonSet")
                admin.apply(daemonset("registry.example.com/gpu-plugin:2"))
                sim.api.audit.clear()
                control = WaveControl(probe_namespace=NAMESPACE, poll=0.05, wave_timeout=60)
                outcome = run_rollout(client, client.get(resource, DRIVER_NS, DS) or {}, SPEC, control)
                assert outcome.error is None and not outcome.not_needed, outcome
                assert images(admin) == dict.fromkeys(NODES, "2")
                # the revert: the old template back (as the rollback re-applies it), its pods replaced
                admin.apply(daemonset("registry.example.com/gpu-plugin:1"))
                revert = WaveControl(revert=True, poll=0.05, wave_timeout=60)
                outcome = run_rollout(client, client.get(resource, DRIVER_NS, DS) or {}, SPEC, revert)
                assert outcome.error is None, outcome
                wait_for(lambda: images(admin) == dict.fromkeys(NODES, "1"), 60, "the old plugin back")
            mine = [e for e in sim.api.audit.events if e.user == RECONCILER_USER]
            refused = [e.to_json() for e in mine if e.code in (401, 403) or not e.allowed]
            assert refused == []
            asked = {(e.request.verb, e.request.resource) for e in mine}
            for needed in [("list", "controllerrevisions"), ("list", "daemonsets"), ("list", "nodes")]:
                assert needed in asked, asked
            assert ("list", "devicetaintrules") in asked and ("delete", "pods") in asked
        finally:
            plane.stop()
            admin.close()
