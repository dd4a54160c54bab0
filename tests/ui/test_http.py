"""The dashboard over real HTTP (waitress) against the simulated cluster after a demo-like history: pages
checked against `status -o json` and `inventory -o json`, headers on every answer, methods, the Host
check, the token, its login form and session cookie, the proxy, escaping."""

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
from reconciler.ui.auth import Access, parse_cidrs
from reconciler.ui.server import DashboardServer

TOKEN = "s3cret-token-" + "z" * 32


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
    assert ids == [r["id"] for r in status["history"]][:25]
    anchors = re.findall(r'<tr id="([^"]+)"', page)
    assert len(anchors) == len(set(anchors)) == len(ids)  # unique, though a rollback shares its apply's id
    assert page.count("● live") == 1
    for sha in {r["sha"] for r in status["history"][:25] if r.get("sha")}:
        assert f'href="/targets/{TARGET}/commits/{sha}#record-' in page
    assert "<script>window.pwned" not in page
    # The failed commit's page: its failure, its rollback, its chain; the denied one's: its findings.
    code, _, page = get(served, f"/targets/{TARGET}/commits/{world.shas['bad']}")
    text = text_of(page)
    assert code == 200 and "Failure and diagnosis" in text and "Rolled back to" in text
    assert "claim" in text and "→" in text
    # Recorded by the pass that failed: its diagnosis, and the object it changed, field by field.
    assert 'class="diagnosis"' in page and "Evidence" in text
    assert "Changed objects" in text and "replicas" in text
    code, _, page = get(served, f"/targets/{TARGET}/commits/{world.shas['denied']}")
    assert HOSTILE_MESSAGE in text_of(page) and "driver-canary" in text_of(page)
    assert "<script>window.pwned" not in page


def test_commit_page_and_the_report_as_its_pass_recorded_it(world: World, served: int) -> None:
    denied = world.shas["denied"]
    status = world.cli_json("status", "--target", TARGET, "--history", "100")
    (recorded,) = [r for r in status["history"] if r["sha"] == denied][:1]
    code, _, page = get(served, f"/targets/{TARGET}/commits/{denied[:10]}")
    assert code == 200 and HOSTILE_MESSAGE in text_of(page) and denied in page
    code, _, page = get(served, f"/targets/{TARGET}/commits/{denied}/report")
    assert code == 200 and "Denied" in text_of(page)
    for decision in recorded["decisions"]:
        assert decision["rule"] in text_of(page) and decision["msg"] in text_of(page)
    code, headers, markdown = get(served, f"/targets/{TARGET}/commits/{denied}/report?format=markdown")
    assert code == 200 and headers["content-type"].startswith("text/markdown")
    assert markdown.startswith(f"## Policy report of {denied}") and "driver-canary" in markdown


def test_only_commits_of_the_history_have_pages(world: World, served: int) -> None:
    for sha in ("0" * 40, "main~0", "main^0", "HEAD", world.shas["good"][:3], "../../etc/passwd"):
        for suffix in ("", "/report", "/report?format=markdown"):
            code, headers, page = get(served, f"/targets/{TARGET}/commits/{sha}{suffix}")
            assert code == 404, (sha, suffix)
            assert headers["x-content-type-options"] == "nosniff"
            assert str(world.cache_dir) not in page and "/tmp" not in page


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
    # The holder of each allocated device (to its workload, target and live commit), and the hostile
    # annotation shown as text.
    assert "ml-team/shared-gpu" in text_of(page)
    status = world.cli_json("status", "--target", TARGET)
    assert f'href="/targets/{TARGET}/history"' in page and "workload" in text_of(page)
    assert f'href="/targets/{TARGET}/commits/{status["lastGood"]}"' in page
    assert 'id="pending"' in page
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
    for path in ("/nothing-here", "/static/../../etc/passwd", "/static/x.js", "/targets/ghost/history"):
        code, headers, _ = get(served, path)
        assert code == 404 and headers["x-content-type-options"] == "nosniff", path
        assert "frame-ancestors 'none'" in headers["content-security-policy"]


def test_page_is_a_clean_document_without_inline_script(served: int) -> None:
    _, _, page = get(served, f"/targets/{TARGET}/history")
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/dashboard.js" defer>']
    assert "style=" not in page and " on" + "error=" not in page and "<style" not in page
    assert 'class="skip"' in page and 'id="main"' in page


