"""Who may read the dashboard, and from where (pure of HTTP servers: it reads a Werkzeug request).

Three ways in, one chosen per start (`Access`):

* a **token** (`--token-file`/`--ui-token-file`, at least 32 bytes): `Authorization: Bearer <token>`, or a
  browser's session cookie, got by sending the token once (the login form a 401 shows, or `?token=` whose
  answer redirects to the same page without it). The cookie holds no token: a value signed with a key made
  at each start (a restart revokes every session), expiring (12 h by default), `HttpOnly`, `SameSite=Lax`
  (a link from the forge's commit status opens the page with the session), `Secure` over TLS or behind a
  trusted proxy saying `X-Forwarded-Proto: https`;
* a **reverse proxy** that authenticates (`--ui-auth=proxy`, the oauth2-proxy pattern): its user header is
  believed only from the proxies' addresses (`--ui-proxy-cidr`);
* **open**: on a loopback address only, unless `--ui-insecure-open` says otherwise (logged at each start).

Every page also checks the `Host` header against `--ui-host` and the loopback names, so a page of another
site that rebinds its DNS name to this address reads nothing.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from itsdangerous import BadSignature, URLSafeTimedSerializer
from werkzeug.sansio.utils import host_is_trusted
from werkzeug.wrappers import Request

from reconciler.errors import UserError

MIN_TOKEN_BYTES = 32
SESSION_COOKIE = "dra_gitops_session"
SESSION_SECONDS = 12 * 3600
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def read_token(file: str | Path | None) -> str | None:
    """The token of a `--token-file` (its first line); UserError naming the file when it is empty or
    shorter than `MIN_TOKEN_BYTES`. The token itself never appears in a message."""
    if file is None:
        return None
    try:
        token = Path(file).read_text().strip()
    except OSError as exc:
        raise UserError(f"cannot read the dashboard token: {exc.strerror}", where=str(file)) from exc
    if not token:
        raise UserError("the dashboard token file is empty", where=f"{file}:1")
    if len(token.encode()) < MIN_TOKEN_BYTES:
        raise UserError(
            f"the dashboard token is {len(token.encode())} bytes; at least {MIN_TOKEN_BYTES} are needed "
            "(e.g. `openssl rand -hex 32 > FILE`)",
            where=f"{file}:1",
        )
    return token


def parse_cidrs(values: Sequence[str], where: str = "--ui-proxy-cidr") -> tuple[Network, ...]:
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError as exc:
            raise UserError(f"not an address or CIDR: {value!r}", where=where) from exc
    return tuple(out)


@dataclass(frozen=True)
class Access:
    """How the dashboard lets readers in (see the module's doc)."""

    token: str | None = field(default=None, repr=False)
    auth: Literal["token", "proxy"] = "token"
    proxy_cidrs: tuple[Network, ...] = ()
    proxy_header: str = "X-Forwarded-User"
    hosts: tuple[str, ...] = ()
    insecure_open: bool = False
    session_seconds: int = SESSION_SECONDS

    @property
    def open(self) -> bool:
        return self.auth == "token" and self.token is None

    def exposure(self, host: str, loopback: bool, where: str = "--listen") -> str | None:
        """UserError when serving `host` would open the dashboard to the network without a token or a
        proxy; the warning to log at each start when `--ui-insecure-open` asks for it anyway."""
        if self.auth == "proxy" and not self.proxy_cidrs:
            raise UserError("--ui-auth=proxy needs --ui-proxy-cidr (the proxies' addresses)", where=where)
        if loopback or not self.open:
            return None
        if not self.insecure_open:
            raise UserError(
                f"the dashboard would be open to anyone who reaches {host}: give it a token "
                "(--ui-token-file / --token-file, at least 32 bytes), put it behind an authenticating "
                "proxy (--ui-auth=proxy --ui-proxy-cidr CIDR), listen on 127.0.0.1, or say "
                "--ui-insecure-open",
                where=where,
            )
        return f"the dashboard on {host} is open to anyone who reaches it (--ui-insecure-open)"


class Gate:
    """The checks of one running dashboard: its session key lives as long as it does."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self._sessions = URLSafeTimedSerializer(secrets.token_bytes(32), salt="dra-gitops dashboard session")
        self._trusted_hosts = [*LOOPBACK_HOSTS, *access.hosts]

    def host_ok(self, request: Request) -> bool:
        return host_is_trusted(request.host, self._trusted_hosts)

    def from_proxy(self, request: Request) -> bool:
        try:
            remote = ipaddress.ip_address(request.remote_addr or "")
        except ValueError:
            return False
        return any(remote in net for net in self.access.proxy_cidrs)

    def secure(self, request: Request) -> bool:
        """Whether the browser reached us over TLS (directly, or through a trusted proxy saying so)."""
        if request.scheme == "https":
            return True
        forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
        return forwarded == "https" and self.from_proxy(request)

    def allowed(self, request: Request) -> bool:
        """Whether the request may read pages (the token, a session or the proxy's word)."""
        access = self.access
        if access.auth == "proxy":
            return self.from_proxy(request) and bool(request.headers.get(access.proxy_header, "").strip())
        if access.token is None:
            return True
        auth = request.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            return self.token_ok(auth[7:].strip())
        return self.session_ok(request.cookies.get(SESSION_COOKIE, ""))

    def token_ok(self, given: str) -> bool:
        token = self.access.token
        return bool(given) and token is not None and secrets.compare_digest(given.encode(), token.encode())

    def session_ok(self, value: str) -> bool:
        if not value:
            return False
        try:
            self._sessions.loads(value, max_age=self.access.session_seconds)
        except BadSignature:  # SignatureExpired is one
            return False
        return True

    def new_session(self) -> str:
        return str(self._sessions.dumps({"v": 1}))
