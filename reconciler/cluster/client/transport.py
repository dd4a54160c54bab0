"""Sending one request to the API server: client-side rate limit, retries, errors translated.

Requests are built as plain values (path, query, body) and sent through the official `ApiClient`, which
brings kubeconfig, in-cluster config, TLS and auth. Temporary errors (429, 5xx, timeouts, refused
connections) are retried with backoff and then raised as `TemporaryError` (exit 4); every other error
answer becomes an `ApiError` (:mod:`reconciler.cluster.client.errors`).

Every attempt is bounded by the timeout, connecting and reading alike, and only our loop retries (the
client's own urllib3 retries are off: they multiplied the time a frozen API server could hold a request).
A request the server received but did not answer (`NoAnswer`) may have been carried out: a create or a
replace is then not sent again (its retry would fail on what the first one did, a Conflict that reads as
"someone else wrote"), other requests are tried once more; the error says what went unanswered.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from reconciler.cluster.client.errors import error_for_response
from reconciler.errors import TemporaryError

RequestLog = list[tuple[str, str, tuple[tuple[str, Any], ...]]]
# Sent again after no answer: a frozen server does not answer a third time either.
_NO_ANSWER_RETRIES = 1
# Not idempotent once carried out: a create (AlreadyExists) and a replace at a resourceVersion (Conflict).
_UNSAFE_AFTER_NO_ANSWER = frozenset({"POST", "PUT"})


class NoAnswer(TemporaryError):
    """The API server took the request and gave no answer within the timeout (frozen, overloaded)."""


def without_client_retries(configuration: Any) -> None:
    """Turn off urllib3's retries in an `ApiClient` configuration (before the client is built): by
    default it re-sends a GET or PUT three times on a read timeout, inside one of our attempts."""
    import urllib3

    configuration.retries = urllib3.Retry(total=0, redirect=0, raise_on_redirect=False)


class RateLimiter:
    """Token bucket shared by all threads of one client (client-go's QPS/burst idea)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if self.qps <= 0:
            return
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            wait = (1 - self._tokens) / self.qps
            self._tokens = 0
        time.sleep(wait)


class ApiTransport:
    """Sends requests to one API server through the official `ApiClient`: the rate limit, the retries of
    temporary failures and the counters of what was sent are its own."""

    def __init__(
        self, api: Any, *, timeout: float, retries: int, backoff: float, qps: float, burst: int
    ) -> None:
        self.api = api
        self.host = str(getattr(api.configuration, "host", "?"))
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.qps = qps
        self.burst = burst
        self._limiter = RateLimiter(qps, burst)
        self.requests_sent = 0
        self.writes_sent = 0
        # (method, path, query) of every request when set to a list: what RBAC a command needs, tests.
        self.request_log: RequestLog | None = None
        # Asked right before each write (not a dry-run) is sent; raises to refuse it: a pass's client is
        # fenced on its target's Lease, so a replica that lost it (paused, partitioned) writes nothing more.
        self.write_fence: Callable[[str, str], None] | None = None

    # ---- transport ----------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        where: str | None = None,
        timeout: float | None = None,
        raw: bool = False,
        retries: int | None = None,
    ) -> Any:
        """Send one request; JSON answer (or text with raw=True). Retries temporary failures (`retries`
        times, the client's setting unless given)."""
        attempt = 0
        allowed = self.retries if retries is None else retries
        while True:
            try:
                return self._send(method, path, query, body, content_type, where, timeout, raw)
            except NoAnswer:
                attempt += 1
                if method in _UNSAFE_AFTER_NO_ANSWER or attempt > min(allowed, _NO_ANSWER_RETRIES):
                    raise
            except TemporaryError as exc:
                attempt += 1
                if attempt > allowed:
                    raise
                time.sleep(min(exc.delay, 5.0) * (1 + random.random() * 0.2))

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]],
        body: Any,
        content_type: str,
        where: str | None,
        timeout: float | None,
        raw: bool,
    ) -> Any:
        import urllib3

        self._limiter.acquire()
        writes = method in ("POST", "PUT", "PATCH", "DELETE") and not any(k == "dryRun" for k, _ in query)
        if writes and self.write_fence is not None:
            self.write_fence(method, where or path)
        headers = {"Accept": "application/json", "Content-Type": content_type}
        # The generated REST layer JSON-encodes dict bodies for JSON content types itself; an apply patch
        # (YAML content type) must arrive as text, and JSON is valid YAML.
        payload = body
        if body is not None and not isinstance(body, str) and "yaml" in content_type:
            payload = json.dumps(body, separators=(",", ":"))
        request = self.api.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params=headers,
            body=payload,
            auth_settings=["BearerToken"],
        )
        self.requests_sent += 1
        if self.request_log is not None:
            self.request_log.append((method, path, tuple(query)))
        if writes:
            self.writes_sent += 1
        seconds = timeout or self.timeout
        try:
            response = self.api.call_api(*request, _request_timeout=seconds)
            data = response.read()
        except Exception as exc:  # urllib3's errors, OSError, or the client's ApiException(status=0)
            if isinstance(exc, urllib3.exceptions.HTTPError | OSError) or getattr(exc, "status", None) == 0:
                raise self._unreachable(method, path, where, seconds, exc) from exc
            raise
        status = response.status
        if 200 <= status < 300:
            if raw:
                return data.decode("utf-8", "replace")
            return json.loads(data) if data else {}
        raise error_for_response(response, status, data, where=where or path, backoff=self.backoff)

    def _unreachable(
        self, method: str, path: str, where: str | None, seconds: float, exc: Exception
    ) -> TemporaryError:
        """What went wrong on the way, said plainly: which request, and whether it went unanswered."""
        import urllib3

        cause: BaseException | None = exc
        if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
            cause = exc.reason
        shown = f"{seconds:g}s"
        # Refused or no route; tested first, as urllib3 derives it from ConnectTimeoutError.
        if isinstance(cause, urllib3.exceptions.NewConnectionError):
            return TemporaryError(
                f"{method} {path}: cannot reach the API server at {self.host}: {cause}", where=where
            )
        if isinstance(cause, urllib3.exceptions.ConnectTimeoutError):
            return TemporaryError(
                f"{method} {path}: cannot connect to the API server at {self.host} within {shown}",
                where=where,
            )
        if isinstance(cause, urllib3.exceptions.TimeoutError | TimeoutError):
            return NoAnswer(f"{method} {path}: no answer from the API server within {shown}", where=where)
        if isinstance(cause, urllib3.exceptions.ProtocolError):
            return TemporaryError(f"{method} {path}: the API server cut the connection: {cause}", where=where)
        return TemporaryError(
            f"{method} {path}: cannot reach the API server at {self.host}: {cause}", where=where
        )
