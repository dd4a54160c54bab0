"""Typed errors of the cluster client, and the translation of the API server's error answers into them.

Every API error becomes an `ApiError` whose message starts with the object ref and carries the server's
message; temporary errors (429, 5xx) become `TemporaryError`, which the transport
(:mod:`reconciler.cluster.client.transport`) retries with backoff before raising it (exit 4).
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.errors import DraGitopsError, EnvironmentProblem, TemporaryError, UserError

_TEMPORARY_STATUS = frozenset({429, 500, 502, 503, 504})
# etcd's refusal of a too large object: under its --max-request-bytes, and over the client's 2 MiB send limit
_ETCD_TOO_LARGE = ("etcdserver: request is too large", "trying to send message larger than max")


class ApiError(DraGitopsError):
    """The API server refused a request. `status` and `reason` are the server's."""

    def __init__(
        self, message: str, *, where: str | None, status: int, reason: str, body: dict[str, Any]
    ) -> None:
        super().__init__(message, where=where)
        self.status = status
        self.reason = reason
        self.body = body


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class Invalid(ApiError, UserError):
    """422/400: the object itself is wrong (validation, unknown field, immutable field)."""


class Forbidden(ApiError, EnvironmentProblem):
    """401/403: our credentials may not do this."""


def object_where(kind: str, namespace: str | None, name: str | None) -> str:
    if name is None:
        return f"{kind}/{namespace}" if namespace else kind
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def _status_message(body: dict[str, Any], fallback: str) -> str:
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or fallback)


def error_for_response(
    response: Any, status: int, data: bytes, *, where: str, backoff: float
) -> TemporaryError | ApiError:
    """The error for an answer outside 2xx: `TemporaryError` for 429 and 5xx (delay: the server's
    Retry-After, else `backoff`), else the `ApiError` subclass of the status."""
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        parsed = {"message": data.decode("utf-8", "replace")[:500]}
    message = _status_message(parsed, f"HTTP {status}")
    reason = str(parsed.get("reason") or "") if isinstance(parsed, dict) else ""
    # Server-side apply reports a manifest that does not fit the schema as an internal error, and etcd an
    # object over its request limit (kube-apiserver passes it on as a 500); retrying cannot help, so both
    # are the user's error like a 422.
    too_large = status == 500 and any(m in message for m in _ETCD_TOO_LARGE)
    if too_large:
        message += " (the object is larger than etcd stores: 1.5 MiB by default; split it or make it smaller)"
    if status in _TEMPORARY_STATUS and not too_large and "failed to create typed patch object" not in message:
        retry_after = response.getheader("Retry-After")
        delay = float(retry_after) if retry_after and retry_after.isdigit() else backoff
        return TemporaryError(f"{message} (HTTP {status})", where=where, delay=delay)
    error_class: type[ApiError] = ApiError
    if status == 404:
        error_class = NotFound
    elif status == 409:
        error_class = Conflict
    elif status in (400, 413, 422, 500):  # 413: the request body is over the server's limit (3 MiB)
        error_class = Invalid
    elif status in (401, 403):
        error_class = Forbidden
    return error_class(message, where=where, status=status, reason=reason, body=parsed)
