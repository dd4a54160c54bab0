"""Lease sharding with nothing but the reconciler's ServiceAccount token (deploy/base applied with kubectl
to the simulated cluster, whose RBAC authorizer behaves as kube-apiserver's): heartbeats created and
renewed, the Leases listed each round, targets shared, a dead replica's targets taken over and its
heartbeat removed; no request refused. `run --once` (tests/deploy/test_deploy_rbac.py) does not shard."""

from __future__ import annotations

from pathlib import Path

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

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.leasemanager import LeaseManager
from reconciler.cluster.leaseshard import heartbeat_name
from reconciler.sim.server import SimCluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)

TARGETS = {f"t{n}": (NAMESPACE, f"dra-gitops-t{n}") for n in range(4)}
TIMINGS = {"duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.3}


def test_sharding_needs_nothing_beyond_the_reconcilers_role(tmp_path: Path) -> None:
    with SimCluster(audit=True) as sim:
        admin = sim.write_kubeconfig(tmp_path / "admin.kubeconfig")
        applied = kubectl(admin, "apply", "-k", str(Path(__file__).resolve().parents[2] / "deploy/base"))
        assert applied.returncode == 0, applied.stderr
        token = request_token(admin, NAMESPACE, SERVICE_ACCOUNT)["status"]["token"]
        kubeconfig = token_kubeconfig(admin, token, tmp_path / "reconciler.kubeconfig")
        assert sim.api.audit is not None
        sim.api.audit.clear()
        clients = [ClusterClient.from_kubeconfig(str(kubeconfig), retries=0) for _ in range(2)]
        a, b = (
            LeaseManager(client, TARGETS, identity=name, replicas_namespace=NAMESPACE, **TIMINGS)
            for client, name in zip(clients, ("dra-gitops-0", "dra-gitops-1"), strict=True)
        )
        try:
            a.start()
            b.start()
            wait_for(
                lambda: len(a.held_targets()) == len(b.held_targets()) == 2, 60, "two targets each", 0.05
            )
            b.stop(release=False)  # killed
            wait_for(lambda: a.held_targets() == set(TARGETS), 60, "the survivor holding every target", 0.05)
            heartbeats = clients[0].resource_for("coordination.k8s.io/v1", "Lease")
            wait_for(
                lambda: clients[0].get(heartbeats, NAMESPACE, heartbeat_name("dra-gitops-1")) is None,
                60,
                "the dead replica's heartbeat removed",
            )
        finally:
            a.stop()
            b.stop()
            for client in clients:
                client.close()
        events = [e for e in sim.api.audit.events if e.user == RECONCILER_USER]
        refused = [e.to_json() for e in events if e.code in (401, 403) or not e.allowed]
        assert refused == []
        used = {(e.request.verb, e.request.resource) for e in events}
        for verb in ("list", "create", "update", "delete"):
            assert (verb, "leases") in used, verb
