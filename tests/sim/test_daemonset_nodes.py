"""The sim's DaemonSet controller picks nodes as kube-controller-manager's does, over real HTTP.

nodeSelector, required node affinity (an empty term matches no node), NoSchedule/NoExecute taints against
the template's tolerations plus the ones the controller adds to every daemon pod (network-unavailable only
with hostNetwork). `reconciler.cluster.readiness.nodefit`, which explains a driver that runs on no node, must count
the same nodes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.readiness import fitting_nodes
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

NS = "ds-nodes"
NODES = ("sim-node-0", "sim-node-1", "sim-node-2")


def daemonset(name: str, **pod_spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}], **pod_spec},
            },
        },
    }


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


GPU = {"matchExpressions": [expr("gpu", "In", "true")]}
DEDICATED = [{"key": "dedicated", "operator": "Exists"}]
N0, N1, N2 = NODES
# sim-node-0: gpu=true gpus=2, taint soft:PreferNoSchedule (never keeps a pod off);
# sim-node-1: gpu=true gpus=8, taint dedicated=ml:NoSchedule; sim-node-2: gpu=false, network unavailable.
CASES: dict[str, tuple[dict[str, Any], set[str]]] = {
    "everywhere": ({}, {N0}),
    "tolerates-everything": ({"tolerations": [{"operator": "Exists"}]}, {N0, N1, N2}),
    "tolerates-dedicated": (
        {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]},
        {N0, N1},
    ),
    "tolerates-another-value": (
        {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]},
        {N0},
    ),
    "selector": ({"nodeSelector": {"gpu": "true"}, "tolerations": DEDICATED}, {N0, N1}),
    "selector-network-unavailable": ({"nodeSelector": {"gpu": "false"}}, set()),
    "host-network": ({"nodeSelector": {"gpu": "false"}, "hostNetwork": True}, {N2}),
    "affinity-in": ({"affinity": required(GPU), "tolerations": DEDICATED}, {N0, N1}),
    "affinity-notin": (
        {"affinity": required({"matchExpressions": [expr("gpu", "NotIn", "true")]}), "hostNetwork": True},
        {N2},
    ),
    "affinity-gt": (
        {"affinity": required({"matchExpressions": [expr("gpus", "Gt", "4")]}), "tolerations": DEDICATED},
        {N1},
    ),
    "affinity-field": (
        {"affinity": required({"matchFields": [expr("metadata.name", "In", N2)]}), "hostNetwork": True},
        {N2},
    ),
    "affinity-empty-term": (
        {"affinity": required({}), "tolerations": [{"operator": "Exists"}]},
        set(),
    ),
    "affinity-empty-term-or-gpu": ({"affinity": required({}, GPU), "tolerations": DEDICATED}, {N0, N1}),
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[SimCluster, ClusterClient]]:
    with SimCluster() as sim:
        plane = install(
            sim,
            nodes=3,
            node_labels=[{"gpu": "true", "gpus": "2"}, {"gpu": "true", "gpus": "8"}, {"gpu": "false"}],
            components=("controller-manager",),
        )
        try:
            with ClusterClient.for_url(sim.url) as client:
                nodes = client.find_kind("", "Node")
                assert nodes is not None
                client.patch_merge(
                    nodes,
                    None,
                    "sim-node-0",
                    {"spec": {"taints": [{"key": "soft", "effect": "PreferNoSchedule"}]}},
                )
                client.patch_merge(
                    nodes,
                    None,
                    "sim-node-1",
                    {"spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}},
                )
                node2 = client.get(nodes, None, "sim-node-2")
                assert node2 is not None
                conditions = [
                    *node2["status"]["conditions"],
                    {"type": "NetworkUnavailable", "status": "True"},
                ]
                client.patch_merge(
                    nodes, None, "sim-node-2", {"status": {"conditions": conditions}}, subresource="status"
                )
                wait_for(
                    lambda: any(
                        t["key"] == "node.kubernetes.io/network-unavailable"
                        for t in (client.get(nodes, None, "sim-node-2") or {}).get("spec", {}).get("taints")
                        or []
                    ),
                    what="the network-unavailable taint on sim-node-2",
                )
                namespaces = client.find_kind("", "Namespace")
                assert namespaces is not None
                client.create(namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
                yield sim, client
        finally:
            plane.stop()


def desired(client: ClusterClient, name: str) -> int:
    resource = client.find_kind("apps", "DaemonSet")
    assert resource is not None

    def observed() -> int | None:
        live = client.get(resource, NS, name) or {}
        status = live.get("status") or {}
        if status.get("observedGeneration") != live["metadata"]["generation"]:
            return None
        return int(status["desiredNumberScheduled"]) + 1  # truthy for 0 as well

    return wait_for(observed, what=f"DaemonSet {name} observed") - 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_desired_pods_count_the_nodes_the_real_controller_would(
    cluster: tuple[SimCluster, ClusterClient], case: str
) -> None:
    _, client = cluster
    spec, expected = CASES[case]
    resource = client.find_kind("apps", "DaemonSet")
    assert resource is not None
    client.create(resource, daemonset(case, **copy.deepcopy(spec)))
    assert desired(client, case) == len(expected)
    nodes = client.list_kind("", "Node")
    assert set(fitting_nodes(spec, nodes)) == expected
