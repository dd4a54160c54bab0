"""What each forge and each receiver gets, over real HTTP to local endpoints: the commit status request of
GitHub, GitLab and Gitea (path, auth header, body), the signed generic webhook and Slack's message."""

from __future__ import annotations

import hashlib
import hmac
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_for
from notify_support import Recorder

from reconciler.loop.config.targetfile import load_targets
from reconciler.notify.events import DESCRIPTION_LIMIT
from reconciler.notify.notifier import Notifier, TargetReports
from reconciler.notify.sender import RetryPolicy

SHA = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "tok-3f9a7c1e5b"
SECRET = "hook-secret-8d2e"


@pytest.fixture
def endpoint() -> Iterator[Recorder]:
    with Recorder() as recorder:
        yield recorder


def notifier_for(yaml_text: str, tmp_path: Path) -> tuple[Notifier, list[tuple[str, str, str]]]:
    (target,) = load_targets(textwrap.dedent(yaml_text), "targets.yaml")
    results: list[tuple[str, str, str]] = []
    notifier = Notifier(
        {target.name: TargetReports(target.commit_status, target.notifications)},
        lambda *result: results.append(result),
        RetryPolicy(attempts=2, first_delay=0.05, timeout=30),
    )
    notifier.start()
    return notifier, results


def secrets(tmp_path: Path, url: str) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "secret").write_text(SECRET + "\n")
    (tmp_path / "url").write_text(url + "\n")


@pytest.mark.parametrize(
    ("provider", "path", "auth", "state_key", "states"),
    [
        (
            "github",
            "/repos/platform/dra/statuses/" + SHA,
            ("Authorization", f"Bearer {TOKEN}"),
            "context",
            ["pending", "failure"],
        ),
        (
            "gitea",
            "/repos/platform/dra/statuses/" + SHA,
            ("Authorization", f"token {TOKEN}"),
            "context",
            ["pending", "failure"],
        ),
        (
            "gitlab",
            "/projects/platform%2Fdra/statuses/" + SHA,
            ("Private-Token", TOKEN),
            "name",
            ["running", "failed"],
        ),
    ],
)
def test_each_forge_gets_its_commit_status_request(
    endpoint: Recorder,
    tmp_path: Path,
    provider: str,
    path: str,
    auth: tuple[str, str],
    state_key: str,
    states: list[str],
) -> None:
    secrets(tmp_path, endpoint.url)
    notifier, results = notifier_for(
        f"""\
        targets:
          - name: prod
            repo: https://git.example.com/platform/dra.git
            commitStatus:
              provider: {provider}
              apiUrl: {endpoint.url}/api
              tokenFile: {tmp_path / "token"}
              dashboardUrl: https://dash.example.com/t/{{target}}/c/{{sha}}
        """,
        tmp_path,
    )
    try:
        notifier.started("prod", SHA)
        finding = "10-driver/kubelet-plugin.yaml:12 driver-canary: " + "x" * 300
        notifier.finished("prod", "denied", SHA, finding)
        notifier.finished("prod", "unchanged", SHA)  # reports nothing
        got = wait_for(lambda: len(endpoint.requests()) >= 2 and endpoint.requests(), 30, "two statuses")
    finally:
        notifier.close(10)
    assert [r.path for r in got] == ["/api" + path] * 2
    assert all(r.headers[auth[0]] == auth[1] for r in got)
    bodies = [r.json() for r in got]
    assert [b["state"] for b in bodies] == states
    assert {b[state_key] for b in bodies} == {"dra-gitops/prod"}
    assert {b["target_url"] for b in bodies} == {f"https://dash.example.com/t/prod/c/{SHA}"}
    assert bodies[0]["description"] == "delivering"
    description = bodies[1]["description"]
    assert description.startswith("denied by policy: 10-driver/kubelet-plugin.yaml:12 driver-canary: xxx")
    assert len(description) == DESCRIPTION_LIMIT and description.endswith("…")
    assert results == [("prod", provider, "delivered")] * 2


