"""The settings of `dra-gitops run` (`ControllerOptions`), apart from the controller that reads them, so a
worker names them without importing the controller."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.delivery.check import CheckOptions
from reconciler.loop.httpserver import DEFAULT_MAX_BODY, Pages
from reconciler.notify.sender import RetryPolicy


@dataclass
class ControllerOptions:
    cache_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    stage_timeout: float = 300.0
    verify_timeout: float = 300.0
    shutdown_timeout: float = 25.0
    # Passes running at once (Flux's --concurrent), on a pool of threads: a replica holding many targets
    # does not run all their passes together (they would only share the CPU), and only the pool's
    # threads, not one per target, keep the deep stacks a pass leaves resident.
    concurrent_passes: int = 4
    max_body: int = DEFAULT_MAX_BODY
    check: CheckOptions = field(default_factory=CheckOptions)
    # Commit statuses and notifications: tries, backoff, queue bound (`reconciler/notify/sender.py`).
    notify_retry: RetryPolicy = field(default_factory=RetryPolicy)
    # On exit, how long what is queued may still take to go out (a forge that is down must not hold it).
    notify_drain: float = 5.0
    # The dashboard served at `/` of the HTTP port (built by the command: `reconciler/ui/`), or none.
    dashboard: Pages | None = None
    # The controller's own kubeconfig (a target's `context` alone picks one of its contexts) and the
    # request deadline of the clients of the targets' own clusters.
    kubeconfig: str | None = None
    request_timeout: float = 30.0


def default_identity() -> str:
    return f"{socket.gethostname()}-{threading.get_native_id()}"
