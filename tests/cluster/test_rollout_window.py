"""Stage 1a judges only the pods of a driver's current template, over HTTP against the simulated cluster.

The sim runs without controllers (API only), and the test plays the real DaemonSet controller itself
through the stage wait's fail-fast hook, one step per poll: it keeps the previous template's
crash-looping pod visible while the controller observes the new generation, deletes it, and only then
creates the new pod, as the real controller does. The old pod must never fail the stage; a
crash-looping pod of the new template must.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from reconciler.cluster.apply import apply_plan
from reconciler.cluster.client import ClusterClient, ResourceInfo
from reconciler.model.loader import parse_documents
from reconciler.model.plan import Change, compute_plan
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

NAMESPACE = "gpu-system"
DRIVER = "gpu.example.com"
CANARY = "plugin-canary"
CANARY_LABEL = {"dra-gitops.io/canary": "true"}
NODE = "node-a"


def canary_body(image: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "gpu-driver", "app.kubernetes.io/component": "kubelet-plugin"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": CANARY,
            "namespace": NAMESPACE,
            "annotations": {"dra-gitops.io/driver": DRIVER, "dra-gitops.io/canary-for": "plugin"},
        },
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "nodeSelector": dict(CANARY_LABEL),
                    "containers": [{"name": "plugin", "image": image}],
                },
            },
        },
    }


class Cluster:
    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.pods = self.resource("", "Pod")
        self.daemonsets = self.resource("apps", "DaemonSet")

    def resource(self, group: str, kind: str) -> ResourceInfo:
        found = self.client.find_kind(group, kind)
        assert found is not None
        return found

    def daemonset(self) -> dict[str, Any]:
        live = self.client.get(self.daemonsets, NAMESPACE, CANARY)
        assert live is not None
        return live

    def ds_status(self, **status: int) -> None:
        self.client.patch_merge(self.daemonsets, NAMESPACE, CANARY, {"status": status}, subresource="status")

    def pod(self, name: str, generation: int, *, crashing: bool = False, ready: bool = False) -> None:
        ds = self.daemonset()
        labels = dict(
            ds["spec"]["template"]["metadata"]["labels"], **{"pod-template-generation": str(generation)}
        )
        owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": CANARY, "uid": ds["metadata"]["uid"]}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "ownerReferences": [owner]},
            "spec": {"nodeName": NODE, "containers": [{"name": "plugin", "image": "x"}]},
        }
        if self.client.get(self.pods, NAMESPACE, name) is None:
            self.client.create(self.pods, body)
        state: dict[str, Any] = (
            {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}}
            if crashing
            else {"running": {}}
        )
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {"name": "plugin", "ready": ready, "restartCount": 3 if crashing else 0, "state": state}
            ],
        }
        self.client.patch_merge(self.pods, NAMESPACE, name, {"status": status}, subresource="status")


@pytest.fixture
def cluster(sim_cluster: SimCluster) -> Iterator[Cluster]:
    """A bare API (no controllers): a canary node, the driver's slice on it, canary v1 with a crashing pod."""
    with ClusterClient.for_url(sim_cluster.url) as client:
        c = Cluster(client)
        client.create(
            c.resource("", "Node"),
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": CANARY_LABEL}},
        )
        client.create(
            c.resource("", "Namespace"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        client.apply(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{NODE}-{DRIVER}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": NODE,
                    "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                    "devices": [],
                },
            }
        )
        client.apply(canary_body("driver:bad"))
        c.ds_status(
            observedGeneration=1,
            desiredNumberScheduled=1,
            currentNumberScheduled=1,
            updatedNumberScheduled=1,
            numberReady=0,
        )
        c.pod("plugin-canary-old", generation=1, crashing=True)
        yield c


def apply_good_revision(cluster: Cluster, controller: Sequence[Callable[[], None]]) -> Any:
    """Apply canary v2 while `controller` steps run one per poll of the stage wait (then nothing more)."""
    steps = list(controller)
    polls: list[int] = []
    asked: list[int] = []

    def hook(stage: int, changes: Sequence[Change]) -> str | None:
        if stage not in asked:  # apply_plan asks once before the stage's writes: not a poll of the wait
            asked.append(stage)
            return None
        polls.append(stage)
        if steps:
            steps.pop(0)()
        return None

    plan = compute_plan([], parse_documents(_yaml(canary_body("driver:good")), "canary.yaml"))
    result = apply_plan(cluster.client, plan, applyset_id=None, stage_timeout=30, fail_fast=hook)
    return result, steps, polls


