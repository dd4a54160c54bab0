"""Webhook deliveries over real HTTP: replays deduped, every call logged without secrets, forge-sized bodies."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.loop.httpserver import ControllerServer, HookTarget
from reconciler.loop.metrics import Metrics
from reconciler.loop.webhooks import DeliveryLog

SECRET = b"gh-secret-value"
TOKEN = b"gl-token-value"
TARGETS = (
    HookTarget(
        name="prod",
        repo="https://github.com/acme/fleet",
        branch="main",
        github_secret=SECRET,
        gitlab_token=TOKEN,
        generic_token=TOKEN,
    ),
)


class Trigger:
    def __init__(self) -> None:
        self.calls: list[tuple[set[str] | None, str]] = []
        self.fail = False

    def __call__(self, names: set[str] | None, reason: str) -> None:
        if self.fail:
            raise RuntimeError("the controller could not take the trigger")
        self.calls.append((names, reason))


@pytest.fixture
def trigger() -> Trigger:
    return Trigger()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def server(trigger: Trigger, metrics: Metrics) -> Iterator[ControllerServer]:
    endpoints = ControllerServer(trigger=trigger, metrics=metrics, hook_targets=TARGETS)
    endpoints.start()
    yield endpoints
    endpoints.stop()


def post(server: ControllerServer, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def github_push(pad: int = 0) -> bytes:
    payload = {"ref": "refs/heads/main", "after": "ab" * 20, "repository": {"clone_url": TARGETS[0].repo}}
    if pad:
        payload["commits"] = [{"message": "x" * 1000} for _ in range(pad // 1000)]
    return json.dumps(payload).encode()


def github_headers(body: bytes, delivery: str | None, secret: bytes = SECRET) -> dict[str, str]:
    headers = {
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest(),
        "X-GitHub-Event": "push",
        "Content-Type": "application/json",
    }
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    return headers


def webhook_counts(metrics: Metrics) -> dict[tuple[str, str], float]:
    body, _ = metrics.render()
    return {
        (sample.labels["provider"], sample.labels["result"]): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if sample.name == "dra_gitops_webhook_requests_total"
    }


# ---- replays ---------------------------------------------------------------------------------------------


def test_a_github_redelivery_is_answered_200_and_triggers_nothing(
    server: ControllerServer, trigger: Trigger, metrics: Metrics
) -> None:
    body = github_push()
    first = post(server, "/hooks/github", body, github_headers(body, "72d3162e-cc78-11e3-81ab-4c9367dc0958"))
    again = post(server, "/hooks/github", body, github_headers(body, "72d3162e-cc78-11e3-81ab-4c9367dc0958"))
    other = post(server, "/hooks/github", body, github_headers(body, "a-new-delivery"))
    assert first == (202, {"triggered": ["prod"]})
    assert again == (200, {"message": "duplicate delivery, ignored"})
    assert other[0] == 202
    assert len(trigger.calls) == 2
    assert webhook_counts(metrics) == {("github", "accepted"): 2, ("github", "duplicate"): 1}
    # Without a delivery id nothing can be told apart: every call is handled.
    for _ in range(2):
        assert post(server, "/hooks/github", body, github_headers(body, None))[0] == 202
    assert len(trigger.calls) == 4


@pytest.mark.parametrize("header", ["Idempotency-Key", "X-Gitlab-Event-UUID"])
def test_a_gitlab_retry_is_deduped_by_its_idempotency_header(
    server: ControllerServer, trigger: Trigger, header: str
) -> None:
    body = json.dumps({"ref": "refs/heads/main", "project": {"web_url": TARGETS[0].repo}}).encode()
    headers = {"X-Gitlab-Token": TOKEN.decode(), "X-Gitlab-Event": "Push Hook", header: "f00d-1"}
    assert post(server, "/hooks/gitlab", body, headers)[0] == 202
    assert post(server, "/hooks/gitlab", body, headers) == (200, {"message": "duplicate delivery, ignored"})
    assert len(trigger.calls) == 1


def test_only_authenticated_deliveries_are_remembered(server: ControllerServer, trigger: Trigger) -> None:
    body = github_push()
    # A caller without the secret cannot burn a delivery id before the forge sends it.
    assert post(server, "/hooks/github", body, github_headers(body, "d-1", secret=b"guess"))[0] == 401
    assert post(server, "/hooks/github", body, github_headers(body, "d-1"))[0] == 202
    assert len(trigger.calls) == 1


def test_a_delivery_that_failed_here_is_handled_when_retried(
    server: ControllerServer, trigger: Trigger
) -> None:
    body = github_push()
    trigger.fail = True
    assert post(server, "/hooks/github", body, github_headers(body, "d-2"))[0] == 500
    trigger.fail = False
    assert post(server, "/hooks/github", body, github_headers(body, "d-2"))[0] == 202
    assert len(trigger.calls) == 1


def test_the_delivery_memory_is_bounded() -> None:
    deliveries = DeliveryLog(capacity=3)
    assert all(deliveries.claim(key) for key in ("a", "b", "c", "d"))
    assert len(deliveries) == 3
    assert deliveries.claim("a")  # the oldest was forgotten
    assert not deliveries.claim("d")


# ---- logs ------------------------------------------------------------------------------------------------


def test_every_call_is_logged_with_provider_delivery_targets_and_result(
    server: ControllerServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="reconciler.loop.httpserver")
    body = github_push()
    post(server, "/hooks/github", body, github_headers(body, "dlv-accepted"))
    post(server, "/hooks/github", body, github_headers(body, "dlv-accepted"))
    post(server, "/hooks/github", body, github_headers(body, "dlv-forged", secret=b"forged-secret"))
    post(server, "/hooks/generic", b"", {"Authorization": f"Bearer {TOKEN.decode()}"})
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("webhook ")]
    assert lines == [
        "webhook github delivery dlv-accepted: 202 accepted (targets: prod)",
        "webhook github delivery dlv-accepted: 200 duplicate: duplicate delivery, ignored (targets: prod)",
        "webhook github delivery dlv-forged: 401 unauthorized (targets: -)",
        "webhook generic delivery (none): 202 accepted (targets: prod)",
    ]
    signature = github_headers(body, None)["X-Hub-Signature-256"]
    for secret in (SECRET.decode(), TOKEN.decode(), signature, "forged-secret", "clone_url"):
        assert secret not in caplog.text


# ---- body size -------------------------------------------------------------------------------------------


def test_a_push_of_several_mib_is_accepted_by_default(server: ControllerServer, trigger: Trigger) -> None:
    body = github_push(pad=3 * 1024 * 1024)
    assert len(body) > 3 * 1024 * 1024
    assert post(server, "/hooks/github", body, github_headers(body, "big"))[0] == 202
    assert len(trigger.calls) == 1


def test_the_limit_is_configurable(trigger: Trigger, metrics: Metrics) -> None:
    endpoints = ControllerServer(trigger=trigger, metrics=metrics, hook_targets=TARGETS, max_body=64 * 1024)
    endpoints.start()
    try:
        body = github_push(pad=100 * 1024)
        status, answer = post(endpoints, "/hooks/github", body, github_headers(body, "too-big"))
    finally:
        endpoints.stop()
    assert (status, answer) == (413, {"message": f"the body is larger than {64 * 1024} bytes"})
    assert trigger.calls == []
