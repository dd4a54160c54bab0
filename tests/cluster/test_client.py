"""ClusterClient against the simulated API server: retries, error types, discovery cache, paging."""

from __future__ import annotations

import time

import pytest

from reconciler.cluster.client import ClusterClient, Conflict, Invalid, NotFound
from reconciler.errors import TemporaryError, UserError
from reconciler.sim.server import SimCluster

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}


def test_temporary_failures_are_retried_then_succeed(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url, backoff=0.01) as client:
        client.resource_for("v1", "ConfigMap")  # discovery first, so both faults hit the apply
        sim_cluster.fail_next(2, status=503, match="configmaps")
        before = client.requests_sent
        applied = client.apply({**CONFIGMAP, "data": {"k": "v"}})
        assert applied["data"] == {"k": "v"}
        assert client.requests_sent - before == 3  # two refused, the third went through


def test_persistent_server_errors_become_a_temporary_error_naming_the_object(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url, retries=2, backoff=0.01) as client:
        client.server_version()
        client.resource_for("v1", "ConfigMap")  # discovery first, so the faults hit the apply
        sim_cluster.fail_next(10, status=500, match="configmaps")
        with pytest.raises(TemporaryError) as error:
            client.apply(CONFIGMAP)
        assert str(error.value).startswith("ConfigMap/default/a: ")
        assert error.value.exit_code == 4
    sim_cluster.clear_faults()


def test_a_hanging_server_times_out(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url, timeout=0.3, retries=1, backoff=0.01) as client:
        client.resource_for("v1", "ConfigMap")
        sim_cluster.timeout_next(5, seconds=2.0, match="configmaps")
        started = time.monotonic()
        with pytest.raises(TemporaryError):
            client.apply(CONFIGMAP)
        assert time.monotonic() - started < 5
    sim_cluster.clear_faults()


def test_error_types_carry_the_servers_message(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url) as client:
        configmaps = client.resource_for("v1", "ConfigMap")
        assert client.get(configmaps, "default", "missing") is None
        assert client.delete(configmaps, "default", "missing") is False
        with pytest.raises(NotFound):
            client.patch_merge(configmaps, "default", "missing", {"data": {"a": "b"}})
        client.create(configmaps, CONFIGMAP)
        with pytest.raises(Conflict):
            client.create(configmaps, CONFIGMAP)
        with pytest.raises(Invalid) as invalid:
            client.apply(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": "typo"},
                    "spec": {"selector": []},
                }
            )
        assert isinstance(invalid.value, UserError)  # a manifest problem: exit 1, never retried
        assert "field not declared in schema" in str(invalid.value)
        with pytest.raises(NotFound) as not_served:
            client.resource_for("resource.k8s.io/v1beta1", "DeviceClass")
        assert str(not_served.value).endswith(
            "resource.k8s.io/v1beta1 DeviceClass is not served by the cluster; use resource.k8s.io/v1 "
            "(it serves DeviceClass in resource.k8s.io/v1)"
        )


def test_discovery_is_read_once_per_client(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url) as client:
        client.resource_for("v1", "ConfigMap")
        client.find_kind("resource.k8s.io", "DeviceClass")
        sent = client.requests_sent
        for _ in range(5):
            client.resource_for("v1", "ConfigMap")
            client.find_kind("resource.k8s.io", "DeviceClass")
            client.served_versions("resource.k8s.io")
        assert client.requests_sent == sent
        client.invalidate()
        client.resource_for("v1", "ConfigMap")
        assert client.requests_sent > sent


def test_list_pages_through_everything(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url) as client:
        for index in range(25):
            client.apply({**CONFIGMAP, "metadata": {"name": f"cm-{index:02d}", "namespace": "default"}})
        client.request_log = []
        items = client.list(client.resource_for("v1", "ConfigMap"), "default", page_size=10)
        names = sorted(
            item["metadata"]["name"] for item in items if item["metadata"]["name"].startswith("cm-")
        )
        assert names == [f"cm-{index:02d}" for index in range(25)]
        assert all(item["kind"] == "ConfigMap" and item["apiVersion"] == "v1" for item in items)
        assert len(client.request_log) >= 3  # limit=10 over 25+ objects: three pages at least
