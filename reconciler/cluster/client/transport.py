"""Sending one request to the API server: client-side rate limit, retries, errors translated.

Requests are built as plain values (path, query, body) and sent through the official `ApiClient`, which
brings kubeconfig, in-cluster config, TLS and auth. Temporary errors (429, 5xx, timeouts, refused
connections) are retried with backoff and then raised as `TemporaryError` (exit 4); every other error
answer becomes an `ApiError` (:mod:`reconciler.cluster.client.errors`).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from reconciler.cluster.client.errors import error_for_response
from reconciler.errors import TemporaryError

RequestLog = list[tuple[str, str, tuple[tuple[str, Any], ...]]]


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
        self._limiter = RateLimiter(qps, burst)
        self.requests_sent = 0
        self.writes_sent = 0
        # (method, path, query) of every request when set to a list: what RBAC a command needs, tests.
        self.request_log: RequestLog | None = None

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
        while True:
            try:
                return self._send(method, path, query, body, content_type, where, timeout, raw)
            except TemporaryError as exc:
                attempt += 1
                if attempt > (self.retries if retries is None else retries):
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
        if method in ("POST", "PUT", "PATCH", "DELETE") and not any(k == "dryRun" for k, _ in query):
            self.writes_sent += 1
        try:
            response = self.api.call_api(*request, _request_timeout=timeout or self.timeout)
            data = response.read()
        except (urllib3.exceptions.TimeoutError, urllib3.exceptions.ProtocolError) as exc:
            raise TemporaryError(
                f"{method} {path} timed out or was cut off: {exc}", where=where or self.host
            ) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemporaryError(f"cannot reach the API server at {self.host}: {exc}", where=where) from exc
        except Exception as exc:  # the client wraps transport errors in ApiException(status=0)
            if getattr(exc, "status", None) == 0:
                raise TemporaryError(
                    f"cannot reach the API server at {self.host}: {exc}", where=where
                ) from exc
            raise
        status = response.status
        if 200 <= status < 300:
            if raw:
                return data.decode("utf-8", "replace")
            return json.loads(data) if data else {}
        raise error_for_response(response, status, data, where=where or path, backoff=self.backoff)
