"""The dashboard as a WSGI application (Werkzeug routing, requests and responses), for any server:
`run`'s operator port and `ui`'s own (`reconciler/loop/http/wsgi.py` adds the security headers to every
answer and serves it on waitress).

GET and HEAD only, but the login form's POST. Who may read and from where is `auth.py`: the `Host`
header first (421 for a name this dashboard does not answer to), then the token, session or proxy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, Protocol

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from reconciler.errors import DraGitopsError
from reconciler.ui.auth import SESSION_COOKIE, Access, Gate, read_token
from reconciler.ui.devicemap import device_map_page
from reconciler.ui.devices import DeviceFilter
from reconciler.ui.history import commit_page, history_page, in_progress_sha, matching
from reconciler.ui.html import path
from reconciler.ui.render import render
from reconciler.ui.report import report_markdown, report_page
from reconciler.ui.targets import TargetView, targets_page

__all__ = ["Access", "Dashboard", "read_token"]

log = logging.getLogger(__name__)

STATIC = {"dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"}
# The paths the dashboard answers (the controller routes everything else).
PREFIXES = ("/targets/", "/static/", "/api/")
EXACT = frozenset({"/", "/devices", "/targets", "/login"})
HTML = "text/html; charset=utf-8"

ROUTES = Map(
    [
        Rule("/", endpoint="targets", methods=["GET"]),
        Rule("/targets", endpoint="targets_moved", methods=["GET"]),
        Rule("/devices", endpoint="devices", methods=["GET"]),
        Rule("/login", endpoint="login", methods=["GET", "POST"]),
        Rule("/api/version", endpoint="version", methods=["GET"]),
        Rule("/static/<name>", endpoint="static", methods=["GET"]),
        Rule("/targets/<name>", endpoint="target_moved", methods=["GET"]),
        Rule("/targets/<name>/history", endpoint="history", methods=["GET"]),
        Rule("/targets/<name>/commits/<sha>", endpoint="commit", methods=["GET"]),
        Rule("/targets/<name>/commits/<sha>/report", endpoint="report", methods=["GET"]),
    ],
    strict_slashes=False,
)


class DeviceSource(Protocol):
    cells: Any
    warnings: Any
    clusters: Any  # (key, label) of every cluster with a device map
    cluster: Any  # the key of this map's cluster
    error: Any  # why that cluster could not be read ("" when it was)
    pending: Any  # the claims waiting for a device


class Data(Protocol):
    """Where the pages' data comes from (`gather.ClusterData`, or plain data in tests and benchmarks)."""

    def targets(self) -> list[TargetView]: ...
    def target(self, name: str, shas: Sequence[str] = ()) -> TargetView | None: ...
    def version(self) -> str: ...
    def devices(self, cluster: str = "") -> DeviceSource | None: ...


def handles(path_only: str) -> bool:
    """Whether a path is the dashboard's."""
    return path_only in EXACT or path_only.startswith(PREFIXES)


def _html(status: int, document: str) -> Response:
    return Response(document, status, content_type=HTML)


def _message(status: int, title: str, message: str, kind: str = "info") -> Response:
    return _html(status, render("message.html", title=title, message=message, kind=kind, refresh=False))


