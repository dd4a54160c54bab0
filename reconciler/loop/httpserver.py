"""The controller's HTTP endpoints: probes, `/metrics`, the Git webhooks that trigger a pass, and the
dashboard's pages (`reconciler/ui/`, handed in as `pages`: this module only routes to them).

Standard library only (`ThreadingHTTPServer` in a background thread). What a webhook must prove and what it
triggers is :mod:`reconciler.loop.webhooks`; here are routing, statuses and bodies. Bodies are limited
before they are read; logs
carry method, path and status, never a header value, a query string or the body.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from reconciler.errors import UserError
from reconciler.loop.metrics import Metrics
from reconciler.loop.webhooks import (
    PROVIDERS,
    HookReply,
    HookTarget,
    Trigger,
    Webhooks,
    delivery_id,
    normalize_repo_url,
    read_secret,
)

__all__ = [
    "ControllerServer",
    "PageAnswer",
    "Pages",
    "HookTarget",
    "normalize_repo_url",
    "parse_listen",
    "read_secret",
]

log = logging.getLogger(__name__)

# GitHub caps a webhook payload at 25 MB (and drops larger ones); GitLab's are smaller.
DEFAULT_MAX_BODY = 25 * 1024 * 1024
_READ_CHUNK = 64 * 1024
# A client that stops sending mid-request must not hold a handler thread for ever.
SOCKET_TIMEOUT = 10.0


HOOK_PATHS = frozenset(f"/hooks/{provider}" for provider in PROVIDERS)


def _log_hook(
    provider: str, delivery: str, targets: Sequence[str], status: int, result: str, message: str
) -> None:
    """One line per webhook call, accepted or refused: never a secret, signature, token or body."""
    log.log(
        logging.WARNING if status >= 500 else logging.INFO,
        "webhook %s delivery %s: %d %s%s (targets: %s)",
        provider,
        delivery or "(none)",
        status,
        result or "-",
        f": {message}" if message and message != result else "",
        ", ".join(targets) or "-",
        extra={"target": ",".join(targets)} if targets else {},
    )


def parse_listen(value: str, where: str = "--listen") -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or `:PORT` (all interfaces) into a bind address."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise UserError(f"expected HOST:PORT, got {value!r}", where=where)
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_text)


class PageAnswer(Protocol):
    status: int
    body: bytes

    def all_headers(self) -> dict[str, str]: ...


class Pages(Protocol):
    """The dashboard (`reconciler/ui/app.py`): the paths it answers, and its answer to a GET or HEAD."""

    def handles(self, path: str) -> bool: ...

    def __call__(self, method: str, target: str, headers: Any) -> PageAnswer: ...


def send_answer(handler: BaseHTTPRequestHandler, answer: PageAnswer) -> None:
    """Write a page's answer (no body for HEAD): the controller's server and `ui`'s both do."""
    handler.send_response(answer.status)
    for name, value in answer.all_headers().items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(answer.body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(answer.body)


class LocalServer(ThreadingHTTPServer):
    """A threading HTTP server that never holds up a shutdown and binds IPv6 addresses too."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def serve_in_background(self, name: str) -> None:
        # A short poll interval makes stop() prompt; an idle select costs nothing noticeable.
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class _Server(LocalServer):
    def __init__(self, address: tuple[str, int], endpoints: ControllerServer) -> None:
        self.endpoints = endpoints
        super().__init__(address, _Handler)


class ControllerServer:
    """`/healthz`, `/readyz`, `/metrics`, `POST /hooks/{github,gitlab,generic}` and the dashboard on one port."""

    def __init__(
        self,
        *,
        trigger: Trigger,
        metrics: Metrics,
        hook_targets: Sequence[HookTarget] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        max_body: int = DEFAULT_MAX_BODY,
        alive: Callable[[], bool] | None = None,
        readiness: Callable[[], str | None] | None = None,
        pages: Pages | None = None,
    ) -> None:
        self.metrics = metrics
        self.webhooks = Webhooks(trigger, hook_targets)
        self.host = host
        self.port = port
        self.max_body = max_body
        # Liveness beyond "the process serves": e.g. whether the controller loop thread is still running.
        self.alive = alive
        # Once ready: why the controller cannot reconcile some target now (None when it can).
        self.readiness = readiness
        # The dashboard at `/` (its token, if any, is its own: probes, metrics and hooks keep theirs).
        self.pages = pages
        self._ready = threading.Event()
        self._server: _Server | None = None

    # ---- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> int:
        """Bind and serve in a background thread; the bound port (useful with port 0)."""
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.port
        self._server.serve_in_background("dra-gitops-http")
        log.info("serving /healthz, /readyz, /metrics and webhooks on %s:%d", self.host, self.port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def set_ready(self, ready: bool = True) -> None:
        """Ready after the first pass (and while `readiness` finds nothing wrong); not ready again while
        shutting down."""
        if ready:
            self._ready.set()
        else:
            self._ready.clear()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT
    server_version = "dra-gitops"
    sys_version = ""

    # ---- routing ----------------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        endpoints = self.server.endpoints
        path = urlsplit(self.path).path
        if path == "/healthz":
            alive = endpoints.alive is None or endpoints.alive()
            self._send(200 if alive else 503, b"ok\n" if alive else b"controller loop stopped\n")
        elif path == "/readyz":
            if not endpoints.ready:
                self._send(503, b"not ready: the first pass has not finished\n")
            elif (reason := endpoints.readiness() if endpoints.readiness else None) is not None:
                self._send(503, f"not ready: {reason}\n".encode())
            else:
                self._send(200, b"ok\n")
        elif path == "/metrics":
            body, content_type = endpoints.metrics.render()
            self._send(200, body, content_type)
        elif path.startswith("/hooks/"):
            self._send(405, b"method not allowed\n", allow="POST")
        elif endpoints.pages is not None and endpoints.pages.handles(path):
            self._page(endpoints.pages)
        else:
            self._send(404, b"not found\n")

    def do_POST(self) -> None:  # noqa: N802
        endpoints = self.server.endpoints
        path = urlsplit(self.path).path
        provider = path.removeprefix("/hooks/") if path.startswith("/hooks/") else ""
        if path in ("/healthz", "/readyz", "/metrics"):
            self._send(405, b"method not allowed\n", allow="GET")
            return
        if endpoints.pages is not None and endpoints.pages.handles(path):
            self._not_allowed()
            return
        if provider not in PROVIDERS or not endpoints.webhooks.enabled(provider):
            # Unknown, or no target has a secret for it: the hook does not exist.
            self._drain_or_close()
            # Logged before answering: a sender (or a test) that has the answer finds the line written.
            if provider in PROVIDERS:
                _log_hook(
                    provider, delivery_id(provider, self.headers), (), 404, "disabled", "no secret for it"
                )
            self._send(404, b"not found\n")
            return
        webhooks = endpoints.webhooks
        delivery = delivery_id(provider, self.headers)
        try:
            body = self._read_body(endpoints.max_body)
            status, answer = webhooks.handle_hook(provider, self.headers, body)
            result, targets, message = "accepted", answer.get("triggered", []), ""
            payload = json.dumps(answer).encode() + b"\n"
        except HookReply as reply:
            status, targets, message = reply.status, reply.targets, reply.message
            result = reply.result or ""
            payload = json.dumps({"message": reply.message}).encode() + b"\n"
        except Exception:  # noqa: BLE001 - the trigger callback failed; the hook's sender should retry
            log.exception("webhook %s failed", provider)
            status, result, targets, message = 500, "error", (), "internal error"
            payload = b'{"message": "internal error"}\n'
        if result:
            endpoints.metrics.record_webhook(provider, result)
        _log_hook(provider, delivery, targets, status, result or "", message)
        self._send(status, payload, "application/json")

    def do_PUT(self) -> None:  # noqa: N802
        self._not_allowed()

    def do_DELETE(self) -> None:  # noqa: N802
        self._not_allowed()

    def do_PATCH(self) -> None:  # noqa: N802
        self._not_allowed()

    def do_OPTIONS(self) -> None:  # noqa: N802
        pages = self.server.endpoints.pages
        if pages is not None and pages.handles(urlsplit(self.path).path):
            self._not_allowed()  # the dashboard: GET and HEAD only
        else:
            self.send_error(501)  # as before the dashboard

    def do_HEAD(self) -> None:  # noqa: N802
        pages = self.server.endpoints.pages
        if pages is not None and pages.handles(urlsplit(self.path).path):
            self._page(pages)
        else:
            self._not_allowed()

    def _not_allowed(self) -> None:
        self._drain_or_close()
        path = urlsplit(self.path).path
        pages = self.server.endpoints.pages
        allow = "POST" if path.startswith("/hooks/") else "GET"
        if pages is not None and pages.handles(path):
            allow = "GET, HEAD"
        self._send(405, b"method not allowed\n", allow=allow)

    def _page(self, pages: Pages) -> None:
        send_answer(self, pages(self.command, self.path, self.headers))

    # ---- bodies -----------------------------------------------------------------------------------------

    def _content_length(self) -> int | None:
        if self.headers.get("Transfer-Encoding"):
            raise HookReply(411, "a Content-Length is required", "bad_request")
        text = self.headers.get("Content-Length")
        if text is None:
            return 0
        if not text.strip().isdigit():
            raise HookReply(400, "invalid Content-Length", "bad_request")
        return int(text)

    def _read_body(self, limit: int) -> bytes:
        try:
            length = self._content_length()
        except HookReply:
            self.close_connection = True
            raise
        assert length is not None
        if length > limit:
            # Refused unread: the connection closes, so the rest of the body is never consumed.
            self.close_connection = True
            raise HookReply(413, f"the body is larger than {limit} bytes", "too_large")
        # Read in chunks: memory grows with what the client really sent, not with what it announced.
        body = bytearray()
        while len(body) < length:
            chunk = self.rfile.read(min(_READ_CHUNK, length - len(body)))
            if not chunk:
                self.close_connection = True
                raise HookReply(400, "the body ended early", "bad_request")
            body += chunk
        return bytes(body)

    def _drain_or_close(self) -> None:
        """A request we refuse without reading: its body must not be taken for the next request."""
        if self.headers.get("Content-Length", "0").strip() not in ("", "0") or self.headers.get(
            "Transfer-Encoding"
        ):
            self.close_connection = True

    def _send(
        self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", allow: str = ""
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if allow:
            self.send_header("Allow", allow)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    # ---- logging: path and status only ------------------------------------------------------------------

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = urlsplit(self.path).path if hasattr(self, "path") else "?"
        # Probes are polled; webhooks get a line of their own (`_log_hook`) with what they did.
        level = (
            logging.DEBUG
            if path in ("/healthz", "/readyz", "/metrics")
            or path in HOOK_PATHS
            or path.startswith(("/api/", "/static/"))  # the dashboard's polls and files
            else logging.INFO
        )
        log.log(level, "%s %s -> %s", getattr(self, "command", "?"), path, code)

    def log_error(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        # The base class formats the raw request line into some errors; keep only the status.
        code = args[0] if args and isinstance(args[0], int) else "?"
        log.debug("bad HTTP request from %s (%s)", self.client_address[0], code)
