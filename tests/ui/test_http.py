"""The dashboard over real HTTP against the simulated cluster after a demo-like history: pages checked
against `status -o json` and `inventory -o json`, headers, methods, the token, escaping."""

from __future__ import annotations

import html
import http.client
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from pass_support import TARGET
from ui_support import ANNOTATION_KEY, HOSTILE_ANNOTATION, HOSTILE_MESSAGE, World

from reconciler.loop.httpserver import ControllerServer
from reconciler.loop.metrics import Metrics
from reconciler.ui.app import Dashboard
from reconciler.ui.server import DashboardServer


def get(
    port: int,
    path: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def served(world: World) -> Iterator[int]:
    """The dashboard on `dra-gitops run`'s HTTP server, next to the probes, metrics and hooks."""
    server = ControllerServer(trigger=lambda names, reason: None, metrics=Metrics(), pages=world.dashboard)
    port = server.start()
    server.set_ready()
    try:
        yield port
    finally:
        server.stop()


def text_of(page: str) -> str:
    """The page's text as a reader sees it: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_targets_page_shows_what_status_json_says(world: World, served: int) -> None:
    status = world.cli_json("status", "--target", TARGET, "--history", "100")
    code, headers, page = get(served, "/")
    assert code == 200 and headers["content-type"].startswith("text/html")
    text = text_of(page)
    assert status["lastGood"][:12] in text
    assert status["lastAttempted"]["sha"][:12] in text
    assert "rolled-back" in text  # the last attempt's pass outcome, as a word
    assert f'href="/targets/{TARGET}/history"' in page
    assert f'href="/targets/{TARGET}/commits/{status["lastGood"]}"' in page
    assert "in progress" not in text.lower() or "nothing" in text


def test_history_lists_every_record_newest_first_linkable_by_sha(world: World, served: int) -> None:
    status = world.cli_json("status", "--target", TARGET, "--history", "100")
    code, _, page = get(served, f"/targets/{TARGET}/history")
    assert code == 200
    ids = [int(i) for i in re.findall(r'data-record="(\d+)"', page)]
    assert ids == [r["id"] for r in status["history"]]
    for sha in {r["sha"] for r in status["history"] if r.get("sha")}:
        assert f'id="{sha}"' in page
    text = text_of(page)
    # The denied commit: its subject as text, its findings; the failed one: its failure and rollback.
    assert HOSTILE_MESSAGE in text
    assert "driver-canary" in text
    assert "Rolled back to" in text
    assert "claim" in text and "→" in text and "ready ✓" in text
    assert "<script>window.pwned" not in page


def test_commit_page_and_report_match_check_markdown(world: World, served: int) -> None:
    from click.testing import CliRunner

    from reconciler.cli import cli

    denied, good = world.shas["denied"], world.shas["good"]
    code, _, page = get(served, f"/targets/{TARGET}/commits/{denied[:10]}")
    assert code == 200 and HOSTILE_MESSAGE in text_of(page) and denied in page
    code, _, page = get(served, f"/targets/{TARGET}/commits/{denied}/report")
    assert code == 200
    assert "Denied" in text_of(page) and "driver-canary" in text_of(page)
    code, headers, markdown = get(served, f"/targets/{TARGET}/commits/{denied}/report?format=markdown")
    assert code == 200 and headers["content-type"].startswith("text/markdown")
    repo = world.cache_dir / TARGET
    done = CliRunner().invoke(
        cli, ["check", "--repo", str(repo), "--base", good, "--head", denied, "-o", "markdown", "-q"]
    )
    assert done.exit_code == 1, done.output
    assert markdown == done.stdout
    # The HTML page holds the same findings as the Markdown.
    for rule in re.findall(r"\| (?:deny|warn) \| `[^`]*` \| `([^`]+)`", markdown):
        assert rule in text_of(page)


def test_a_commit_without_report_says_so(world: World, served: int) -> None:
    code, _, page = get(served, f"/targets/{TARGET}/commits/{'0' * 40}/report")
    assert code == 200
    assert "cannot be produced" in text_of(page)
    code, _, _ = get(served, f"/targets/{TARGET}/commits/{'0' * 40}/report?format=markdown")
    assert code == 404


def test_device_map_totals_add_up_to_inventory(world: World, served: int) -> None:
    def read() -> tuple[dict[str, Any], str] | None:
        """`inventory` and the page, once both saw the same devices (the world's pods may still settle)."""
        inventory = world.cli_json("inventory")
        code, _, page = get(served, "/devices")
        assert code == 200
        rows = re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td></tr>", page)
        shown = {driver: (int(d), int(a), int(f)) for driver, d, a, f in rows}
        expected = {
            k: (v["devices"], v["allocated"], v["free"])
            for k, v in inventory["drivers"].items()
            if v["devices"]
        }
        return (inventory, page) if shown == expected else None

    inventory, page = wait_for(read, 60, "the device map's totals equal inventory's")
    totals = inventory["totals"]
    assert re.search(
        rf"<strong>Total</strong></td><td>{totals['devices']}</td><td>{totals['allocated']}</td><td>{totals['free']}</td>",
        page,
    )
    assert page.count('data-state="allocated"') == totals["allocated"]
    assert page.count('class="tile ') - 4 == totals["devices"]  # the legend has one tile per state
    # The holder of each allocated device, and the hostile annotation shown as text.
    assert "ml-team/shared-gpu" in text_of(page)
    assert ANNOTATION_KEY in page and HOSTILE_ANNOTATION in text_of(page)
    assert "<img src=x" not in page


def test_device_map_filters(world: World, served: int) -> None:
    inventory = world.cli_json("inventory")
    node = inventory["nodes"][0]["name"]
    _, _, page = get(served, f"/devices?node={node}")
    assert f'data-node="{node}"' in page
    assert all(n == node for n in re.findall(r'data-node="([^"]*)"', page))
    _, _, page = get(served, "/devices?namespace=ml-team")
    states = re.findall(r'data-state="([a-z-]+)" data-device', page)
    assert states and set(states) == {"allocated"}
    _, _, page = get(served, "/devices?driver=nothing.example.com")
    assert "No device matches the filters." in page


def test_headers_methods_and_the_controllers_own_routes(served: int) -> None:
    for path in ("/", f"/targets/{TARGET}/history", "/devices", "/static/dashboard.css", "/api/version"):
        code, headers, _ = get(served, path)
        assert code == 200, path
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert headers["x-content-type-options"] == "nosniff"
    code, headers, body = get(served, "/", method="HEAD")
    assert code == 200 and body == "" and int(headers["content-length"]) > 0
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        code, headers, _ = get(served, "/", method=method, body=b"x")
        assert code == 405 and headers["allow"] == "GET, HEAD", method
    assert get(served, "/healthz")[0] == 200
    assert get(served, "/metrics")[0] == 200
    assert get(served, "/hooks/generic")[0] == 405
    assert get(served, "/nothing-here")[0] == 404
    assert get(served, "/static/../../etc/passwd")[0] == 404


def test_page_is_a_clean_document_without_inline_script(served: int) -> None:
    _, _, page = get(served, f"/targets/{TARGET}/history")
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/dashboard.js" defer>']
    assert "style=" not in page and " on" + "error=" not in page and "<style" not in page
    assert 'class="skip"' in page and 'id="main"' in page


def test_token_guards_the_pages_but_not_the_probes(world: World, tmp_path: Path) -> None:
    from reconciler.ui.app import read_token

    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    dashboard = Dashboard(world.dashboard.data, read_token(token_file))
    server = ControllerServer(trigger=lambda names, reason: None, metrics=Metrics(), pages=dashboard)
    port = server.start()
    try:
        assert get(port, "/")[0] == 401
        assert get(port, "/", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert get(port, "/", headers={"Authorization": "Bearer s3cret-token"})[0] == 200
        code, headers, _ = get(port, "/devices?token=s3cret-token&node=x")
        assert code == 303 and headers["location"] == "/devices?node=x"
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
        assert "s3cret-token" not in cookie  # the browser keeps a value derived from it
        # The way back is always this server: a path that a browser would read as another host is not.
        for sneaky in ("/\\evil.example.com", "//evil.example.com"):
            answer = dashboard("GET", f"{sneaky}?token=s3cret-token", {})
            assert answer.status == 303 and answer.headers["Location"] == "/", sneaky
        assert get(port, "/", headers={"Cookie": cookie})[0] == 200
        assert get(port, "/", headers={"Cookie": "dra_gitops_ui=s3cret-token"})[0] == 401
        assert get(port, "/healthz")[0] == 200 and get(port, "/metrics")[0] == 200
        assert get(port, "/static/dashboard.js")[0] == 200
    finally:
        server.stop()
    token_file.write_text("")
    with pytest.raises(Exception, match=r"token:1: the dashboard token file is empty"):
        read_token(token_file)


def test_ui_server_serves_the_same_pages(world: World) -> None:
    server = DashboardServer(world.dashboard, "127.0.0.1", 0)
    port = server.start()
    try:
        code, headers, page = get(port, "/")
        assert code == 200 and headers["x-content-type-options"] == "nosniff"
        assert TARGET in page
        assert get(port, "/", method="POST", body=b"{}")[0] == 405
    finally:
        server.stop()
