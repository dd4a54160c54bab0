"""A Deployment's rollout at full capacity: predicted by `check --cluster`, and real on the simulated cluster.

With the default strategy (maxSurge 25% rounded up, maxUnavailable 25% rounded down: 1 and 0 for two
replicas) the Deployment controller starts a new-template pod before deleting an old one. When every
device is held by the old pods, that pod never gets one and the rollout stalls; with maxUnavailable 1 an
old pod goes first and the rollout completes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from helpers import wait_for
from test_check_cluster import CHANGE, check, gpu_sim  # noqa: F401  (fixture)

from reconciler.cluster.client import ClusterClient
from reconciler.sim.server import SimCluster

ROOM = "  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}\n  selector:"


def apply_all(client: ClusterClient, text: str) -> None:
    for doc in yaml.safe_load_all(text):
        client.apply(doc)


def trainer_pods(client: ClusterClient) -> list[dict[str, Any]]:
    return [
        p
        for p in client.list_kind("", "Pod")
        if p["metadata"].get("namespace") == "ml" and not p["metadata"].get("deletionTimestamp")
    ]


def image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"])


def running(client: ClusterClient, tag: str, count: int) -> bool:
    pods = [p for p in trainer_pods(client) if image(p) == tag]
    return len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def start(sim: SimCluster, text: str) -> ClusterClient:
    client = ClusterClient.for_url(sim.url)
    apply_all(client, text)
    wait_for(lambda: running(client, "trainer:1", 2), timeout=15, what="two trainers on both devices")
    return client


def test_a_rollout_with_no_free_device_stalls_and_is_predicted(
    gpu_sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    sim, kubeconfig = gpu_sim
    client = start(sim, CHANGE % 2)
    try:
        change = tmp_path / "change"
        change.mkdir()
        upgraded = (CHANGE % 2).replace("image: trainer:1", "image: trainer:2")
        (change / "trainer.yaml").write_text(upgraded)

        code, report = check(kubeconfig, change)
        capacity = [f for f in report["findings"] if f["rule"] == "capacity"]
        assert code == 0 and len(capacity) == 1, report["findings"]
        assert capacity[0]["ref"] == "Deployment/ml/trainer"
        assert capacity[0]["msg"].startswith(
            "Deployment/ml/trainer: pod ml/trainer-0 cannot be scheduled: sim-node-0: claim gpu: needs 1, "
            "0 of 2 matching devices free (2 allocated); rolling update to a new pod template with "
            "maxUnavailable 0 and maxSurge 1: the 2 old pod(s) keep their devices"
        ), capacity[0]["msg"]
        assert [(p["pod"], p["outcome"]) for p in report["capacity"]["pods"]] == [
            ("ml/trainer-0", "does-not-fit")
        ]

        # What the cluster does with it: the new pod waits, both old pods stay.
        apply_all(client, upgraded)

        def stalled() -> bool:
            pods = trainer_pods(client)
            new = [p for p in pods if image(p) == "trainer:2"]
            return len(new) == 1 and not new[0]["spec"].get("nodeName") and running(client, "trainer:1", 2)

        wait_for(stalled, timeout=10, what="the surge pod pending beside both old pods")
        events = wait_for(
            lambda: [
                e
                for e in client.list_kind("", "Event")
                if e.get("reason") == "FailedScheduling"
                and "cannot allocate all claims" in e.get("message", "")
            ],
            timeout=10,
            what="FailedScheduling for the surge pod",
        )
        assert events
        assert stalled()  # still, after the scheduler tried
    finally:
        client.close()


def test_room_to_roll_is_no_finding_and_the_rollout_completes(
    gpu_sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    sim, kubeconfig = gpu_sim
    roomy = (CHANGE % 2).replace("  selector:", ROOM)
    client = start(sim, roomy)
    try:
        change = tmp_path / "change"
        change.mkdir()
        upgraded = roomy.replace("image: trainer:1", "image: trainer:2")
        (change / "trainer.yaml").write_text(upgraded)
        code, report = check(kubeconfig, change)
        assert (code, report["findings"]) == (0, [])
        assert report["capacity"]["pods"] == []  # old pods go first: nothing new needs a device of its own

        apply_all(client, upgraded)
        wait_for(
            lambda: running(client, "trainer:2", 2), timeout=20, what="both trainers on the new template"
        )
    finally:
        client.close()


def test_an_unchanged_template_is_no_rollout(gpu_sim: tuple[SimCluster, Path], tmp_path: Path) -> None:  # noqa: F811
    sim, kubeconfig = gpu_sim
    client = start(sim, CHANGE % 2)
    try:
        change = tmp_path / "change"
        change.mkdir()
        (change / "trainer.yaml").write_text(CHANGE % 2)  # as applied: the live copy only has defaults added
        code, report = check(kubeconfig, change)
        assert (code, report["findings"], report["capacity"]["pods"]) == (0, [], [])
    finally:
        client.close()
