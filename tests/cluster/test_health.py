"""kstatus-style health per kind (pure: plain dicts in, Health out)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.cluster.readiness import Health, health_of, pod_failure


def obj(api_version: str, kind: str, *, generation: int | None = None, **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "ns"}
    if generation is not None:
        meta["generation"] = generation
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **fields}


def cond(ctype: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def deployment(want: int | None = 2, generation: int = 2, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {} if want is None else {"replicas": want}
    return obj("apps/v1", "Deployment", generation=generation, spec=spec, status=status)


CASES: list[tuple[str, dict[str, Any] | None, str, str]] = [
    ("missing object", None, "in-progress", "not found"),
    # Namespace
    ("namespace active", obj("v1", "Namespace", status={"phase": "Active"}), "current", "active"),
    ("namespace no status", obj("v1", "Namespace"), "current", "active"),
    (
        "namespace terminating",
        obj("v1", "Namespace", status={"phase": "Terminating"}),
        "in-progress",
        "terminating",
    ),
    # CRD
    (
        "crd established",
        obj(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            status={"conditions": [cond("Established", "True")]},
        ),
        "current",
        "established",
    ),
    (
        "crd pending",
        obj("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        "in-progress",
        "not established",
    ),
    (
        "crd names rejected",
        obj(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            status={"conditions": [cond("NamesAccepted", "False", "NameConflict", "plural in use")]},
        ),
        "failed",
        "plural in use",
    ),
    # Deployment
    (
        "deployment ready",
        deployment(observedGeneration=2, replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2),
        "current",
        "2/2",
    ),
    (
        "deployment not observed",
        deployment(observedGeneration=1, updatedReplicas=2),
        "in-progress",
        "not observed",
    ),
    ("deployment no status", deployment(), "in-progress", "not observed"),
    (
        "deployment updating",
        deployment(observedGeneration=2, replicas=2, updatedReplicas=1, readyReplicas=2, availableReplicas=2),
        "in-progress",
        "1/2 replicas updated",
    ),
    (
        "deployment old replicas left",
        deployment(observedGeneration=2, replicas=3, updatedReplicas=2, readyReplicas=3, availableReplicas=3),
        "in-progress",
        "old replicas",
    ),
    (
        "deployment not ready",
        deployment(observedGeneration=2, replicas=2, updatedReplicas=2, readyReplicas=1, availableReplicas=1),
        "in-progress",
        "1/2 replicas ready",
    ),
    (
        "deployment not available",
        deployment(observedGeneration=2, replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=1),
        "in-progress",
        "1/2 replicas available",
    ),
    (
        "deployment default replicas",
        deployment(
            None, observedGeneration=2, replicas=1, updatedReplicas=1, readyReplicas=1, availableReplicas=1
        ),
        "current",
        "1/1",
    ),
    ("deployment scaled to zero", deployment(0, observedGeneration=2), "current", "0/0"),
    (
        "deployment deadline exceeded",
        deployment(
            observedGeneration=2,
            conditions=[
                cond("Progressing", "False", "ProgressDeadlineExceeded", "ReplicaSet x has timed out")
            ],
        ),
        "failed",
        "progress deadline exceeded",
    ),
    (
        "deployment progressing false for another reason",
        deployment(observedGeneration=2, conditions=[cond("Progressing", "False", "Other")]),
        "in-progress",
        "0/2",
    ),
    # DaemonSet
    (
        "daemonset ready",
        obj(
            "apps/v1",
            "DaemonSet",
            generation=1,
            status={
                "observedGeneration": 1,
                "desiredNumberScheduled": 2,
                "updatedNumberScheduled": 2,
                "numberReady": 2,
                "numberAvailable": 2,
            },
        ),
        "current",
        "2/2",
    ),
    (
        "daemonset zero desired",
        obj(
            "apps/v1",
            "DaemonSet",
            generation=1,
            status={"observedGeneration": 1, "desiredNumberScheduled": 0},
        ),
        "current",
        "0 desired",
    ),
    ("daemonset no status", obj("apps/v1", "DaemonSet", generation=1), "in-progress", "not observed"),
    (
        "daemonset observed without counts",
        obj("apps/v1", "DaemonSet", generation=1, status={"observedGeneration": 1}),
        "in-progress",
        "no status",
    ),
    (
        "daemonset updating",
        obj(
            "apps/v1",
            "DaemonSet",
            generation=3,
            status={
                "observedGeneration": 3,
                "desiredNumberScheduled": 2,
                "updatedNumberScheduled": 1,
                "numberReady": 2,
            },
        ),
        "in-progress",
        "1/2 pods updated",
    ),
    (
        "daemonset not ready",
        obj(
            "apps/v1",
            "DaemonSet",
            generation=1,
            status={
                "observedGeneration": 1,
                "desiredNumberScheduled": 2,
                "updatedNumberScheduled": 2,
                "numberReady": 1,
            },
        ),
        "in-progress",
        "1/2 pods ready",
    ),
    # StatefulSet
    (
        "statefulset ready",
        obj(
            "apps/v1",
            "StatefulSet",
            generation=1,
            spec={"replicas": 3},
            status={
                "observedGeneration": 1,
                "readyReplicas": 3,
                "updatedReplicas": 3,
                "currentRevision": "a",
                "updateRevision": "a",
            },
        ),
        "current",
        "3/3",
    ),
    (
        "statefulset rolling",
        obj(
            "apps/v1",
            "StatefulSet",
            generation=1,
            spec={"replicas": 3},
            status={
                "observedGeneration": 1,
                "readyReplicas": 3,
                "updatedReplicas": 3,
                "currentRevision": "a",
                "updateRevision": "b",
            },
        ),
        "in-progress",
        "rolling update",
    ),
    (
        "statefulset partitioned",
        obj(
            "apps/v1",
            "StatefulSet",
            generation=1,
            spec={
                "replicas": 3,
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
            },
            status={
                "observedGeneration": 1,
                "readyReplicas": 3,
                "updatedReplicas": 1,
                "currentRevision": "a",
                "updateRevision": "b",
            },
        ),
        "current",
        "3/3",
    ),
    (
        "statefulset not ready",
        obj(
            "apps/v1",
            "StatefulSet",
            generation=1,
            spec={"replicas": 3},
            status={"observedGeneration": 1, "readyReplicas": 2},
        ),
        "in-progress",
        "2/3",
    ),
    # ReplicaSet
    (
        "replicaset ready",
        obj(
            "apps/v1",
            "ReplicaSet",
            generation=1,
            spec={"replicas": 2},
            status={"observedGeneration": 1, "readyReplicas": 2, "availableReplicas": 2},
        ),
        "current",
        "2/2",
    ),
    (
        "replicaset failure",
        obj(
            "apps/v1",
            "ReplicaSet",
            generation=1,
            spec={"replicas": 2},
            status={"conditions": [cond("ReplicaFailure", "True", "FailedCreate", "quota exceeded")]},
        ),
        "failed",
        "quota exceeded",
    ),
    (
        "replicaset not available",
        obj(
            "apps/v1",
            "ReplicaSet",
            generation=1,
            spec={"replicas": 2},
            status={"observedGeneration": 1, "readyReplicas": 2, "availableReplicas": 0},
        ),
        "in-progress",
        "0/2 replicas available",
    ),
    # Job
    (
        "job complete",
        obj("batch/v1", "Job", status={"conditions": [cond("Complete", "True")]}),
        "current",
        "complete",
    ),
    (
        "job failed",
        obj(
            "batch/v1",
            "Job",
            status={"conditions": [cond("Failed", "True", "BackoffLimitExceeded", "too many")]},
        ),
        "failed",
        "too many",
    ),
    ("job running", obj("batch/v1", "Job", status={"active": 1}), "in-progress", "1 active"),
    # Pod
    (
        "pod ready",
        obj("v1", "Pod", status={"phase": "Running", "conditions": [cond("Ready", "True")]}),
        "current",
        "ready",
    ),
    ("pod pending", obj("v1", "Pod", status={"phase": "Pending"}), "in-progress", "Pending"),
    ("pod no status", obj("v1", "Pod"), "in-progress", "Pending"),
    (
        "pod running not ready",
        obj("v1", "Pod", status={"phase": "Running", "conditions": [cond("Ready", "False")]}),
        "in-progress",
        "not ready",
    ),
    (
        "pod unschedulable",
        obj(
            "v1",
            "Pod",
            status={
                "phase": "Pending",
                "conditions": [cond("PodScheduled", "False", "Unschedulable", "0/2 nodes")],
            },
        ),
        "in-progress",
        "0/2 nodes",
    ),
    ("pod succeeded", obj("v1", "Pod", status={"phase": "Succeeded"}), "current", "succeeded"),
    ("pod failed", obj("v1", "Pod", status={"phase": "Failed", "reason": "Evicted"}), "failed", "Evicted"),
    (
        "pod crashloop",
        obj(
            "v1",
            "Pod",
            status={
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "plugin",
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                    }
                ],
            },
        ),
        "failed",
        "plugin CrashLoopBackOff: back-off",
    ),
    (
        "pod image pull",
        obj(
            "v1",
            "Pod",
            status={
                "phase": "Pending",
                "initContainerStatuses": [
                    {"name": "init", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
                ],
            },
        ),
        "failed",
        "init ImagePullBackOff",
    ),
    (
        "pod container creating",
        obj(
            "v1",
            "Pod",
            status={
                "phase": "Pending",
                "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}],
            },
        ),
        "in-progress",
        "Pending",
    ),
    # DRA objects and the rest: current once they exist
    ("resourceclaim", obj("resource.k8s.io/v1", "ResourceClaim"), "current", "exists"),
    ("deviceclass", obj("resource.k8s.io/v1", "DeviceClass"), "current", "exists"),
    ("configmap", obj("v1", "ConfigMap"), "current", "exists"),
    ("custom resource", obj("example.com/v1", "Widget", status={"whatever": 1}), "current", "exists"),
    # a CRD-defined kind that happens to be called Deployment is not judged as one
    ("foreign deployment", obj("example.com/v1", "Deployment"), "current", "exists"),
]


@pytest.mark.parametrize(("name", "body", "state", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_health(name: str, body: dict[str, Any] | None, state: str, fragment: str) -> None:
    health = health_of(body)
    assert health.state == state, health
    assert fragment in health.message


def test_terminating_objects_are_in_progress() -> None:
    for body in (obj("v1", "ConfigMap"), deployment(observedGeneration=2), obj("v1", "Pod")):
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        assert health_of(body) == Health("in-progress", "being deleted")


def test_health_flags() -> None:
    assert Health("current", "").current and not Health("current", "").failed
    assert Health("failed", "").failed and not Health("failed", "").current


def test_malformed_fields_do_not_raise() -> None:
    weird = obj("apps/v1", "Deployment", generation=1, spec={"replicas": "two"}, status="broken")
    assert health_of(weird).state == "in-progress"
    assert health_of(
        {"kind": "Pod", "apiVersion": "v1", "status": {"containerStatuses": ["x", None]}}
    ).state == ("in-progress")
    assert health_of({}).state == "current"


def test_pod_failure_none_for_healthy_pod() -> None:
    assert pod_failure(obj("v1", "Pod", status={"phase": "Running"})) is None
