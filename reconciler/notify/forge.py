"""Commit statuses as each forge takes them (pure): the request that sets the status `dra-gitops/<target>`
on a commit.

* GitHub: `POST {api}/repos/{owner}/{repo}/statuses/{sha}`, `{state, target_url, description, context}`,
  state pending|success|failure|error, `Authorization: Bearer <token>`.
* GitLab: `POST {api}/projects/{id}/statuses/{sha}`, `{state, name, target_url, description}`, state
  pending|running|success|failed|canceled, `PRIVATE-TOKEN: <token>`; a project path is URL-encoded.
* Gitea and Forgejo: `POST {api}/repos/{owner}/{repo}/statuses/{sha}`, `{state, target_url,
  description, context}`, state pending|success|error|failure|warning, `Authorization: token <token>`.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from reconciler.notify.config import CommitStatusConfig
from reconciler.notify.events import Report, StatusState, describe, status_state
from reconciler.notify.request import HttpRequest

CONTEXT_PREFIX = "dra-gitops/"

# Each forge's word for our states (GitHub and Gitea have no "running": a delivery is pending there).
_STATES = {
    "github": {
        StatusState.PENDING: "pending",
        StatusState.RUNNING: "pending",
        StatusState.SUCCESS: "success",
        StatusState.FAILURE: "failure",
    },
    "gitea": {
        StatusState.PENDING: "pending",
        StatusState.RUNNING: "pending",
        StatusState.SUCCESS: "success",
        StatusState.FAILURE: "failure",
    },
    "gitlab": {
        StatusState.PENDING: "pending",
        StatusState.RUNNING: "running",
        StatusState.SUCCESS: "success",
        StatusState.FAILURE: "failed",
    },
}


def context_of(target: str) -> str:
    return CONTEXT_PREFIX + target


def dashboard_link(config: CommitStatusConfig, report: Report) -> str | None:
    if not config.dashboard_url:
        return None
    return config.dashboard_url.format(target=quote(report.target, safe=""), sha=quote(report.sha, safe=""))


def status_request(config: CommitStatusConfig, token: str, report: Report) -> HttpRequest | None:
    """The request setting the report's commit status, None for an event that sets none."""
    state = status_state(report.event)
    if state is None:
        return None
    repository = config.repository or ""
    body: dict[str, str] = {"state": _STATES[config.provider][state], "description": describe(report)}
    link = dashboard_link(config, report)
    if link:
        body["target_url"] = link
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    sha = quote(report.sha, safe="")
    if config.provider == "gitlab":
        url = f"{config.api_url}/projects/{quote(repository, safe='')}/statuses/{sha}"
        body["name"] = context_of(report.target)
        headers["PRIVATE-TOKEN"] = token
    else:
        owner, name = repository.split("/", 1)
        url = f"{config.api_url}/repos/{quote(owner, safe='')}/{quote(name, safe='')}/statuses/{sha}"
        body["context"] = context_of(report.target)
        if config.provider == "github":
            headers["Authorization"] = f"Bearer {token}"
            headers["Accept"] = "application/vnd.github+json"
            headers["X-GitHub-Api-Version"] = "2022-11-28"
        else:
            headers["Authorization"] = f"token {token}"
    label = f"{config.provider} status {body.get('state')} for {report.sha[:12]}"
    return HttpRequest(label=label, url=url, body=json.dumps(body).encode(), headers=headers)
