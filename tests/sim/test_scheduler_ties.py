"""The simulated scheduler breaks ties between nodes that score equal best at random, reproducibly with
a seed, and spreads a ReplicaSet's pods by default, over real HTTP."""

from __future__ import annotations

from typing import Any

from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def _node_of_one_pod(seed: int) -> str:
    with SimCluster() as cluster:
        plane = install(cluster, nodes=3, components=("controller-manager", "scheduler"), scheduler_seed=seed)
        try:
            with ClusterClient.for_url(cluster.url) as client:
                client.apply(_pod("p"))
                pods = client.find_kind("", "Pod")
                assert pods is not None
                wait_for(lambda: ((client.get(pods, "default", "p") or {}).get("spec") or {}).get("nodeName"))
                return str(client.get(pods, "default", "p")["spec"]["nodeName"])
        finally:
            plane.stop()


def test_equal_nodes_are_picked_at_random_and_a_seed_repeats_the_pick() -> None:
    picks = [_node_of_one_pod(seed) for seed in range(8)]
    assert len(set(picks)) > 1, picks  # three equal nodes: not always the same one
    assert _node_of_one_pod(3) == picks[3]


def test_a_replicasets_pods_spread_over_the_nodes() -> None:
    with SimCluster() as cluster:
        plane = install(cluster, nodes=3, components=("controller-manager", "scheduler"), scheduler_seed=1)
        try:
            with ClusterClient.for_url(cluster.url) as client:
                client.apply(
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "metadata": {"name": "web", "namespace": "default"},
                        "spec": {
                            "replicas": 3,
                            "selector": {"matchLabels": {"app": "web"}},
                            "template": {
                                "metadata": {"labels": {"app": "web"}},
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "m",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": "2"}},
                                        }
                                    ]
                                },
                            },
                        },
                    }
                )
                pods = client.find_kind("", "Pod")
                assert pods is not None

                def nodes() -> list[str]:
                    items = client.list(pods, "default") or []
                    return [str((p.get("spec") or {}).get("nodeName") or "") for p in items]

                wait_for(lambda: len(nodes()) == 3 and all(nodes()), what="three bound pods")
                assert sorted(nodes()) == ["sim-node-0", "sim-node-1", "sim-node-2"]
        finally:
            plane.stop()
