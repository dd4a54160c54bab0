"""Which pods are of a workload's current template (pure: live objects in, pods out)."""

from __future__ import annotations

from typing import Any

from reconciler.cluster.readiness import RolloutContext, current_pods

NS = "apps-ns"
LABELS = {"app": "x"}


def workload(kind: str, generation: int = 2, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": NS, "uid": f"uid-{kind}", "generation": generation},
        "spec": {"selector": {"matchLabels": LABELS}, "template": {"metadata": {"labels": LABELS}}},
        "status": status if status is not None else {"observedGeneration": generation},
    }


def pod(name: str, labels: dict[str, str] | None = None, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {**LABELS, **(labels or {})}}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_daemonset_pods_of_the_current_generation_only_and_never_a_deleted_one() -> None:
    pods = [
        pod("old", {"pod-template-generation": "1"}),
        pod("new", {"pod-template-generation": "2"}),
        pod("going", {"pod-template-generation": "2"}, deleting=True),
        {
            **pod("elsewhere", {"pod-template-generation": "2"}),
            "metadata": {"name": "elsewhere", "namespace": "other", "labels": LABELS},
        },
    ]
    assert names(current_pods(workload("DaemonSet"), pods)) == ["new"]


def test_daemonset_pod_without_generation_label_is_judged_by_the_newest_controller_revision() -> None:
    ds = workload("DaemonSet")
    owner = [{"uid": ds["metadata"]["uid"]}]
    revisions = [
        {
            "metadata": {
                "name": "w-aaa",
                "labels": {"controller-revision-hash": "aaa"},
                "ownerReferences": owner,
            },
            "revision": 1,
        },
        {
            "metadata": {
                "name": "w-bbb",
                "labels": {"controller-revision-hash": "bbb"},
                "ownerReferences": owner,
            },
            "revision": 2,
        },
    ]
    pods = [
        pod("old", {"controller-revision-hash": "aaa"}),
        pod("new", {"controller-revision-hash": "bbb"}),
    ]
    assert names(current_pods(ds, pods, RolloutContext(revisions=revisions))) == ["new"]


def test_deployment_pods_of_the_newest_replica_set_once_observed() -> None:
    deployment = workload("Deployment")
    owner = [{"uid": deployment["metadata"]["uid"]}]

    def replica_set(hash_: str, revision: str) -> dict[str, Any]:
        return {
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"w-{hash_}",
                "namespace": NS,
                "uid": f"rs-{hash_}",
                "labels": {**LABELS, "pod-template-hash": hash_},
                "annotations": {"deployment.kubernetes.io/revision": revision},
                "ownerReferences": owner,
            },
        }

    context = RolloutContext(replica_sets=[replica_set("aaa", "9"), replica_set("bbb", "10")])
    pods = [pod("old", {"pod-template-hash": "aaa"}), pod("new", {"pod-template-hash": "bbb"})]
    assert names(current_pods(deployment, pods, context)) == ["new"]
    unobserved = workload("Deployment", generation=3, status={"observedGeneration": 2})
    assert current_pods(unobserved, pods, context) == []


def test_statefulset_pods_of_the_update_revision() -> None:
    sts = workload(
        "StatefulSet", status={"observedGeneration": 2, "updateRevision": "w-new", "currentRevision": "w-old"}
    )
    pods = [
        pod("w-0", {"controller-revision-hash": "w-new"}),
        pod("w-1", {"controller-revision-hash": "w-old"}),
    ]
    assert names(current_pods(sts, pods)) == ["w-0"]


def test_other_workloads_keep_every_selected_pod() -> None:
    rs = workload("ReplicaSet")
    assert names(current_pods(rs, [pod("a"), pod("b"), pod("c", deleting=True)])) == ["a", "b"]
