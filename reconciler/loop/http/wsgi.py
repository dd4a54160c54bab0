"""Serving WSGI applications on waitress: bounded threads, body and header limits, idle connections
closed, and the security headers on every answer (the application's, and waitress's own 400/413/431).

What a request may be:

* its target (path and query) at most `MAX_TARGET` bytes, else 414;
* its headers at most `MAX_HEADERS` bytes, else 431 (waitress refuses above `HARD_HEADERS` itself);
* its body at most the server's `max_body` bytes, announced or chunked, else 413 from the headers alone
  (the body is never read);
* a connection idle for `SOCKET_TIMEOUT` seconds is closed, so a half-open socket holds no thread
  (waitress reads and writes in its own loop; the `threads` only run the application).

Logs carry method, path and status, never a header value, a query string or a body.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from waitress.channel import HTTPChannel
from waitress.server import create_server
from waitress.task import ErrorTask

from reconciler.errors import UserError

log = logging.getLogger(__name__)

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
MAX_TARGET = 8192
MAX_HEADERS = 16 * 1024
HARD_HEADERS = 64 * 1024
# A client that stops sending mid-request must not hold a connection for ever.
SOCKET_TIMEOUT = 10.0
# Paths polled or logged elsewhere (webhooks get a line of their own): logged at DEBUG.
QUIET_PREFIXES = ("/healthz", "/readyz", "/metrics", "/hooks/", "/static/", "/api/")

# Called with (status, path) when waitress itself refuses a request (400, 413, 431, ...).
OnRefusal = Callable[[int, str], None]


def parse_listen(value: str, where: str = "--listen") -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or `:PORT` (all interfaces) into a bind address."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise UserError(f"expected HOST:PORT, got {value!r}", where=where)
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plain(status: int, text: str, **headers: str) -> tuple[str, list[tuple[str, str]], bytes]:
    body = text.encode()
    reason = _REASONS.get(status, "")
    head = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    return f"{status} {reason}".strip(), head + list(headers.items()), body


_REASONS = {414: "URI Too Long", 431: "Request Header Fields Too Large"}


def with_security_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`headers` and every security header they do not set themselves."""
    names = {name.lower() for name, _ in headers}
    return list(headers) + [(k, v) for k, v in SECURITY_HEADERS.items() if k.lower() not in names]


def secured(app: App) -> App:
    """`app` behind the request limits, with the security headers on every answer and one log line each."""

    def serve(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "/")
        method = str(environ.get("REQUEST_METHOD") or "?")
        target_size = len(str(environ.get("RAW_URI") or path)) + len(str(environ.get("QUERY_STRING") or ""))
        answer: list[str] = []

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status.split(" ", 1)[0]]
            return start_response(status, with_security_headers(headers), exc_info)

        def log_it() -> None:
            quiet = path.startswith(QUIET_PREFIXES)
            log.log(
                logging.DEBUG if quiet else logging.INFO,
                "%s %s -> %s",
                method,
                path,
                answer[0] if answer else "?",
            )

        refused = None
        if target_size > MAX_TARGET:
            refused = plain(414, "the request target is too long\n")
        elif sum(len(k) + len(str(v)) for k, v in environ.items() if k.startswith("HTTP_")) > MAX_HEADERS:
            refused = plain(431, "the request headers are too large\n")
        if refused is not None:
            status, headers, body = refused
            start(status, headers)
            log_it()
            return [body]
        try:
            return app(environ, start)
        finally:
            log_it()

    return serve


class _RefusalTask(ErrorTask):
    """Waitress's own error answer (a malformed request, a body or headers too large), with our headers."""

    def execute(self) -> None:
        error = self.request.error
        status_line, headers, body = error.to_response(self.channel.server.adj.ident)
        path = str(getattr(self.request, "path", "") or "?")
        status = int(str(status_line).split(" ", 1)[0])
        if path.startswith("/hooks/"):  # a forge reads JSON, as every other answer of the hooks
            limit = self.channel.server.adj.max_request_body_size - 1
            message = f"the body is larger than {limit} bytes" if status == 413 else str(error.reason).lower()
            body = (json.dumps({"message": message}) + "\n").encode()
            headers = [("Content-Length", str(len(body))), ("Content-Type", "application/json")]
        # Counted and logged before answering: a sender (or a test) that has the answer finds them.
        log.info("refused %s -> %d", path, status)
        refusal = getattr(self.channel.server, "on_refusal", None)
        if refusal is not None:
            refusal(status, path)
        self.status = status_line
        self.response_headers.extend(with_security_headers(headers))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Channel(HTTPChannel):
    error_task_class = _RefusalTask


class WsgiServer:
    """One listener: `app` on waitress in a background thread; `start` gives the bound port (useful with
    port 0), `stop` closes every connection and waits for the application threads."""

    def __init__(
        self,
        app: App,
        host: str,
        port: int,
        *,
        name: str,
        threads: int = 4,
        max_body: int = 64 * 1024,
        on_refusal: OnRefusal | None = None,
        url_scheme: str = "http",
    ) -> None:
        self.app = secured(app)
        self.host = host
        self.port = port
        self.name = name
        self.threads = threads
        self.max_body = max_body
        self.on_refusal = on_refusal
        self.url_scheme = url_scheme
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        try:
            server = create_server(
                self.app,
                host=self.host,
                port=self.port,
                threads=self.threads,
                # waitress refuses a body of max_request_body_size bytes or more
                max_request_body_size=self.max_body + 1,
                max_request_header_size=HARD_HEADERS,
                channel_timeout=SOCKET_TIMEOUT,
                cleanup_interval=2,
                connection_limit=200,
                asyncore_use_poll=True,
                asyncore_loop_timeout=1,
                ident="dra-gitops",
                url_scheme=self.url_scheme,
                # X-Forwarded-* reach the application as sent: it believes them from its trusted proxies only
                clear_untrusted_proxy_headers=False,
            )
        except OSError as exc:
            raise UserError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}", where=self.name
            ) from exc
        server.channel_class = _Channel
        server.on_refusal = self.on_refusal
        self._server = server
        self.port = int(server.effective_port)
        self._thread = threading.Thread(target=server.run, name=self.name, daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.task_dispatcher.shutdown(timeout=5)
        # Closed from the server's own loop (woken by its trigger), which then ends: its map is empty.
        from waitress import wasyncore

        try:
            server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
        except OSError:
            # The loop has already closed its map, its trigger with it: nothing is left to wake.
            wasyncore.close_all(server._map)
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
