"""A server-side apply that re-states what is stored stays a no-op a second later (kube-apiserver keeps the
managedFields times when they are all that would change), also where the server defaults inside an atomic
list the manifest leaves out (ResourceClaim requests: allocationMode, count)."""

from __future__ import annotations

import time

from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.sim.server import SimCluster

CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c1", "namespace": "default", "labels": {"a": "1"}},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
}


def test_reapplying_a_defaulted_claim_a_second_later_keeps_its_resource_version() -> None:
    with SimCluster() as sim, ClusterClient.for_url(sim.url) as client:
        first = client.apply(CLAIM)
        second = int(time.time())  # managedFields times have a resolution of one second: the next one
        wait_for(lambda: int(time.time()) > second, 5, "the next second")
        again = client.apply(CLAIM)
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        assert again["metadata"]["managedFields"] == first["metadata"]["managedFields"]
