"""Every OPA failure is exit 4 with the server's own words; a URL that is no OPA URL is a usage error (2);
`policy test -o json` prints one document, whatever happens."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opa_standin import StandInServer

from reconciler.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests-example"

# What a server might answer: (status, content type, body).
ANSWERS = {
    "json-500": (
        500,
        "application/json",
        b'{"code": "internal_error", "message": "storage_error: disk full"}',
    ),
    "plain-500": (500, "text/plain", b"upstream connect error or disconnect/reset before headers"),
    "json-404": (404, "application/json", b'{"code": "resource_not_found", "message": "no such path"}'),
    "not-json-200": (200, "text/html", b"<html>a login page</html>"),
}


class Broken:
    """A server answering every request the same way; `slow` holds each answer until released."""

    def __init__(self) -> None:
        self.answer = ANSWERS["json-500"]
        self.release = threading.Event()
        self.slow = False


@pytest.fixture
def broken() -> Iterator[tuple[str, Broken]]:
    state = Broken()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if state.slow:
                state.release.wait(10)
            status, content_type, body = state.answer
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError):  # the client gave up waiting (the slow case)
                self.wfile.write(body)

        do_GET = do_POST  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        state.release.set()
        server.shutdown()
        thread.join()
        server.server_close()


def check(url: str, *extra: str) -> Any:
    return CliRunner().invoke(cli, ["check", str(EXAMPLE), "--opa-url", url, "-q", *extra])


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (
            "json-500",
            "answered 500 to POST /v1/data/dra/gitops_entrypoint/answer: internal_error: storage_error: disk full",
        ),
        ("plain-500", "answered 500 to POST /v1/data/dra/gitops_entrypoint/answer: upstream connect error"),
        (
            "json-404",
            "answered 404 to POST /v1/data/dra/gitops_entrypoint/answer: resource_not_found: no such path",
        ),
        ("not-json-200", "something that is not JSON: '<html>a login page</html>'"),
    ],
)
def test_a_failing_server_is_exit_4_with_its_own_message(
    broken: tuple[str, Broken], answer: str, says: str
) -> None:
    url, state = broken
    state.answer = ANSWERS[answer]
    result = check(url)
    assert result.exit_code == 4, result.output
    assert (
        says in result.output and "JSONDecodeError" not in result.output and "Traceback" not in result.output
    )


def test_a_slow_server_is_exit_4_after_the_opa_timeout(broken: tuple[str, Broken]) -> None:
    url, state = broken
    state.slow = True
    result = check(url, "--opa-timeout", "300ms")
    assert result.exit_code == 4, result.output
    assert (
        "did not answer POST /v1/data/dra/gitops_entrypoint/answer within 0.3s (--opa-timeout)"
        in result.output
    )


def test_a_server_that_is_down_is_exit_4_for_check_and_policy_test() -> None:
    result = check("http://127.0.0.1:9")
    assert result.exit_code == 4 and "OPA server at http://127.0.0.1:9 is unreachable" in result.output
    tested = CliRunner().invoke(
        cli, ["policy", "test", "--opa-url", "http://127.0.0.1:9", "-o", "json", "-q"]
    )
    assert tested.exit_code == 4
    document = json.loads(tested.stdout)  # one document, with the embedded results and the error
    assert document["ok"] is False and document["engines"]["embedded"]["ok"] is True
    assert "unreachable" in document["errors"][0]


@pytest.mark.parametrize("url", ["ftp://x:1", "http://", "http://host:port"])
def test_an_url_that_is_no_opa_url_is_a_usage_error(url: str) -> None:
    for args in (["check", str(EXAMPLE)], ["policy", "test"]):
        result = CliRunner().invoke(cli, [*args, "--opa-url", url])
        assert result.exit_code == 2, (args, result.output)
        assert "--opa-url" in result.output


def test_policy_test_on_the_server_prints_one_json_document(opa_server: StandInServer) -> None:
    result = CliRunner().invoke(cli, ["policy", "test", "--opa-url", opa_server.url, "-o", "json", "-q"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document["engines"]) == {"embedded", "opa"}
    assert document["engines"]["opa"]["summary"] == document["engines"]["embedded"]["summary"]
    assert document["ok"] is True and document["errors"] == [] and document["opa_differences"] == []
