"""The controller's HTTP endpoints over real HTTP on 127.0.0.1 (waitress): probes, metrics and signed
webhooks, the two listeners, the request limits and the security headers on every answer."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.errors import UserError
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.config.targets import Secret, target_from_flags
from reconciler.loop.httpserver import (
    ControllerServer,
    HookTarget,
    normalize_repo_url,
    parse_listen,
    read_secret,
)
from reconciler.loop.metrics import Metrics

GITHUB_SECRET = b"gh-secret-value"
GITLAB_TOKEN = b"gl-token-value"
GENERIC_TOKEN = b"generic-token-value"

TARGETS = (
    HookTarget(
        name="prod",
        repo="git@github.com:acme/fleet.git",
        branch="main",
        github_secret=GITHUB_SECRET,
        gitlab_token=GITLAB_TOKEN,
        generic_token=GENERIC_TOKEN,
    ),
    HookTarget(
        name="staging", repo="https://github.com/acme/fleet", branch="staging", github_secret=GITHUB_SECRET
    ),
    HookTarget(
        name="releases",
        repo="https://github.com/acme/fleet",
        branch=None,
        tag_pattern="v*",
        github_secret=GITHUB_SECRET,
    ),
    HookTarget(
        name="lab", repo="https://gitlab.example.com/acme/lab.git", branch="main", generic_token=b"lab-token"
    ),
)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[set[str] | None, str]] = []

    def __call__(self, names: set[str] | None, reason: str) -> None:
        self.calls.append((names, reason))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def server(recorder: Recorder, metrics: Metrics) -> Iterator[ControllerServer]:
    endpoints = ControllerServer(trigger=recorder, metrics=metrics, hook_targets=TARGETS, max_body=4096)
    endpoints.start()
    yield endpoints
    endpoints.stop()


def request(
    server: ControllerServer, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, body=body or None, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read(), response
    finally:
        connection.close()


def push(ref: str = "refs/heads/main", clone_url: str = "https://github.com/acme/fleet.git") -> bytes:
    return json.dumps(
        {"ref": ref, "after": "0123456789abcdef0123", "repository": {"clone_url": clone_url, "ssh_url": ""}}
    ).encode()


def github_headers(body: bytes, secret: bytes = GITHUB_SECRET, event: str = "push") -> dict[str, str]:
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": event,
        "Content-Type": "application/json",
    }


def webhook_counts(metrics: Metrics) -> dict[tuple[str, str], float]:
    body, _ = metrics.render()
    counts = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "dra_gitops_webhook_requests_total":
                counts[(sample.labels["provider"], sample.labels["result"])] = sample.value
    return counts


# ---- probes and metrics ---------------------------------------------------------------------------------


def test_healthz_readyz_flip_and_metrics(server: ControllerServer, metrics: Metrics) -> None:
    assert request(server, "GET", "/healthz")[0] == 200
    status, body, _ = request(server, "GET", "/readyz")
    assert (status, body) == (503, b"not ready: the first pass has not finished\n")
    server.set_ready()
    assert request(server, "GET", "/readyz")[0] == 200
    server.set_ready(False)  # shutting down
    assert request(server, "GET", "/readyz")[0] == 503

    metrics.record_pass("prod", "applied", 0.2)
    status, body, response = request(server, "GET", "/metrics")
    assert status == 200 and response.getheader("Content-Type", "").startswith("text/plain; version=")
    families = {family.name: family for family in text_string_to_metric_families(body.decode())}
    (passes,) = [s for s in families["dra_gitops_passes"].samples if s.name == "dra_gitops_passes_total"]
    assert passes.labels == {"target": "prod", "outcome": "applied"} and passes.value == 1


def test_healthz_reports_a_stopped_controller_loop(recorder: Recorder, metrics: Metrics) -> None:
    loop_running = [True]
    endpoints = ControllerServer(trigger=recorder, metrics=metrics, alive=lambda: loop_running[0])
    endpoints.start()
    try:
        assert request(endpoints, "GET", "/healthz")[0] == 200
        loop_running[0] = False
        assert request(endpoints, "GET", "/healthz")[0] == 503
    finally:
        endpoints.stop()


def test_methods_and_paths(server: ControllerServer) -> None:
    assert request(server, "GET", "/nowhere")[0] == 404
    assert request(server, "POST", "/hooks/bitbucket", b"{}")[0] == 404
    status, _, response = request(server, "GET", "/hooks/github")
    assert status == 405 and response.getheader("Allow") == "POST"
    status, _, response = request(server, "POST", "/metrics", b"x")
    assert status == 405 and response.getheader("Allow") == "GET, HEAD"
    assert request(server, "DELETE", "/healthz")[0] == 405
    assert request(server, "HEAD", "/healthz")[0] == 200
    assert request(server, "PUT", "/hooks/generic", b"{}")[0] == 405


# ---- GitHub -------------------------------------------------------------------------------------------------


def test_github_push_triggers_the_targets_following_its_ref(
    server: ControllerServer, recorder: Recorder, metrics: Metrics
) -> None:
    body = push()
    status, answer, _ = request(server, "POST", "/hooks/github", body, github_headers(body))
    # `prod` follows git@github.com:acme/fleet.git: the https clone URL names the same repository.
    assert (status, json.loads(answer)) == (202, {"triggered": ["prod"]})
    assert recorder.calls == [({"prod"}, "github push refs/heads/main 0123456789ab")]

    tag = push("refs/tags/v1.2.0")
    assert request(server, "POST", "/hooks/github", tag, github_headers(tag))[0] == 202
    assert recorder.calls[-1][0] == {"releases"}

    other_branch = push("refs/heads/feature")
    status, answer, _ = request(server, "POST", "/hooks/github", other_branch, github_headers(other_branch))
    assert status == 200 and "no target follows refs/heads/feature" in json.loads(answer)["message"]
    other_repo = push(clone_url="https://github.com/acme/other.git")
    assert request(server, "POST", "/hooks/github", other_repo, github_headers(other_repo))[0] == 200
    assert len(recorder.calls) == 2
    assert webhook_counts(metrics) == {("github", "accepted"): 2, ("github", "ignored"): 2}


def test_github_ping_and_other_events(server: ControllerServer, recorder: Recorder) -> None:
    ping = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    status, answer, _ = request(server, "POST", "/hooks/github", ping, github_headers(ping, event="ping"))
    assert (status, json.loads(answer)) == (200, {"ok": True, "event": "ping"})
    issue = b'{"action": "opened"}'
    assert request(server, "POST", "/hooks/github", issue, github_headers(issue, event="issues"))[0] == 200
    assert recorder.calls == []


def test_github_form_encoded_push(server: ControllerServer, recorder: Recorder) -> None:
    body = urlencode({"payload": push().decode()}).encode()
    headers = {**github_headers(body), "Content-Type": "application/x-www-form-urlencoded"}
    assert request(server, "POST", "/hooks/github", body, headers)[0] == 202
    assert recorder.calls[0][0] == {"prod"}


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "sha256=" + "0" * 64,
        "sha1=" + hmac.new(GITHUB_SECRET, push(), hashlib.sha1).hexdigest(),
        "sha256=" + hmac.new(b"wrong-secret", push(), hashlib.sha256).hexdigest(),
        # A signature of another body: the signature must cover the exact bytes received.
        "sha256=" + hmac.new(GITHUB_SECRET, push("refs/heads/staging"), hashlib.sha256).hexdigest(),
    ],
)
def test_forged_or_missing_github_signature_is_401_and_counted(
    server: ControllerServer, recorder: Recorder, metrics: Metrics, signature: str | None
) -> None:
    headers = {"X-GitHub-Event": "push"}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    status, answer, _ = request(server, "POST", "/hooks/github", push(), headers)
    assert (status, json.loads(answer)) == (401, {"message": "unauthorized"})
    assert recorder.calls == []
    assert webhook_counts(metrics) == {("github", "unauthorized"): 1}


def test_malformed_github_json_is_400(server: ControllerServer, recorder: Recorder, metrics: Metrics) -> None:
    for body in (b"{not json", b"[1, 2]", b'{"repository": {}}'):
        assert request(server, "POST", "/hooks/github", body, github_headers(body))[0] == 400
    assert recorder.calls == []
    assert webhook_counts(metrics) == {("github", "bad_request"): 3}


# ---- GitLab and generic -------------------------------------------------------------------------------------


def test_gitlab_push_with_token(server: ControllerServer, recorder: Recorder, metrics: Metrics) -> None:
    body = json.dumps(
        {
            "object_kind": "push",
            "ref": "refs/heads/main",
            "checkout_sha": "fedcba9876543210",
            "project": {
                "git_ssh_url": "git@github.com:acme/fleet.git",
                "git_http_url": "https://github.com/acme/fleet.git",
            },
        }
    ).encode()
    headers = {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": GITLAB_TOKEN.decode()}
    assert request(server, "POST", "/hooks/gitlab", body, headers)[0] == 202
    assert recorder.calls == [({"prod"}, "gitlab push refs/heads/main fedcba987654")]
    for forged in (
        {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "gl-token-valuE"},
        {"X-Gitlab-Event": "Push Hook"},
    ):
        assert request(server, "POST", "/hooks/gitlab", body, forged)[0] == 401
    assert len(recorder.calls) == 1
    assert webhook_counts(metrics) == {("gitlab", "accepted"): 1, ("gitlab", "unauthorized"): 2}


def test_generic_bearer_token_triggers_its_targets(server: ControllerServer, recorder: Recorder) -> None:
    bearer = {"Authorization": f"Bearer {GENERIC_TOKEN.decode()}"}
    status, answer, _ = request(server, "POST", "/hooks/generic", b"", bearer)
    assert (status, json.loads(answer)) == (202, {"triggered": ["prod"]})
    assert request(server, "POST", "/hooks/generic", b'{"target": "prod"}', bearer)[0] == 202
    lab = {"Authorization": "bearer lab-token"}
    assert request(server, "POST", "/hooks/generic", b"{}", lab)[0] == 202
    assert recorder.calls == [
        ({"prod"}, "generic webhook"),
        ({"prod"}, "generic webhook"),
        ({"lab"}, "generic webhook"),
    ]
    # A token only triggers its own targets; an unknown target gets the same answer.
    assert request(server, "POST", "/hooks/generic", b'{"target": "prod"}', lab)[0] == 404
    assert request(server, "POST", "/hooks/generic", b'{"target": "ghost"}', lab)[0] == 404
    assert request(server, "POST", "/hooks/generic", b'{"target": 3}', lab)[0] == 400
    assert request(server, "POST", "/hooks/generic", b"target=prod", lab)[0] == 400
    for forged in ({"Authorization": "Bearer nope"}, {"Authorization": GENERIC_TOKEN.decode()}, {}):
        assert request(server, "POST", "/hooks/generic", b"", forged)[0] == 401
    assert len(recorder.calls) == 3


def test_a_provider_without_secrets_is_disabled(recorder: Recorder, metrics: Metrics) -> None:
    only_generic = (HookTarget(name="a", repo="/srv/a.git", branch="main", generic_token=b"t"),)
    endpoints = ControllerServer(trigger=recorder, metrics=metrics, hook_targets=only_generic)
    endpoints.start()
    try:
        body = push()
        assert request(endpoints, "POST", "/hooks/github", body, github_headers(body))[0] == 404
        assert request(endpoints, "POST", "/hooks/gitlab", body, {"X-Gitlab-Token": ""})[0] == 404
        assert request(endpoints, "POST", "/hooks/generic", b"", {"Authorization": "Bearer t"})[0] == 202
    finally:
        endpoints.stop()
    assert recorder.calls == [({"a"}, "generic webhook")]


# ---- size limit -----------------------------------------------------------------------------------------------


def test_oversized_body_is_413_unread_and_counted(
    server: ControllerServer, recorder: Recorder, metrics: Metrics
) -> None:
    body = b'{"ref": "refs/heads/main", "pad": "' + b"x" * 5000 + b'"}'
    status, _, response = request(server, "POST", "/hooks/github", body, github_headers(body))
    assert status == 413 and response.getheader("Connection") == "close"
    assert recorder.calls == []
    assert webhook_counts(metrics) == {("github", "too_large"): 1}


def test_413_is_sent_before_the_body_arrives(server: ControllerServer) -> None:
    # Announce 100 MiB and send none of it: the answer must come from the headers alone.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /hooks/generic HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer lab-token\r\n"
            b"Content-Length: 104857600\r\n\r\n"
        )
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413 ")


def test_chunked_bodies_are_decoded_within_the_same_limit(
    server: ControllerServer, recorder: Recorder
) -> None:
    """waitress decodes a chunked body and counts it against the same limit as an announced one."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /hooks/generic HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer lab-token\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        )
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 202 ")
    assert recorder.calls == [({"lab"}, "generic webhook")]
    chunk = b"x" * 3000
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /hooks/generic HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer lab-token\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 2
        )
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert len(recorder.calls) == 1


