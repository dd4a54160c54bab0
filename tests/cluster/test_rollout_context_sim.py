"""`rollout_context` reads the ControllerRevisions a DaemonSet's pods need, from the simulated cluster."""

from __future__ import annotations

from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.readiness import current_pods, rollout_context
from reconciler.sim.server import SimCluster

NS = "gpu-system"


def daemonset(name: str, generation: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "generation": generation},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}},
        "status": {"observedGeneration": generation},
    }


def owner(ds: dict[str, Any]) -> list[dict[str, Any]]:
    meta = ds["metadata"]
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
    ]


def pod(ds: dict[str, Any], node: str, generation: int, revision: str) -> dict[str, Any]:
    labels = {
        **ds["spec"]["selector"]["matchLabels"],
        "pod-template-generation": str(generation),
        "controller-revision-hash": revision,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{ds['metadata']['name']}-{node}",
            "namespace": NS,
            "labels": labels,
            "ownerReferences": owner(ds),
        },
        "spec": {"nodeName": node},
    }


def test_pods_back_on_the_template_after_a_rollback_are_current_whatever_another_daemonset_is_at() -> None:
    # The main DaemonSet went v2 (generation 3), v3 (4), then back to v2 (5: the revision renumbered); n1 was
    # reverted (a new pod), n2, which the halted upgrade never reached, kept its generation-3 pod of v2. Its
    # canary is at generation 3 too: every pod's generation label is some DaemonSet's generation.
    main, canary = daemonset("plugin", 5), daemonset("plugin-canary", 3)
    pods = [
        pod(main, "n1", 5, "v2"),
        pod(main, "n2", 3, "v2"),
        pod(canary, "n0", 3, "c3"),
    ]
    with SimCluster(served_versions=("v1",)) as sim, ClusterClient.for_url(sim.url) as client:
        client.create(
            client.resource_for("v1", "Namespace"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        for ds, name, number in ((main, "v3", 3), (main, "v2", 4), (canary, "c3", 3)):
            client.create(
                client.resource_for("apps/v1", "ControllerRevision"),
                {
                    "apiVersion": "apps/v1",
                    "kind": "ControllerRevision",
                    "metadata": {
                        "name": f"{ds['metadata']['name']}-{name}",
                        "namespace": NS,
                        "labels": {"controller-revision-hash": name},
                        "ownerReferences": owner(ds),
                    },
                    "data": {},
                    "revision": number,
                },
            )
        context = rollout_context(client, [main, canary], pods)
    current = sorted(p["metadata"]["name"] for p in current_pods(main, pods, context))
    assert current == ["plugin-n1", "plugin-n2"]  # n2's pod never left v2
    assert [p["metadata"]["name"] for p in current_pods(canary, pods, context)] == ["plugin-canary-n0"]
