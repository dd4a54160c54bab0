"""The controller's HTTP endpoints: probes, `/metrics` and the Git webhooks that trigger a pass.

Standard library only (`ThreadingHTTPServer` in a background thread). A webhook never triggers anything
unless it proves the secret of at least one target: GitHub's HMAC-SHA256 of the raw body, GitLab's token,
or a bearer token, each compared in constant time. A provider without any secret is disabled (404), so an
unauthenticated trigger is impossible by configuration. Bodies are limited before they are read; logs
carry method, path and status, never a header value, a query string or the body.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reconciler.errors import UserError
from reconciler.loop.metrics import Metrics
from reconciler.loop.targets import Secret, Target

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY = 1024 * 1024
# A client that stops sending mid-request must not hold a handler thread for ever.
SOCKET_TIMEOUT = 10.0
Trigger = Callable[[set[str] | None, str], None]
PROVIDERS = ("github", "gitlab", "generic")


def read_secret(secret: Secret, where: str) -> bytes:
    """The secret's bytes (a file's content without its trailing newline); UserError naming the flag or
    file when it cannot be read or is empty. The value itself never appears in a message."""
    if secret.value is not None:
        value = secret.value.encode()
        shown = where
    else:
        assert secret.file is not None
        shown = secret.file
        try:
            value = Path(secret.file).read_bytes().strip()
        except OSError as exc:
            raise UserError(f"cannot read the secret file: {exc.strerror}", where=shown) from exc
    if not value:
        raise UserError("the secret is empty", where=shown)
    return value


@dataclass(frozen=True)
class HookTarget:
    """What the webhook endpoints know of one target: what a push must name, and each provider's secret."""

    name: str
    repo: str
    branch: str | None
    tag_pattern: str | None = None
    github_secret: bytes | None = field(default=None, repr=False)
    gitlab_token: bytes | None = field(default=None, repr=False)
    generic_token: bytes | None = field(default=None, repr=False)

    @classmethod
    def from_target(cls, target: Target) -> HookTarget:
        """Reads the target's secret files (errors name the file, or the flag for inline secrets)."""
        hooks = target.webhooks
        return cls(
            name=target.name,
            repo=target.repo,
            branch=target.branch,
            tag_pattern=target.tag_pattern,
            github_secret=read_secret(hooks.github_secret, "--webhook-secret")
            if hooks.github_secret
            else None,
            gitlab_token=read_secret(hooks.gitlab_token, "--webhook-token") if hooks.gitlab_token else None,
            generic_token=read_secret(hooks.generic_token, "--webhook-token")
            if hooks.generic_token
            else None,
        )

    def secret_for(self, provider: str) -> bytes | None:
        return {"github": self.github_secret, "gitlab": self.gitlab_token, "generic": self.generic_token}[
            provider
        ]

    def follows(self, repo_urls: Iterable[str], ref: str) -> bool:
        """Whether a push of `ref` to a repository known by `repo_urls` concerns this target. Any tag push
        concerns a tag-pattern target: the source picks the newest matching tag itself."""
        ours = normalize_repo_url(self.repo)
        if not any(normalize_repo_url(url) == ours for url in repo_urls if url):
            return False
        if self.tag_pattern:
            return ref.startswith("refs/tags/")
        return ref == f"refs/heads/{self.branch}"


def normalize_repo_url(url: str) -> str:
    """`host/owner/repo` for https, ssh and scp-like URLs alike, so a push names the repository however
    the target spells it (`git@github.com:o/r.git` == `https://github.com/O/r`)."""
    text = url.strip()
    if "://" in text:
        parts = urlsplit(text)
        host, path = (parts.hostname or ""), parts.path
    elif "@" in text.split("/", 1)[0] and ":" in text:  # scp-like user@host:path
        host, path = text.split("@", 1)[1].split(":", 1)
    else:  # a local path
        host, path = "", text
    return f"{host.lower()}/{path.strip('/').removesuffix('.git').lower()}"


def parse_listen(value: str, where: str = "--listen") -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or `:PORT` (all interfaces) into a bind address."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise UserError(f"expected HOST:PORT, got {value!r}", where=where)
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_text)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], endpoints: ControllerServer) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.endpoints = endpoints
        super().__init__(address, _Handler)


