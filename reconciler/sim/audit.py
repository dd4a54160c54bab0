"""The simulated kube-apiserver's audit log: who did what, and which authorization checks it took.

Off unless asked for (``SimCluster(audit=True)``, ``sim serve --audit-log FILE``). Each served request is
one :class:`AuditEvent` (metadata level, ResponseComplete stage): user, verb, resource and subresource,
namespace, name, response code, and every authorization decision made while serving it (the request's own
check first, then the ``escalate``/``bind`` checks of RBAC writes). ``--audit-log`` writes them as JSON
lines shaped like ``audit.k8s.io/v1`` Events.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from reconciler.sim.rbac import Attributes, Decision


@dataclass(frozen=True)
class AuditEvent:
    request: Attributes
    code: int
    checks: tuple[Decision, ...]
    at: str
    query: tuple[tuple[str, str], ...] = ()  # the request's parameters (requestURI carries them)

    @property
    def dry_run(self) -> bool:
        """A write sent with `dryRun`: authorised and admitted, nothing persisted."""
        return any(key == "dryRun" for key, _ in self.query)

    @property
    def user(self) -> str:
        return self.request.user.name

    @property
    def allowed(self) -> bool:
        """The request itself passed authorization (privileged users always do)."""
        own = [c for c in self.checks if c.attributes == self.request]
        return self.request.user.privileged or any(c.allowed for c in own)

    def to_json(self) -> dict[str, Any]:
        r = self.request
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "stage": "ResponseComplete",
            "requestURI": r.path + ("?" + urlencode(self.query) if self.query else ""),
            "verb": r.verb,
            "user": {"username": r.user.name, "groups": list(r.user.groups)},
            "responseStatus": {"metadata": {}, "code": self.code},
            "stageTimestamp": self.at,
        }
        if r.resource_request:
            ref = {
                "resource": r.resource,
                "subresource": r.subresource,
                "namespace": r.namespace,
                "name": r.name,
                "apiGroup": r.api_group,
                "apiVersion": r.api_version,
            }
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        own = next((c for c in self.checks if c.attributes == r), None)
        if own is not None or r.user.privileged:
            event["annotations"] = {
                "authorization.k8s.io/decision": "allow" if self.allowed else "forbid",
                "authorization.k8s.io/reason": own.reason if own is not None else "",
            }
        return event


class AuditLog:
    """Events in memory (``events``), and appended to ``path`` as JSON lines when given."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._events: list[AuditEvent] = []

    def record(
        self,
        request: Attributes,
        code: int,
        checks: list[Decision],
        query: list[tuple[str, str]] | None = None,
    ) -> None:
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event = AuditEvent(request, code, tuple(checks), at, tuple(query or ()))
        with self._lock:
            self._events.append(event)
            if self.path is not None:
                with self.path.open("a") as out:
                    out.write(json.dumps(event.to_json(), separators=(",", ":")) + "\n")

    @property
    def events(self) -> list[AuditEvent]:
        with self._lock:
            return list(self._events)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()


__all__ = ["AuditEvent", "AuditLog"]
