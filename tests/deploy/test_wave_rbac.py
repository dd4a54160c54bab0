"""A driver upgrade wave, its drain and its probe, with nothing but the reconciler's ServiceAccount token.

deploy/base is applied with kubectl to the simulated cluster (RBAC enforced as kube-apiserver does, serving
DeviceTaintRules); an admin installs a driver DaemonSet in `gpu-system` with `updateStrategy: OnDelete` and
delivers a new template; then `run_wave` (reconciler/cluster/wave.py: drainDevices and a probe in the
reconciler's own namespace, reconciler/cluster/probe.py) runs with a client of the ServiceAccount's token.

Then: the wave passed and none of its requests was refused; every permission deploy/base grants for the
waves (WAVES) was used by it; and without any one permission the wave used (removed from every role that
grants it), the wave fails with Forbidden: the roles hold what the wave and the probe need, and what
deploy/base added for them is no more than that.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deploy_support import (
    KUBECTL,
    NAMESPACE,
    NO_KUBECTL,
    RECONCILER_USER,
    SERVICE_ACCOUNT,
    base_roles,
    kubectl,
    request_token,
    role_without,
    token_kubeconfig,
)
from helpers import wait_for
from wave_fixtures import plugin_daemonset

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.probe import PROBE_LABEL
from reconciler.cluster.wave import WaveResult, WaveTarget, run_wave
from reconciler.errors import DraGitopsError
from reconciler.model.driver_rollout import Probe
from reconciler.sim.audit import AuditEvent
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)

DRIVER_NS, DS, DRIVER = "gpu-system", "gpu-plugin", "gpu.example.com"
NODES = ("sim-node-0", "sim-node-1")
PROBE = Probe(DRIVER, "registry.example.com/gpu-probe:1")
Permission = tuple[str, str, str, str]  # (role, verb, apiGroup, resource)
ROLES = ("ClusterRole/dra-gitops", "ClusterRole/dra-gitops-managed", f"Role/{NAMESPACE}/dra-gitops")

# What deploy/base grants for the waves, each with the code that needs it (deploy/base/rbac.yaml says the same).
WAVES: dict[Permission, str] = {
    **{
        (
            "ClusterRole/dra-gitops",
            verb,
            "resource.k8s.io",
            "devicetaintrules",
        ): "wave.py drains a wave's pools"
        for verb in ("create", "patch", "delete")
    },
    (f"Role/{NAMESPACE}/dra-gitops", "create", "", "pods"): "probe.py: a probe pod per wave node",
    **{
        (f"Role/{NAMESPACE}/dra-gitops", verb, "resource.k8s.io", "resourceclaims"): "probe.py: its claims"
        for verb in ("list", "create", "delete")
    },
}


def daemonset(image: str) -> dict[str, Any]:
    return plugin_daemonset(image, DRIVER_NS, DS, DRIVER)


@dataclass
class Cluster:
    sim: SimCluster
    plane: ControlPlane
    admin: ClusterClient
    kubeconfig: Path
    roles: dict[str, dict[str, Any]]
    releases: int = 1

    def upgrade(self) -> None:
        """A new template for the plugin (OnDelete: nothing moves until the wave replaces the pods)."""
        self.releases += 1
        self.admin.apply(daemonset(f"registry.example.com/gpu-plugin:{self.releases}"))

    def tidy(self) -> None:
        """What a refused wave may leave: its taint rules, the probe's objects; then the plugin everywhere."""
        rules = self.admin.resource_for("resource.k8s.io/v1beta2", "DeviceTaintRule")
        for rule in self.admin.list(rules):
            self.admin.delete(rules, None, rule["metadata"]["name"])
        selector = f"{PROBE_LABEL}={DRIVER}"
        for kind, api in (("Pod", "v1"), ("ResourceClaim", "resource.k8s.io/v1")):
            resource = self.admin.resource_for(api, kind)
            for obj in self.admin.list(resource, NAMESPACE, label_selector=selector):
                self.admin.delete(resource, NAMESPACE, obj["metadata"]["name"])
        wait_for(lambda: plugin_ready(self.admin), 60, "the plugin Ready with its slices on every node")

    def wave(self, number: int) -> tuple[WaveResult | None, str, list[AuditEvent]]:
        """One wave with the ServiceAccount's token: its result (None: it raised), the error, the requests."""
        assert self.sim.api.audit is not None
        self.sim.api.audit.clear()
        target = WaveTarget(DRIVER_NS, DS, DRIVER, number, NODES, True, PROBE, probe_namespace=NAMESPACE)
        with ClusterClient.from_kubeconfig(str(self.kubeconfig), retries=0) as client:
            try:
                result, error = run_wave(client, target, timeout=60, poll=0.05), ""
            except DraGitopsError as exc:
                result, error = None, str(exc)
        events = [e for e in self.sim.api.audit.events if e.user == RECONCILER_USER]
        return result, error, events


