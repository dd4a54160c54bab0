"""The controller's HTTP endpoints on two listeners (`reconciler/loop/http/wsgi.py` serves them):

* the operator port (`--listen`): `/healthz`, `/readyz`, `/metrics` (prometheus-client's WSGI app) and the
  dashboard (`reconciler/ui/`, handed in as `pages`: a WSGI application of its own);
* the webhook receiver (`--webhook-listen`, what an Ingress may publish): `POST /hooks/{github,gitlab,
  generic}` only. Without a receiver of their own, the hooks are served on the operator port.

What a webhook must prove and what it triggers is :mod:`reconciler.loop.webhooks`; here are routing,
statuses and bodies (Werkzeug). Bodies are limited before they are read (waitress answers 413 from the
headers); logs carry method, path and status, never a header value, a query string or the body.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from prometheus_client import make_wsgi_app
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from reconciler.loop.http.wsgi import App, Environ, StartResponse, WsgiServer, parse_listen
from reconciler.loop.metrics import Metrics
from reconciler.loop.webhooks import (
    PROVIDERS,
    HookReply,
    HookTarget,
    Trigger,
    Webhooks,
    delivery_id,
    normalize_repo_url,
    read_secret,
)

__all__ = [
    "ControllerServer",
    "Pages",
    "HookTarget",
    "normalize_repo_url",
    "parse_listen",
    "read_secret",
]

log = logging.getLogger(__name__)

# GitHub caps a webhook payload at 25 MB (and drops larger ones); GitLab's are smaller.
DEFAULT_MAX_BODY = 25 * 1024 * 1024
# The operator port takes no body but the dashboard's login form.
OPERATOR_MAX_BODY = 64 * 1024
HOOK_PATHS = frozenset(f"/hooks/{provider}" for provider in PROVIDERS)


def _log_hook(
    provider: str, delivery: str, targets: Sequence[str], status: int, result: str, message: str
) -> None:
    """One line per webhook call, accepted or refused: never a secret, signature, token or body."""
    log.log(
        logging.WARNING if status >= 500 else logging.INFO,
        "webhook %s delivery %s: %d %s%s (targets: %s)",
        provider,
        delivery or "(none)",
        status,
        result or "-",
        f": {message}" if message and message != result else "",
        ", ".join(targets) or "-",
        extra={"target": ",".join(targets)} if targets else {},
    )


class Pages(Protocol):
    """The dashboard (`reconciler/ui/app.py`): the paths it answers, and a WSGI application answering them."""

    def handles(self, path: str) -> bool: ...

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]: ...


def _json(status: int, document: Any) -> Response:
    return Response(json.dumps(document) + "\n", status, content_type="application/json")


def _text(status: int, text: str) -> Response:
    return Response(text, status, content_type="text/plain; charset=utf-8")


_OPERATOR = Map(
    [
        Rule("/healthz", endpoint="healthz", methods=["GET"]),
        Rule("/readyz", endpoint="readyz", methods=["GET"]),
        Rule("/metrics", endpoint="metrics", methods=["GET"]),
    ]
)
_HOOKS = Map([Rule("/hooks/<provider>", endpoint="hook", methods=["POST"])])


class ControllerServer:
    """The operator port and, when `webhook_port` is set, the webhook receiver (see the module's doc)."""

    def __init__(
        self,
        *,
        trigger: Trigger,
        metrics: Metrics,
        hook_targets: Sequence[HookTarget] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        max_body: int = DEFAULT_MAX_BODY,
        alive: Callable[[], bool] | None = None,
        readiness: Callable[[], str | None] | None = None,
        pages: Pages | None = None,
        webhook_host: str = "127.0.0.1",
        webhook_port: int | None = None,
    ) -> None:
        self.metrics = metrics
        self.webhooks = Webhooks(trigger, hook_targets)
        self.host = host
        self.port = port
        self.max_body = max_body
        # Liveness beyond "the process serves": e.g. whether the controller loop thread is still running.
        self.alive = alive
        # Once ready: why the controller cannot reconcile some target now (None when it can).
        self.readiness = readiness
        # The dashboard at `/` (its token, if any, is its own: probes, metrics and hooks keep theirs).
        self.pages = pages
        # The webhook receiver's own listener (None: the hooks are on the operator port).
        self.webhook_host = webhook_host
        self.webhook_port = webhook_port
        self._metrics_app = make_wsgi_app(metrics.registry)
        self._ready = threading.Event()
        self._servers: list[WsgiServer] = []

    # ---- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> int:
        """Bind and serve in background threads; the operator port (useful with port 0)."""
        separate = self.webhook_port is not None
        operator = WsgiServer(
            self.operator_app,
            self.host,
            self.port,
            name="dra-gitops-http",
            max_body=OPERATOR_MAX_BODY if separate else self.max_body,
            on_refusal=None if separate else self._refused,
        )
        self.port = operator.start()
        self._servers = [operator]
        served = "/healthz, /readyz, /metrics" + (", the dashboard" if self.pages is not None else "")
        if separate:
            assert self.webhook_port is not None
            receiver = WsgiServer(
                self.hook_app,
                self.webhook_host,
                self.webhook_port,
                name="dra-gitops-webhooks",
                threads=2,
                max_body=self.max_body,
                on_refusal=self._refused,
            )
            try:
                self.webhook_port = receiver.start()
            except Exception:
                operator.stop()
                raise
            self._servers.append(receiver)
            log.info("serving webhooks on %s:%d", self.webhook_host, self.webhook_port)
        else:
            served += " and webhooks"
        log.info("serving %s on %s:%d", served, self.host, self.port)
        return self.port

    def stop(self) -> None:
        for server in self._servers:
            server.stop()
        self._servers = []

    def set_ready(self, ready: bool = True) -> None:
        """Ready after the first pass (and while `readiness` finds nothing wrong); not ready again while
        shutting down."""
        if ready:
            self._ready.set()
        else:
            self._ready.clear()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    # ---- the operator port -----------------------------------------------------------------------------

    def operator_app(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "/")
        if path.startswith("/hooks/") and self.webhook_port is None:
            return self.hook_app(environ, start_response)
        if self.pages is not None and self.pages.handles(path):
            return self.pages(environ, start_response)
        adapter = _OPERATOR.bind_to_environ(environ)
        try:
            endpoint, _ = adapter.match()
        except HTTPException as exc:
            answer: Response = _text(exc.code or 500, f"{exc.name.lower()}\n")
            if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
                answer.headers["Allow"] = ", ".join(sorted(exc.valid_methods))
            return answer(environ, start_response)
        if endpoint == "metrics":
            metrics_app: App = self._metrics_app
            return metrics_app(environ, start_response)
        return self._probe(endpoint)(environ, start_response)

    def _probe(self, endpoint: str) -> Response:
        if endpoint == "healthz":
            alive = self.alive is None or self.alive()
            return _text(200 if alive else 503, "ok\n" if alive else "controller loop stopped\n")
        if not self.ready:
            return _text(503, "not ready: the first pass has not finished\n")
        reason = self.readiness() if self.readiness else None
        return _text(503, f"not ready: {reason}\n") if reason is not None else _text(200, "ok\n")

    # ---- the webhook receiver ---------------------------------------------------------------------------

    def hook_app(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        adapter = _HOOKS.bind_to_environ(environ)
        try:
            _, args = adapter.match()
            answer = self._hook(str(args["provider"]), request)
        except NotFound:
            answer = _text(404, "not found\n")
        except MethodNotAllowed:
            answer = _text(405, "method not allowed\n")
            answer.headers["Allow"] = "POST"
        return answer(environ, start_response)

    def _hook(self, provider: str, request: Request) -> Response:
        webhooks = self.webhooks
        headers = request.headers
        if provider not in PROVIDERS or not webhooks.enabled(provider):
            # Unknown, or no target has a secret for it: the hook does not exist.
            if provider in PROVIDERS:
                _log_hook(provider, delivery_id(provider, headers), (), 404, "disabled", "no secret for it")
            return _text(404, "not found\n")
        delivery = delivery_id(provider, headers)
        try:
            status, answer = webhooks.handle_hook(provider, headers, request.get_data(cache=False))
            result, targets, message = "accepted", answer.get("triggered", []), ""
            document: Any = answer
        except HookReply as reply:
            status, targets, message = reply.status, reply.targets, reply.message
            result = reply.result or ""
            document = {"message": reply.message}
        except Exception:  # noqa: BLE001 - the trigger callback failed; the hook's sender should retry
            log.exception("webhook %s failed", provider)
            status, result, targets, message = 500, "error", (), "internal error"
            document = {"message": "internal error"}
        if result:
            self.metrics.record_webhook(provider, result)
        _log_hook(provider, delivery, targets, status, result or "", message)
        return _json(status, document)

    def _refused(self, status: int, path: str) -> None:
        """Waitress refused a request before the application saw it: a hook's is counted and logged."""
        if status == 413 and path in HOOK_PATHS:
            provider = path.removeprefix("/hooks/")
            if self.webhooks.enabled(provider):
                self.metrics.record_webhook(provider, "too_large")
                _log_hook(
                    provider, "", (), 413, "too_large", f"the body is larger than {self.max_body} bytes"
                )
