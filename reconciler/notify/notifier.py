"""What the controller calls: `started` when a pass begins delivering a new commit, `finished` with the
outcome of every pass. Each turns into the commit status and the notifications the target asks for,
queued on the `Sender`; nothing here waits for the network.

The secret files (token, webhook URL, signing secret) are checked when the notifier is built (a missing or
empty one is a config error at its `path:line`) and read again at each delivery, so a rotated Secret is
picked up without a restart.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from reconciler.errors import UserError
from reconciler.notify.config import CommitStatusConfig, NotificationConfig
from reconciler.notify.events import Event, Report, event_of, status_state
from reconciler.notify.forge import status_request
from reconciler.notify.hooks import slack_request, webhook_request
from reconciler.notify.request import HttpRequest
from reconciler.notify.sender import Job, RetryPolicy, Sender


@dataclass(frozen=True)
class TargetReports:
    """Where one target's outcomes go."""

    commit_status: CommitStatusConfig | None = None
    notifications: tuple[NotificationConfig, ...] = ()


def read_secret(path: str, key: str, where: str) -> str:
    """A secret file's content without surrounding whitespace; UserError at `where` when unreadable or empty."""
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise UserError(f"`{key}` {path}: cannot read it: {exc.strerror or exc}", where=where) from exc
    if not text:
        raise UserError(f"`{key}` {path} is empty", where=where)
    return text


def _read_url(config: NotificationConfig) -> str:
    url = read_secret(config.url_file, "urlFile", config.url_where)
    if not url.lower().startswith(("https://", "http://")) or any(c.isspace() for c in url):
        # The file's content is a secret: the message names the file, never what it holds.
        raise UserError(f"`urlFile` {config.url_file} must hold one http(s) URL", where=config.url_where)
    return url


class Notifier:
    def __init__(
        self,
        targets: Mapping[str, TargetReports],
        on_result: Callable[[str, str, str], None],
        policy: RetryPolicy | None = None,
    ) -> None:
        self.targets = {
            name: reports
            for name, reports in targets.items()
            if reports.commit_status or reports.notifications
        }
        for reports in self.targets.values():
            self._check(reports)
        self.sender = Sender(policy or RetryPolicy(), on_result)
        # Per target, the (sha, event) last reported: a pass that finds the same again (a commit still
        # awaiting approval at every poll) reports nothing new.
        self._last: dict[str, tuple[str, Event]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _check(reports: TargetReports) -> None:
        if reports.commit_status is not None:
            status = reports.commit_status
            read_secret(status.token_file, "tokenFile", status.token_where)
        for notification in reports.notifications:
            _read_url(notification)
            if notification.secret_file:
                read_secret(notification.secret_file, "secretFile", notification.secret_where)

    @property
    def active(self) -> bool:
        return bool(self.targets)

    def start(self) -> None:
        if self.active:
            self.sender.start()

    def close(self, timeout: float) -> None:
        if self.active:
            self.sender.close(timeout)

    # ---- what the controller reports ----------------------------------------------------------------

    def started(self, target: str, sha: str) -> None:
        """A pass began delivering `sha`: its commit status turns pending."""
        self._report(Report(target, sha, Event.STARTED, "started", at=_now()))

    def finished(
        self, target: str, outcome: str, sha: str | None, message: str = "", failed: str = ""
    ) -> None:
        """A pass ended; passes that decide nothing about a commit (unchanged, held, ...) report nothing."""
        event = event_of(outcome)
        if event is None or not sha:
            return
        self._report(Report(target, sha, event, str(outcome), message=message, failed=failed, at=_now()))

    def _report(self, report: Report) -> None:
        reports = self.targets.get(report.target)
        if reports is None:
            return
        with self._lock:
            key = (report.sha, report.event)
            if report.event != Event.DRIFT_CORRECTED and self._last.get(report.target) == key:
                return
            self._last[report.target] = key
        status = reports.commit_status
        if status is not None and status_state(report.event) is not None:
            self.sender.submit(
                Job(
                    f"{report.target}/status", report.target, status.provider, _status_builder(status, report)
                )
            )
        for index, notification in enumerate(reports.notifications):
            if notification.wants(report.target, report.event):
                self.sender.submit(
                    Job(
                        f"{report.target}/notification/{index}",
                        report.target,
                        notification.type,
                        _notification_builder(notification, report),
                    )
                )


def _status_builder(config: CommitStatusConfig, report: Report) -> Callable[[], HttpRequest | None]:
    def build() -> HttpRequest | None:
        return status_request(config, read_secret(config.token_file, "tokenFile", config.token_where), report)

    return build


def _notification_builder(config: NotificationConfig, report: Report) -> Callable[[], HttpRequest | None]:
    delivery_id = uuid.uuid4().hex

    def build() -> HttpRequest | None:
        url = _read_url(config)
        if config.type == "slack":
            return slack_request(url, report)
        secret = (
            read_secret(config.secret_file, "secretFile", config.secret_where) if config.secret_file else None
        )
        return webhook_request(url, secret.encode() if secret is not None else None, report, delivery_id)

    return build


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
