"""The last good revision's manifests, kept in the target's state namespace.

Rollback and drift correction need the last good revision's objects. Its commit may be gone from the
remote (a force-push) and the Git cache is empty after a restart, so a copy is kept under our control: a
ConfigMap `dra-gitops-<target>-last-good` beside the state, written whenever a revision becomes last good,
holding the revision's manifest files compressed (`source/treecopy.py`). A copy over what a ConfigMap can
hold is not written: the target then depends on the remote keeping that commit, and the log says so.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from typing import Any

from reconciler.cluster import applyset
from reconciler.cluster.client import ClusterClient, Conflict, NotFound, ResourceInfo
from reconciler.errors import DraGitopsError

log = logging.getLogger("dra_gitops.keep")

# A ConfigMap holds at most 1 MiB; base64 grows the copy by a third.
MAX_KEPT_BYTES = 700 * 1024
SHA_ANNOTATION = "dra-gitops.io/revision"
DATA_KEY = "manifests.json.gz"


class KeptRevision:
    def __init__(
        self, client: ClusterClient, target: str, namespace: str = applyset.DEFAULT_NAMESPACE
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = f"dra-gitops-{target}-last-good"

    @property
    def ref(self) -> str:
        return f"ConfigMap/{self.namespace}/{self.name}"

    @property
    def _resource(self) -> ResourceInfo:
        # Asked for at first use, not when built: a controller starts while a target's cluster is down.
        return self.client.resource_for("v1", "ConfigMap")

    def save(self, sha: str, payload: bytes) -> bool:
        """Keep `payload` as the copy of `sha`; False (logged) when it is too big or cannot be written."""
        if len(payload) > MAX_KEPT_BYTES:
            log.warning(
                "%s: the manifests of %s are %d bytes compressed, over the %d a ConfigMap can keep: a "
                "rollback to it needs the commit in the remote",
                self.ref,
                sha[:12],
                len(payload),
                MAX_KEPT_BYTES,
                extra={"sha": sha},
            )
            return False
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "annotations": {SHA_ANNOTATION: sha},
                "labels": {"app.kubernetes.io/managed-by": "dra-gitops"},
            },
            "binaryData": {DATA_KEY: base64.b64encode(payload).decode()},
        }
        try:
            live = self.client.get(self._resource, self.namespace, self.name)
            if live is not None and _kept_sha(live) == sha and live.get("binaryData") == body["binaryData"]:
                return True  # kept already (by the pass that made it last good, before a restart)
            if live is None:
                with contextlib.suppress(Conflict):
                    self.client.create(self._resource, body)
                    return True
                live = self.client.get(self._resource, self.namespace, self.name) or {}
            body["metadata"]["resourceVersion"] = (live.get("metadata") or {}).get("resourceVersion")
            self.client.replace(self._resource, body)
            return True
        except DraGitopsError as exc:
            log.warning(
                "%s: cannot keep the manifests of %s: %s", self.ref, sha[:12], exc, extra={"sha": sha}
            )
            return False

    def has(self, sha: str) -> bool:
        """Whether the copy kept is of `sha` (False when there is none, or it cannot be read)."""
        try:
            live = self.client.get(self._resource, self.namespace, self.name)
        except DraGitopsError:
            return False
        return live is not None and _kept_sha(live) == sha

    def load(self, sha: str) -> bytes | None:
        """The kept copy of `sha`, or None when the copy kept is of another revision or there is none."""
        try:
            live = self.client.get(self._resource, self.namespace, self.name)
        except NotFound:
            return None
        if live is None or _kept_sha(live) != sha:
            return None
        data = (live.get("binaryData") or {}).get(DATA_KEY)
        return base64.b64decode(data) if data else None


def _kept_sha(live: dict[str, Any]) -> str | None:
    return ((live.get("metadata") or {}).get("annotations") or {}).get(SHA_ANNOTATION)