# ---- logs, secrets, helpers ------------------------------------------------------------------------------------


def test_logs_carry_no_secret_and_no_body(server: ControllerServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="reconciler.loop")
    body = push()
    request(server, "POST", "/hooks/github?token=query-secret", body, github_headers(body))
    request(
        server,
        "POST",
        "/hooks/github",
        body,
        {"X-Hub-Signature-256": "sha256=forged", "X-GitHub-Event": "push"},
    )
    request(server, "POST", "/hooks/generic", b"", {"Authorization": f"Bearer {GENERIC_TOKEN.decode()}"})
    text = caplog.text
    assert "POST /hooks/github -> 202" in text and "POST /hooks/github -> 401" in text
    for secret in ("query-secret", "forged", GENERIC_TOKEN.decode(), GITHUB_SECRET.decode(), "clone_url"):
        assert secret not in text


def test_hook_targets_read_secret_files(tmp_path: Path) -> None:
    (tmp_path / "github").write_text("file-secret\n")
    (tmp_path / "empty").write_text("\n")
    config = (
        "targets:\n  - name: a\n    repo: https://github.com/acme/fleet\n"
        f"    webhooks:\n      githubSecretFile: {tmp_path / 'github'}\n"
    )
    (target,) = load_targets(config, "targets.yaml")
    hook = HookTarget.from_target(target)
    assert hook.github_secret == b"file-secret" and hook.gitlab_token is None
    assert "file-secret" not in repr(hook)

    flags = HookTarget.from_target(target_from_flags(repo="/srv/a.git", webhook_token="inline"))
    assert flags.gitlab_token == flags.generic_token == b"inline" and flags.github_secret is None

    with pytest.raises(UserError, match=r"^.*/missing: cannot read the secret file: No such file"):
        read_secret(Secret(file=str(tmp_path / "missing")), "x")
    with pytest.raises(UserError, match=r"/empty: the secret is empty$"):
        read_secret(Secret(file=str(tmp_path / "empty")), "x")


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("git@github.com:Acme/Fleet.git", "github.com/acme/fleet"),
        ("https://github.com/acme/fleet", "github.com/acme/fleet"),
        ("https://github.com/acme/fleet.git/", "github.com/acme/fleet"),
        ("ssh://git@github.com:22/acme/fleet.git", "github.com/acme/fleet"),
        ("git://github.com/acme/fleet.git", "github.com/acme/fleet"),
        ("/srv/git/fleet.git", "/srv/git/fleet"),
    ],
)
def test_repository_urls_compare_across_schemes(url: str, normal: str) -> None:
    assert normalize_repo_url(url) == normal


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_listen(":9000") == ("0.0.0.0", 9000)
    assert parse_listen("[::1]:80") == ("::1", 80)
    for bad in ("8080", "host:", "host:99999", "host:http"):
        with pytest.raises(UserError, match="^--listen: expected HOST:PORT"):
            parse_listen(bad)


