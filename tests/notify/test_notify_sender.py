"""Delivery to endpoints that misbehave, over real HTTP: a 5xx retried with growing backoff (the same signed
bytes each time), a refused connection given up after the bounded tries, a 401 or a redirect never
retried nor followed, a hanging endpoint holding no other destination, a full queue dropping; and no URL or
token in the logs."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest
from helpers import wait_for
from notify_support import Recorder, closed_port_url

from reconciler.loop.config.targetfile import load_targets
from reconciler.notify.notifier import Notifier, TargetReports
from reconciler.notify.sender import RetryPolicy

SHA = "89abcdef0123456789abcdef0123456789abcdef"
TOKEN = "glpat-tok-5e1d9c"
SLACK_PATH = "/services/T01/B02/SeCrEtPaRt"


def notifier_for(
    tmp_path: Path, hooks: list[str], policy: RetryPolicy, forge: str | None = None
) -> tuple[Notifier, list[tuple[str, str, str]]]:
    """Target `prod`: a webhook (signed) per URL in `hooks`, and a GitLab status when `forge` is given."""
    (tmp_path / "secret").write_text("s3cret\n")
    (tmp_path / "token").write_text(TOKEN + "\n")
    entries = []
    for index, url in enumerate(hooks):
        (tmp_path / f"url{index}").write_text(url + "\n")
        entries.append(
            f"      - {{type: webhook, urlFile: {tmp_path / f'url{index}'}, secretFile: {tmp_path / 'secret'}}}"
        )
    status = (
        f"    commitStatus: {{provider: gitlab, apiUrl: '{forge}', repository: '42', tokenFile: {tmp_path / 'token'}}}\n"
        if forge
        else ""
    )
    notifications = "    notifications:\n" + "\n".join(entries) + "\n" if entries else ""
    text = "targets:\n  - name: prod\n    repo: /srv/git/dra\n" + status + notifications
    (target,) = load_targets(text, "targets.yaml")
    results: list[tuple[str, str, str]] = []
    notifier = Notifier(
        {"prod": TargetReports(target.commit_status, target.notifications)},
        lambda *result: results.append(result),
        policy,
    )
    notifier.start()
    return notifier, results


def test_a_5xx_is_retried_with_growing_backoff_and_the_same_signed_body(tmp_path: Path) -> None:
    with Recorder(answers=[500, 503]) as endpoint:
        notifier, results = notifier_for(
            tmp_path, [endpoint.url], RetryPolicy(attempts=5, first_delay=0.2, timeout=30)
        )
        try:
            notifier.finished("prod", "applied", SHA)
            wait_for(lambda: ("prod", "webhook", "delivered") in results, 60, "delivered on the third try")
        finally:
            notifier.close(10)
    first, second, third = endpoint.requests()
    assert results == [
        ("prod", "webhook", "retried"),
        ("prod", "webhook", "retried"),
        ("prod", "webhook", "delivered"),
    ]
    # Backoff: at least 0.2 s before the second try, twice that before the third.
    assert second.at - first.at >= 0.2
    assert third.at - second.at >= 0.4
    assert first.body == second.body == third.body
    assert len({r.headers["X-Dra-Gitops-Signature"] for r in (first, second, third)}) == 1


def test_a_refusing_endpoint_is_given_up_after_the_bounded_tries_without_leaking_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    down = closed_port_url()
    (tmp_path / "slack").write_text(down + SLACK_PATH + "\n")
    (tmp_path / "token").write_text(TOKEN + "\n")
    text = textwrap.dedent(
        f"""\
        targets:
          - name: prod
            repo: https://github.com/platform/dra.git
            commitStatus: {{provider: github, apiUrl: '{down}', tokenFile: {tmp_path / "token"}}}
            notifications:
              - {{type: slack, urlFile: {tmp_path / "slack"}}}
        """
    )
    (target,) = load_targets(text, "targets.yaml")
    results: list[tuple[str, str, str]] = []
    notifier = Notifier(
        {"prod": TargetReports(target.commit_status, target.notifications)},
        lambda *result: results.append(result),
        RetryPolicy(attempts=3, first_delay=0.05, timeout=30),
    )
    notifier.start()
    try:
        notifier.finished("prod", "rolled-back", SHA, "verification failed", "verify-failed")
        wait_for(lambda: results.count(("prod", "slack", "failed")) == 1, 60, "slack given up")
        wait_for(lambda: results.count(("prod", "github", "failed")) == 1, 60, "github given up")
    finally:
        notifier.close(10)
    for kind in ("slack", "github"):
        assert results.count(("prod", kind, "retried")) == 2
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "failed after 3 tries" in logged
    assert SLACK_PATH not in logged and "SeCrEt" not in logged and TOKEN not in logged
    assert "notification slack rolled-back for 89abcdef0123" in logged


@pytest.mark.parametrize("answer", [401, 422, 302])
def test_a_refusal_or_a_redirect_is_final(tmp_path: Path, answer: int) -> None:
    with Recorder(answers=[answer]) as endpoint:
        notifier, results = notifier_for(
            tmp_path, [], RetryPolicy(attempts=5, first_delay=0.05), endpoint.url
        )
        try:
            notifier.started("prod", SHA)
            wait_for(lambda: results, 30, "an end")
        finally:
            notifier.close(10)
        assert results == [("prod", "gitlab", "failed")]
        (request,) = endpoint.requests()  # tried once; a redirect not followed (the token stays here)
        assert request.path == f"/projects/42/statuses/{SHA}"


def test_a_hanging_endpoint_holds_no_other_destination_and_the_queue_is_bounded(tmp_path: Path) -> None:
    with Recorder() as stuck, Recorder() as fine:
        stuck.release.clear()
        notifier, results = notifier_for(
            tmp_path, [stuck.url, fine.url], RetryPolicy(attempts=1, timeout=60, queue_size=3)
        )
        try:
            notifier.finished("prod", "applied", SHA)  # one request to each
            assert stuck.holding.wait(30)
            wait_for(lambda: ("prod", "webhook", "delivered") in results, 30, "the other endpoint served")
            assert len(fine.requests()) == 1
            # Queued now: the held request; a report to both endpoints fits, the next one is dropped
            # (for both) and counted.
            fine.release.clear()  # held too from now on, so what the queue holds does not shrink meanwhile
            notifier.finished("prod", "denied", SHA, "no")
            notifier.finished("prod", "rolled-back", SHA, "no")
            assert results.count(("prod", "webhook", "dropped")) == 2
            stuck.release.set()
            fine.release.set()
            wait_for(lambda: results.count(("prod", "webhook", "delivered")) == 4, 60, "all delivered")
        finally:
            notifier.close(10)
        # In order per destination: the held one first.
        assert [r.json()["event"] for r in stuck.requests()] == ["applied", "denied"]
