"""Delivers notification requests on a few background threads, so a forge or a webhook that is down, slow
or refusing never blocks or fails a pass (and one that hangs holds one thread, not the other destinations).

A request is queued (bounded: when full it is dropped and counted) and sent in order per destination
(the `pending` status of a commit never lands after its `success`); a destination failing with a
connection error, a timeout, 408, 429 or a 5xx is tried again after an exponential backoff, up to
`attempts` times, while the other destinations go on. Other answers (401, 404, 422, a redirect, which
would carry the token elsewhere) are final. Each end is logged by the request's label, never its URL or
headers, and counted through `on_result(target, kind, result)`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import DraGitopsError
from reconciler.notify.request import HttpRequest

log = logging.getLogger("dra_gitops.notify")

DELIVERED, RETRIED, FAILED, DROPPED = "delivered", "retried", "failed", "dropped"
_RETRIED_STATUSES = {408, 429}


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # tries per request, the first included
    first_delay: float = 1.0  # seconds before the second try; doubled for each next one
    max_delay: float = 60.0
    timeout: float = 10.0  # one request's connect and read
    queue_size: int = 1000  # requests waiting, all destinations together
    threads: int = 4  # destinations served at once: one that hangs holds one thread, not the others

    def delay(self, failures: int) -> float:
        return float(min(self.max_delay, self.first_delay * 2 ** max(0, failures - 1)))


@dataclass
class Job:
    """A request to one destination, built when it is first sent (so secrets are read off the pass's
    thread, and a rotated secret is picked up)."""

    destination: str  # requests to one destination go in order
    target: str
    kind: str  # the metric label: github, gitlab, gitea, webhook, slack
    build: Callable[[], HttpRequest | None]
    request: HttpRequest | None = None
    failures: int = 0
    due: float = 0.0
    seq: int = field(default=0)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error: following it would send the token or signed body to another address."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Refused(DraGitopsError):
    """The endpoint's answer says trying again will not help (401, 404, 422, a redirect)."""