# ---- limits, headers and the two listeners ----------------------------------------------------------------


def raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer


def test_every_answer_carries_the_security_headers(server: ControllerServer) -> None:
    """The application's answers and waitress's own refusals alike (404, 405, 413, 414, 431, 400)."""
    answers = [
        request(server, "GET", "/nowhere")[2],
        request(server, "PUT", "/healthz", b"x")[2],
        request(server, "POST", "/hooks/github", b"x" * 5000)[2],
        request(server, "GET", "/healthz?" + "q" * 9000)[2],
        request(server, "GET", "/healthz", headers={"X-Big": "b" * 20000})[2],
        request(server, "GET", "/healthz", headers={"X-Huge": "b" * 70000})[2],
        request(server, "GET", "/healthz")[2],
    ]
    assert [a.status for a in answers] == [404, 405, 413, 414, 431, 431, 200]
    for answer in answers:
        assert answer.getheader("X-Content-Type-Options") == "nosniff", answer.status
        assert "frame-ancestors 'none'" in answer.getheader("Content-Security-Policy", ""), answer.status
        assert answer.getheader("Server") == "dra-gitops"
    garbage = raw(server.port, b"NOT HTTP AT ALL\r\n\r\n")
    assert garbage.split(b" ")[1] == b"400" and b"X-Content-Type-Options: nosniff" in garbage


