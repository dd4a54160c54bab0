"""Staging, then production, as one controller runs them: two clusters of their own (each a `SimCluster`
with nodes, driver and kubelets, reached through its kubeconfig), the controller's Leases in a third, one
Git repository, and a forge recording the commit statuses. Push → staging verified → its rollback
rehearsed → production awaits approval → `dra-gitops approve` → production verified; a commit staging
could not verify never reaches production, and the forge shows each step as `dra-gitops/<target>`."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from cluster_support import Cluster, app_settings, write_kubeconfig
from helpers import GitRemote, wait_for
from notify_support import Recorder

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.sim.server import SimCluster

TOKEN = "forge-token-0123456789"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[ClusterClient, Path]]:
    """The controller's own cluster: only the Leases live here."""
    with SimCluster() as sim, ClusterClient.for_url(sim.url) as client:
        yield client, write_kubeconfig(tmp_path / "home" / "kubeconfig", sim.url, "home")


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[dict[str, Cluster]]:
    made: dict[str, Cluster] = {}
    try:
        for name in ("staging", "production"):
            made[name] = Cluster(name, tmp_path / "clusters" / name / "kubeconfig")
        yield made
    finally:
        for cluster in made.values():
            cluster.stop()


def live_value(cluster: Cluster) -> str | None:
    live = cluster.client.get(cluster.client.resource_for("v1", "ConfigMap"), "app", "settings")
    return None if live is None else live["data"]["value"]


def statuses(forge: Recorder, context: str) -> list[tuple[str, str]]:
    """(sha, state) of every commit status the forge received for `context`, in order."""
    found = []
    for request in forge.requests():
        body = request.json()
        if body.get("context") == context:
            found.append((request.path.rsplit("/", 1)[-1], body["state"]))
    return found


def test_a_commit_goes_through_staging_rehearsal_and_approval_to_production(
    home: tuple[ClusterClient, Path], clusters: dict[str, Cluster], tmp_path: Path
) -> None:
    home_client, home_kubeconfig = home
    staging, production = clusters["staging"], clusters["production"]
    remote = GitRemote(tmp_path / "git")
    one = app_settings(remote, "one")
    (tmp_path / "token").write_text(TOKEN)
    with Recorder() as forge:
        config = tmp_path / "targets.yaml"
        config.write_text(
            textwrap.dedent(f"""\
            defaults:
              repo: {remote.url}
              path: app
              pollInterval: 1s
              grace: 5s
              commitStatus:
                provider: gitea
                apiUrl: {forge.url}/api/v1
                repository: platform/dra
                tokenFile: {tmp_path / "token"}
            targets:
              - name: staging
                kubeconfig: {staging.kubeconfig}
                rehearseRollback: true
              - name: production
                kubeconfig: {production.kubeconfig}
                promoteFrom: staging
                requireRehearsal: true
                soak: 1s
                approval: manual
            """)
        )
        targets = load_targets(config.read_text(), str(config))
        options = ControllerOptions(
            cache_dir=tmp_path / "cache",
            port=0,
            stage_timeout=60,
            verify_timeout=60,
            check=CheckOptions(),
            kubeconfig=str(home_kubeconfig),
        )
        controller = Controller(home_client, targets, options)
        verb = ["--config", str(config), "--kubeconfig", str(home_kubeconfig)]
        controller.start()
        try:
            # Staging verifies the commit and rehearses its rollback, in its own cluster.
            wait_for(lambda: staging.state("staging").last_good == one, 120, "staging verified")
            record = staging.state("staging").history[0]
            assert record.sha == one and record.rehearsal is not None and record.rehearsal["ok"] is True
            assert live_value(staging) == "one"
            # Production waits for a person, with nothing written to its cluster.
            wait_for(
                lambda: (a := production.state("production").approval) is not None and a.sha == one,
                120,
                "production awaiting approval",
            )
            assert production.state("production").last_good is None and live_value(production) is None
            status = CliRunner().invoke(cli, ["status", "--target", "production", *verb])
            assert f"approval of {one}" in status.output, status.output

            approved = CliRunner().invoke(cli, ["approve", one[:12], "--target", "production", *verb])
            assert approved.exit_code == 0, approved.output
            wait_for(lambda: production.state("production").last_good == one, 120, "production verified")
            assert live_value(production) == "one"
            assert production.state("production").history[0].approval is not None

            # A commit staging cannot read is held there and never offered to production.
            (remote.work / "app" / "broken.yaml").write_text("kind: ConfigMap\nmetadata: [oops\n")
            broken = remote.commit_and_push("a manifest that does not parse")
            wait_for(
                lambda: (a := staging.state("staging").last_attempted) is not None and a.sha == broken,
                120,
                "staging refused the broken commit",
            )
            assert staging.state("staging").last_attempted.outcome == "invalid"
            (remote.work / "app" / "broken.yaml").unlink()
            two = app_settings(remote, "two")
            wait_for(lambda: staging.state("staging").last_good == two, 120, "staging verified the fix")
            wait_for(
                lambda: (a := production.state("production").approval) is not None and a.sha == two,
                120,
                "production awaiting approval of the fix",
            )
            refused = CliRunner().invoke(cli, ["approve", broken, "--target", "production", *verb])
            assert refused.exit_code == 1, refused.output
            approved = CliRunner().invoke(cli, ["approve", two, "--target", "production", *verb])
            assert approved.exit_code == 0, approved.output
            wait_for(lambda: production.state("production").last_good == two, 120, "production verified two")
            assert live_value(production) == "two"
            assert broken not in {r.sha for r in production.state("production").history}

            # The forge saw each step, in order, per environment.
            wait_for(
                lambda: statuses(forge, "dra-gitops/production")[-1:] == [(two, "success")],
                30,
                "production's success reported",
            )
        finally:
            controller.stop()
        on_staging = statuses(forge, "dra-gitops/staging")
        assert on_staging == [
            (one, "pending"),
            (one, "success"),
            (broken, "pending"),
            (broken, "failure"),
            (two, "pending"),
            (two, "success"),
        ], on_staging
        on_production = statuses(forge, "dra-gitops/production")
        for sha in (one, two):
            # Awaiting approval, then delivering, then verified.
            assert [state for s, state in on_production if s == sha] == ["pending", "pending", "success"]
        assert {r.headers["Authorization"] for r in forge.requests()} == {f"token {TOKEN}"}
    # Nothing of the targets' in the controller's cluster but their Leases.
    assert not home_client.list_kind("", "ConfigMap", "dra-gitops")