def plugin_ready(client: ClusterClient) -> bool:
    pods = [p for p in client.list_kind("", "Pod", DRIVER_NS) if not p["metadata"].get("deletionTimestamp")]
    ready = {
        p["spec"].get("nodeName")
        for p in pods
        if any(
            c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])
        )
    }
    slices = {s["spec"]["nodeName"] for s in client.list_kind("resource.k8s.io", "ResourceSlice")}
    return ready == slices == set(NODES) and len(pods) == len(NODES)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("wave-rbac")
    with SimCluster(served_versions=("v1", "v1beta2"), audit=True) as sim:
        plane = install(sim, nodes=len(NODES), devices_per_node=2, drivers=(DRIVER,), time_scale=0.01)
        admin = ClusterClient.for_url(sim.url)
        try:
            admin_config = sim.write_kubeconfig(tmp / "admin.kubeconfig")
            applied = kubectl(
                admin_config, "apply", "-k", str(Path(__file__).resolve().parents[2] / "deploy/base")
            )
            assert applied.returncode == 0, applied.stderr
            token = request_token(admin_config, NAMESPACE, SERVICE_ACCOUNT)["status"]["token"]
            kubeconfig = token_kubeconfig(admin_config, token, tmp / "reconciler.kubeconfig")
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
            wait_for(lambda: plugin_ready(admin), 60, "the plugin Ready with its slices on every node")
            yield Cluster(sim, plane, admin, kubeconfig, base_roles())
        finally:
            plane.stop()
            admin.close()


def used(events: list[AuditEvent]) -> set[Permission]:
    return {
        (c.role, c.attributes.verb, c.attributes.api_group, c.attributes.combined_resource)
        for e in events
        for c in e.checks
        if c.allowed and c.role in ROLES and c.attributes.resource_request
    }


@pytest.fixture(scope="module")
def good_wave(cluster: Cluster) -> tuple[WaveResult | None, str, list[AuditEvent]]:
    cluster.upgrade()
    outcome = cluster.wave(1)
    cluster.tidy()
    return outcome


def test_the_wave_and_its_probe_pass_with_the_reconcilers_roles(
    good_wave: tuple[WaveResult | None, str, list[AuditEvent]],
) -> None:
    result, error, events = good_wave
    assert result is not None, error
    assert result.ok, (result.problem, result.failed_nodes)
    assert result.actions("sim-node-0") == [
        "taint",
        "delete-pod",
        "pod-ready",
        "slices-republished",
        "probe",
        "untaint",
    ]
    refused = [e.to_json() for e in events if e.code in (401, 403) or not e.allowed]
    assert refused == []
    for event in events:
        for check in event.checks:
            if check.attributes.resource_request:
                assert check.role in ROLES, (event.to_json(), check.reason)


