"""Watch lists (`sendInitialEvents=true`), as kube-apiserver serves them to client-go 1.37's reflectors and
`kubectl rollout status`: the current objects, a BOOKMARK marking the end of the initial events, then the
changes; and the parameters it requires, refused as kube-apiserver refuses them."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from reconciler.sim.server import SimCluster

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def create(sim: SimCluster, name: str) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).encode()
    request = urllib.request.Request(
        sim.url + CONFIGMAPS, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    urllib.request.urlopen(request, timeout=5).close()


def watch(sim: SimCluster, query: str, events: int) -> list[dict[str, Any]]:
    with urllib.request.urlopen(
        f"{sim.url}{CONFIGMAPS}?watch=true&timeoutSeconds=5&{query}", timeout=10
    ) as stream:
        return [json.loads(stream.readline()) for _ in range(events)]


def test_a_watch_list_sends_the_objects_then_the_initial_events_end_bookmark_then_changes(
    sim_cluster: SimCluster,
) -> None:
    create(sim_cluster, "first")
    create(sim_cluster, "second")
    later = threading.Timer(0.5, create, (sim_cluster, "third"))
    later.start()
    try:
        got = watch(
            sim_cluster,
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            4,
        )
    finally:
        later.join()
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in got] == [
        ("ADDED", "first"), ("ADDED", "second"), ("BOOKMARK", None), ("ADDED", "third"),
    ]  # fmt: skip
    bookmark = got[2]["object"]
    assert (bookmark["apiVersion"], bookmark["kind"]) == ("v1", "ConfigMap")
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(
        got[1]["object"]["metadata"]["resourceVersion"]
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "sendInitialEvents=true&allowWatchBookmarks=true",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks: Forbidden: allowWatchBookmarks required when resourceVersionMatch is set",
        ),
        (
            "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
    ],
)
def test_watch_list_options_are_validated_as_kube_apiserver_does(
    sim_cluster: SimCluster, query: str, message: str
) -> None:
    with pytest.raises(urllib.error.HTTPError) as error:
        watch(sim_cluster, query, 1)
    assert error.value.code == 422
    status = json.loads(error.value.read())
    assert status["reason"] == "Invalid"
    assert status["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'


def test_send_initial_events_false_watches_from_now(sim_cluster: SimCluster) -> None:
    create(sim_cluster, "before")
    later = threading.Timer(0.5, create, (sim_cluster, "after"))
    later.start()
    try:
        got = watch(
            sim_cluster,
            "sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            1,
        )
    finally:
        later.join()
    assert [e["object"]["metadata"]["name"] for e in got] == ["after"]
