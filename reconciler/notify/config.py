"""A target's `commitStatus` and `notifications` keys of the `run --config` file. Pure: the input is the
parsed YAML with the `path:line` of every value (`Located`), every error names one; secrets stay file
paths (the controller checks them when it starts, `notifier.py`, and reads them at each delivery).

    commitStatus:
      provider: github                  # github | gitlab | gitea (Forgejo too)
      apiUrl: https://api.github.com    # default for github and gitlab; required for gitea
      repository: platform/dra          # owner/name; GitLab: the project id or path; default: from `repo`
      tokenFile: /etc/dra-gitops/forge/token
      dashboardUrl: https://grafana.example.com/d/dra?var-target={target}&var-sha={sha}
    notifications:
      - type: webhook                   # webhook | slack
        urlFile: /etc/dra-gitops/notify/webhook-url
        secretFile: /etc/dra-gitops/notify/webhook-secret   # signs the body (X-Dra-Gitops-Signature)
        events: [applied, denied, rolled-back, awaiting-approval]
        targets: [production]           # only for these targets (useful in `defaults`)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from string import Formatter
from typing import Any

from reconciler.errors import UserError
from reconciler.notify.events import DEFAULT_EVENTS, EVENTS, Event

# A value read from the config file and its `path:line`; a mapping's value is a dict of Located, a list's
# a list of Located, a scalar's the scalar.
Located = tuple[Any, str]

PROVIDERS = ("github", "gitlab", "gitea")
DEFAULT_API_URLS = {"github": "https://api.github.com", "gitlab": "https://gitlab.com/api/v4"}
NOTIFICATION_TYPES = ("webhook", "slack")
COMMIT_STATUS_KEYS = ("provider", "apiUrl", "repository", "tokenFile", "dashboardUrl")
NOTIFICATION_KEYS = ("type", "urlFile", "secretFile", "events", "targets")
DASHBOARD_FIELDS = ("target", "sha")

_OWNER_NAME = re.compile(r"^[\w.-]+/[\w.-]+$")
_PROJECT = re.compile(r"^(\d+|[\w.-]+(/[\w.-]+)+)$")
# https://host/owner/name(.git), ssh://git@host/owner/name(.git), git@host:owner/name(.git)
_REPO_PATH = re.compile(r"^(?:[a-z+]+://[^/]+/|[\w.-]+@[\w.-]+:)(?P<path>[^?#]+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class CommitStatusConfig:
    provider: str
    token_file: str
    api_url: str
    repository: str | None  # None until resolved from the target's repository URL (`resolve_repository`)
    dashboard_url: str | None = None  # may hold {target} and {sha}
    where: str = field(default="", compare=False)
    token_where: str = field(default="", compare=False)


@dataclass(frozen=True)
class NotificationConfig:
    type: str
    url_file: str
    secret_file: str | None = None
    events: frozenset[Event] = DEFAULT_EVENTS
    targets: frozenset[str] | None = None  # None: every target that has it
    where: str = field(default="", compare=False)
    url_where: str = field(default="", compare=False)
    secret_where: str = field(default="", compare=False)
    targets_where: str = field(default="", compare=False)

    def wants(self, target: str, event: Event) -> bool:
        return event in self.events and (self.targets is None or target in self.targets)


def _mapping(located: Located, allowed: tuple[str, ...], key: str) -> dict[str, Located]:
    value, where = located
    if not isinstance(value, dict):
        raise UserError(f"`{key}` must be a mapping of settings", where=where)
    for name, (_, at) in value.items():
        if name not in allowed:
            raise UserError(
                f"unknown key {name!r} in `{key}` (expected one of: {', '.join(allowed)})", where=at
            )
    return value


def _string(fields: dict[str, Located], key: str, where: str, *, required: bool = False) -> str | None:
    if key not in fields:
        if required:
            raise UserError(f"`{key}` is required", where=where)
        return None
    value, at = fields[key]
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"`{key}` must be a non-empty string", where=at)
    return value.strip()


def _http_url(value: str, key: str, where: str) -> str:
    if not value.lower().startswith(("https://", "http://")):
        raise UserError(f"`{key}` must be an http(s) URL", where=where)
    if "@" in value.split("://", 1)[1].split("/", 1)[0]:
        raise UserError(f"`{key}` must not hold credentials; give a token file", where=where)
    return value.rstrip("/")


def _dashboard(value: str, where: str) -> str:
    _http_url(value, "dashboardUrl", where)
    try:
        names = {name for _, name, _, _ in Formatter().parse(value) if name is not None}
    except ValueError as exc:
        raise UserError(f"`dashboardUrl` is not a valid template: {exc}", where=where) from exc
    unknown = names - set(DASHBOARD_FIELDS)
    if unknown:
        raise UserError(
            f"`dashboardUrl` may hold {{target}} and {{sha}}, not {{{sorted(unknown)[0]}}}", where=where
        )
    return value


def commit_status_from(located: Located) -> CommitStatusConfig:
    fields = _mapping(located, COMMIT_STATUS_KEYS, "commitStatus")
    where = located[1]
    provider = _string(fields, "provider", where, required=True) or ""
    if provider not in PROVIDERS:
        raise UserError(
            f"`provider` {provider!r} must be one of: {', '.join(PROVIDERS)}", where=fields["provider"][1]
        )
    api = _string(fields, "apiUrl", where) or DEFAULT_API_URLS.get(provider)
    if api is None:
        raise UserError(
            f"`apiUrl` is required for {provider} (e.g. https://git.example.com/api/v1)", where=where
        )
    api = _http_url(api, "apiUrl", fields["apiUrl"][1] if "apiUrl" in fields else where)
    if "repository" in fields and isinstance(fields["repository"][0], int):  # a GitLab project id
        fields = {**fields, "repository": (str(fields["repository"][0]), fields["repository"][1])}
    repository = _string(fields, "repository", where)
    if repository is not None:
        repository = check_repository(provider, repository, fields["repository"][1])
    dashboard = _string(fields, "dashboardUrl", where)
    return CommitStatusConfig(
        provider=provider,
        token_file=_string(fields, "tokenFile", where, required=True) or "",
        api_url=api,
        repository=repository,
        dashboard_url=_dashboard(dashboard, fields["dashboardUrl"][1]) if dashboard else None,
        where=where,
        token_where=fields["tokenFile"][1],
    )


def check_repository(provider: str, repository: str, where: str) -> str:
    pattern, expected = (
        (_PROJECT, "a project id or group/project path")
        if provider == "gitlab"
        else (
            _OWNER_NAME,
            "owner/name",
        )
    )
    if not pattern.match(repository):
        raise UserError(f"`repository` {repository!r} must be {expected}", where=where)
    return repository


def resolve_repository(config: CommitStatusConfig, repo_url: str) -> CommitStatusConfig:
    """The forge repository a target's statuses go to: `repository`, else the path of its Git URL."""
    if config.repository is not None:
        return config
    match = _REPO_PATH.match(repo_url)
    path = match.group("path").strip("/") if match else ""
    if path.startswith("~"):  # ssh://host/~user/repo
        path = ""
    try:
        repository = check_repository(config.provider, path, config.where)
    except UserError:
        raise UserError(
            f"`commitStatus` needs `repository`: the repository URL {repo_url!r} does not name one",
            where=config.where,
        ) from None  # cause hidden: it says the same about an empty path
    return replace(config, repository=repository)