class Sender:
    def __init__(self, policy: RetryPolicy, on_result: Callable[[str, str, str], None]) -> None:
        self.policy = policy
        self.on_result = on_result
        self._queues: dict[str, deque[Job]] = {}
        self._size = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._deadline: float | None = None
        self._seq = itertools.count()
        self._inflight: set[str] = set()  # destinations a thread is sending to now
        self._threads = [
            threading.Thread(target=self._loop, name=f"notify-sender-{n}", daemon=True)
            for n in range(max(1, policy.threads))
        ]
        self._opener = urllib.request.build_opener(_NoRedirect())

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job) -> bool:
        """Queue a request; False (and counted as dropped) when the queue is full or closed."""
        with self._cond:
            if self._stopping or self._size >= self.policy.queue_size:
                accepted = False
            else:
                job.seq, job.due = next(self._seq), time.monotonic()
                self._queues.setdefault(job.destination, deque()).append(job)
                self._size += 1
                accepted = True
                self._cond.notify_all()
        if not accepted:
            log.warning(
                "notification queue full or closed: %s dropped", job.kind, extra={"target": job.target}
            )
            self.on_result(job.target, job.kind, DROPPED)
        return accepted

    def close(self, timeout: float) -> None:
        """Stop taking requests; deliver what is queued for at most `timeout` seconds, drop the rest."""
        with self._cond:
            self._stopping = True
            self._deadline = time.monotonic() + timeout
            self._cond.notify_all()
        # The threads are daemons: one still inside a request at the deadline does not hold the exit.
        end = time.monotonic() + timeout + 1
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, end - time.monotonic()))

    # ---- the thread -----------------------------------------------------------------------------------

    def _next(self) -> Job | None:
        """The destination head due first, waiting for it; None when closed and done."""
        with self._cond:
            while True:
                now = time.monotonic()
                if self._stopping and (
                    not self._size or (self._deadline is not None and now >= self._deadline)
                ):
                    self._drop_all()
                    return None
                heads = [q[0] for d, q in self._queues.items() if d not in self._inflight]
                job = min(heads, key=lambda j: (j.due, j.seq), default=None)
                if job is not None and job.due <= now:
                    self._inflight.add(job.destination)
                    return job
                wait = None if job is None else job.due - now
                if self._deadline is not None:
                    wait = max(0.0, self._deadline - now) if wait is None else min(wait, self._deadline - now)
                self._cond.wait(wait)

    def _drop_all(self) -> None:
        """Drop what waits; a request being sent is left to its thread."""
        for destination, queue in list(self._queues.items()):
            sending = queue.popleft() if destination in self._inflight else None
            for job in queue:
                log.warning("shutting down: %s notification dropped", job.kind, extra={"target": job.target})
                self.on_result(job.target, job.kind, DROPPED)
                self._size -= 1
            queue.clear()
            if sending is not None:
                queue.append(sending)
            else:
                del self._queues[destination]
        self._cond.notify_all()

    def _loop(self) -> None:
        while (job := self._next()) is not None:
            done = self._attempt(job)
            with self._cond:
                self._inflight.discard(job.destination)
                if done:
                    queue = self._queues[job.destination]
                    queue.popleft()
                    self._size -= 1
                    if not queue:
                        del self._queues[job.destination]
                self._cond.notify_all()

    def _attempt(self, job: Job) -> bool:
        """One try; True when the job is finished (delivered or given up), False to try again later."""
        target = {"target": job.target}
        try:
            if job.request is None:
                job.request = job.build()
            if job.request is not None:
                self._post(job.request)
        except Refused as exc:
            log.warning("%s: refused, not retried: %s", self._label(job), exc, extra=target)
            self.on_result(job.target, job.kind, FAILED)
            return True
        except Exception as exc:  # whatever the network or a secret file does, the loop goes on
            job.failures += 1
            reason = _reason(exc, job.request)
            if job.failures >= self.policy.attempts:
                log.warning(
                    "%s: failed after %d tries: %s", self._label(job), job.failures, reason, extra=target
                )
                self.on_result(job.target, job.kind, FAILED)
                return True
            delay = self.policy.delay(job.failures)
            log.info(
                "%s: try %d failed (%s); again in %.1fs",
                self._label(job),
                job.failures,
                reason,
                delay,
                extra=target,
            )
            self.on_result(job.target, job.kind, RETRIED)
            job.due = time.monotonic() + delay
            return False
        if job.request is not None:
            log.info("%s: delivered", self._label(job), extra=target)
            self.on_result(job.target, job.kind, DELIVERED)
        return True

    @staticmethod
    def _label(job: Job) -> str:
        return f"notification {job.request.label if job.request else job.kind}"

    def _post(self, request: HttpRequest) -> None:
        call = urllib.request.Request(request.url, data=request.body, headers=request.headers, method="POST")
        try:
            with self._opener.open(call, timeout=self.policy.timeout) as answer:
                answer.read(65536)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code >= 500 or exc.code in _RETRIED_STATUSES:
                raise
            raise Refused(f"HTTP {exc.code}") from None  # cause hidden: its repr holds the URL


def _reason(exc: BaseException, request: HttpRequest | None) -> str:
    """Why a try failed, in words that never hold the URL or a header."""
    if isinstance(exc, urllib.error.HTTPError):
        text = f"HTTP {exc.code}"
    elif isinstance(exc, urllib.error.URLError):
        text = str(exc.reason)
    elif isinstance(exc, TimeoutError):
        text = "no answer in time"
    else:
        text = f"{type(exc).__name__}: {exc}"
    if request is not None:
        text = text.replace(request.url, "<url>")
        for value in request.headers.values():
            if len(value) >= 8:
                text = text.replace(value, "<secret>")
    return text
