"""One target of `dra-gitops run`: its reconciler, its trigger and its thread (`controller.py` builds one per
target and runs their passes on its pass pool)."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.leasemanager import LeaseManager
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.errors import DraGitopsError, EnvironmentProblem
from reconciler.loop.config.durations import jittered
from reconciler.loop.config.targets import Target
from reconciler.loop.metrics import PASS_ERROR, Metrics
from reconciler.loop.passes.keep import KeptRevision
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import LeaseLost, PassResult, ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.loop.promotion.upstream import UpstreamReader
from reconciler.loop.run.clusters import TargetClusters, unreachable
from reconciler.loop.run.settings import ControllerOptions
from reconciler.notify.notifier import Notifier
from reconciler.outcome import Outcome
from reconciler.source.remote import GitCredentials, GitSource, SignaturePolicy

log = logging.getLogger("dra_gitops.controller")
# How soon a target whose own cluster could not be reached is tried again (at most its poll interval).
UNREACHABLE_RETRY = 10.0


class Controller(Protocol):
    """What a worker uses of the controller that runs it (`controller.py`)."""

    options: ControllerOptions
    clusters: TargetClusters
    leases: LeaseManager
    metrics: Metrics
    notifier: Notifier
    stopping: threading.Event
    pass_pool: ThreadPoolExecutor

    def upstream_reader(self, target: Target, source: GitSource) -> UpstreamReader | None: ...

    def update_readiness(self) -> None: ...

    def reach(self, target: Target, client: ClusterClient) -> str | None: ...

    def observe(self, target: str, result: PassResult, reason: str) -> None: ...


def git_source_for(target: Target, cache_dir: Path) -> GitSource:
    def path(value: str | None) -> Path | None:
        return Path(value) if value else None

    signatures = None
    if target.gpg_keyring or target.ssh_allowed_signers:
        signatures = SignaturePolicy(
            gpg_keyring=path(target.gpg_keyring), ssh_allowed_signers=path(target.ssh_allowed_signers)
        )
    return GitSource(
        target.repo,
        cache_dir / target.name,
        branch=target.branch,
        tag_pattern=target.tag_pattern,
        path="" if target.path in ("", ".") else target.path,
        credentials=GitCredentials(
            ssh_key_file=path(target.ssh_key_file),
            known_hosts_file=path(target.known_hosts_file),
            token_file=path(target.token_file),
        ),
        signatures=signatures,
    )


class TargetWorker:
    """One target: its reconciler, its trigger, its thread."""

    def __init__(self, controller: Controller, target: Target) -> None:
        self.controller = controller
        self.target = target
        self.wake = threading.Event()
        self.reason = "start"
        self.passes = 0
        self.decided = threading.Event()  # a first pass ran, or this replica found the target not its own
        self.busy = False  # in a pass (or about to be): its Lease is not handed over as surplus now
        # Why the last pass could not reconcile the target (an environment problem), None when it could.
        self.problem: str | None = None
        self.thread = threading.Thread(target=self.loop, name=f"target-{target.name}", daemon=True)
        # The target's cluster: its state, kept copy, Events and objects (its Lease is the controller's).
        self.client = controller.clusters.client(target)
        # Whether its own cluster answered and holds its state namespace (the controller's: checked at start).
        self.reached = target.cluster is None
        # What the pass writes goes through a client fenced on the target's Lease: a replica that lost it
        # (paused past the renew deadline, partitioned) sends nothing more, whatever stage it is in.
        fenced = self.client.fenced(self.fence)
        self.source = GitRevisions(
            git_source_for(target, controller.options.cache_dir),
            kept=KeptRevision(fenced, target.name, target.state_namespace),
        )
        self.reconciler = Reconciler(
            fenced,
            self.source,
            ReconcileOptions(
                DeliverOptions(
                    target=target.name,
                    namespace=target.state_namespace,
                    grace=target.grace,
                    stage_timeout=controller.options.stage_timeout,
                    verify_timeout=controller.options.verify_timeout,
                    prune=target.prune,
                ),
                git_revert_branch=target.git_revert_branch,
                identity=controller.options.identity,
                self_heal=target.self_heal,
                gates=target.gates,
            ),
            controller.options.check,
            progress=lambda message: log.info("%s", message, extra={"target": target.name}),
            should_stop=self.should_stop,
            on_deliver=lambda sha: controller.notifier.started(target.name, sha),
        )
        self.reconciler.upstream = controller.upstream_reader(target, self.source.source)
        self.reconciler.on_rollout = lambda progress: controller.metrics.set_rollout_wave(
            target.name, progress.driver, progress.wave, progress.of
        )

    def fence(self, method: str, where: str) -> None:
        """Before each write of a pass: the Lease must be held, renewed within the renew deadline on the
        monotonic clock (a renewal younger than it leaves the lease duration's margin before anyone else
        may take it over, as client-go's leader election does)."""
        if not self.controller.leases.held(self.target.name):
            log.warning(
                "%s %s not sent: this replica no longer holds the lease",
                method,
                where,
                extra={"target": self.target.name},
            )
            raise LeaseLost(f"{method} {where} not sent: this replica lost the target's lease")

    def should_stop(self) -> str | None:
        if self.controller.stopping.is_set():
            return "the reconciler is shutting down"
        if not self.controller.leases.held(self.target.name):
            return "this replica lost the target's lease"
        return None

    def loop(self) -> None:
        controller = self.controller
        while not controller.stopping.is_set():
            if controller.leases.held(self.target.name):
                controller.pass_pool.submit(self.pass_in_pool).result()
            self.decided.set()
            controller.update_readiness()
            interval = self.target.poll_interval
            if not self.reached and self.problem:  # its own cluster did not answer: try again soon
                interval = min(interval, UNREACHABLE_RETRY)
            wait = jittered(interval)
            if self.reconciler.wake_after is not None:  # a soak ends before the next poll
                wait = min(wait, self.reconciler.wake_after + 0.5)
            self.wake.wait(wait)
            self.wake.clear()

    def pass_in_pool(self) -> None:
        """A pass on one of the controller's pass threads. Queued for one is not in a pass: the target may
        be handed over meanwhile (sharding), and then no pass runs."""
        self.busy = True
        try:
            if self.controller.leases.held(self.target.name) and not self.controller.stopping.is_set():
                self.run_pass()
        finally:
            self.busy = False

    def run_pass(self) -> PassResult | None:
        """One pass, observed by the controller; None when it raised (logged and counted as an error)."""
        controller = self.controller
        reason, self.reason = self.reason, "poll"
        if not self.reached:
            why = controller.reach(self.target, self.client)
            if why is not None:
                if why != self.problem:
                    log.error("cannot reconcile: %s", why, extra={"target": self.target.name})
                self.problem = why
                controller.metrics.record_pass(self.target.name, PASS_ERROR, 0.0)
                return None
            self.reached = True
        try:
            result = self.reconciler.reconcile()
        except DraGitopsError as exc:
            log.error("pass failed: %s", exc, extra={"target": self.target.name})
            controller.metrics.record_pass(self.target.name, PASS_ERROR, 0.0)
            problem = f"the last pass failed: {exc}" if isinstance(exc, EnvironmentProblem) else None
            if self.target.cluster is not None:
                # Its own cluster may be gone, or its state namespace: the next pass asks a bounded question
                # and sees to the namespace first (the Lease rounds do that for the controller's cluster).
                self.reached = False
                if problem:  # say which cluster (readiness names the target)
                    problem = unreachable(self.target, self.client) or problem
            self.problem = problem
            return None
        except Exception as exc:  # a bug must not kill the worker: log it and try again next time
            log.exception("pass crashed", extra={"target": self.target.name})
            controller.metrics.record_pass(self.target.name, PASS_ERROR, 0.0)
            self.problem = f"the last pass crashed: {type(exc).__name__}: {exc}"
            return None
        self.problem = result.message if result.outcome == Outcome.SOURCE_ERROR else None
        self.passes += 1
        controller.observe(self.target.name, result, reason)
        return result