def _names(located: Located, key: str, allowed: tuple[str, ...] | None) -> tuple[frozenset[str], str]:
    value, where = located
    if not isinstance(value, list) or not value:
        raise UserError(f"`{key}` must be a non-empty list", where=where)
    names = set()
    for item, at in value:
        if not isinstance(item, str) or not item.strip():
            raise UserError(f"`{key}` must list names, not {item!r}", where=at)
        if allowed is not None and item not in allowed:
            raise UserError(f"unknown event {item!r} (expected one of: {', '.join(allowed)})", where=at)
        names.add(item)
    return frozenset(names), where


def notifications_from(located: Located) -> tuple[NotificationConfig, ...]:
    items, where = located
    if not isinstance(items, list) or not items:
        raise UserError("`notifications` must be a non-empty list", where=where)
    return tuple(_notification(item) for item in items)


def _notification(located: Located) -> NotificationConfig:
    fields = _mapping(located, NOTIFICATION_KEYS, "notifications")
    where = located[1]
    kind = _string(fields, "type", where, required=True) or ""
    if kind not in NOTIFICATION_TYPES:
        raise UserError(
            f"`type` {kind!r} must be one of: {', '.join(NOTIFICATION_TYPES)}", where=fields["type"][1]
        )
    secret = _string(fields, "secretFile", where)
    if secret and kind == "slack":
        raise UserError(
            "`secretFile` is for webhooks; Slack's URL is its secret", where=fields["secretFile"][1]
        )
    events: frozenset[Event] = DEFAULT_EVENTS
    if "events" in fields:
        names, _ = _names(fields["events"], "events", EVENTS)
        events = frozenset(Event(name) for name in names)
    targets, targets_where = _names(fields["targets"], "targets", None) if "targets" in fields else (None, "")
    return NotificationConfig(
        type=kind,
        url_file=_string(fields, "urlFile", where, required=True) or "",
        secret_file=secret,
        events=events,
        targets=targets,
        where=where,
        url_where=fields["urlFile"][1],
        secret_where=fields["secretFile"][1] if secret else "",
        targets_where=targets_where,
    )
