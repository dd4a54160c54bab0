"""The dashboard's routes, answers and safety rules, for any HTTP server (`ui`'s and `run`'s).

GET and HEAD only. Every answer carries a Content-Security-Policy without inline script or style,
`X-Content-Type-Options: nosniff` and `frame-ancestors 'none'`. With a token (read from a file), every
page needs `Authorization: Bearer <token>`, or the cookie a browser gets by opening any page once with
`?token=<token>` (the page then reloads without it, so the token leaves the address bar).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from importlib import resources
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from reconciler.errors import DraGitopsError, UserError
from reconciler.ui.devicemap import device_map_page
from reconciler.ui.devices import DeviceFilter
from reconciler.ui.history import commit_page, history_page, matching
from reconciler.ui.html import Html, path
from reconciler.ui.layout import note, page
from reconciler.ui.report import CommitReport, report_page
from reconciler.ui.targets import TargetView, targets_page

log = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
TOKEN_COOKIE = "dra_gitops_ui"
STATIC = {"dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"}
# The paths the dashboard answers (the controller routes everything else as before).
PREFIXES = ("/targets/", "/static/", "/api/")
EXACT = frozenset({"/", "/devices", "/targets"})


class Headers(Protocol):
    """A request's headers, looked up without regard to case (`http.server`'s message)."""

    def get(self, name: str, default: None = None) -> str | None: ...


class DeviceSource(Protocol):
    cells: Any
    warnings: Any
    clusters: Any  # (key, label) of every cluster with a device map
    cluster: Any  # the key of this map's cluster
    error: Any  # why that cluster could not be read ("" when it was)


class Data(Protocol):
    """Where the pages' data comes from (`gather.ClusterData`, or plain data in tests and benchmarks)."""

    def targets(self) -> list[TargetView]: ...
    def target(self, name: str, shas: Sequence[str] = ()) -> TargetView | None: ...
    def report(self, view: TargetView, sha: str) -> CommitReport: ...
    def version(self) -> str: ...
    def devices(self, cluster: str = "") -> DeviceSource | None: ...


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    def all_headers(self) -> dict[str, str]:
        return {"Content-Type": self.content_type, **SECURITY_HEADERS, **self.headers}


def handles(path_only: str) -> bool:
    """Whether a path is the dashboard's."""
    return path_only in EXACT or path_only.startswith(PREFIXES)


def read_token(file: str | Path | None) -> str | None:
    """The token of a `--token-file` (its first line); UserError naming the file when it is empty."""
    if file is None:
        return None
    try:
        token = Path(file).read_text().strip()
    except OSError as exc:
        raise UserError(f"cannot read the dashboard token: {exc.strerror}", where=str(file)) from exc
    if not token:
        raise UserError("the dashboard token file is empty", where=f"{file}:1")
    return token


def _html(status: int, document: Html) -> Answer:
    return Answer(status, document.encode())


def _text(status: int, text: str, **headers: str) -> Answer:
    return Answer(status, text.encode(), "text/plain; charset=utf-8", dict(headers))


