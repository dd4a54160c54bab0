"""Readiness of one live object, kstatus-style: current / in-progress / failed.

PURE: takes the object as the API server returned it, never talks to a cluster. The rules follow
kstatus (sigs.k8s.io/cli-utils): a controller object is current only once its controller has observed
the latest generation and every replica is updated, ready and available; anything we do not know is
current as soon as it exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from reconciler.cluster.objects import condition
from reconciler.model.readers import as_dict

State = Literal["current", "in-progress", "failed"]
CURRENT: State = "current"
IN_PROGRESS: State = "in-progress"
FAILED: State = "failed"

# Container waiting reasons that will not fix themselves without a change.
FAILED_WAITING_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


@dataclass(frozen=True)
class Health:
    state: State
    message: str

    @property
    def current(self) -> bool:
        return self.state == CURRENT

    @property
    def failed(self) -> bool:
        return self.state == FAILED


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return default


def _cond_true(obj: dict[str, Any], ctype: str) -> bool:
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def _generation_observed(obj: dict[str, Any]) -> bool:
    """False while the controller has not seen the latest spec (a missing generation counts as seen)."""
    generation = as_dict(obj.get("metadata")).get("generation")
    if generation is None:
        return True
    observed = as_dict(obj.get("status")).get("observedGeneration")
    return observed is not None and _int(observed, -1) >= _int(generation)


def _terminating(obj: dict[str, Any]) -> Health | None:
    if as_dict(obj.get("metadata")).get("deletionTimestamp"):
        return Health(IN_PROGRESS, "being deleted")
    return None


def _namespace(obj: dict[str, Any]) -> Health:
    phase = as_dict(obj.get("status")).get("phase")
    if phase == "Terminating" or as_dict(obj.get("metadata")).get("deletionTimestamp"):
        return Health(IN_PROGRESS, "namespace is terminating")
    if phase in (None, "Active"):
        # A namespace without status is what an API double may return; the server makes it Active.
        return Health(CURRENT, "namespace is active")
    return Health(IN_PROGRESS, f"namespace phase is {phase}")


def _crd(obj: dict[str, Any]) -> Health:
    if _cond_true(obj, "Established"):
        return Health(CURRENT, "CRD is established")
    names = condition(obj, "NamesAccepted")
    if names is not None and names.get("status") == "False":
        return Health(
            FAILED, f"CRD names not accepted: {names.get('message') or names.get('reason') or ''}".strip()
        )
    return Health(IN_PROGRESS, "CRD is not established yet")


def _deployment(obj: dict[str, Any]) -> Health:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    progressing = condition(obj, "Progressing")
    if (
        progressing is not None
        and progressing.get("status") == "False"
        and progressing.get("reason") == "ProgressDeadlineExceeded"
    ):
        return Health(FAILED, f"progress deadline exceeded: {progressing.get('message') or ''}".strip())
    if not _generation_observed(obj):
        return Health(IN_PROGRESS, "deployment spec not observed yet")
    if spec.get("paused"):
        return Health(IN_PROGRESS, "deployment is paused")
    want = _int(spec.get("replicas"), 1) if spec.get("replicas") is not None else 1
    updated = _int(status.get("updatedReplicas"))
    ready = _int(status.get("readyReplicas"))
    available = _int(status.get("availableReplicas"))
    total = _int(status.get("replicas"))
    if updated < want:
        return Health(IN_PROGRESS, f"{updated}/{want} replicas updated")
    if total > updated:
        return Health(IN_PROGRESS, f"{total - updated} old replicas pending termination")
    if ready < want:
        return Health(IN_PROGRESS, f"{ready}/{want} replicas ready")
    if available < want:
        return Health(IN_PROGRESS, f"{available}/{want} replicas available")
    return Health(CURRENT, f"{want}/{want} replicas ready")


def _replicaset(obj: dict[str, Any]) -> Health:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    failure = condition(obj, "ReplicaFailure")
    if failure is not None and failure.get("status") == "True":
        return Health(
            FAILED, f"replica failure: {failure.get('message') or failure.get('reason') or ''}".strip()
        )
    if not _generation_observed(obj):
        return Health(IN_PROGRESS, "replicaset spec not observed yet")
    want = _int(spec.get("replicas"), 1) if spec.get("replicas") is not None else 1
    ready = _int(status.get("readyReplicas"))
    available = _int(status.get("availableReplicas"))
    if ready < want:
        return Health(IN_PROGRESS, f"{ready}/{want} replicas ready")
    if available < want:
        return Health(IN_PROGRESS, f"{available}/{want} replicas available")
    return Health(CURRENT, f"{want}/{want} replicas ready")


def _statefulset(obj: dict[str, Any]) -> Health:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    if not _generation_observed(obj):
        return Health(IN_PROGRESS, "statefulset spec not observed yet")
    want = _int(spec.get("replicas"), 1) if spec.get("replicas") is not None else 1
    ready = _int(status.get("readyReplicas"))
    current = _int(status.get("currentReplicas"))
    updated = _int(status.get("updatedReplicas"))
    strategy = as_dict(spec.get("updateStrategy"))
    partition = _int(as_dict(strategy.get("rollingUpdate")).get("partition"))
    if ready < want:
        return Health(IN_PROGRESS, f"{ready}/{want} replicas ready")
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        if updated < want - partition:
            return Health(IN_PROGRESS, f"{updated}/{want - partition} replicas updated")
        revision, target = status.get("currentRevision"), status.get("updateRevision")
        if partition == 0 and revision and target and revision != target:
            return Health(IN_PROGRESS, "rolling update in progress")
    elif current and current < want:
        return Health(IN_PROGRESS, f"{current}/{want} replicas current")
    return Health(CURRENT, f"{want}/{want} replicas ready")


def _daemonset(obj: dict[str, Any]) -> Health:
    status = as_dict(obj.get("status"))
    if not _generation_observed(obj):
        return Health(IN_PROGRESS, "daemonset spec not observed yet")
    if "desiredNumberScheduled" not in status:
        return Health(IN_PROGRESS, "daemonset has no status yet")
    desired = _int(status.get("desiredNumberScheduled"))
    if desired == 0:
        return Health(CURRENT, "no nodes to run on (0 desired)")
    updated = _int(status.get("updatedNumberScheduled"))
    ready = _int(status.get("numberReady"))
    available = _int(status.get("numberAvailable"), ready)
    if updated < desired:
        return Health(IN_PROGRESS, f"{updated}/{desired} pods updated")
    if ready < desired:
        return Health(IN_PROGRESS, f"{ready}/{desired} pods ready")
    if available < desired:
        return Health(IN_PROGRESS, f"{available}/{desired} pods available")
    return Health(CURRENT, f"{desired}/{desired} pods ready")


def _job(obj: dict[str, Any]) -> Health:
    failed = condition(obj, "Failed")
    if failed is not None and failed.get("status") == "True":
        return Health(FAILED, f"job failed: {failed.get('message') or failed.get('reason') or ''}".strip())
    if _cond_true(obj, "Complete"):
        return Health(CURRENT, "job complete")
    status = as_dict(obj.get("status"))
    return Health(
        IN_PROGRESS,
        f"job running: {_int(status.get('active'))} active, {_int(status.get('succeeded'))} succeeded",
    )


def pod_failure(obj: dict[str, Any]) -> str | None:
    """Why a pod will not become Ready by itself (CrashLoopBackOff, image pull, phase Failed), or None."""
    status = as_dict(obj.get("status"))
    if status.get("phase") == "Failed":
        reason = status.get("reason") or status.get("message") or "pod failed"
        return f"phase Failed: {reason}"
    for field in ("initContainerStatuses", "containerStatuses"):
        for cstatus in status.get(field) or []:
            if not isinstance(cstatus, dict):
                continue
            waiting = as_dict(as_dict(cstatus.get("state")).get("waiting"))
            reason = waiting.get("reason")
            if reason in FAILED_WAITING_REASONS:
                message = waiting.get("message")
                detail = f": {message}" if message else ""
                return f"container {cstatus.get('name')} {reason}{detail}"
    return None


def _pod(obj: dict[str, Any]) -> Health:
    failure = pod_failure(obj)
    if failure is not None:
        return Health(FAILED, failure)
    status = as_dict(obj.get("status"))
    phase = status.get("phase") or "Pending"
    if phase == "Succeeded":
        return Health(CURRENT, "pod succeeded")
    if phase == "Running" and _cond_true(obj, "Ready"):
        return Health(CURRENT, "pod is ready")
    scheduled = condition(obj, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        message = scheduled.get("message") or scheduled.get("reason") or ""
        return Health(IN_PROGRESS, f"pod not scheduled: {message}".strip())
    return Health(IN_PROGRESS, f"pod is {phase}, not ready")


_BY_KIND = {
    ("", "Namespace"): _namespace,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    ("apps", "Deployment"): _deployment,
    ("apps", "DaemonSet"): _daemonset,
    ("apps", "StatefulSet"): _statefulset,
    ("apps", "ReplicaSet"): _replicaset,
    ("batch", "Job"): _job,
    ("", "Pod"): _pod,
}


def health_of(obj: dict[str, Any] | None) -> Health:
    """The health of a live object; None (not found) is in progress: it may still be created."""
    if not isinstance(obj, dict):
        return Health(IN_PROGRESS, "not found")
    api_version = str(obj.get("apiVersion") or "")
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    check = _BY_KIND.get((group, str(obj.get("kind") or "")))
    if check is None:
        # ResourceClaim, DeviceClass, ConfigMap, ...: existing is all there is to wait for.
        return _terminating(obj) or Health(CURRENT, "exists")
    if check is not _namespace:
        terminating = _terminating(obj)
        if terminating is not None:
            return terminating
    return check(obj)


__all__ = ["CURRENT", "FAILED", "IN_PROGRESS", "Health", "State", "health_of", "pod_failure"]
