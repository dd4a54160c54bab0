"""One `Controller` running a staging and a production target from a `--config` file, polling only once an
hour: staging's verified commit wakes production at once, production looks again when the soak ends, and
`dra-gitops approve` (the command, over HTTP to the cluster) wakes it through its Lease to deliver."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import GitRemote, wait_for

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.sim.server import SimCluster


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    with SimCluster() as cluster:
        yield cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig")


def settings(remote: GitRemote, stage: str, value: str) -> None:
    """The stage's folder: its own namespace and one ConfigMap saying `value`."""
    folder = remote.work / stage
    folder.mkdir(exist_ok=True)
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"app-{stage}"}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": f"app-{stage}"},
            "data": {"value": value},
        },
    ]
    (folder / "settings.yaml").write_text(yaml.safe_dump_all(docs))


def test_staging_wakes_production_which_soaks_then_waits_for_approve(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = sim
    remote = GitRemote(tmp_path / "git")
    for stage in ("staging", "production"):
        settings(remote, stage, "one")
    sha = remote.commit_and_push("settings: one")
    config = tmp_path / "targets.yaml"
    config.write_text(
        textwrap.dedent(f"""\
        defaults:
          repo: {remote.url}
          pollInterval: 1h
          grace: 5s
        targets:
          - name: staging
            path: staging
          - name: production
            path: production
            promoteFrom: staging
            soak: 2s
            approval: manual
        """)
    )
    targets = load_targets(config.read_text(), str(config))
    with ClusterClient.for_url(cluster.url) as client:
        options = ControllerOptions(
            cache_dir=tmp_path / "cache", port=0, stage_timeout=60, verify_timeout=60, check=CheckOptions()
        )
        controller = Controller(client, targets, options)
        passes: list[str] = []
        controller.pass_listeners.append(lambda name, result: passes.append(f"{name} {result.outcome}"))

        def production() -> TargetState:
            return StateStore(client, "production").load()

        controller.start()
        try:
            wait_for(lambda: StateStore(client, "staging").load().last_good == sha, 60, "staging verified")
            # Woken by staging, not by its hourly poll: soaking first, then (woken when the soak ends)
            # awaiting approval.
            wait_for(lambda: "production awaiting-approval" in passes, 60, "production awaiting approval")
            state = production()
            assert state.approval is not None and state.approval.sha == sha and state.last_good is None
            assert [r.outcome for r in state.history] == ["awaiting-approval"]
            production_passes = [p for p in passes if p.startswith("production")]
            # Unless the machine took the whole soak to start it, the pass staging woke was soaking, and the
            # soak's end woke the next one, long before the hourly poll.
            assert production_passes[-1] == "production awaiting-approval", passes
            assert set(production_passes[:-1]) <= {"production unchanged", "production soaking"}, passes

            status = CliRunner().invoke(
                cli, ["status", "--target", "production", "--kubeconfig", str(kubeconfig)]
            )
            assert f"awaiting:    approval of {sha}" in status.output, status.output
            done = CliRunner().invoke(
                cli,
                [
                    "approve",
                    sha[:12],
                    "--target",
                    "production",
                    "--config",
                    str(config),
                    "--kubeconfig",
                    str(kubeconfig),
                ],
            )
            assert done.exit_code == 0, done.output
            assert f"production: {sha} approved by" in done.output
            wait_for(lambda: production().last_good == sha, 60, "production delivered once approved")
            live = client.get(client.resource_for("v1", "ConfigMap"), "app-production", "settings")
            assert live is not None and live["data"] == {"value": "one"}
            again = CliRunner().invoke(
                cli, ["approve", sha, "--target", "production", "--kubeconfig", str(kubeconfig)]
            )
            assert again.exit_code == 1
            assert "is the last good commit already: nothing to approve" in again.output
        finally:
            controller.stop()