def test_the_webhook_is_signed_and_slack_gets_text_and_blocks(tmp_path: Path) -> None:
    with Recorder() as hook, Recorder(default=200) as slack:
        secrets(tmp_path, hook.url + "/dra")
        (tmp_path / "slack").write_text(slack.url + "/services/T0/B0/XYZ\n")
        notifier, results = notifier_for(
            f"""\
            targets:
              - name: prod
                repo: https://git.example.com/platform/dra.git
                notifications:
                  - type: webhook
                    urlFile: {tmp_path / "url"}
                    secretFile: {tmp_path / "secret"}
                    events: [applied, rolled-back]
                  - type: slack
                    urlFile: {tmp_path / "slack"}
                    events: [rolled-back]
            """,
            tmp_path,
        )
        try:
            notifier.started("prod", SHA)  # `started` is not asked for: nothing is sent
            notifier.finished("prod", "denied", SHA, "no")  # nor `denied`
            notifier.finished(
                "prod", "rolled-back", SHA, "claim ml-team/shared-gpu not allocated", "verify-failed"
            )
            notifier.finished("prod", "applied", SHA)
            wait_for(lambda: len(hook.requests()) == 2 and len(slack.requests()) == 1, 30, "3 notifications")
        finally:
            notifier.close(10)
    rolled, applied = hook.requests()
    assert rolled.path == "/dra"
    for request in (rolled, applied):
        expected = "sha256=" + hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
        assert request.headers["X-Dra-Gitops-Signature"] == expected
        assert request.headers["X-Dra-Gitops-Delivery"] == request.json()["id"]
    body = rolled.json()
    assert {k: body[k] for k in ("target", "event", "sha", "outcome", "message")} == {
        "target": "prod",
        "event": "rolled-back",
        "sha": SHA,
        "outcome": "rolled-back",
        "message": "claim ml-team/shared-gpu not allocated",
    }
    assert body["description"] == "verify-failed, rolled back: claim ml-team/shared-gpu not allocated"
    assert body["time"].endswith("Z") and rolled.headers["X-Dra-Gitops-Event"] == "rolled-back"
    assert applied.json()["event"] == "applied" and applied.json()["id"] != body["id"]
    (message,) = slack.requests()
    assert message.path == "/services/T0/B0/XYZ"
    slack_body = message.json()
    assert slack_body["text"].startswith(":rewind: *prod* `0123456789ab`: verify-failed, rolled back: claim")
    assert [block["type"] for block in slack_body["blocks"]] == ["section", "context"]
    assert slack_body["blocks"][0]["text"] == {"type": "mrkdwn", "text": slack_body["text"]}
    assert "X-Dra-Gitops-Signature" not in message.headers
    assert sorted(results) == [("prod", "slack", "delivered")] + [("prod", "webhook", "delivered")] * 2


def test_the_same_event_for_the_same_commit_is_reported_once(endpoint: Recorder, tmp_path: Path) -> None:
    secrets(tmp_path, endpoint.url)
    notifier, results = notifier_for(
        f"""\
        targets:
          - name: prod
            repo: https://git.example.com/platform/dra.git
            notifications:
              - {{type: webhook, urlFile: {tmp_path / "url"}, events: [started, awaiting-approval, applied]}}
        """,
        tmp_path,
    )
    try:
        for _ in range(3):  # a promotion waiting for its approval, pass after pass
            notifier.finished("prod", "awaiting-approval", SHA, "waiting for dra-gitops approve")
        notifier.started("prod", SHA)
        notifier.finished("prod", "applied", SHA)
        notifier.started("prod", SHA)  # delivered again (a retry): reported again
        notifier.finished("prod", "applied", SHA)
        wait_for(lambda: len(results) == 5, 30, "five deliveries")
    finally:
        notifier.close(10)
    assert [r.json()["event"] for r in endpoint.requests()] == [
        "awaiting-approval",
        "started",
        "applied",
        "started",
        "applied",
    ]
    assert "X-Dra-Gitops-Signature" not in endpoint.requests()[0].headers  # no secretFile: unsigned
