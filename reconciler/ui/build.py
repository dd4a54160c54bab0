"""The dashboard of a set of targets: their states from the cluster, their commits from Git caches.

`run` passes its own cache directory (its workers keep each target's bare clone there and fetch it); `ui`
passes one of its own and fetches it when a page names a commit it lacks. A target naming a cluster of its
own is read there: `run` passes the controller's clients of those clusters, `ui` builds its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reconciler.cluster.client import ClusterClient
from reconciler.loop.config.targets import Target
from reconciler.loop.run.clusters import TargetClusters
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.worker import git_source_for
from reconciler.ui.app import Dashboard
from reconciler.ui.auth import Access
from reconciler.ui.gather import ClusterData
from reconciler.ui.places import READ_TIMEOUT, Place, home_place, target_places
from reconciler.ui.reports import GitCache, GitReports


def build_dashboard(
    client: ClusterClient,
    *,
    targets: Sequence[Target] | None = None,
    state_namespace: str = "dra-gitops",
    cache_dir: Path | None = None,
    fetch: bool = False,
    token: str | None = None,
    access: Access | None = None,
    clusters: TargetClusters | None = None,
    home_label: str = "the controller's cluster",
    read_timeout: float = READ_TIMEOUT,
) -> Dashboard:
    """`targets` None: every target whose state is in `state_namespace` (commits then stay unknown);
    `clusters`: the clients of the targets' own clusters (else every target is read through `client`);
    `read_timeout`: each request's deadline (`places.py`)."""
    git = None
    if targets is not None and cache_dir is not None:
        caches = {}
        for target in targets:
            source = git_source_for(target, cache_dir)
            caches[target.name] = GitCache(
                repo=source.cache_dir, subdir=source.path, fetch=source.fetch if fetch else None
            )
        git = GitReports(caches)
    wanted = [(t.name, t.state_namespace) for t in targets] if targets is not None else None
    home = home_place(client, home_label, read_timeout)
    places: list[Place] = [home]
    place_of: dict[str, Place] = {}
    if targets is not None and clusters is not None:
        places, place_of = target_places(home, targets, clusters.client)
    data = ClusterData(
        client, targets=wanted, state_namespace=state_namespace, git=git, places=places, place_of=place_of
    )
    return Dashboard(data, token, access)


def controller_dashboard(
    controller: Controller, token: str | None = None, access: Access | None = None
) -> Dashboard:
    """`run`'s dashboard: the workers' Git caches (they fetch, it does not), and each target's state and
    devices read through the controller's own client of that target's cluster."""
    return build_dashboard(
        controller.client,
        targets=controller.targets,
        cache_dir=controller.options.cache_dir,
        token=token,
        access=access,
        clusters=controller.clusters,
    )