class Dashboard:
    """The dashboard's WSGI application; `respond(request)` gives one answer."""

    def __init__(self, data: Data, token: str | None = None, access: Access | None = None) -> None:
        self.data = data
        self.access = access or Access(token=token)
        self.gate = Gate(self.access)

    @property
    def token(self) -> str | None:
        return self.access.token

    def handles(self, path_only: str) -> bool:
        return handles(path_only)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        return self.respond(Request(environ))(environ, start_response)

    def respond(self, request: Request) -> Response:
        if not self.gate.host_ok(request):
            return Response(
                "this dashboard does not answer to that host name (see --ui-host)\n",
                421,
                content_type="text/plain; charset=utf-8",
            )
        adapter = ROUTES.bind_to_environ(request.environ)
        try:
            endpoint, args = adapter.match()
        except MethodNotAllowed as exc:
            allowed = sorted(exc.valid_methods or ["GET", "HEAD"])
            answer = Response("method not allowed\n", 405, content_type="text/plain; charset=utf-8")
            answer.headers["Allow"] = ", ".join(m for m in ("GET", "HEAD", "POST") if m in allowed)
            return answer
        except NotFound:
            return _message(404, "Not found", "No such page.")
        except HTTPException as exc:  # a redirect of the router (a trailing slash)
            return exc.get_response(request.environ)
        if endpoint == "static":
            return _static(str(args["name"]))
        if endpoint == "login":
            return self._login(request)
        if not self.gate.allowed(request):
            return self._denied(request)
        try:
            return self._route(endpoint, args, request)
        except DraGitopsError as exc:
            log.info("dashboard %s: %s", request.path, exc)
            return _message(503, "Unavailable", f"The cluster could not be read: {exc}", "bad")
        except Exception:  # noqa: BLE001 - a page's bug must not take the server's thread with it
            log.exception("dashboard %s failed", request.path)
            return _message(500, "Error", "The page failed; the server's log says why.", "bad")

    # ---- who may read -----------------------------------------------------------------------------------

    def _denied(self, request: Request) -> Response:
        if self.access.auth == "token" and "token" in request.args:
            if not self.gate.token_ok(request.args["token"]):
                return self._login_form(401, request.path, "That token is not this dashboard's.")
            # The token leaves the address bar at once: the same page without it, with a session.
            rest = request.args.copy()
            rest.poplist("token")
            location = _local(request.path) + (f"?{_encode(rest)}" if rest else "")
            return self._with_session(request, redirect(location, 303))
        if self.access.auth == "proxy":
            return Response("sign in through the proxy\n", 401, content_type="text/plain; charset=utf-8")
        return self._login_form(401, request.full_path.rstrip("?"))

    def _login_form(self, status: int, next_page: str, message: str = "") -> Response:
        hours = self.access.session_seconds // 3600
        page = render(
            "login.html", title="Sign in", next=_local(next_page), message=message, hours=hours, refresh=False
        )
        answer = _html(status, page)
        answer.headers["WWW-Authenticate"] = 'Bearer realm="dra-gitops"'
        return answer

    def _login(self, request: Request) -> Response:
        if self.access.auth != "token" or self.access.token is None:
            return redirect("/", 303)
        if request.method != "POST":
            return self._login_form(200, request.args.get("next", "/"))
        next_page = request.form.get("next", "/")
        if not self.gate.token_ok(request.form.get("token", "")):
            return self._login_form(401, next_page, "That token is not this dashboard's.")
        return self._with_session(request, redirect(_local(next_page), 303))

    def _with_session(self, request: Request, answer: Response) -> Response:
        answer.set_cookie(
            SESSION_COOKIE,
            self.gate.new_session(),
            max_age=self.access.session_seconds,
            path="/",
            httponly=True,
            secure=self.gate.secure(request),
            samesite="Lax",
        )
        return answer

    # ---- pages ------------------------------------------------------------------------------------------

    def _route(self, endpoint: str, args: Mapping[str, Any], request: Request) -> Response:
        query = request.args
        if endpoint == "targets":
            return _html(200, targets_page(self.data.targets()))
        if endpoint == "targets_moved":
            return redirect("/", 308)
        if endpoint == "version":
            return Response(
                json.dumps({"version": self.data.version()}), 200, content_type="application/json"
            )
        if endpoint == "devices":
            devices = self.data.devices(query.get("cluster", ""))
            if devices is None:
                return _message(404, "Not found", "No such cluster.")
            chosen = DeviceFilter(query.get("driver", ""), query.get("node", ""), query.get("namespace", ""))
            document = device_map_page(
                devices.cells,
                chosen,
                devices.warnings,
                devices.clusters,
                devices.cluster,
                devices.error,
                pending=getattr(devices, "pending", ()),
                view=query.get("view", ""),
                live=getattr(devices, "live", None),
            )
            # A cluster that cannot be read: its page says why (with the choice of the others), as a 503.
            return _html(503 if devices.error else 200, document)
        name = str(args["name"])
        sha = str(args.get("sha") or "")
        view = self.data.target(name, [sha] if len(sha) == 40 else ())
        if view is None:
            return _message(404, "Not found", "No such target.")
        if endpoint == "target_moved":
            return redirect(path("targets", name, "history"), 308)
        if endpoint == "history":  # a target whose cluster cannot be read: the page says why, as a 503
            page = _number(query.get("page", "1"))
            return _html(503 if view.error else 200, history_page(view, query.get("outcome", ""), page))
        records = matching(view.status.get("history") or [], sha)
        current = in_progress_sha(view, sha)
        if not records and current is not None and endpoint == "commit":  # its pass is still delivering it
            if view.commits.get(current) is None and len(sha) != 40:
                view = self.data.target(name, [current]) or view
            return _html(200, commit_page(view, [], current))
        if not records:
            return _message(
                404,
                "Not found",
                "The history of this target holds no such commit (a full sha, or a prefix naming one commit).",
            )
        if endpoint == "commit":
            if view.commits.get(str(records[0].get("sha"))) is None and len(sha) != 40:
                view = self.data.target(name, [str(records[0].get("sha"))]) or view
            return _html(200, commit_page(view, records))
        if query.get("format") == "markdown":
            return Response(report_markdown(records[0]), 200, content_type="text/markdown; charset=utf-8")
        return _html(200, report_page(view, records[0]))


def _number(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 7 else 1


def _local(target: str) -> str:
    """A path of this server (never `//host` or `/\\host`: another site), else `/`."""
    if target.startswith("/") and target[1:2] not in ("/", "\\") and "\\" not in target:
        return target
    return "/"


def _encode(args: Any) -> str:
    from urllib.parse import urlencode

    return urlencode(list(args.items(multi=True)))


def _static(name: str) -> Response:
    if name not in STATIC:
        return Response("not found\n", 404, content_type="text/plain; charset=utf-8")
    body = resources.files("reconciler.ui").joinpath("static", name).read_bytes()
    answer = Response(body, 200, content_type=STATIC[name])
    answer.headers["Cache-Control"] = "no-cache"
    return answer