def test_every_permission_granted_for_the_waves_is_used_by_a_wave(
    cluster: Cluster, good_wave: tuple[WaveResult | None, str, list[AuditEvent]]
) -> None:
    for permission in WAVES:
        role, verb, group, resource = permission
        assert any(
            verb in rule["verbs"] and group in rule["apiGroups"] and resource in rule["resources"]
            for rule in cluster.roles[role]["rules"]
        ), f"deploy/base does not grant {permission}"
    writes = {(e.request.verb, e.request.resource, e.request.namespace) for e in good_wave[2]}
    assert ("create", "pods", NAMESPACE) in writes and ("create", "resourceclaims", NAMESPACE) in writes
    assert not any(verb == "create" and ns == DRIVER_NS for verb, _, ns in writes)  # the probe stays home
    # each was asked for by the wave (whichever role allowed it: the managed set grants some of them too)
    asked = {(verb, group, resource) for _, verb, group, resource in used(good_wave[2])}
    unused = sorted(p for p in WAVES if p[1:] not in asked)
    assert unused == [], f"granted for the waves, asked for by no request of a wave: {unused}"


def _grants(role: dict[str, Any], permission: Permission) -> bool:
    _, verb, group, resource = permission
    return any(
        verb in rule["verbs"] and group in rule["apiGroups"] and resource in rule["resources"]
        for rule in role["rules"]
    )


def wave_needs() -> list[tuple[str, str, str]]:
    """(verb, apiGroup, resource) a good wave with its probe asks for: every one must be needed."""
    return sorted(
        {
            ("get", "apps", "daemonsets"),
            ("list", "apps", "controllerrevisions"),
            ("list", "", "pods"),
            ("delete", "", "pods"),
            ("create", "", "pods"),
            ("list", "", "nodes"),
            ("list", "resource.k8s.io", "resourceslices"),
            ("list", "resource.k8s.io", "deviceclasses"),
            ("create", "resource.k8s.io", "devicetaintrules"),
            ("patch", "resource.k8s.io", "devicetaintrules"),
            ("delete", "resource.k8s.io", "devicetaintrules"),
            ("list", "resource.k8s.io", "resourceclaims"),
            ("create", "resource.k8s.io", "resourceclaims"),
            ("delete", "resource.k8s.io", "resourceclaims"),
        }
    )


def test_the_list_of_what_a_wave_needs_is_what_it_asked_for(
    good_wave: tuple[WaveResult | None, str, list[AuditEvent]],
) -> None:
    asked = {(verb, group, resource) for _, verb, group, resource in used(good_wave[2])}
    assert asked == set(wave_needs())


@pytest.mark.parametrize("need", wave_needs(), ids=lambda n: f"{n[0]}:{n[2]}")
def test_without_any_permission_it_used_the_wave_fails_forbidden(
    cluster: Cluster, good_wave: tuple[WaveResult | None, str, list[AuditEvent]], need: tuple[str, str, str]
) -> None:
    verb, group, resource = need
    holding = {rid: role for rid, role in cluster.roles.items() if _grants(role, ("", verb, group, resource))}
    assert holding, f"no role grants {need}"
    cluster.upgrade()
    try:
        for role in holding.values():
            cluster.admin.apply(role_without(role, verb, group, resource))
        result, error, _ = cluster.wave(cluster.releases)
    finally:
        for role in holding.values():
            cluster.admin.apply(role)
        cluster.tidy()
    said = error or " ".join(
        [*(result.failed_nodes.values() if result else []), (result.problem or "") if result else ""]
    )
    assert result is None or not result.ok, f"the wave passed without {need}: it is not needed"
    assert "forbidden" in said.lower(), said


def test_probe_pods_may_be_created_in_the_reconcilers_namespace_only(cluster: Cluster) -> None:
    """Creating pods anywhere would let the reconciler run any ServiceAccount's pod: only its own namespace."""
    for rid, role in cluster.roles.items():
        if _grants(role, ("", "create", "", "pods")):
            assert rid == f"Role/{NAMESPACE}/dra-gitops", rid
    assert _grants(cluster.roles[f"Role/{NAMESPACE}/dra-gitops"], ("", "create", "", "pods"))
