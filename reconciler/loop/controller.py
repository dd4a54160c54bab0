"""`dra-gitops run`: the long-running reconciler. Builds everything, then loops per target.

One worker thread per target waits for a trigger (its jittered poll interval, a webhook, a retry) and runs
a pass while this replica holds the target's Lease. Replicas share the targets through the Leases, so a
target is reconciled by one replica at a time, and a dead replica's targets move when its leases expire.
SIGTERM stops taking work: a running pass stops at its next stage boundary (its `inProgress` marker stays,
so whichever replica takes the target next converges it first), leases are released, the process exits 0.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.leasemanager import LeaseManager
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.errors import DraGitopsError, EnvironmentProblem
from reconciler.loop.clusters import TargetClusters, check_clusters, unreachable
from reconciler.loop.durations import jittered
from reconciler.loop.httpserver import DEFAULT_MAX_BODY, ControllerServer, HookTarget, Pages
from reconciler.loop.keep import KeptRevision
from reconciler.loop.metrics import PASS_ERROR, Metrics
from reconciler.loop.promotionstep import UpstreamReader
from reconciler.loop.reconcile import Reconciler
from reconciler.loop.reconcile_types import PassResult, ReconcileOptions
from reconciler.loop.revisions import GitRevisions
from reconciler.loop.targets import Target
from reconciler.loop.upstream import ref_reader, state_reader
from reconciler.notify.notifier import Notifier, TargetReports
from reconciler.notify.sender import RetryPolicy
from reconciler.outcome import Outcome
from reconciler.source.remote import GitCredentials, GitSource, SignaturePolicy

log = logging.getLogger("dra_gitops.controller")
Progress = Callable[[str], None]
# How soon a target whose own cluster could not be reached is tried again (at most its poll interval).
UNREACHABLE_RETRY = 10.0


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


class _Worker:
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
        self.source = GitRevisions(
            git_source_for(target, controller.options.cache_dir),
            kept=KeptRevision(self.client, target.name, target.state_namespace),
        )
        self.reconciler = Reconciler(
            self.client,
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


class Controller:
    def __init__(self, client: ClusterClient, targets: Sequence[Target], options: ControllerOptions) -> None:
        if not targets:
            raise DraGitopsError("no targets to reconcile: give --repo or --config")
        self.client = client
        self.targets = list(targets)
        self.options = options
        check_clusters(self.targets, options.kubeconfig)
        self.clusters = TargetClusters(
            client, self.targets, options.kubeconfig, timeout=options.request_timeout
        )
        self.options.identity = options.identity or default_identity()
        self.stopping = threading.Event()
        self.pass_pool = ThreadPoolExecutor(max(1, options.concurrent_passes), thread_name_prefix="pass")
        self.metrics = Metrics()
        # Built before anything starts: a missing token or webhook URL file is a config error now.
        self.notifier = Notifier(
            {t.name: TargetReports(t.commit_status, t.notifications) for t in self.targets},
            self.metrics.record_notification,
            options.notify_retry,
        )
        # Lease rounds give up on a frozen API server well before the renew deadline (and say so).
        lease_client = client.bounded(timeout=max(1.0, options.renew_deadline / 3), retries=1)
        self.leases = LeaseManager(
            lease_client,
            {t.name: (t.state_namespace, t.lease_name) for t in self.targets},
            identity=self.options.identity,
            duration=options.lease_duration,
            renew_deadline=options.renew_deadline,
            retry_period=options.retry_period,
            on_acquired=lambda name: self._lease_changed(name, True),
            on_lost=lambda name: self._lease_changed(name, False),
            on_requested=lambda name: self.trigger({name}, "requested by another replica"),
            on_namespace_missing=self.ensure_namespaces,
            # Sharding: each replica holds about ceil(targets / live replicas), heartbeats beside the
            # first target's Lease; a surplus target is handed over only between passes.
            replicas_namespace=self.targets[0].state_namespace,
            may_release=lambda name: not self.workers[name].busy,
        )
        # Per state namespace, why it is missing and cannot be created (readiness says it).
        self.namespace_problems: dict[str, str] = {}
        self.workers = {t.name: _Worker(self, t) for t in self.targets}
        self.server = ControllerServer(
            trigger=self.trigger,
            metrics=self.metrics,
            hook_targets=[HookTarget.from_target(t) for t in self.targets],
            host=options.host,
            port=options.port,
            max_body=options.max_body,
            alive=lambda: not self.stopping.is_set(),
            readiness=self.unready_reason,
            pages=options.dashboard,
        )
        self.last_results: dict[str, PassResult] = {}
        # Called with (target, result) after every pass, on the worker's thread (the demo follows passes).
        self.pass_listeners: list[Callable[[str, PassResult], None]] = []

    def upstream_reader(self, target: Target, source: GitSource) -> UpstreamReader | None:
        """Where a promoted target reads its upstream's verified commits (`loop/upstream.py`)."""
        gates = target.gates
        if gates.upstream_ref:
            return ref_reader(source, gates.upstream_ref)
        upstream = next((t for t in self.targets if t.name == gates.upstream), None)
        if upstream is None:
            return None
        return state_reader(self.clusters.client(upstream), upstream.name, upstream.state_namespace)

    # ---- triggers -----------------------------------------------------------------------------------

    def trigger(self, names: set[str] | None, reason: str) -> None:
        """Start a pass of each named target now: here when this replica holds its Lease, else on the
        replica that does (a webhook reaches whichever replica the Service picked)."""
        for name, worker in self.workers.items():
            if names is not None and name not in names:
                continue
            if self.leases.held(name):
                worker.reason = reason
                worker.wake.set()
            else:
                self.leases.request(name, reason)

    def _lease_changed(self, name: str, held: bool) -> None:
        self.metrics.set_lease_held(name, held)
        log.info("lease %s", "acquired" if held else "lost", extra={"target": name})
        if held:
            self.trigger({name}, "lease acquired")

    def update_readiness(self) -> None:
        if not self.server.ready and all(w.decided.is_set() for w in self.workers.values()):
            self.server.set_ready(True)

    def unready_reason(self) -> str | None:
        """Why this replica cannot reconcile some target now (None when it can), asked by `/readyz` after
        the first passes: a state namespace that is gone and cannot be created, a Lease the last round
        could not read or write, a held target whose last pass failed for an environment problem
        (API server, credentials, Git source) or crashed. Each clears with the next round or pass that
        succeeds."""
        problems = [f"namespace {ns}: {why}" for ns, why in sorted(self.namespace_problems.items())]
        problems += [f"target {name}: {why}" for name, why in sorted(self.leases.lease_errors().items())]
        problems += [
            f"target {name}: {worker.problem}"
            for name, worker in self.workers.items()
            if worker.problem and self.leases.held(name)
        ]
        return "; ".join(problems) or None

    def observe(self, target: str, result: PassResult, reason: str) -> None:
        self.last_results[target] = result
        self.metrics.record_pass(target, result.outcome, result.seconds)
        self.metrics.record_violations(result.violations)
        if result.outcome == Outcome.APPLIED:
            self.metrics.set_last_applied(target, time.time())
            # The targets promoting from it look now, not at their next poll.
            downstream = {t.name for t in self.targets if t.gates.upstream == target}
            if downstream:
                self.trigger(downstream, f"{target} verified {(result.sha or '')[:12]}")
        if result.outcome in (Outcome.ROLLED_BACK, Outcome.ROLLBACK_FAILED):
            self.metrics.record_rollback(target, "ok" if result.outcome == Outcome.ROLLED_BACK else "failed")
        if result.outcome == Outcome.DRIFT_CORRECTED and result.drift is not None:
            refs = result.drift.refs()
            self.metrics.record_drift_corrections(target, sum(len(v) for v in refs.values()))
        if result.records or result.outcome not in (Outcome.UNCHANGED, Outcome.HELD):
            self._claim_metrics(target)
        log.info(
            "pass %s in %.2fs (%s)%s",
            result.outcome,
            result.seconds,
            reason,
            f": {result.message}" if result.message else "",
            extra={"target": target, "sha": result.sha or ""},
        )
        self.notifier.finished(
            target,
            result.outcome,
            result.sha,
            result.message,
            failed=str(result.delivery.outcome) if result.delivery is not None else "",
        )
        for listener in self.pass_listeners:
            listener(target, result)

    def _claim_metrics(self, target: str) -> None:
        """Pending claims and allocated devices by driver, from one LIST of claims in the target's cluster."""
        client = self.workers[target].client
        try:
            claims = client.list_kind("resource.k8s.io", "ResourceClaim")
        except DraGitopsError:
            return
        pending = 0
        by_driver: dict[str, int] = {}
        for claim in claims:
            allocation = (claim.get("status") or {}).get("allocation")
            if not allocation:
                pending += 1
                continue
            for device in ((allocation.get("devices") or {}).get("results")) or []:
                driver = str(device.get("driver") or "")
                by_driver[driver] = by_driver.get(driver, 0) + 1
        self.metrics.set_pending_claims(target, pending)
        self.metrics.set_cluster_devices(client.host, by_driver)

    # ---- lifecycle ----------------------------------------------------------------------------------

    def ensure_namespaces(self, only: set[str] | None = None) -> bool:
        """The state namespaces hold the Leases (in this cluster) and the state (of the targets without a
        cluster of their own): create those missing (the deployment normally has; one deleted while we
        run is created again when its Lease cannot be written). True when every one exists now; else each
        problem is logged once and kept for readiness. A target's own cluster is seen to by its worker
        (`reach`), so a cluster that cannot be reached delays its own targets only."""
        users: dict[str, list[str]] = {}
        for target in self.targets:
            if only is None or target.state_namespace in only:
                users.setdefault(target.state_namespace, []).append(target.name)
        ok = True
        home = {t.name for t in self.targets if t.cluster is None}
        for namespace, names in sorted(users.items()):
            problem = self._ensure_namespace(
                self.client,
                namespace,
                f"created namespace {namespace} (it holds the targets' Leases and state)",
            )
            if problem is None:
                self.namespace_problems.pop(namespace, None)
                continue
            ok = False
            held = "the Lease and state" if set(names) <= home else "the Leases"
            message = (
                f"namespace {namespace} must exist (it holds {held} of {', '.join(sorted(names))}): {problem}"
            )
            if self.namespace_problems.get(namespace) != message:
                log.error("%s", message)
            self.namespace_problems[namespace] = message
        return ok

    def reach(self, target: Target, client: ClusterClient) -> str | None:
        """A target's own cluster answers (a bounded question) and holds its state namespace (created
        when missing): None, else why not (`/readyz` names the target)."""
        down = unreachable(target, client)
        if down is not None:
            return down
        namespace = target.state_namespace
        problem = self._ensure_namespace(
            client,
            namespace,
            f"created namespace {namespace} in the cluster of target {target.name} (its state)",
        )
        if problem is None:
            return None
        return f"namespace {target.state_namespace} must exist in its cluster (it holds its state): {problem}"

    @staticmethod
    def _ensure_namespace(client: ClusterClient, namespace: str, created: str) -> str | None:
        """None when the namespace exists (created now if it was missing), else why it does not."""
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        try:
            resource = client.resource_for("v1", "Namespace")
            live = client.get(resource, None, namespace)
            if live is None:
                client.create(resource, body)
                log.info("%s", created)
                return None
        except DraGitopsError as exc:
            return f"cannot create it: {exc}"
        if (live.get("metadata") or {}).get("deletionTimestamp"):
            return "it is being deleted; it is created again once its deletion has finished"
        return None

    def start(self) -> int:
        port = self.server.start()
        self.notifier.start()
        self.ensure_namespaces()
        self.leases.start()
        for worker in self.workers.values():
            worker.thread.start()
        return port

    def run_once(self) -> dict[str, PassResult | None]:
        """One pass of every target whose Lease this replica takes now, in the caller's thread; then the
        Leases are released and the sources closed (`run --once`).

        By target, in order: its pass's result, or None when the pass raised (logged, as in `run`). A
        target whose Lease another replica holds (and renews) is left out; a Lease its holder stopped
        renewing (a killed process) is waited for until it expires, then taken, as `run` does.
        """
        results: dict[str, PassResult | None] = {}
        self.notifier.start()
        try:
            self.ensure_namespaces()
            self.leases.contend()
            for name, worker in self.workers.items():
                if self.leases.held(name):
                    results[name] = worker.run_pass()
        finally:
            self.leases.stop()
            self.close()
        return results

    def stop(self) -> None:
        """Stop taking work; let running passes reach a stage boundary; release the leases."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.server.set_ready(False)
        for worker in self.workers.values():
            worker.wake.set()
        deadline = time.monotonic() + self.options.shutdown_timeout
        for worker in self.workers.values():
            if worker.thread.is_alive():
                worker.thread.join(max(0.0, deadline - time.monotonic()))
        self.leases.stop()
        self.server.stop()
        self.pass_pool.shutdown(wait=False)
        self.close()

    def close(self) -> None:
        for worker in self.workers.values():
            worker.source.close()
        self.notifier.close(self.options.notify_drain)
        self.clusters.close()

    def status(self) -> dict[str, Any]:
        return {
            "identity": self.options.identity,
            "targets": {
                name: {"held": self.leases.held(name), "passes": worker.passes}
                for name, worker in self.workers.items()
            },
        }
