"""The dashboard tests' world: a simulated cluster after a demo-like history, read by a dashboard.

One world per test session (its passes take a while): the example manifests applied (the shared claim
carrying a hostile annotation), a driver change denied (its commit message hostile), the change put
back, and a commit asking for more GPUs than exist applied, failed and rolled back. The Git cache of the
passes is the dashboard's, as in `dra-gitops run`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import GitRemote
from pass_support import EXAMPLE, TARGET, edit

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.config.targets import target_from_flags
from reconciler.loop.passes.keep import KeptRevision
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource
from reconciler.ui.app import Dashboard
from reconciler.ui.build import build_dashboard

# What would run if a page let markup through: each sets window.pwned and the title.
HOSTILE_SCRIPT = "<script>window.pwned=1;document.title='pwned'</script>"
HOSTILE_IMG = "<img src=x onerror=\"window.pwned=2;document.title='pwned'\">"
HOSTILE_MESSAGE = f"driver v0.4.0 {HOSTILE_SCRIPT} straight to main"
HOSTILE_ANNOTATION = f"team notes {HOSTILE_IMG}"
ANNOTATION_KEY = "example.com/notes"


@dataclass
class World:
    cluster: SimCluster
    client: ClusterClient
    remote: GitRemote
    kubeconfig: Path
    cache_dir: Path
    shas: dict[str, str]  # good, denied, restored, bad
    dashboard: Dashboard

    def cli_json(self, *args: str) -> Any:
        """A command's `-o json` output against the world's cluster (exit code not judged)."""
        import json

        done = CliRunner().invoke(cli, [*args, "--kubeconfig", str(self.kubeconfig), "-o", "json"])
        assert done.output.strip(), done.output
        return json.loads(done.stdout)


def _annotate(doc: dict[str, Any]) -> None:
    doc["metadata"].setdefault("annotations", {})[ANNOTATION_KEY] = HOSTILE_ANNOTATION


def _driver_image(image: str) -> Any:
    return lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image=image)


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("ui-world")
    with SimCluster() as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            kubeconfig = sim.write_kubeconfig(root / "kubeconfig")
            remote = GitRemote(root / "git")
            shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
            edit(remote, "30-claims/shared-gpu-claim.yaml", _annotate)
            cache_dir = root / "cache"
            with ClusterClient.for_url(sim.url) as client:
                source = GitSource(remote.url, cache_dir / TARGET, branch="main")
                options = ReconcileOptions(
                    DeliverOptions(target=TARGET, grace=5.0, stage_timeout=60, verify_timeout=60)
                )
                revisions = GitRevisions(source, kept=KeptRevision(client, TARGET))
                reconciler = Reconciler(client, revisions, options, CheckOptions())
                shas = {"good": remote.commit_and_push("example stack with notes on the shared claim")}
                assert reconciler.reconcile().outcome == "applied"
                original = "registry.example.com/gpu-example-driver:v0.3.0"
                edit(
                    remote,
                    "10-driver/kubelet-plugin.yaml",
                    _driver_image("registry.example.com/gpu-example-driver:v0.4.0"),
                )
                shas["denied"] = remote.commit_and_push(HOSTILE_MESSAGE)
                assert reconciler.reconcile().outcome == "denied"
                edit(remote, "10-driver/kubelet-plugin.yaml", _driver_image(original))
                shas["restored"] = remote.commit_and_push("driver back to v0.3.0")
                assert reconciler.reconcile().outcome == "applied"
                edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
                shas["bad"] = remote.commit_and_push("trainer: 4 replicas (5 GPUs needed, 4 exist)")
                result = reconciler.reconcile()
                assert result.outcome == "rolled-back", result.message
                revisions.close()
                target = target_from_flags(
                    repo=remote.url,
                    name=TARGET,
                    branch="main",
                    path=".",
                    state_namespace="dra-gitops",
                    grace=5.0,
                )
                dashboard = build_dashboard(client, targets=[target], cache_dir=cache_dir)
                yield World(sim, client, remote, kubeconfig, cache_dir, shas, dashboard)
        finally:
            plane.stop()
