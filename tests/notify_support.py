"""A local HTTP endpoint standing in for a forge or a webhook receiver: it records every request (method,
path, headers, body, arrival time) and answers from a script (status codes in order, then a default),
optionally holding each request until the test releases it."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived

    def json(self) -> Any:
        return json.loads(self.body)


class Recorder:
    def __init__(self, answers: list[int] | None = None, default: int = 201) -> None:
        self.answers = list(answers or [])
        self.default = default
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.release = threading.Event()  # cleared: requests are held until it is set
        self.release.set()
        self.holding = threading.Event()  # set when a held request arrived
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with recorder.lock:
                    recorder.received.append(
                        Received("POST", self.path, dict(self.headers.items()), body, time.monotonic())
                    )
                    status = recorder.answers.pop(0) if recorder.answers else recorder.default
                if not recorder.release.is_set():
                    recorder.holding.set()
                    recorder.release.wait(120)
                answer = b'{"ok": true}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if 300 <= status < 400:
                    self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def requests(self) -> list[Received]:
        with self.lock:
            return list(self.received)

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """An address where nothing listens (connections are refused)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}"