class Dashboard:
    """Answers one request: `dashboard(method, target, headers)` where `target` is the request's path and
    query as sent."""

    def __init__(self, data: Data, token: str | None = None) -> None:
        self.data = data
        self.token = token
        # The browser's cookie holds a value derived from the token, never the token itself.
        self._cookie = (
            hmac.new(token.encode(), b"dra-gitops dashboard cookie", hashlib.sha256).hexdigest()
            if token
            else ""
        )

    def handles(self, path_only: str) -> bool:
        return handles(path_only)

    def __call__(self, method: str, target: str, headers: Headers) -> Answer:
        parts = urlsplit(target)
        if method not in ("GET", "HEAD"):
            return _text(405, "method not allowed\n", Allow="GET, HEAD")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        denied = self._authorize(parts.path, query, headers)
        if denied is not None:
            return denied
        try:
            return self._route(parts.path, query)
        except DraGitopsError as exc:
            log.info("dashboard %s: %s", parts.path, exc)
            return _html(
                503, page("Unavailable", note(f"The cluster could not be read: {exc}", "bad"), refresh=False)
            )
        except Exception:  # noqa: BLE001 - a page's bug must not take the server's thread with it
            log.exception("dashboard %s failed", parts.path)
            return _html(
                500, page("Error", note("The page failed; the server's log says why.", "bad"), refresh=False)
            )

    def _authorize(self, path_only: str, query: dict[str, str], headers: Headers) -> Answer | None:
        if self.token is None or path_only.startswith("/static/"):
            return None
        auth = headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            if _same(auth.removeprefix("Bearer ").strip(), self.token):
                return None
        elif "token" in query:
            if _same(query["token"], self.token):
                rest = urlencode({k: v for k, v in query.items() if k != "token"})
                # Back to the same page of this server (never `//host` or `/\host`: another site).
                local = path_only if path_only.startswith("/") and path_only[1:2] not in ("/", "\\") else "/"
                set_cookie = f"{TOKEN_COOKIE}={self._cookie}; Path=/; HttpOnly; SameSite=Strict"
                location = local + (f"?{rest}" if rest else "")
                return _text(303, "see other\n", Location=location, **{"Set-Cookie": set_cookie})
        elif _same(_cookie(headers.get("Cookie") or ""), self._cookie):
            return None
        return _text(
            401,
            "a bearer token is required (Authorization: Bearer, or open the page once with ?token=)\n",
            **{"WWW-Authenticate": 'Bearer realm="dra-gitops"'},
        )

    def _route(self, path_only: str, query: dict[str, str]) -> Answer:
        if path_only == "/":
            return _html(200, targets_page(self.data.targets()))
        if path_only == "/targets":
            return _text(308, "moved\n", Location="/")
        if path_only == "/devices":
            devices = self.data.devices(query.get("cluster", ""))
            if devices is None:
                return _html(404, page("Not found", note("No such cluster."), refresh=False))
            chosen = DeviceFilter(query.get("driver", ""), query.get("node", ""), query.get("namespace", ""))
            document = device_map_page(
                devices.cells, chosen, devices.warnings, devices.clusters, devices.cluster, devices.error
            )
            # A cluster that cannot be read: its page says why (with the choice of the others), as a 503.
            return _html(503 if devices.error else 200, document)
        if path_only == "/api/version":
            return Answer(200, json.dumps({"version": self.data.version()}).encode(), "application/json")
        if path_only.startswith("/static/"):
            return _static(path_only.removeprefix("/static/"))
        segments = [unquote(s) for s in path_only.strip("/").split("/")]
        if len(segments) >= 2 and segments[0] == "targets":
            return self._target(segments[1], segments[2:], query)
        return _html(404, page("Not found", note("No such page."), refresh=False))

    def _target(self, name: str, rest: list[str], query: dict[str, str]) -> Answer:
        view = self.data.target(name, rest[1:2] if rest[:1] == ["commits"] else ())
        if view is None:
            return _html(404, page("Not found", note(f"No target {name!r}."), refresh=False))
        if not rest:
            return _text(308, "moved\n", Location=path("targets", name, "history"))
        if rest == ["history"]:  # a target whose cluster cannot be read: the page says why, as a 503
            return _html(503 if view.error else 200, history_page(view))
        if len(rest) in (2, 3) and rest[0] == "commits":
            sha = rest[1]
            if len(rest) == 2:
                return _html(200, commit_page(view, sha))
            if rest[2] == "report":
                found = matching(view.status.get("history") or [], sha)
                full = str(found[0].get("sha")) if found else sha
                report = self.data.report(view, full)
                if query.get("format") == "markdown":
                    if report.result is None:
                        return _text(404, f"{report.unavailable}\n")
                    return Answer(200, report.markdown.encode(), "text/markdown; charset=utf-8")
                return _html(200, report_page(report, found[0] if found else None))
        return _html(404, page("Not found", note("No such page."), refresh=False))


def _same(given: str, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def _cookie(header: str) -> str:
    """The dashboard's cookie in a Cookie header ("" when absent or the header is malformed)."""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # noqa: BLE001 - a malformed cookie header is no token
        return ""
    morsel = jar.get(TOKEN_COOKIE)
    return morsel.value if morsel is not None else ""


def _static(name: str) -> Answer:
    if name not in STATIC:
        return _text(404, "not found\n")
    body = resources.files("reconciler.ui").joinpath("static", name).read_bytes()
    return Answer(200, body, STATIC[name], {"Cache-Control": "no-cache"})
