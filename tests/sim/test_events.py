"""Events recorded by the simulated control plane are aggregated as client-go's recorder does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from reconciler.cluster.diagnose import event_line, events_for
from reconciler.sim.controlplane.base import Component
from reconciler.sim.server import SimCluster


class Recorder(Component):
    """A component that only records events (the scheduler and kubelet record theirs the same way)."""

    name = "recorder"

    def reconcile(self) -> None:
        return None


@pytest.fixture
def recorder(sim_cluster: SimCluster) -> Recorder:
    component = Recorder()
    sim_cluster.add_component(component)
    return component


@pytest.fixture
def pod(core: client.CoreV1Api) -> dict[str, Any]:
    body: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "worker", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    core.create_namespaced_pod("default", body)
    return dict(loaded(core.read_namespaced_pod("worker", "default", _preload_content=False)))


def loaded(resp: Any) -> Any:
    """The JSON body of a call made with ``_preload_content=False``."""
    return json.loads(resp.data)


def core_events(core: client.CoreV1Api) -> list[dict[str, Any]]:
    return list(loaded(core.list_namespaced_event("default", _preload_content=False))["items"])


def test_a_repeated_event_bumps_the_count_of_one_event(
    core: client.CoreV1Api, recorder: Recorder, pod: dict[str, Any]
) -> None:
    for _ in range(3):
        recorder.emit_event(pod, "FailedScheduling", "0/1 nodes are available", component="default-scheduler")
    (event,) = core_events(core)
    assert event["count"] == 3
    assert event["series"]["count"] == 3
    assert event["lastTimestamp"] >= event["firstTimestamp"]
    assert event_line(event).startswith(
        "event FailedScheduling (x3) from default-scheduler on Pod/default/worker"
    )
    assert events_for([event], "Pod", "default", "worker", pod["metadata"]["uid"]) == [event]


def test_the_events_api_shows_the_series(
    sim_cluster: SimCluster, core: client.CoreV1Api, recorder: Recorder, pod: dict[str, Any]
) -> None:
    recorder.emit_event(pod, "BackOff", "Back-off restarting failed container", component="kubelet")
    recorder.emit_event(pod, "BackOff", "Back-off restarting failed container", component="kubelet")
    events = client.EventsV1Api(core.api_client)
    (event,) = loaded(events.list_namespaced_event("default", _preload_content=False))["items"]
    assert event["regarding"]["name"] == "worker"
    assert event["deprecatedCount"] == 2
    assert event["series"]["count"] == 2
    assert event["series"]["lastObservedTime"].endswith("Z")


def test_other_messages_reasons_and_sources_are_separate_events(
    core: client.CoreV1Api, recorder: Recorder, pod: dict[str, Any]
) -> None:
    recorder.emit_event(pod, "FailedScheduling", "0/1 nodes are available", component="default-scheduler")
    recorder.emit_event(pod, "FailedScheduling", "0/2 nodes are available", component="default-scheduler")
    recorder.emit_event(pod, "Scheduled", "0/1 nodes are available", component="default-scheduler")
    recorder.emit_event(pod, "FailedScheduling", "0/1 nodes are available", component="kubelet")
    events = core_events(core)
    assert len(events) == 4
    assert all(e["count"] == 1 and "series" not in e for e in events)


def test_a_deleted_event_is_recorded_anew(
    core: client.CoreV1Api, recorder: Recorder, pod: dict[str, Any]
) -> None:
    recorder.emit_event(pod, "BackOff", "Back-off", component="kubelet")
    recorder.emit_event(pod, "BackOff", "Back-off", component="kubelet")
    (first,) = core_events(core)
    core.delete_namespaced_event(first["metadata"]["name"], "default")
    recorder.emit_event(pod, "BackOff", "Back-off", component="kubelet")
    (again,) = core_events(core)
    assert again["metadata"]["name"] != first["metadata"]["name"]
    assert again["count"] == 1
