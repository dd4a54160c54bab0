"""Delivery targets of the controller: what to follow (repo, ref, path) and where its state lives.

A target comes either from `--config FILE` (`targetfile.py`: every error pointing at `path:line`)
or from the single-target flags of `dra-gitops run` (errors naming the flag). Both go through one
validation, so a target means the same thing whichever way it was given. Pure: the only input is the
config text; secrets stay file paths (or the flag's value, never shown in a repr) until the edge reads them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import UserError
from reconciler.loop.config.durations import parse_duration
from reconciler.loop.config.gates import GATE_KEYS, Gates, build_gates
from reconciler.notify.config import CommitStatusConfig, NotificationConfig, resolve_repository

DEFAULT_STATE_NAMESPACE = "dra-gitops"
DEFAULT_BRANCH = "main"
DEFAULT_POLL_INTERVAL = 30.0
DEFAULT_GRACE = 60.0
# `dra-gitops-<name>` (state ConfigMap, Lease) must itself be a DNS label: 63 - len("dra-gitops-").
MAX_NAME_LENGTH = 52
RESOURCE_PREFIX = "dra-gitops-"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# git check-ref-format, the parts that matter for a branch given by hand.
_BAD_REF = re.compile(r"(\.\.|@\{|[\x00-\x20\x7f~^:?*\[\\]|//|^/|/$|^-|\.lock$|^\.|/\.|\.$|^@$)")
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")


@dataclass(frozen=True)
class Secret:
    """A secret given as a file path (config, `--x-file` flags) or inline (a flag); its value never shows."""

    file: str | None = None
    value: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class WebhookAuth:
    """Per-provider webhook credentials; a provider without one has its hook disabled for this target."""

    github_secret: Secret | None = None
    gitlab_token: Secret | None = None
    generic_token: Secret | None = None


@dataclass(frozen=True)
class ClusterRef:
    """The cluster a target's state and objects live in, when not the controller's own: a kubeconfig file
    (a mounted Secret) and/or one of its contexts (`loop/run/clusters.py` checks both and connects)."""

    kubeconfig: str | None = None
    context: str | None = None
    # `path:line` of each key (the target's own line when it came from `defaults`), for messages.
    kubeconfig_where: str = field(default="", compare=False)
    context_where: str = field(default="", compare=False)

    def describe(self) -> str:
        parts = [
            f"kubeconfig {self.kubeconfig}" if self.kubeconfig else "",
            f"context {self.context}" if self.context else "",
        ]
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Target:
    name: str
    repo: str
    branch: str | None = DEFAULT_BRANCH
    tag_pattern: str | None = None
    path: str = "."
    state_namespace: str = DEFAULT_STATE_NAMESPACE
    poll_interval: float = DEFAULT_POLL_INTERVAL
    grace: float = DEFAULT_GRACE
    ssh_key_file: str | None = None
    known_hosts_file: str | None = None
    token_file: str | None = None
    gpg_keyring: str | None = None
    ssh_allowed_signers: str | None = None
    git_revert_branch: str | None = None
    webhooks: WebhookAuth = WebhookAuth()
    # Argo CD's switches: delete what Git no longer has; put back what drifted from the last good revision.
    prune: bool = True
    self_heal: bool = True
    # Promotion from an upstream target, soak, approval, rollback rehearsal (`loop/config/gates.py`).
    gates: Gates = Gates()
    # Its own cluster (state, ApplySet, Events, objects); None: the controller's. Its Lease stays home.
    cluster: ClusterRef | None = None
    # Where the target was defined (`path:line` or "flags"), for messages about it.
    origin: str = field(default="flags", compare=False)
    # Outcomes reported back (`reconciler/notify/`): commit statuses on the forge, notifications.
    commit_status: CommitStatusConfig | None = None
    notifications: tuple[NotificationConfig, ...] = ()

    @property
    def lease_name(self) -> str:
        return RESOURCE_PREFIX + self.name


# ---- validation shared by the config file and the flags ---------------------------------------------------

# Config key -> flag name, for messages about flags; also the set of keys a target may have.
_FLAG_OF = {
    "name": "--target",
    "repo": "--repo",
    "branch": "--branch",
    "tagPattern": "--tag-pattern",
    "path": "--path",
    "stateNamespace": "--state-namespace",
    "pollInterval": "--poll-interval",
    "grace": "--grace",
    "sshKeyFile": "--ssh-key-file",
    "knownHostsFile": "--known-hosts-file",
    "tokenFile": "--token-file",
    "gpgKeyring": "--gpg-keyring",
    "sshAllowedSigners": "--ssh-allowed-signers",
    "gitRevertBranch": "--git-revert",
    "webhooks": "--webhook-secret",
    "prune": "--no-prune",
    "selfHeal": "--no-self-heal",
    "kubeconfig": "kubeconfig",
    "context": "context",
}
# Keys only a config file gives (no flag), each parsed from its nested YAML by `targetfile.py`.
_NOTIFY_KEYS = ("commitStatus", "notifications")
# The keys a target may have in a config file.
CONFIG_KEYS = (*_FLAG_OF, *_NOTIFY_KEYS, *GATE_KEYS)
WEBHOOK_KEYS = ("githubSecretFile", "gitlabTokenFile", "genericTokenFile")


def string_value(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"`{key}` must be a non-empty string", where=where)
    return value.strip()


def _optional_string(fields: Mapping[str, Any], key: str, where_of: Callable[[str], str]) -> str | None:
    value = fields.get(key)
    return None if value is None else string_value(value, key, where_of(key))


def check_name(name: str, key: str, where: str) -> str:
    if len(name) > MAX_NAME_LENGTH or not _DNS_LABEL.match(name):
        raise UserError(
            f"`{key}` {name!r} must be a DNS label (lower-case letters, digits and '-') of at most "
            f"{MAX_NAME_LENGTH} characters",
            where=where,
        )
    return name


def _check_branch(branch: str, key: str, where: str) -> str:
    if _BAD_REF.search(branch):
        raise UserError(f"`{key}` {branch!r} is not a valid Git branch name", where=where)
    return branch.removeprefix("refs/heads/")


def _check_path(path: str, where: str) -> str:
    normal = posixpath.normpath(path.strip() or ".")
    if normal.startswith("/") or normal == ".." or normal.startswith("../"):
        raise UserError(f"`path` {path!r} must be relative and stay inside the repository", where=where)
    return normal


def url_scheme(repo: str) -> str:
    """`ssh`, `https` (also http) or `local` (a path or file:// URL, as tests and mirrors use)."""
    lowered = repo.lower()
    if lowered.startswith("ssh://") or _SCP_LIKE.match(repo):
        return "ssh"
    if lowered.startswith(("https://", "http://")):
        return "https"
    if "://" in lowered and not lowered.startswith("file://"):
        scheme = lowered.split("://", 1)[0]
        raise UserError(f"unsupported repository URL scheme {scheme!r} (use https, ssh or file)")
    return "local"


def _check_repo(repo: str, where: str) -> str:
    try:
        scheme = url_scheme(repo)
    except UserError as exc:
        raise UserError(exc.detail, where=where) from exc
    if scheme == "https" and "@" in repo.split("://", 1)[1].split("/", 1)[0]:
        # A token in the URL ends up in logs, error messages and `git remote -v`.
        raise UserError("credentials must not be part of the repository URL; use a token file", where=where)
    return repo


def build_target(fields: Mapping[str, Any], where_of: Callable[[str], str], origin: str) -> Target:
    name = check_name(string_value(fields.get("name"), "name", where_of("name")), "name", where_of("name"))
    if fields.get("repo") is None:
        raise UserError("`repo` is required", where=where_of("repo"))
    repo = _check_repo(string_value(fields["repo"], "repo", where_of("repo")), where_of("repo"))
    branch = _optional_string(fields, "branch", where_of)
    tag_pattern = _optional_string(fields, "tagPattern", where_of)
    if branch and tag_pattern:
        raise UserError("give either `branch` or `tagPattern`, not both", where=where_of("tagPattern"))
    if not tag_pattern:
        branch = _check_branch(branch or DEFAULT_BRANCH, "branch", where_of("branch"))
    path = _check_path(str(fields.get("path") or "."), where_of("path"))
    namespace = _optional_string(fields, "stateNamespace", where_of) or DEFAULT_STATE_NAMESPACE
    check_name(namespace, "stateNamespace", where_of("stateNamespace"))
    poll = parse_duration(fields.get("pollInterval", DEFAULT_POLL_INTERVAL), where_of("pollInterval"))
    if poll <= 0:
        raise UserError("`pollInterval` must be longer than 0s", where=where_of("pollInterval"))
    grace = parse_duration(fields.get("grace", DEFAULT_GRACE), where_of("grace"))
    ssh_key = _optional_string(fields, "sshKeyFile", where_of)
    known_hosts = _optional_string(fields, "knownHostsFile", where_of)
    token = _optional_string(fields, "tokenFile", where_of)
    scheme = url_scheme(repo)
    for key, value, needs in (
        ("sshKeyFile", ssh_key, "ssh"),
        ("knownHostsFile", known_hosts, "ssh"),
        ("tokenFile", token, "https"),
    ):
        if value and scheme != needs:
            raise UserError(f"`{key}` needs an {needs} repository URL, not {repo!r}", where=where_of(key))
    revert = _optional_string(fields, "gitRevertBranch", where_of)
    if revert:
        _check_branch(revert, "gitRevertBranch", where_of("gitRevertBranch"))
        if revert == branch:
            raise UserError(
                "`gitRevertBranch` must differ from the followed branch (reverts go there for review)",
                where=where_of("gitRevertBranch"),
            )
    return Target(
        name=name,
        repo=repo,
        branch=None if tag_pattern else branch,
        tag_pattern=tag_pattern,
        path=path,
        state_namespace=namespace,
        poll_interval=poll,
        grace=grace,
        ssh_key_file=ssh_key,
        known_hosts_file=known_hosts,
        token_file=token,
        gpg_keyring=_optional_string(fields, "gpgKeyring", where_of),
        ssh_allowed_signers=_optional_string(fields, "sshAllowedSigners", where_of),
        git_revert_branch=revert,
        webhooks=fields.get("webhooks") or WebhookAuth(),
        prune=_flag(fields, "prune", where_of),
        self_heal=_flag(fields, "selfHeal", where_of),
        gates=build_gates(fields, where_of),
        cluster=_cluster(fields, where_of),
        origin=origin,
        commit_status=resolve_repository(fields["commitStatus"], repo)
        if fields.get("commitStatus")
        else None,
        notifications=tuple(fields.get("notifications") or ()),
    )


def _cluster(fields: Mapping[str, Any], where_of: Callable[[str], str]) -> ClusterRef | None:
    """The target's own cluster from `kubeconfig` and `context` (the files are checked when connecting)."""
    kubeconfig = _optional_string(fields, "kubeconfig", where_of)
    context = _optional_string(fields, "context", where_of)
    if kubeconfig is None and context is None:
        return None
    return ClusterRef(kubeconfig, context, where_of("kubeconfig"), where_of("context"))


def _flag(fields: Mapping[str, Any], key: str, where_of: Callable[[str], str]) -> bool:
    """A true/false switch, true when absent."""
    value = fields.get(key, True)
    if not isinstance(value, bool):
        raise UserError(f"`{key}` must be true or false, not {value!r}", where=where_of(key))
    return value


# ---- the single-target flags -------------------------------------------------------------------------------


def target_from_flags(
    *,
    repo: str | None,
    name: str = "default",
    branch: str | None = None,
    tag_pattern: str | None = None,
    path: str = ".",
    poll_interval: str | float = DEFAULT_POLL_INTERVAL,
    state_namespace: str = DEFAULT_STATE_NAMESPACE,
    grace: str | float = DEFAULT_GRACE,
    ssh_key_file: str | None = None,
    known_hosts_file: str | None = None,
    token_file: str | None = None,
    gpg_keyring: str | None = None,
    ssh_allowed_signers: str | None = None,
    git_revert_branch: str | None = None,
    webhook_secret: str | None = None,
    webhook_secret_file: str | None = None,
    webhook_token: str | None = None,
    webhook_token_file: str | None = None,
) -> Target:
    """The one target of `dra-gitops run --repo ...`. `--webhook-secret` is GitHub's HMAC secret;
    `--webhook-token` authenticates both GitLab (`X-Gitlab-Token`) and generic (bearer) hooks."""
    github = _flag_secret(webhook_secret, webhook_secret_file, "--webhook-secret")
    token = _flag_secret(webhook_token, webhook_token_file, "--webhook-token")
    fields: dict[str, Any] = {
        "name": name,
        "repo": repo,
        "branch": branch,
        "tagPattern": tag_pattern,
        "path": path,
        "stateNamespace": state_namespace,
        "pollInterval": poll_interval,
        "grace": grace,
        "sshKeyFile": ssh_key_file,
        "knownHostsFile": known_hosts_file,
        "tokenFile": token_file,
        "gpgKeyring": gpg_keyring,
        "sshAllowedSigners": ssh_allowed_signers,
        "gitRevertBranch": git_revert_branch,
        "webhooks": WebhookAuth(github_secret=github, gitlab_token=token, generic_token=token),
    }
    return build_target(fields, lambda key: _FLAG_OF.get(key, key), "flags")


def _flag_secret(value: str | None, file: str | None, flag: str) -> Secret | None:
    if value and file:
        raise UserError(f"give {flag} or {flag}-file, not both", where=flag)
    if value is not None and not value.strip():
        raise UserError("must not be empty", where=flag)
    if value:
        return Secret(value=value)
    return Secret(file=file) if file else None
