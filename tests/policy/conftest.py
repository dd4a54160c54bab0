"""An OPA server for the OPA-engine tests.

When `DRA_GITOPS_OPA_URL` points at a real OPA server, tests use it. Otherwise they start a small stand-in
on 127.0.0.1 that speaks the part of OPA's REST API our engine uses (policies, data queries, health) and
evaluates with regorus. It lets the opa-python-client path run over real HTTP in CI, where no OPA binary
can be installed; the real-server run is the authority on OPA itself.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

_LOCATION = re.compile(r"-->\s*(?P<file>[^\n]+?):(?P<row>\d+):(?P<col>\d+)")


class _OpaStandIn:
    def __init__(self) -> None:
        self.modules: dict[str, str] = {}
        self.compiled: Any = None
        self.lock = threading.Lock()

    def engine(self, modules: dict[str, str]) -> Any:
        import regorus

        engine = regorus.Engine()
        for module_id, text in modules.items():
            engine.add_policy(module_id, text)
        return engine

    def put_policy(self, module_id: str, text: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            candidate = {**self.modules, module_id: text}
            try:
                self.engine(candidate)
            except RuntimeError as exc:
                match = _LOCATION.search(str(exc))
                location = (
                    {"file": module_id, "row": int(match["row"]), "col": int(match["col"])} if match else {}
                )
                error = {
                    "code": "rego_parse_error",
                    "message": str(exc).splitlines()[-1],
                    "location": location,
                }
                return 400, {
                    "code": "invalid_parameter",
                    "message": "error(s) occurred while compiling module(s)",
                    "errors": [error],
                }
            self.modules = candidate
            self.compiled = None
            return 200, {}

    def query(self, path: str, input_doc: Any) -> dict[str, Any]:
        with self.lock:
            if self.compiled is None:
                self.compiled = self.engine(self.modules)
            engine = self.compiled.clone()
        engine.set_input_json(json.dumps(input_doc if input_doc is not None else {}))
        query = "data" + "".join(f".{part}" for part in path.strip("/").split("/") if part)
        try:
            answer = json.loads(engine.eval_query_as_json(query))
        except RuntimeError:
            return {}
        results = answer.get("result") or []
        return {"result": results[0]["expressions"][0]["value"]} if results else {}


def _handler(state: _OpaStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            if self.path.startswith("/health"):
                self._send(200, {})
            elif self.path.startswith("/v1/policies"):
                self._send(200, {"result": [{"id": k, "raw": v} for k, v in state.modules.items()]})
            elif self.path.startswith("/v1/data"):
                self._send(200, state.query(self.path.removeprefix("/v1/data"), None))
            else:
                self._send(404, {"code": "resource_not_found"})

        def do_PUT(self) -> None:  # noqa: N802
            body = self._body()
            if self.path.startswith("/v1/policies/"):
                status, payload = state.put_policy(self.path.removeprefix("/v1/policies/"), body.decode())
                self._send(status, payload)
            else:
                self._send(404, {"code": "resource_not_found"})

        def do_POST(self) -> None:  # noqa: N802
            body = self._body()
            if self.path.startswith("/v1/data"):
                payload = json.loads(body or b"{}")
                self._send(
                    200, state.query(self.path.split("?")[0].removeprefix("/v1/data"), payload.get("input"))
                )
            else:
                self._send(404, {"code": "resource_not_found"})

        def do_DELETE(self) -> None:  # noqa: N802
            module_id = self.path.removeprefix("/v1/policies/")
            with state.lock:
                state.modules.pop(module_id, None)
                state.compiled = None
            self._send(200, {})

    return Handler


@pytest.fixture
def opa_url() -> Iterator[str]:
    real = os.environ.get("DRA_GITOPS_OPA_URL")
    if real:
        yield real
        return
    # One thread serves every request: regorus engines must be used and dropped on the thread that made them.
    state = _OpaStandIn()
    server = HTTPServer(("127.0.0.1", 0), _handler(state))

    def serve() -> None:
        server.serve_forever(poll_interval=0.05)
        state.compiled = None  # dropped here, on the thread that created it

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