def test_a_half_open_connection_holds_no_thread(server: ControllerServer) -> None:
    """Clients that stop mid-request (more of them than the server has threads) do not stop others."""
    stalled = []
    try:
        for _ in range(8):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(b"POST /hooks/generic HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            stalled.append(sock)
        assert request(server, "GET", "/healthz")[0] == 200
    finally:
        for sock in stalled:
            sock.close()


def test_the_webhook_receiver_serves_hooks_only(recorder: Recorder, metrics: Metrics) -> None:
    endpoints = ControllerServer(
        trigger=recorder, metrics=metrics, hook_targets=TARGETS, max_body=4096, webhook_port=0
    )
    operator = endpoints.start()
    assert endpoints.webhook_port not in (None, operator)
    receiver = endpoints.webhook_port
    assert receiver is not None

    def on(
        port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request(method, path, body=body or None, headers=headers or {})
            return connection.getresponse().status
        finally:
            connection.close()

    try:
        bearer = {"Authorization": f"Bearer {GENERIC_TOKEN.decode()}"}
        assert on(receiver, "POST", "/hooks/generic", b"", bearer) == 202
        assert on(operator, "POST", "/hooks/generic", b"", bearer) == 404  # the hooks left the operator port
        for path in ("/healthz", "/readyz", "/metrics", "/"):
            assert on(receiver, "GET", path) == 404, path  # what an Ingress publishes: the hooks alone
        assert on(operator, "GET", "/healthz") == 200 and on(operator, "GET", "/metrics") == 200
        body = b"x" * 5000
        assert on(receiver, "POST", "/hooks/generic", body, bearer) == 413
    finally:
        endpoints.stop()
    assert recorder.calls == [({"prod"}, "generic webhook")]
    assert webhook_counts(metrics) == {("generic", "accepted"): 1, ("generic", "too_large"): 1}
