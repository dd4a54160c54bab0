"""`dra-gitops approve` needs the operator role of deploy/operator and nothing more: the approval is
written to the target's state ConfigMap (and the holder of its Lease asked for a pass). Run as a real
process with nothing but a ServiceAccount token bound to that role, on the simulated cluster (RBAC
enforced as kube-apiserver does); without the role it is refused with Forbidden and writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deploy_support import (
    KUBECTL,
    NAMESPACE,
    NO_KUBECTL,
    ROOT,
    explain,
    kustomize,
    request_token,
    token_kubeconfig,
)

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.records import Approval, PromotionView
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.sim.server import SimCluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)

OPERATOR = "dra-operator"
SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def operator_docs() -> list[dict[str, Any]]:
    """deploy/operator, its binding bound to a ServiceAccount of the test; and a ServiceAccount bound to nothing."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        *(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NAMESPACE}}
            for name in (OPERATOR, "nobody")
        ),
    ]
    for doc in kustomize("operator"):
        if doc["kind"] == "RoleBinding":
            doc = {**doc, "subjects": [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NAMESPACE}]}
        docs.append(doc)
    return docs


def approve(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUST_BACKTRACE": "0"}
    env.pop("KUBECONFIG", None)
    args = ["approve", SHA[:12], "--target", "production", "--state-namespace", NAMESPACE]
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_approve_needs_only_the_operator_role(tmp_path: Path) -> None:
    with SimCluster(audit=True) as sim:
        admin = sim.write_kubeconfig(tmp_path / "admin.kubeconfig")
        with ClusterClient.for_url(sim.url) as client:
            for doc in operator_docs():
                client.apply(doc)
            # The state a promoted target's pass leaves when a commit awaits approval.
            store = StateStore(client, "production", NAMESPACE)
            waiting = TargetState(
                promotion=PromotionView(upstream="staging", eligible=SHA, waiting="approval"),
                approval=Approval(sha=SHA, since="2026-01-01T00:00:00Z"),
            )
            store.save(waiting)
            tokens = {
                name: token_kubeconfig(
                    admin,
                    request_token(admin, NAMESPACE, name)["status"]["token"],
                    tmp_path / f"{name}.kubeconfig",
                )
                for name in (OPERATOR, "nobody")
            }

            refused = approve(tokens["nobody"])
            assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), explain(refused)
            assert store.load().approval == Approval(sha=SHA, since="2026-01-01T00:00:00Z")

            done = approve(tokens[OPERATOR])
            assert done.returncode == 0, explain(done)
            approval = store.load().approval
            assert approval is not None and approval.sha == SHA
            assert (
                approval.approved_by
                and f"system:serviceaccount:{NAMESPACE}:{OPERATOR}" in approval.approved_by
            )
            record = store.load().history[0]
            assert (record.operation, record.outcome, record.requested_by) == (
                "approve",
                "approved",
                approval.approved_by,
            )
