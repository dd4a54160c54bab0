"""`dra-gitops run`: the long-running reconciler. Builds everything, then loops per target.

One worker thread per target waits for a trigger (its jittered poll interval, a webhook, a retry) and runs
a pass while this replica holds the target's Lease. Replicas share the targets through the Leases, so a
target is reconciled by one replica at a time, and a dead replica's targets move when its leases expire.
SIGTERM stops taking work: a running pass stops at its next stage boundary (its `inProgress` marker stays,
so whichever replica takes the target next converges it first), leases are released, the process exits 0.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.leasemanager import LeaseManager
from reconciler.errors import DraGitopsError
from reconciler.loop.config.targets import Target
from reconciler.loop.httpserver import ControllerServer, HookTarget
from reconciler.loop.metrics import Metrics
from reconciler.loop.passes.reconcile_types import PassResult
from reconciler.loop.promotion.upstream import UpstreamReader, ref_reader, state_reader
from reconciler.loop.run.clusters import TargetClusters, check_clusters, unreachable
from reconciler.loop.run.identity import ClusterIdentity
from reconciler.loop.run.settings import ControllerOptions, default_identity
from reconciler.loop.run.worker import TargetWorker
from reconciler.notify.notifier import Notifier, TargetReports
from reconciler.outcome import Outcome
from reconciler.source.remote import GitSource

log = logging.getLogger("dra_gitops.controller")
Progress = Callable[[str], None]


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
        # The cluster first reached: another at the same address later gets no Lease write, no pass.
        self.identity = ClusterIdentity(lease_client)
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
            guard=self.identity.problem,
        )
        # Per state namespace, why it is missing and cannot be created (readiness says it).
        self.namespace_problems: dict[str, str] = {}
        self.workers = {t.name: TargetWorker(self, t) for t in self.targets}
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
        """Where a promoted target reads its upstream's verified commits (`loop/promotion/upstream.py`)."""
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
