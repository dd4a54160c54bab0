"""The controller's metrics, read back by parsing the exposition text as Prometheus would."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.loop.metrics import Metrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(metrics: Metrics) -> Samples:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain; version=")
    found: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        assert family.name.startswith(("dra_gitops_", "process_"))
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_passes_and_their_durations_by_target_and_outcome() -> None:
    metrics = Metrics()
    metrics.record_pass("prod", "applied", 1.2)
    metrics.record_pass("prod", "applied", 0.3)
    metrics.record_pass("prod", "rolled-back", 42.0)
    found = samples(metrics)
    labels = (("outcome", "applied"), ("target", "prod"))
    assert found[("dra_gitops_passes_total", labels)] == 2
    assert found[("dra_gitops_passes_total", (("outcome", "rolled-back"), ("target", "prod")))] == 1
    assert found[("dra_gitops_pass_duration_seconds_count", labels)] == 2
    assert found[("dra_gitops_pass_duration_seconds_sum", labels)] == pytest.approx(1.5)
    bucket = ("dra_gitops_pass_duration_seconds_bucket", (("le", "0.5"), *labels))
    assert found[bucket] == 1


def test_state_counters_and_gauges() -> None:
    metrics = Metrics()
    metrics.set_last_applied("prod", 1_700_000_000.5)
    metrics.record_violations(
        {("claim-count-limit", "error"): 2, ("driver-canary", "warning"): 1, ("x", "info"): 0}
    )
    metrics.record_violations({("claim-count-limit", "error"): 1})
    metrics.record_rollback("prod", "succeeded")
    metrics.record_drift_corrections("prod", 3)
    metrics.record_drift_corrections("prod", 0)
    metrics.set_pending_claims("prod", 4)
    metrics.set_cluster_devices("https://a", {"gpu.example.com": 6, "nic.example.com": 2})
    metrics.record_webhook("github", "accepted")
    metrics.record_webhook("github", "unauthorized")
    metrics.record_webhook("github", "unauthorized")
    found = samples(metrics)
    assert found[("dra_gitops_last_applied_timestamp_seconds", (("target", "prod"),))] == 1_700_000_000.5
    rule = (("rule", "claim-count-limit"), ("severity", "error"))
    assert found[("dra_gitops_policy_violations_total", rule)] == 3
    assert (
        found[("dra_gitops_policy_violations_total", (("rule", "driver-canary"), ("severity", "warning")))]
        == 1
    )
    assert ("dra_gitops_policy_violations_total", (("rule", "x"), ("severity", "info"))) not in found
    assert found[("dra_gitops_rollbacks_total", (("result", "succeeded"), ("target", "prod")))] == 1
    assert found[("dra_gitops_drift_corrections_total", (("target", "prod"),))] == 3
    assert found[("dra_gitops_pending_claims", (("target", "prod"),))] == 4
    assert found[("dra_gitops_allocated_devices", (("driver", "gpu.example.com"),))] == 6
    assert (
        found[("dra_gitops_webhook_requests_total", (("provider", "github"), ("result", "unauthorized")))]
        == 2
    )
    assert found[("dra_gitops_webhook_requests_total", (("provider", "github"), ("result", "accepted")))] == 1


def test_allocated_devices_is_the_whole_picture() -> None:
    metrics = Metrics()
    metrics.set_cluster_devices("https://a", {"gpu.example.com": 6, "nic.example.com": 2})
    metrics.set_cluster_devices("https://a", {"gpu.example.com": 1})
    found = samples(metrics)
    assert found[("dra_gitops_allocated_devices", (("driver", "gpu.example.com"),))] == 1
    assert ("dra_gitops_allocated_devices", (("driver", "nic.example.com"),)) not in found


def test_allocated_devices_add_up_the_clusters_each_counted_once() -> None:
    metrics = Metrics()
    metrics.set_cluster_devices("https://staging", {"gpu.example.com": 3})
    metrics.set_cluster_devices("https://production", {"gpu.example.com": 4, "nic.example.com": 1})
    metrics.set_cluster_devices("https://staging", {"gpu.example.com": 2})  # a later look at staging
    found = samples(metrics)
    assert found[("dra_gitops_allocated_devices", (("driver", "gpu.example.com"),))] == 6
    assert found[("dra_gitops_allocated_devices", (("driver", "nic.example.com"),))] == 1


def test_losing_a_lease_drops_the_targets_current_state_but_keeps_counters() -> None:
    metrics = Metrics()
    metrics.set_lease_held("prod", True)
    metrics.set_last_applied("prod", 10.0)
    metrics.set_pending_claims("prod", 1)
    metrics.record_pass("prod", "applied", 0.1)
    metrics.set_lease_held("prod", False)
    found = samples(metrics)
    assert found[("dra_gitops_lease_held", (("target", "prod"),))] == 0
    assert ("dra_gitops_last_applied_timestamp_seconds", (("target", "prod"),)) not in found
    assert ("dra_gitops_pending_claims", (("target", "prod"),)) not in found
    assert found[("dra_gitops_passes_total", (("outcome", "applied"), ("target", "prod")))] == 1


def test_each_instance_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.record_pass("a", "applied", 0.1)
    assert ("dra_gitops_passes_total", (("outcome", "applied"), ("target", "a"))) not in samples(second)


def test_unknown_webhook_result_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown webhook result"):
        Metrics().record_webhook("github", "maybe")


def test_process_metrics_beside_ours() -> None:
    import resource
    import time

    found = samples(Metrics())
    assert 0 < found[("process_resident_memory_bytes", ())] < 16 * 1024**3
    assert found[("process_cpu_seconds_total", ())] > 0
    assert found[("process_open_fds", ())] >= 3
    assert found[("process_max_fds", ())] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert 0 < found[("process_start_time_seconds", ())] <= time.time()
