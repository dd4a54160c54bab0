"""Clusters of their own for the multi-cluster tests: a simulated cluster with nodes, the example driver
and kubelets, reached through a kubeconfig naming one context (as a mounted Secret holds it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster

NAMESPACE = "dra-gitops"


class Cluster:
    """A simulated cluster with nodes, driver and kubelets, reached through a kubeconfig whose only
    context has the cluster's name (as a mounted Secret would hold)."""

    def __init__(
        self, name: str, kubeconfig: Path, nodes: int = 2, devices_per_node: int = 2, driver: bool = False
    ) -> None:
        """`driver`: the example driver already runs (its ResourceSlices published), as in a cluster
        whose driver another team installed."""
        self.name = name
        self.sim = SimCluster().start()
        labels = [{"dra-gitops.io/canary": "true"}] + [{}] * (nodes - 1)
        self.plane: ControlPlane | None = install(
            self.sim,
            nodes=nodes,
            devices_per_node=devices_per_node,
            node_labels=labels,
            driver_preinstalled=driver,
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


def app_settings(remote: Any, value: str, subject: str | None = None) -> str:
    """`app/`: one namespace and a ConfigMap saying `value`, the same manifests for every environment;
    committed and pushed (the sha)."""
    folder = remote.work / "app"
    folder.mkdir(exist_ok=True)
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "app"},
            "data": {"value": value},
        },
    ]
    (folder / "settings.yaml").write_text(yaml.safe_dump_all(docs))
    return str(remote.commit_and_push(subject or f"settings: {value}"))
