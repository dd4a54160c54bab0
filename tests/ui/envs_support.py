"""The dashboard's two-cluster world: staging, then production, each in a simulated cluster of its own
(different sizes, so a map of the wrong cluster shows), run by one controller whose Leases live in a
third, as `dra-gitops run --config` runs them, its dashboard on the controller's port.

The history it leaves: commit one verified on staging and its rollback rehearsed, production awaiting
approval of it, approved (`dra-gitops approve`) and verified; commit two (its subject hostile) verified
on staging, production awaiting its approval. A second targets file, the `ui`'s, adds a target whose
cluster cannot be reached.
"""

from __future__ import annotations

import json
import socket
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cluster_support import Cluster, app_settings, write_kubeconfig
from helpers import GitRemote, wait_for
from ui_support import HOSTILE_SCRIPT

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.sim.server import SimCluster
from reconciler.ui.build import controller_dashboard

HOSTILE_SUBJECT = f"settings: two {HOSTILE_SCRIPT}"


@dataclass
class Envs:
    home: ClusterClient
    home_kubeconfig: Path
    clusters: dict[str, Cluster]  # staging, production
    config: Path  # the controller's targets file
    ui_config: Path  # the same targets and `lost`, whose cluster does not answer
    cache_dir: Path
    remote: GitRemote
    shas: dict[str, str]  # one, two
    port: int  # the controller's HTTP port: its dashboard

    def cli_json(self, *args: str, config: Path | None = None, kubeconfig: Path | None = None) -> Any:
        """A command's `-o json` output (exit code not judged); --config and --kubeconfig as given."""
        where = ["--config", str(config)] if config is not None else []
        done = CliRunner().invoke(
            cli, [*args, *where, "--kubeconfig", str(kubeconfig or self.home_kubeconfig), "-o", "json"]
        )
        assert done.stdout.strip(), done.output
        return json.loads(done.stdout)

    def status(self, target: str) -> Any:
        return self.cli_json("status", "--target", target, "--history", "100", config=self.config)

    def inventory(self, cluster: str) -> Any:
        return self.cli_json("inventory", kubeconfig=self.clusters[cluster].kubeconfig)


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envs]:
    root = tmp_path_factory.mktemp("ui-envs")
    made: dict[str, Cluster] = {}
    with SimCluster() as sim, ClusterClient.for_url(sim.url) as home:
        home_kubeconfig = write_kubeconfig(root / "home" / "kubeconfig", sim.url, "home")
        try:
            made["staging"] = Cluster("staging", root / "clusters" / "staging" / "kubeconfig", driver=True)
            made["production"] = Cluster(
                "production", root / "clusters" / "production" / "kubeconfig", nodes=3, driver=True
            )
            remote = GitRemote(root / "git")
            one = app_settings(remote, "one", "settings: one")
            targets_yaml = textwrap.dedent(f"""\
                defaults:
                  repo: {remote.url}
                  path: app
                  pollInterval: 1s
                  grace: 5s
                targets:
                  - name: staging
                    kubeconfig: {made["staging"].kubeconfig}
                    rehearseRollback: true
                  - name: production
                    kubeconfig: {made["production"].kubeconfig}
                    promoteFrom: staging
                    requireRehearsal: true
                    soak: 1s
                    approval: manual
                """)
            config = root / "targets.yaml"
            config.write_text(targets_yaml)
            lost = write_kubeconfig(
                root / "clusters" / "lost" / "kubeconfig", f"http://127.0.0.1:{closed_port()}", "lost"
            )
            ui_config = root / "ui-targets.yaml"
            ui_config.write_text(targets_yaml + f"  - name: lost\n    kubeconfig: {lost}\n")
            targets = load_targets(config.read_text(), str(config))
            options = ControllerOptions(
                cache_dir=root / "cache",
                port=0,
                stage_timeout=60,
                verify_timeout=60,
                check=CheckOptions(),
                kubeconfig=str(home_kubeconfig),
            )
            controller = Controller(home, targets, options)
            # As `run` wires it: the dashboard reads each target through the controller's clients.
            controller.server.pages = controller_dashboard(controller)
            port = controller.start()
            try:
                envs = Envs(
                    home, home_kubeconfig, made, config, ui_config, options.cache_dir, remote, {}, port
                )
                envs.shas["one"] = one
                staging, production = made["staging"], made["production"]
                verb = [
                    "--target",
                    "production",
                    "--config",
                    str(config),
                    "--kubeconfig",
                    str(home_kubeconfig),
                ]
                wait_for(lambda: staging.state("staging").last_good == one, 180, "staging verified one")
                wait_for(
                    lambda: (a := production.state("production").approval) is not None and a.sha == one,
                    180,
                    "production awaiting approval of one",
                )
                approved = CliRunner().invoke(cli, ["approve", one[:12], *verb])
                assert approved.exit_code == 0, approved.output
                wait_for(lambda: production.state("production").last_good == one, 180, "production verified")
                two = envs.shas["two"] = app_settings(remote, "two", HOSTILE_SUBJECT)
                wait_for(lambda: staging.state("staging").last_good == two, 180, "staging verified two")
                wait_for(
                    lambda: (a := production.state("production").approval) is not None and a.sha == two,
                    180,
                    "production awaiting approval of two",
                )
                yield envs
            finally:
                controller.stop()
        finally:
            for cluster in made.values():
                cluster.stop()
