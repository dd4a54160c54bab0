"""The Git webhooks that trigger a pass: who may call them, and what a push names.

A webhook never triggers anything unless it proves the secret of at least one target: GitHub's HMAC-SHA256
of the raw body, GitLab's token, or a bearer token, each compared in constant time. A provider without any
secret is disabled (404), so an unauthenticated trigger is impossible by configuration. The HTTP side
(bodies, statuses, routing) is in :mod:`reconciler.loop.httpserver`.

Forges redeliver: GitHub names each delivery (`X-GitHub-Delivery`, kept by a redelivery), GitLab sends
`Idempotency-Key` (the same on its retries) and `X-Gitlab-Event-UUID`. An authenticated call whose delivery
was already handled is answered 200 "duplicate delivery, ignored" (an error would make the forge retry
again) and triggers nothing. The ids remembered are bounded (`DELIVERIES_KEPT`, oldest forgotten first),
and only authenticated calls are remembered, so nobody without a secret can fill or probe the memory.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reconciler.errors import UserError
from reconciler.loop.config.targets import Secret, Target

Trigger = Callable[[set[str] | None, str], None]
PROVIDERS = ("github", "gitlab", "generic")
# Deliveries remembered for dedupe: a forge redelivers within hours, at most a few per push.
DELIVERIES_KEPT = 4096
# Headers naming a delivery, by provider, first present wins.
DELIVERY_HEADERS = {
    "github": ("X-GitHub-Delivery",),
    "gitlab": ("Idempotency-Key", "X-Gitlab-Event-UUID"),
    "generic": ("Idempotency-Key",),
}
_DELIVERY_ID_MAX = 128


def delivery_id(provider: str, headers: Any) -> str:
    """The delivery's id as the forge names it ("" when none), cut to printable characters: it is
    logged, and a caller without the secret chooses it."""
    for name in DELIVERY_HEADERS.get(provider, ()):
        value = str(headers.get(name) or "").strip()
        if value:
            return "".join(c for c in value[:_DELIVERY_ID_MAX] if c.isprintable() and not c.isspace())
    return ""


class DeliveryLog:
    """The deliveries handled lately, bounded; `claim` is atomic so two concurrent copies of one delivery
    trigger once."""

    def __init__(self, capacity: int = DELIVERIES_KEPT) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, key: str) -> bool:
        """True for a delivery not seen before (now remembered), False for a replay."""
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return False
            self._seen[key] = None
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)
            return True

    def forget(self, key: str) -> None:
        """A delivery that failed on our side: the forge's retry must be handled, not ignored."""
        with self._lock:
            self._seen.pop(key, None)

    def __len__(self) -> int:
        return len(self._seen)


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


class HookReply(Exception):
    """Ends a request with a status; `result` is the webhook metric's label when it is a hook."""

    def __init__(
        self, status: int, message: str, result: str | None = None, targets: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.result = result
        self.targets = tuple(targets)  # the targets the call concerned, for the log line


class Webhooks:
    """Authenticates and interprets webhook calls for a set of targets; `trigger` starts their passes."""

    def __init__(self, trigger: Trigger, hook_targets: Sequence[HookTarget] = ()) -> None:
        self.trigger = trigger
        self.hook_targets = tuple(hook_targets)
        self.deliveries = DeliveryLog()

    def enabled(self, provider: str) -> list[HookTarget]:
        return [target for target in self.hook_targets if target.secret_for(provider)]

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
        """Authenticate, parse and trigger; raises HookReply for everything but an accepted trigger."""
        header = {"github": "X-Hub-Signature-256", "gitlab": "X-Gitlab-Token", "generic": "Authorization"}
        proof = str(headers.get(header[provider]) or "")
        if provider == "generic":
            scheme, _, token = proof.partition(" ")
            proof = token.strip() if scheme.lower() == "bearer" else ""  # the scheme is case-insensitive
        allowed = self.authorized(provider, proof.encode(), body) if proof else []
        if not allowed:
            raise HookReply(401, "unauthorized", "unauthorized")
        delivery = delivery_id(provider, headers)
        if not delivery:
            return self._handle(provider, headers, body, allowed)
        # Per set of targets proven: one forge event may reach us through hooks of different secrets.
        key = " ".join([provider, delivery, *sorted(t.name for t in allowed)])
        if not self.deliveries.claim(key):
            raise HookReply(200, "duplicate delivery, ignored", "duplicate", [t.name for t in allowed])
        try:
            return self._handle(provider, headers, body, allowed)
        except HookReply as reply:
            if reply.status >= 400:
                self.deliveries.forget(key)
            raise
        except Exception:
            self.deliveries.forget(key)
            raise

    def _handle(
        self, provider: str, headers: Any, body: bytes, allowed: list[HookTarget]
    ) -> tuple[int, dict[str, Any]]:
        """An authenticated call: what it triggers."""
        if provider == "generic":
            return self._generic(allowed, body)
        event = str(headers.get("X-GitHub-Event" if provider == "github" else "X-Gitlab-Event") or "")
        if provider == "github" and event == "ping":
            return 200, {"ok": True, "event": "ping"}
        if event not in ("push", "Push Hook", "Tag Push Hook"):
            raise HookReply(200, f"event {event!r} ignored", "ignored", [t.name for t in allowed])
        payload = _json_object(_github_payload(headers, body) if provider == "github" else body)
        ref = payload.get("ref")
        if not isinstance(ref, str):
            raise HookReply(400, "a push event needs a `ref`", "bad_request")
        urls = _repository_urls(payload)
        names = {target.name for target in allowed if target.follows(urls, ref)}
        if not names:
            raise HookReply(
                200, f"no target follows {ref} of this repository", "ignored", [t.name for t in allowed]
            )
        sha = str(payload.get("after") or payload.get("checkout_sha") or "")[:12]
        self._fire(names, f"{provider} push {ref} {sha}".strip())
        return 202, {"triggered": sorted(names)}

    def _generic(self, allowed: list[HookTarget], body: bytes) -> tuple[int, dict[str, Any]]:
        names = {target.name for target in allowed}
        if body.strip():
            wanted = _json_object(body).get("target")
            if wanted is not None:
                if not isinstance(wanted, str):
                    raise HookReply(400, "`target` must be a string", "bad_request")
                # The same answer for an unknown target and one this token may not trigger.
                if wanted not in names:
                    raise HookReply(404, f"no target {wanted!r} accepts this token", "bad_request")
                names = {wanted}
        self._fire(names, "generic webhook")
        return 202, {"triggered": sorted(names)}

    def _fire(self, names: set[str], reason: str) -> None:
        self.trigger(names, reason)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HookReply(400, "the body is not valid JSON", "bad_request") from exc
    if not isinstance(value, dict):
        raise HookReply(400, "the body must be a JSON object", "bad_request")
    return value


def _github_payload(headers: Any, body: bytes) -> bytes:
    """GitHub sends JSON, or (content type `form`) the JSON in a `payload` form field."""
    if str(headers.get("Content-Type") or "").startswith("application/x-www-form-urlencoded"):
        fields = parse_qs(body.decode("utf-8", "replace"))
        if not fields.get("payload"):
            raise HookReply(400, "a form-encoded hook needs a `payload` field", "bad_request")
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
