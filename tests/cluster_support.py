"""Clusters of their own for the multi-cluster tests: a simulated cluster with nodes, the example driver
and kubelets, reached through a kubeconfig naming one context (as a mounted Secret holds it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.cluster.client import ClusterClient
from reconciler.loop.state import StateStore
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

NAMESPACE = "dra-gitops"


class Cluster:
    """A simulated cluster with nodes, driver and kubelets, reached through a kubeconfig whose only
    context has the cluster's name (as a mounted Secret would hold)."""

    def __init__(self, name: str, kubeconfig: Path) -> None:
        self.name = name
        self.sim = SimCluster().start()
        self.plane: ControlPlane | None = install(
            self.sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}]
        )
        self.kubeconfig = write_kubeconfig(kubeconfig, self.sim.url, name)
        self.client = ClusterClient.for_url(self.sim.url)

    def stop(self) -> None:
        if self.plane is not None:
            self.plane.stop()
            self.plane = None
        self.sim.stop()
        self.client.close()

    def state(self, target: str) -> Any:
        return StateStore(self.client, target, NAMESPACE).load()

    def configmaps(self) -> set[str]:
        return {c["metadata"]["name"] for c in self.client.list_kind("", "ConfigMap", NAMESPACE)}


def write_kubeconfig(path: Path, server: str, context: str) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": "reconciler", "user": {}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": "reconciler"}}],
        "current-context": context,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
