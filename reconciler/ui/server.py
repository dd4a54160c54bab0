"""`dra-gitops ui`'s HTTP server: the dashboard alone, standard library only (`ThreadingHTTPServer` in a
background thread). Logs carry method, path and status, never a header, a query string or a token."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from reconciler.loop.httpserver import LocalServer, send_answer
from reconciler.ui.app import Dashboard

log = logging.getLogger(__name__)
SOCKET_TIMEOUT = 10.0


class _Server(LocalServer):
    def __init__(self, address: tuple[str, int], dashboard: Dashboard) -> None:
        self.dashboard = dashboard
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT
    server_version = "dra-gitops"
    sys_version = ""

    def _answer(self) -> None:
        if self.headers.get("Content-Length", "0").strip() not in ("", "0") or self.headers.get(
            "Transfer-Encoding"
        ):
            self.close_connection = True  # a body we do not read must not be taken for the next request
        send_answer(self, self.server.dashboard(self.command, self.path, self.headers))

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _answer  # noqa: N815

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = urlsplit(self.path).path if hasattr(self, "path") else "?"
        log.log(
            logging.DEBUG if path.startswith(("/static/", "/api/")) else logging.INFO,
            "%s %s -> %s",
            getattr(self, "command", "?"),
            path,
            code,
        )

    def log_error(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("bad HTTP request from %s", self.client_address[0])


class DashboardServer:
    def __init__(self, dashboard: Dashboard, host: str = "127.0.0.1", port: int = 8090) -> None:
        self.dashboard = dashboard
        self.host = host
        self.port = port
        self._server: _Server | None = None

    def start(self) -> int:
        self._server = _Server((self.host, self.port), self.dashboard)
        self.port = self._server.port
        self._server.serve_in_background("dra-gitops-ui")
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
