"""Shared fixtures: a simulated cluster on a random port, started in a thread for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reconciler.sim.server import SimCluster


@pytest.fixture
def sim_cluster() -> Iterator[SimCluster]:
    """An API-only simulated cluster (no control plane) on 127.0.0.1; stopped after the test."""
    with SimCluster() as cluster:
        yield cluster


@pytest.fixture
def sim_url(sim_cluster: SimCluster) -> str:
    return sim_cluster.url
