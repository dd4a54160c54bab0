"""The simulated kube-controller-manager: workloads → pods, pod claims from templates, claim cleanup.

Each controller lives in its own module (deployments, daemonsets, batch, claims); this class runs them
in one pass on every change of a watched kind (and every ``interval`` seconds, for the clocks).
"""

from __future__ import annotations

from reconciler.sim.controlplane.batch import StatefulSetJobControl
from reconciler.sim.controlplane.claims import PodClaimControl
from reconciler.sim.controlplane.daemonsets import DaemonSetControl
from reconciler.sim.controlplane.deployments import DeploymentControl
from reconciler.sim.controlplane.nodelifecycle import NodeLifecycleControl
from reconciler.sim.controlplane.objects import RESOURCE, condition, is_terminating, md, node_ready


class ControllerManager(
    NodeLifecycleControl, DeploymentControl, DaemonSetControl, StatefulSetJobControl, PodClaimControl
):
    name = "controller-manager"
    watches = frozenset(
        {
            ("", "namespaces"),
            ("", "pods"),
            ("", "nodes"),
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "daemonsets"),
            ("apps", "statefulsets"),
            ("batch", "jobs"),
            (RESOURCE, "resourceclaims"),
            (RESOURCE, "resourceclaimtemplates"),
        }
    )

    def __init__(self, node_monitor_grace_period: float = 40.0) -> None:
        super().__init__()
        self.node_monitor_grace_period = node_monitor_grace_period

    def reconcile(self) -> None:
        self.service_accounts()
        pods = self.store.list("", "pods")
        self.node_lifecycle(pods)
        self.deployments()
        self.replicasets(pods)
        self.daemonsets(pods)
        self.statefulsets(pods)
        self.jobs(pods)
        self.pod_claims(self.store.list("", "pods"))

    # ------------------------------------------------------------------ namespaces

    def service_accounts(self) -> None:
        existing = {
            md(sa).get("namespace")
            for sa in self.store.list("", "serviceaccounts")
            if md(sa).get("name") == "default"
        }
        for ns in self.store.list("", "namespaces"):
            name = md(ns).get("name")
            if name in existing or is_terminating(ns):
                continue
            self.try_create(
                "",
                "serviceaccounts",
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": name},
                },
            )


__all__ = ["ControllerManager", "condition", "node_ready"]