def test_token_guards_the_pages_but_not_the_probes(world: World, tmp_path: Path) -> None:
    from reconciler.ui.auth import read_token

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    dashboard = Dashboard(world.dashboard.data, read_token(token_file))
    server = ControllerServer(trigger=lambda names, reason: None, metrics=Metrics(), pages=dashboard)
    port = server.start()
    try:
        code, headers, page = get(port, "/devices?node=x")
        # A login form on 401 (no JavaScript needed), the way back kept in it.
        assert code == 401 and headers["content-type"].startswith("text/html")
        assert '<form method="post" action="/login"' in page and 'value="/devices?node=x"' in page
        assert headers["x-content-type-options"] == "nosniff"
        assert get(port, "/", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert get(port, "/", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        code, headers, _ = get(port, f"/devices?token={TOKEN}&node=x")
        assert code == 303 and headers["location"] == "/devices?node=x"
        cookie = headers["set-cookie"].split(";")[0]
        flags = [f.strip() for f in headers["set-cookie"].split(";")[1:]]
        assert {"HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=43200"} <= set(flags)
        assert "Secure" not in flags  # plain HTTP here
        assert TOKEN not in cookie  # the browser keeps a signed session, not the token
        assert get(port, "/", headers={"Cookie": cookie})[0] == 200
        # A link from the forge (another site) opens the page with the session (SameSite=Lax).
        cross = {"Cookie": cookie, "Sec-Fetch-Site": "cross-site", "Referer": "https://forge.example.com/x"}
        assert get(port, f"/targets/{TARGET}/history", headers=cross)[0] == 200
        assert get(port, "/", headers={"Cookie": f"dra_gitops_session={TOKEN}"})[0] == 401
        # The login form: the token in the body, never in a URL; then only the session travels.
        form = f"token={TOKEN}&next=/devices".encode()
        code, headers, _ = get(
            port, "/login", "POST", {"Content-Type": "application/x-www-form-urlencoded"}, form
        )
        assert code == 303 and headers["location"] == "/devices" and "SameSite=Lax" in headers["set-cookie"]
        wrong = b"token=nope&next=/"
        assert (
            get(port, "/login", "POST", {"Content-Type": "application/x-www-form-urlencoded"}, wrong)[0]
            == 401
        )
        for sneaky in ("//evil.example.com", "/\\evil.example.com", "https://evil.example.com/"):
            body = f"token={TOKEN}&next={sneaky}".encode()
            code, headers, _ = get(
                port, "/login", "POST", {"Content-Type": "application/x-www-form-urlencoded"}, body
            )
            assert code == 303 and headers["location"] == "/", sneaky
        assert get(port, "/healthz")[0] == 200 and get(port, "/metrics")[0] == 200
        assert get(port, "/static/dashboard.js")[0] == 200
    finally:
        server.stop()
    token_file.write_text("")
    with pytest.raises(Exception, match=r"token:1: the dashboard token file is empty"):
        read_token(token_file)
    token_file.write_text("x" * 31)
    with pytest.raises(Exception, match=r"token:1: the dashboard token is 31 bytes; at least 32"):
        read_token(token_file)


def test_sessions_expire_and_die_with_the_server(world: World) -> None:
    dashboard = Dashboard(world.dashboard.data, access=Access(token=TOKEN, session_seconds=1))
    server = DashboardServer(dashboard, "127.0.0.1", 0)
    port = server.start()
    try:
        cookie = get(port, f"/?token={TOKEN}")[1]["set-cookie"].split(";")[0]
        assert get(port, "/", headers={"Cookie": cookie})[0] == 200
        wait_for(lambda: get(port, "/", headers={"Cookie": cookie})[0] == 401, 30, "the session to expire")
    finally:
        server.stop()
    again = DashboardServer(Dashboard(world.dashboard.data, access=Access(token=TOKEN)), "127.0.0.1", 0)
    port = again.start()
    try:
        fresh = get(port, f"/?token={TOKEN}")[1]["set-cookie"].split(";")[0]
        other = Dashboard(world.dashboard.data, access=Access(token=TOKEN))
        assert other.gate.session_ok(fresh.split("=", 1)[1]) is False  # a new start: a new key
    finally:
        again.stop()


def test_host_header_is_checked(world: World) -> None:
    """DNS rebinding: a page of another site, its name pointed here, reads nothing."""
    dashboard = Dashboard(world.dashboard.data, access=Access(hosts=("dash.example.com",)))
    server = DashboardServer(dashboard, "127.0.0.1", 0)
    port = server.start()
    try:
        for host, expected in (
            ("evil.example.com", 421),
            ("evil.example.com:8090", 421),
            ("dash.example.com", 200),
            ("localhost:1234", 200),
            ("127.0.0.1", 200),
        ):
            code, headers, _ = get(port, "/", headers={"Host": host})
            assert code == expected, host
            assert headers["x-content-type-options"] == "nosniff"
    finally:
        server.stop()


def test_proxy_auth_believes_only_its_proxies(world: World) -> None:
    dashboard = Dashboard(
        world.dashboard.data, access=Access(auth="proxy", proxy_cidrs=parse_cidrs(["127.0.0.0/8"]))
    )
    outside = Dashboard(
        world.dashboard.data, access=Access(auth="proxy", proxy_cidrs=parse_cidrs(["10.0.0.0/8"]))
    )
    server, other = DashboardServer(dashboard, "127.0.0.1", 0), DashboardServer(outside, "127.0.0.1", 0)
    port, other_port = server.start(), other.start()
    try:
        assert get(port, "/")[0] == 401
        assert get(port, "/", headers={"X-Forwarded-User": "ann@example.com"})[0] == 200
        assert get(other_port, "/", headers={"X-Forwarded-User": "ann@example.com"})[0] == 401
    finally:
        server.stop()
        other.stop()
    secure = Dashboard(
        world.dashboard.data, access=Access(token=TOKEN, proxy_cidrs=parse_cidrs(["127.0.0.1/32"]))
    )
    server = DashboardServer(secure, "127.0.0.1", 0)
    port = server.start()
    try:
        headers = get(port, f"/?token={TOKEN}", headers={"X-Forwarded-Proto": "https"})[1]
        assert "Secure" in [f.strip() for f in headers["set-cookie"].split(";")]
    finally:
        server.stop()


def test_an_open_dashboard_is_refused_off_loopback() -> None:
    from reconciler.errors import UserError

    with pytest.raises(UserError, match="open to anyone who reaches 0.0.0.0"):
        Access().exposure("0.0.0.0", loopback=False)
    assert Access().exposure("127.0.0.1", loopback=True) is None
    assert Access(token=TOKEN).exposure("0.0.0.0", loopback=False) is None
    warning = Access(insecure_open=True).exposure("10.0.0.5", loopback=False)
    assert warning is not None and "--ui-insecure-open" in warning


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
