"""`approve --config T --target production SHA` on a machine without a default kubeconfig, exactly as the
operator guide and the CI promote examples call it (issue 29, item 5): the target's cluster comes from the
config; the controller's is needed only to wake the controller. Without it the approval is recorded and the
command says the controller takes it at its next poll.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from controller_support import REPO

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.records import Approval, PromotionView
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.sim.server import SimCluster

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_approve_with_only_the_targets_cluster_records_the_approval(tmp_path: Path) -> None:
    with SimCluster() as sim, ClusterClient.for_url(sim.url) as client:
        kubeconfig = sim.write_kubeconfig(tmp_path / "production.kubeconfig")
        config = tmp_path / "targets.yaml"
        target = {
            "name": "production",
            "repo": "https://git.example.com/platform/dra-manifests.git",
            "kubeconfig": str(kubeconfig),
            "promoteFrom": "staging",
            "approval": "manual",
        }
        staging = {"name": "staging", "repo": target["repo"], "kubeconfig": str(kubeconfig)}
        config.write_text(yaml.safe_dump({"targets": [staging, target]}, sort_keys=False))
        store = StateStore(client, "production", "dra-gitops")
        store.save(
            TargetState(
                promotion=PromotionView(upstream="staging", eligible=SHA, waiting="approval"),
                approval=Approval(sha=SHA, since="2026-01-01T00:00:00Z"),
            )
        )
        home = tmp_path / "home"
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env.update(HOME=str(home), PYTHONPATH=str(REPO), RUST_BACKTRACE="0")
        command = [sys.executable, "-m", "reconciler", "approve", "--config", str(config)]
        done = subprocess.run(
            [*command, "--target", "production", SHA], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        assert "takes it at its next poll" in done.stderr, done.stderr
        approval = store.load().approval
        assert approval is not None and approval.sha == SHA and approval.approved_by
