"""The controller's cluster by its identity: the uid of its kube-system Namespace, as first seen. Another
cluster answering at the same address later (the API server went away, another came up there) is never a
place to write: the Lease rounds write nothing (`LeaseManager.guard`), so the passes stop, and `/readyz`
names both identities (`Controller.unready_reason`, through the Lease errors)."""

from __future__ import annotations

from reconciler.cluster.client import ClusterClient
from reconciler.errors import DraGitopsError


class ClusterIdentity:
    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.first: str | None = None  # the uid of kube-system when this process first reached the cluster

    def problem(self) -> str | None:
        """Why this is not the cluster first reached (None when it is, or it cannot be asked now)."""
        try:
            live = self.client.get(self.client.resource_for("v1", "Namespace"), None, "kube-system")
        except DraGitopsError:
            return None  # unreachable: the Lease rounds say so themselves
        found = str(((live or {}).get("metadata") or {}).get("uid") or "")
        if not found:
            return None
        if self.first is None:
            self.first = found
        if found == self.first:
            return None
        return (
            f"another cluster answers at {self.client.host}: its kube-system Namespace's uid is {found}, "
            f"this controller's cluster was {self.first}; nothing is written there"
        )
