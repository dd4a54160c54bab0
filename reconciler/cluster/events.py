"""Kubernetes Events for what a reconcile pass decided, on the target's state ConfigMap.

`kubectl describe configmap dra-gitops-<target> -n <ns>` and `kubectl get events` then tell the story
(applied, denied, rolled back, drift corrected) next to the state itself. An event that cannot be written
never fails the pass: it is a side channel, the state store is the record.
"""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.errors import DraGitopsError

COMPONENT = "dra-gitops"
_MESSAGE_LIMIT = 1024
log = logging.getLogger("dra_gitops.events")


class EventRecorder:
    def __init__(self, client: ClusterClient, namespace: str, configmap: str, instance: str = "") -> None:
        self.client = client
        self.namespace = namespace
        self.configmap = configmap
        self.instance = instance

    def emit(self, reason: str, message: str, *, warning: bool = False) -> dict[str, Any] | None:
        now = datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{self.configmap}.{now.strftime('%Y%m%d%H%M%S')}{secrets.token_hex(3)}",
                "namespace": self.namespace,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "namespace": self.namespace,
                "name": self.configmap,
            },
            "reason": reason,
            "message": message[:_MESSAGE_LIMIT],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance or COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            created = self.client.create(self.client.resource_for("v1", "Event"), body)
        except (DraGitopsError, OSError) as exc:
            log.warning("could not record event %s: %s", reason, exc)
            return None
        return created
