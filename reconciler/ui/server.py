"""`dra-gitops ui`'s HTTP server: the dashboard alone, on waitress (`reconciler/loop/http/wsgi.py`: the
security headers on every answer, request limits, bounded threads). Logs carry method, path and status,
never a header, a query string or a token."""

from __future__ import annotations

from reconciler.loop.http.wsgi import WsgiServer
from reconciler.ui.app import Dashboard

# The dashboard takes no body but the login form.
MAX_BODY = 16 * 1024


class DashboardServer:
    def __init__(self, dashboard: Dashboard, host: str = "127.0.0.1", port: int = 8090) -> None:
        self.dashboard = dashboard
        self.host = host
        self.port = port
        self._server: WsgiServer | None = None

    def start(self) -> int:
        self._server = WsgiServer(
            self.dashboard, self.host, self.port, name="dra-gitops-ui", max_body=MAX_BODY
        )
        self.port = self._server.start()
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