class _Reply(Exception):
    """Ends a request with a status; `result` is the webhook metric's label when it is a hook."""

    def __init__(self, status: int, message: str, result: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.result = result


class ControllerServer:
    """`/healthz`, `/readyz`, `/metrics` and `POST /hooks/{github,gitlab,generic}` on one port."""

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
    ) -> None:
        self.trigger = trigger
        self.metrics = metrics
        self.hook_targets = tuple(hook_targets)
        self.host = host
        self.port = port
        self.max_body = max_body
        # Liveness beyond "the process serves": e.g. whether the controller loop thread is still running.
        self.alive = alive
        self._ready = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> int:
        """Bind and serve in a background thread; the bound port (useful with port 0)."""
        self._server = _Server((self.host, self.port), self)
        self.port = int(self._server.server_address[1])
        # A short poll interval makes stop() prompt; an idle select costs nothing noticeable.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="dra-gitops-http", daemon=True
        )
        self._thread.start()
        log.info("serving /healthz, /readyz, /metrics and webhooks on %s:%d", self.host, self.port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def set_ready(self, ready: bool = True) -> None:
        """Ready after the first pass; not ready again while shutting down."""
        if ready:
            self._ready.set()
        else:
            self._ready.clear()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def enabled(self, provider: str) -> list[HookTarget]:
        return [target for target in self.hook_targets if target.secret_for(provider)]

    # ---- webhooks ---------------------------------------------------------------------------------------

    def authorized(self, provider: str, proof: bytes, body: bytes) -> list[HookTarget]:
        """Targets whose secret `proof` demonstrates. Every secret is compared, so the time taken does not
        tell which one matched."""
        matched = []
        for target in self.enabled(provider):
            secret = target.secret_for(provider)
            assert secret is not None
            if provider == "github":
                expected = b"sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
            else:
                expected = secret
            if hmac.compare_digest(expected, proof):
                matched.append(target)
        return matched

    def handle_hook(self, provider: str, headers: Any, body: bytes) -> tuple[int, dict[str, Any]]:
        """Authenticate, parse and trigger; raises _Reply for everything but an accepted trigger."""
        header = {"github": "X-Hub-Signature-256", "gitlab": "X-Gitlab-Token", "generic": "Authorization"}
        proof = str(headers.get(header[provider]) or "")
        if provider == "generic":
            scheme, _, token = proof.partition(" ")
            proof = token.strip() if scheme.lower() == "bearer" else ""  # the scheme is case-insensitive
        allowed = self.authorized(provider, proof.encode(), body) if proof else []
        if not allowed:
            raise _Reply(401, "unauthorized", "unauthorized")
        if provider == "generic":
            return self._generic(allowed, body)
        event = str(headers.get("X-GitHub-Event" if provider == "github" else "X-Gitlab-Event") or "")
        if provider == "github" and event == "ping":
            return 200, {"ok": True, "event": "ping"}
        if event not in ("push", "Push Hook", "Tag Push Hook"):
            raise _Reply(200, f"event {event!r} ignored", "ignored")
        payload = _json_object(_github_payload(headers, body) if provider == "github" else body)
        ref = payload.get("ref")
        if not isinstance(ref, str):
            raise _Reply(400, "a push event needs a `ref`", "bad_request")
        urls = _repository_urls(payload)
        names = {target.name for target in allowed if target.follows(urls, ref)}
        if not names:
            raise _Reply(200, f"no target follows {ref} of this repository", "ignored")
        sha = str(payload.get("after") or payload.get("checkout_sha") or "")[:12]
        self._fire(names, f"{provider} push {ref} {sha}".strip())
        return 202, {"triggered": sorted(names)}

    def _generic(self, allowed: list[HookTarget], body: bytes) -> tuple[int, dict[str, Any]]:
        names = {target.name for target in allowed}
        if body.strip():
            wanted = _json_object(body).get("target")
            if wanted is not None:
                if not isinstance(wanted, str):
                    raise _Reply(400, "`target` must be a string", "bad_request")
                # The same answer for an unknown target and one this token may not trigger.
                if wanted not in names:
                    raise _Reply(404, f"no target {wanted!r} accepts this token", "bad_request")
                names = {wanted}
        self._fire(names, "generic webhook")
        return 202, {"triggered": sorted(names)}

    def _fire(self, names: set[str], reason: str) -> None:
        log.info("webhook triggers %s (%s)", ", ".join(sorted(names)), reason)
        self.trigger(names, reason)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Reply(400, "the body is not valid JSON", "bad_request") from exc
    if not isinstance(value, dict):
        raise _Reply(400, "the body must be a JSON object", "bad_request")
    return value


def _github_payload(headers: Any, body: bytes) -> bytes:
    """GitHub sends JSON, or (content type `form`) the JSON in a `payload` form field."""
    if str(headers.get("Content-Type") or "").startswith("application/x-www-form-urlencoded"):
        fields = parse_qs(body.decode("utf-8", "replace"))
        if not fields.get("payload"):
            raise _Reply(400, "a form-encoded hook needs a `payload` field", "bad_request")
        return fields["payload"][0].encode()
    return body


def _repository_urls(payload: dict[str, Any]) -> list[str]:
    """Every URL by which a GitHub or GitLab push names its repository."""
    keys = ("clone_url", "ssh_url", "git_url", "html_url", "url", "git_http_url", "git_ssh_url", "web_url")
    urls: list[str] = []
    for section in ("repository", "project"):
        info = payload.get(section)
        if isinstance(info, dict):
            urls.extend(str(info[key]) for key in keys if isinstance(info.get(key), str))
            if isinstance(info.get("homepage"), str):
                urls.append(info["homepage"])
    return urls


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT
    server_version = "dra-gitops"
    sys_version = ""

    # ---- routing ----------------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        endpoints = self.server.endpoints
        path = urlsplit(self.path).path
        if path == "/healthz":
            alive = endpoints.alive is None or endpoints.alive()
            self._send(200 if alive else 503, b"ok\n" if alive else b"controller loop stopped\n")
        elif path == "/readyz":
            ready = endpoints.ready
            self._send(
                200 if ready else 503, b"ok\n" if ready else b"not ready: the first pass has not finished\n"
            )
        elif path == "/metrics":
            body, content_type = endpoints.metrics.render()
            self._send(200, body, content_type)
        elif path.startswith("/hooks/"):
            self._send(405, b"method not allowed\n", allow="POST")
        else:
            self._send(404, b"not found\n")

    def do_POST(self) -> None:  # noqa: N802
        endpoints = self.server.endpoints
        path = urlsplit(self.path).path
        provider = path.removeprefix("/hooks/") if path.startswith("/hooks/") else ""
        if path in ("/healthz", "/readyz", "/metrics"):
            self._send(405, b"method not allowed\n", allow="GET")
            return
        if provider not in PROVIDERS or not endpoints.enabled(provider):
            # Unknown, or no target has a secret for it: the hook does not exist.
            self._drain_or_close()
            self._send(404, b"not found\n")
            return
        try:
            body = self._read_body(endpoints.max_body)
            status, answer = endpoints.handle_hook(provider, self.headers, body)
            endpoints.metrics.record_webhook(provider, "accepted")
            self._send(status, json.dumps(answer).encode() + b"\n", "application/json")
        except _Reply as reply:
            if reply.result:
                endpoints.metrics.record_webhook(provider, reply.result)
            self._send(
                reply.status, json.dumps({"message": reply.message}).encode() + b"\n", "application/json"
            )
        except Exception:  # noqa: BLE001 - the trigger callback failed; the hook's sender should retry
            log.exception("webhook %s failed", provider)
            self._send(500, b'{"message": "internal error"}\n', "application/json")

    def do_PUT(self) -> None:  # noqa: N802
        self._not_allowed()

    def do_DELETE(self) -> None:  # noqa: N802
        self._not_allowed()

    def do_PATCH(self) -> None:  # noqa: N802
        self._not_allowed()

    def do_HEAD(self) -> None:  # noqa: N802
        self._not_allowed()

    def _not_allowed(self) -> None:
        self._drain_or_close()
        path = urlsplit(self.path).path
        allow = "POST" if path.startswith("/hooks/") else "GET"
        self._send(405, b"method not allowed\n", allow=allow)

    # ---- bodies -----------------------------------------------------------------------------------------

    def _content_length(self) -> int | None:
        if self.headers.get("Transfer-Encoding"):
            raise _Reply(411, "a Content-Length is required", "bad_request")
        text = self.headers.get("Content-Length")
        if text is None:
            return 0
        if not text.strip().isdigit():
            raise _Reply(400, "invalid Content-Length", "bad_request")
        return int(text)

    def _read_body(self, limit: int) -> bytes:
        try:
            length = self._content_length()
        except _Reply:
            self.close_connection = True
            raise
        assert length is not None
        if length > limit:
            # Refused unread: the connection closes, so the rest of the body is never consumed.
            self.close_connection = True
            raise _Reply(413, f"the body is larger than {limit} bytes", "too_large")
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            raise _Reply(400, "the body ended early", "bad_request")
        return body

    def _drain_or_close(self) -> None:
        """A request we refuse without reading: its body must not be taken for the next request."""
        if self.headers.get("Content-Length", "0").strip() not in ("", "0") or self.headers.get(
            "Transfer-Encoding"
        ):
            self.close_connection = True

    def _send(
        self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", allow: str = ""
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if allow:
            self.send_header("Allow", allow)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    # ---- logging: path and status only ------------------------------------------------------------------

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = urlsplit(self.path).path if hasattr(self, "path") else "?"
        level = logging.DEBUG if path in ("/healthz", "/readyz", "/metrics") else logging.INFO
        log.log(level, "%s %s -> %s", getattr(self, "command", "?"), path, code)

    def log_error(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        # The base class formats the raw request line into some errors; keep only the status.
        code = args[0] if args and isinstance(args[0], int) else "?"
        log.debug("bad HTTP request from %s (%s)", self.client_address[0], code)
