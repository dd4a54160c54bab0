"""Fixtures of the sim tests: the official client's CoreV1Api on a bare simulated API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from reconciler.sim.server import SimCluster


@pytest.fixture
def core(sim_cluster: SimCluster) -> Iterator[client.CoreV1Api]:
    cfg = client.Configuration(host=sim_cluster.url)
    cfg.retries = 0
    api = client.ApiClient(cfg)
    yield client.CoreV1Api(api)
    api.close()
