"""Our cluster client reports the size limits' answers as the user's error, at once and naming the object.

kube-apiserver answers a stored object over etcd's limit with a 500 ("etcdserver: request is too large"):
a status that is otherwise temporary, but retrying the same object can never succeed. A body over 3 MiB
is a 413. Both must come back as `Invalid` (exit 1) without retries, saying what limit was hit.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers import widget_crd

from reconciler.cluster.client import ClusterClient, Invalid
from reconciler.errors import DraGitopsError
from reconciler.sim.server import SimCluster

MIB = 1024 * 1024
CRD: dict[str, Any] = widget_crd()


def test_an_object_over_etcds_limit_is_invalid_at_once(sim_cluster: SimCluster) -> None:
    sim_cluster.store.create("apiextensions.k8s.io", "customresourcedefinitions", CRD)
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"blob": "z" * (2 * MIB)},
    }
    with ClusterClient.for_url(sim_cluster.url) as cluster:
        sent = cluster.transport.requests_sent
        started = time.monotonic()
        with pytest.raises(Invalid) as exc:
            cluster.apply(widget)
        assert time.monotonic() - started < 2.0  # no back-off between retries
        assert cluster.transport.requests_sent - sent <= 2  # discovery at most, and the one apply
    message = str(exc.value)
    assert message.startswith("Widget/default/w: ")
    assert "etcdserver: request is too large" in message
    assert "1.5 MiB" in message


def test_a_body_over_the_request_limit_is_invalid(sim_cluster: SimCluster) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "huge", "namespace": "default"},
        "data": {"x": "y" * (3 * MIB)},
    }
    with ClusterClient.for_url(sim_cluster.url) as cluster, pytest.raises(Invalid) as exc:
        cluster.apply(cm)
    assert str(exc.value).startswith("ConfigMap/default/huge: Request entity too large: limit is 3145728")
    assert exc.value.status == 413


def test_a_state_too_large_for_its_configmap_says_which_part(sim_cluster: SimCluster) -> None:
    """A target of 40,000 objects: its inventory alone is over the 1 MiB a ConfigMap's data may hold."""
    from reconciler.loop.store.state import StateStore, TargetState

    state = TargetState(inventory=[f"v1 ConfigMap/team/config-{i:05d}" for i in range(40_000)])
    with ClusterClient.for_url(sim_cluster.url) as cluster:
        store = StateStore(cluster, "big")
        with pytest.raises(DraGitopsError) as exc:
            store.save(state)
    message = str(exc.value)
    assert message.startswith("ConfigMap/dra-gitops/dra-gitops-big: the target's state is ")
    assert "over the 1,048,576 a ConfigMap holds (inventory " in message


def test_the_history_is_bounded_as_it_is_stored() -> None:
    """History records of nested lists: their indented form, the one stored, stays within the bound."""
    import json

    from reconciler.loop.store.records import HistoryRecord
    from reconciler.loop.store.state import HISTORY_BYTES, TargetState

    state = TargetState()
    for n in range(20):
        findings = [[[f"finding {n}-{i}"]] for i in range(500)]
        record = HistoryRecord.from_json({"sha": f"{n:040d}", "findings": findings})
        assert record is not None
        state.record(record)
    assert len(json.dumps([record.to_json() for record in state.history], indent=1)) <= HISTORY_BYTES
