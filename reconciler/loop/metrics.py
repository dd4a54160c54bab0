"""The controller's Prometheus metrics, on a registry of its own.

A private `CollectorRegistry` per `Metrics` keeps tests and several controllers in one process from
colliding on the global registry. Every name of ours starts with `dra_gitops_`; beside them the registry
has prometheus-client's standard `process_*` metrics of this process (resident memory, CPU seconds, open
file descriptors and their limit, start time; read from /proc, so on Linux only). Counters only grow; gauges about
a target are dropped with `forget_target` when this replica stops reconciling it (lease lost), so two
replicas never both report a target's current state.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reconciler.outcome import Outcome

PREFIX = "dra_gitops_"
# A pass ranges from a no-op (tens of milliseconds) to a staged apply with verification (minutes).
PASS_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# The `outcome` label of a pass that raised (it has no `Outcome`).
PASS_ERROR: Literal["error"] = "error"
WEBHOOK_RESULTS = ("accepted", "ignored", "duplicate", "unauthorized", "too_large", "bad_request", "error")


class Metrics:
    """Typed recording methods over the metric objects; `render()` gives the exposition for `/metrics`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.passes = Counter(
            PREFIX + "passes",
            "Reconcile passes by target and outcome.",
            ["target", "outcome"],
            registry=registry,
        )
        self.pass_duration = Histogram(
            PREFIX + "pass_duration_seconds",
            "Duration of reconcile passes by target and outcome.",
            ["target", "outcome"],
            buckets=PASS_DURATION_BUCKETS,
            registry=registry,
        )
        self.rollout_wave = Gauge(
            PREFIX + "driver_rollout_wave",
            "The wave a driver upgrade in waves is at (its waves count in driver_rollout_waves).",
            ["target", "driver"],
            registry=registry,
        )
        self.rollout_waves = Gauge(
            PREFIX + "driver_rollout_waves",
            "How many waves the driver upgrade under way has.",
            ["target", "driver"],
            registry=registry,
        )
        self.last_applied = Gauge(
            PREFIX + "last_applied_timestamp_seconds",
            "Unix time at which the target's last revision was applied and verified.",
            ["target"],
            registry=registry,
        )
        self.policy_violations = Counter(
            PREFIX + "policy_violations",
            "Policy violations found in checked revisions, by rule and severity.",
            ["rule", "severity"],
            registry=registry,
        )
        self.rollbacks = Counter(
            PREFIX + "rollbacks",
            "Rollbacks to the last good revision by target and result (succeeded or failed).",
            ["target", "result"],
            registry=registry,
        )
        self.drift_corrections = Counter(
            PREFIX + "drift_corrections",
            "Objects whose live state had drifted and were set back to the repository's, by target.",
            ["target"],
            registry=registry,
        )
        self.pending_claims = Gauge(
            PREFIX + "pending_claims",
            "ResourceClaims managed by the target that are not allocated.",
            ["target"],
            registry=registry,
        )
        self.allocated_devices = Gauge(
            PREFIX + "allocated_devices",
            "Devices allocated to ResourceClaims in the cluster, by driver.",
            ["driver"],
            registry=registry,
        )
        self.webhook_requests = Counter(
            PREFIX + "webhook_requests",
            "Webhook requests by provider and result.",
            ["provider", "result"],
            registry=registry,
        )
        self.lease_held = Gauge(
            PREFIX + "lease_held",
            "1 while this replica holds the target's Lease and reconciles it, else 0.",
            ["target"],
            registry=registry,
        )
        self.notifications = Counter(
            PREFIX + "notifications",
            "Commit statuses and notifications by target, kind (github, gitlab, gitea, webhook, slack) and "
            "result (delivered, retried: a try failed and another follows, failed: given up, dropped).",
            ["target", "kind", "result"],
            registry=registry,
        )
        # The process_* families every Prometheus exporter has, on our registry rather than the global one.
        ProcessCollector(registry=registry)
        self._drivers: set[str] = set()
        # Allocated devices by driver of each cluster the targets live in (its API server's URL).
        self._devices_of: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    # ---- passes ---------------------------------------------------------------------------------------

    def record_pass(self, target: str, outcome: Outcome | Literal["error"], seconds: float) -> None:
        """A pass by its outcome; `PASS_ERROR` for one that raised before it had one."""
        self.passes.labels(target=target, outcome=outcome).inc()
        self.pass_duration.labels(target=target, outcome=outcome).observe(seconds)

    def set_last_applied(self, target: str, unix_time: float) -> None:
        self.last_applied.labels(target=target).set(unix_time)

    def record_violations(self, violations: Mapping[tuple[str, str], int]) -> None:
        """Counts keyed by (rule, severity), e.g. from a policy report."""
        for (rule, severity), count in violations.items():
            if count:
                self.policy_violations.labels(rule=rule, severity=severity).inc(count)

    def record_rollback(self, target: str, result: str) -> None:
        self.rollbacks.labels(target=target, result=result).inc()

    def record_drift_corrections(self, target: str, count: int) -> None:
        if count:
            self.drift_corrections.labels(target=target).inc(count)

    # ---- cluster state --------------------------------------------------------------------------------

    def set_pending_claims(self, target: str, count: int) -> None:
        self.pending_claims.labels(target=target).set(count)

    def set_cluster_devices(self, cluster: str, by_driver: Mapping[str, int]) -> None:
        """One cluster's allocated devices by driver; the gauge shows the sum over the clusters seen
        (targets may live in clusters of their own, each counted once however many targets it has)."""
        with self._lock:
            self._devices_of[cluster] = dict(by_driver)
            total: dict[str, int] = {}
            for picture in self._devices_of.values():
                for driver, count in picture.items():
                    total[driver] = total.get(driver, 0) + count
            self._set_devices(total)

    def _set_devices(self, by_driver: Mapping[str, int]) -> None:
        """The whole picture: drivers that no longer have allocated devices drop out of the series."""
        for gone in self._drivers - set(by_driver):
            self.allocated_devices.remove(gone)
        for driver, count in by_driver.items():
            self.allocated_devices.labels(driver=driver).set(count)
        self._drivers = set(by_driver)

    # ---- webhooks and leases --------------------------------------------------------------------------

    def record_webhook(self, provider: str, result: str) -> None:
        if result not in WEBHOOK_RESULTS:
            raise ValueError(f"unknown webhook result {result!r}; expected one of {WEBHOOK_RESULTS}")
        self.webhook_requests.labels(provider=provider, result=result).inc()

    def record_notification(self, target: str, kind: str, result: str) -> None:
        self.notifications.labels(target=target, kind=kind, result=result).inc()

    def set_rollout_wave(self, target: str, driver: str, wave: int, waves: int) -> None:
        """A driver upgrade in waves moved on (`model/wave_progress.RolloutProgress`)."""
        self.rollout_wave.labels(target=target, driver=driver).set(wave)
        self.rollout_waves.labels(target=target, driver=driver).set(waves)

    def set_lease_held(self, target: str, held: bool) -> None:
        self.lease_held.labels(target=target).set(1 if held else 0)
        if not held:
            self.forget_target(target)

    def forget_target(self, target: str) -> None:
        """Drop the target's current-state gauges (another replica reports them now)."""
        for gauge in (self.last_applied, self.pending_claims):
            gauge.remove(target)  # a no-op for a target it never saw

    # ---- exposition -----------------------------------------------------------------------------------

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
