"""Staging and production as two simulated clusters following one Git repository, each target reconciled
by a real `Reconciler` over GitSource (the way `dra-gitops run` builds it); production reads what staging
verified from staging's state, through the staging cluster's own client."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from helpers import GitRemote

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.config.gates import Gates
from reconciler.loop.passes.keep import KeptRevision
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.loop.promotion.upstream import state_reader
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource


@dataclass
class Stage:
    name: str
    client: ClusterClient
    reconciler: Reconciler

    def state(self) -> TargetState:
        return StateStore(self.client, self.name).load()


def sim_client(stack: ExitStack) -> ClusterClient:
    """A cluster of two nodes with two devices each (the example needs 3), and a client of it."""
    sim = stack.enter_context(SimCluster())
    plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
    stack.callback(plane.stop)
    return stack.enter_context(ClusterClient.for_url(sim.url))


def stage(name: str, client: ClusterClient, remote: GitRemote, cache: Path, gates: Gates) -> Stage:
    source = GitSource(remote.url, cache / name, branch="main")
    options = ReconcileOptions(
        DeliverOptions(target=name, grace=5.0, stage_timeout=60, verify_timeout=60), gates=gates
    )
    revisions = GitRevisions(source, kept=KeptRevision(client, name))
    return Stage(name, client, Reconciler(client, revisions, options, CheckOptions()))


def two_stages(
    remote: GitRemote, cache: Path, staging_gates: Gates, production_gates: Gates
) -> Iterator[tuple[Stage, Stage]]:
    with ExitStack() as stack:
        staging = stage("staging", sim_client(stack), remote, cache, staging_gates)
        production = stage("production", sim_client(stack), remote, cache, production_gates)
        production.reconciler.upstream = state_reader(staging.client, "staging", "dra-gitops")
        yield staging, production


def production_source(stage: Stage) -> GitSource:
    """The GitSource a stage's reconciler reads (what a ref it follows is fetched through)."""
    source = stage.reconciler.source
    assert isinstance(source, GitRevisions)
    return source.source
