"""Two controllers on two clusters, neither holding the other's credentials: staging publishes what it
verified to Git (`publishVerified`), production follows that ref (`promoteFrom: {ref: ...}`). Real
`Controller`s (threads, Leases, polling) on two simulated clusters, one bare Git repository."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from helpers import GitRemote, wait_for
from pass_support import EXAMPLE, edit
from promotion_support import sim_client

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.errors import EnvironmentProblem
from reconciler.loop.config.gates import Gates
from reconciler.loop.config.targets import Target
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.source.remote import GitSource

REF = "refs/dra-gitops/staging/verified"


def controller(client: ClusterClient, target: Target, cache: Path) -> Controller:
    options = ControllerOptions(
        cache_dir=cache,
        port=0,
        identity=target.name,
        stage_timeout=60,
        verify_timeout=60,
        check=CheckOptions(),
    )
    return Controller(client, [target], options)


def published(remote: GitRemote) -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", REF], cwd=remote.bare, capture_output=True, text=True
    )
    return done.stdout.strip() or None


@pytest.fixture
def clusters() -> Iterator[tuple[ClusterClient, ClusterClient]]:
    with ExitStack() as stack:
        yield sim_client(stack), sim_client(stack)


def test_production_follows_the_ref_staging_publishes_and_never_takes_what_failed_there(
    clusters: tuple[ClusterClient, ClusterClient], remote: GitRemote, tmp_path: Path
) -> None:
    staging_client, production_client = clusters
    good = remote.commit_and_push("example")
    staging = controller(
        staging_client,
        Target(
            name="staging", repo=remote.url, grace=5.0, poll_interval=1.0, gates=Gates(publish_verified=True)
        ),
        tmp_path / "staging",
    )
    production = controller(
        production_client,
        Target(
            name="production", repo=remote.url, grace=5.0, poll_interval=1.0, gates=Gates(upstream_ref=REF)
        ),
        tmp_path / "production",
    )

    def state(client: ClusterClient, name: str) -> TargetState:
        return StateStore(client, name).load()

    staging.start()
    production.start()
    try:
        wait_for(lambda: state(production_client, "production").last_good == good, 120, "production on good")
        assert published(remote) == good
        record = state(staging_client, "staging").history[0]
        assert record.published == {"ref": REF, "sha": good}
        promoted = state(production_client, "production").history[0].promoted
        assert promoted is not None and promoted["from"] == REF

        edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
        bad = remote.commit_and_push("trainer: 4 replicas (5 GPUs needed, 4 exist)")
        wait_for(
            lambda: (a := state(staging_client, "staging").last_attempted) and a.sha == bad and a.rolled_back,
            120,
            "staging to roll the bad commit back",
        )
        edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=2))
        edit(
            remote,
            "40-workloads/trainer.yaml",
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=20"]),
        )
        fixed = remote.commit_and_push("trainer: 2 replicas, 20 epochs")
        wait_for(
            lambda: state(production_client, "production").last_good == fixed, 120, "production on the fix"
        )
        assert published(remote) == fixed
        seen = state(production_client, "production")
        assert bad not in {r.sha for r in seen.history}
        assert [r.sha for r in seen.history if r.operation == "apply"] == [fixed, good]
    finally:
        staging.stop()
        production.stop()


def test_a_published_ref_only_moves_forward(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    older = remote.commit_and_push("example")
    newer = remote.commit_and_push("one more")
    with GitSource(remote.url, tmp_path / "cache", branch="main") as source:
        source.fetch()
        assert source.fetch_ref(REF) is None
        source.publish(older, REF)
        source.publish(newer, REF)
        assert published(remote) == newer
        with pytest.raises(EnvironmentProblem, match="fast-forward only"):
            source.publish(older, REF)
        assert published(remote) == newer
        assert source.fetch_ref(REF) == newer