def _yaml(body: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(copy.deepcopy(body))


def test_old_crash_looping_pod_does_not_fail_the_repair(cluster: Cluster) -> None:
    assert cluster.daemonset()["metadata"]["generation"] == 1
    seen_old: list[bool] = []

    def observe() -> None:
        # The controller has seen generation 2; the old pod is still there (the real controller's window).
        assert cluster.daemonset()["metadata"]["generation"] == 2
        seen_old.append(cluster.client.get(cluster.pods, NAMESPACE, "plugin-canary-old") is not None)
        cluster.ds_status(
            observedGeneration=2, desiredNumberScheduled=1, updatedNumberScheduled=0, numberReady=0
        )

    def still_there() -> None:
        seen_old.append(cluster.client.get(cluster.pods, NAMESPACE, "plugin-canary-old") is not None)
        cluster.client.delete(cluster.pods, NAMESPACE, "plugin-canary-old")

    def new_pod_starting() -> None:
        cluster.pod("plugin-canary-new", generation=2)

    def new_pod_ready() -> None:
        cluster.pod("plugin-canary-new", generation=2, ready=True)
        cluster.ds_status(
            observedGeneration=2,
            desiredNumberScheduled=1,
            currentNumberScheduled=1,
            updatedNumberScheduled=1,
            numberReady=1,
            numberAvailable=1,
        )

    result, left, polls = apply_good_revision(
        cluster, [observe, still_there, new_pod_starting, new_pod_ready]
    )
    assert result.ok, result.error
    assert seen_old == [True, True], "the old crash-looping pod was visible during the wait"
    assert not left and len(polls) >= 5, "the stage ended only after the new pod became Ready"
    assert [s.label for s in result.stages] == ["1a drivers"]


def test_crash_looping_pod_of_the_current_template_still_fails_fast(cluster: Cluster) -> None:
    def observe() -> None:
        cluster.client.delete(cluster.pods, NAMESPACE, "plugin-canary-old")
        cluster.ds_status(
            observedGeneration=2, desiredNumberScheduled=1, updatedNumberScheduled=0, numberReady=0
        )

    def new_pod_crashes() -> None:
        cluster.pod("plugin-canary-new", generation=2, crashing=True)
        cluster.ds_status(
            observedGeneration=2, desiredNumberScheduled=1, updatedNumberScheduled=1, numberReady=0
        )

    result, left, _ = apply_good_revision(cluster, [observe, new_pod_crashes])
    assert not result.ok
    error = result.error or ""
    assert error.startswith("stage 1a drivers: fail fast"), error
    assert "plugin-canary-new" in error and "CrashLoopBackOff" in error
    assert "plugin-canary-old" not in error
    assert not left


def test_the_controllers_word_is_not_enough_without_ready_current_pods(cluster: Cluster) -> None:
    """Status claims a finished rollout while the only visible pod is the old one: keep waiting."""

    def status_claims_done() -> None:
        cluster.ds_status(
            observedGeneration=2,
            desiredNumberScheduled=1,
            currentNumberScheduled=1,
            updatedNumberScheduled=1,
            numberReady=1,
            numberAvailable=1,
        )

    def old_pod_goes_new_one_ready() -> None:
        cluster.client.delete(cluster.pods, NAMESPACE, "plugin-canary-old")
        cluster.pod("plugin-canary-new", generation=2, ready=True)

    checked: list[str] = []

    def not_done_yet() -> None:
        # One poll ran with the status saying done and no current pod Ready: the stage had to go on.
        checked.append("polled")

    result, left, polls = apply_good_revision(
        cluster, [status_claims_done, not_done_yet, old_pod_goes_new_one_ready]
    )
    assert result.ok, result.error
    assert checked == ["polled"] and not left


# ---- a canary that runs nowhere ------------------------------------------------------------------------


def test_changed_canary_whose_selector_matches_no_node_fails_its_stage(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url) as client:
        c = Cluster(client)
        client.create(
            c.resource("", "Node"), {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
        )
        client.create(
            c.resource("", "Namespace"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        plan = compute_plan([], parse_documents(_yaml(canary_body("driver:v2")), "canary.yaml"))
        result = apply_plan(client, plan, applyset_id=None, stage_timeout=30)
    assert not result.ok
    error = result.error or ""
    assert error.startswith("stage 1a drivers: fail fast"), error
    assert f"DaemonSet/{NAMESPACE}/{CANARY}" in error
    assert "nodeSelector dra-gitops.io/canary=true matches no node" in error
    assert "kubectl label node <node> dra-gitops.io/canary=true" in error


def test_canary_desiring_no_pod_fails_when_changed_and_warns_when_unchanged() -> None:
    """With the sim's controllers: the DaemonSet controller reports desiredNumberScheduled 0."""
    with SimCluster() as sim:
        install(sim, nodes=1, devices_per_node=1, drivers=[DRIVER])  # no node carries the canary label
        with ClusterClient.for_url(sim.url) as client:
            client.create(
                Cluster(client).resource("", "Namespace"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            plan = compute_plan([], parse_documents(_yaml(canary_body("driver:v2")), "canary.yaml"))
            first = apply_plan(client, plan, applyset_id=None, stage_timeout=30)
            again = apply_plan(client, plan, applyset_id=None, stage_timeout=30)
    assert not first.ok
    assert "runs on no node" in (first.error or "") and "kubectl label node" in (first.error or "")
    assert again.ok, again.error
    (stage,) = again.stages
    assert any("runs on no node" in w and "kubectl label node" in w for w in stage.warnings), stage.warnings
