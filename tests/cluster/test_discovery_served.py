"""Discovery by kind and version against the simulated cluster: what the cluster serves for each kind.

A kind is served in a version when that group version's resource list has it, as `kubectl api-resources`
reads it; a served group version is not enough (DeviceTaintRule is not in resource.k8s.io/v1 on 1.36).
"""

from __future__ import annotations

import pytest

from reconciler.cluster.apply import dry_run
from reconciler.cluster.client import ClusterClient, NotFound
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.plan import compute_plan
from reconciler.sim.server import SimCluster

ALL_DRA_VERSIONS = ("v1", "v1beta2", "v1beta1", "v1alpha3")


def not_served(client: ClusterClient, api_version: str, kind: str) -> str:
    with pytest.raises(NotFound) as error:
        client.resource_for(api_version, kind, where=f"{kind}/x")
    assert error.value.reason == "NotServed"
    return str(error.value)


def test_the_message_names_the_versions_that_serve_the_kind() -> None:
    with SimCluster(served_versions=ALL_DRA_VERSIONS) as sim, ClusterClient.for_url(sim.url) as client:
        assert not_served(client, "resource.k8s.io/v1", "DeviceTaintRule") == (
            "DeviceTaintRule/x: resource.k8s.io/v1 DeviceTaintRule is not served by the cluster; "
            "use resource.k8s.io/v1beta2 (it serves DeviceTaintRule in resource.k8s.io/v1beta2, "
            "resource.k8s.io/v1alpha3)"
        )
        assert not_served(client, "admissionregistration.k8s.io/v1beta1", "ValidatingAdmissionPolicy") == (
            "ValidatingAdmissionPolicy/x: admissionregistration.k8s.io/v1beta1 ValidatingAdmissionPolicy is "
            "not served by the cluster; use admissionregistration.k8s.io/v1 (it serves "
            "ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1)"
        )


def test_the_message_says_when_no_version_serves_the_kind() -> None:
    with SimCluster() as sim, ClusterClient.for_url(sim.url) as client:
        # Default flags: resource.k8s.io/v1 only, which has no DeviceTaintRule on 1.36.
        message = not_served(client, "resource.k8s.io/v1", "DeviceTaintRule")
        assert message == (
            "DeviceTaintRule/x: resource.k8s.io/v1 DeviceTaintRule is not served by the cluster; "
            "no version it serves has DeviceTaintRule (resource.k8s.io: v1)"
        )
        assert "the cluster serves resource.k8s.io v1" not in message
        assert not_served(client, "scheduling.k8s.io/v1alpha2", "PodGroup").endswith(
            "no version it serves has PodGroup (scheduling.k8s.io: v1)"
        )
        assert not_served(client, "example.com/v1", "Widget").endswith("it serves no example.com version")


def test_a_dry_run_reports_the_same_message() -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
    }
    manifest = Manifest(body=body, ref=ref_of(body), path="rules.yaml", line=1)
    with SimCluster(served_versions=ALL_DRA_VERSIONS) as sim, ClusterClient.for_url(sim.url) as client:
        result = dry_run(client, compute_plan([], [manifest]))
    [item] = result.results
    assert item.error is not None and "use resource.k8s.io/v1beta2" in item.error


def test_served_kinds_lists_every_kind_per_version() -> None:
    with SimCluster(served_versions=ALL_DRA_VERSIONS) as sim, ClusterClient.for_url(sim.url) as client:
        served = client.served_kinds()
    assert served.unavailable == []
    kinds = served.kinds
    assert kinds["resource.k8s.io"]["DeviceTaintRule"] == ["v1beta2", "v1alpha3"]
    assert kinds["resource.k8s.io"]["ResourceClaim"] == ["v1", "v1beta2", "v1beta1"]
    assert kinds["admissionregistration.k8s.io"]["ValidatingAdmissionPolicy"] == ["v1"]
    assert kinds[""]["Pod"] == ["v1"] and kinds["apps"]["Deployment"] == ["v1"]
    assert "PodGroup" not in kinds.get("scheduling.k8s.io", {})


def test_a_group_version_that_cannot_be_read_is_reported_not_fatal(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url, backoff=0.01) as client:
        client.groups()
        sim_cluster.fail_next(2, status=500, match="/apis/batch/v1")  # the sweep retries once
        served = client.served_kinds()
        assert served.unavailable == ["batch/v1"]
        assert "batch" not in served.kinds and served.kinds["apps"]["Deployment"] == ["v1"]
        # Not cached as empty: a later lookup reads it again.
        assert client.resource_for("batch/v1", "Job").plural == "jobs"
    sim_cluster.clear_faults()
