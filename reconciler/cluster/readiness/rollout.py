"""Which pods belong to a workload's CURRENT template: the one place fail-fast signals and health look.

A rollout keeps the previous template's pods visible for a while (the DaemonSet controller deletes an old
pod, waits for it to go, and only then creates its replacement; a Deployment scales the old ReplicaSet
down as the new one comes up). Those pods say nothing about the revision being applied: a crash-looping
pod of the template we are replacing must not fail the stage that repairs it. So every check that judges
a workload by its pods asks `current_pods` first:

* DaemonSet: label `pod-template-generation` equals the DaemonSet's metadata.generation; for a pod without
  it, `controller-revision-hash` equals the hash of the newest ControllerRevision (when given).
* Deployment: pods of the newest ReplicaSet (highest `deployment.kubernetes.io/revision`), matched by
  `pod-template-hash` or owner; none until the controller has observed the latest generation.
* StatefulSet: `controller-revision-hash` equals status.updateRevision, once the generation is observed.
* Anything else (ReplicaSet, Job, ...): every pod its selector matches.

A pod being deleted (metadata.deletionTimestamp) is never current. Everything here is pure except
`rollout_context`, which reads what the pure part needs from the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cluster.objects import labels_match, meta, owned_by, workload_selector
from reconciler.model.readers import as_dict

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

TEMPLATE_GENERATION_LABEL = "pod-template-generation"
REVISION_HASH_LABEL = "controller-revision-hash"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
DEPLOYMENT_REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


def _labels(obj: Mapping[str, Any]) -> dict[str, Any]:
    return as_dict(meta(obj).get("labels"))


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _observed(workload: Mapping[str, Any]) -> bool:
    generation = _number(meta(workload).get("generation"))
    if generation is None:
        return True
    observed = _number(as_dict(workload.get("status")).get("observedGeneration"))
    return observed is not None and observed >= generation


def selects(workload: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The pod is the workload's: same namespace, and owned by it or matched by its selector labels."""
    if str(meta(pod).get("namespace") or "") != str(meta(workload).get("namespace") or ""):
        return False
    if owned_by(pod, workload):
        return True
    return labels_match(workload_selector(workload), _labels(pod))


def newest_replica_set(
    deployment: Mapping[str, Any], replica_sets: Iterable[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The Deployment's ReplicaSet with the highest revision annotation (owned by it, or selected by it)."""
    mine = [
        rs
        for rs in replica_sets
        if str(meta(rs).get("namespace") or "") == str(meta(deployment).get("namespace") or "")
        and (owned_by(rs, deployment) if meta(deployment).get("uid") else selects(deployment, rs))
    ]

    def revision(rs: Mapping[str, Any]) -> int:
        return _number(as_dict(meta(rs).get("annotations")).get(DEPLOYMENT_REVISION_ANNOTATION)) or 0

    return max(mine, key=revision, default=None)


def newest_revision_hash(workload: Mapping[str, Any], revisions: Iterable[Mapping[str, Any]]) -> str | None:
    """The hash label of the workload's newest ControllerRevision (highest .revision), or None."""
    mine = [r for r in revisions if owned_by(r, workload)]
    newest = max(mine, key=lambda r: _number(r.get("revision")) or 0, default=None)
    if newest is None:
        return None
    value = _labels(newest).get(REVISION_HASH_LABEL)
    return str(value) if value else str(meta(newest).get("name") or "").rsplit("-", 1)[-1] or None


@dataclass(frozen=True)
class RolloutContext:
    """What besides pods decides which pods are current: ReplicaSets and ControllerRevisions."""

    replica_sets: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    revisions: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


def _daemonset_current(ds: Mapping[str, Any], context: RolloutContext) -> Any:
    generation = meta(ds).get("generation")
    newest_hash = newest_revision_hash(ds, context.revisions) if context.revisions else None

    # As the daemon controller's IsPodUpdated: the template generation OR the revision hash matches (a
    # rollback to an older template makes the pods that never left it current again). The hash counts once
    # the controller observed the spec (before, the newest revision is still the one replaced).
    observed = as_dict(ds.get("status")).get("observedGeneration") == generation
    by_hash = newest_hash if observed else None

    def current(pod: Mapping[str, Any]) -> bool:
        labels = _labels(pod)
        if by_hash is not None and str(labels.get(REVISION_HASH_LABEL) or "") == by_hash:
            return True
        if TEMPLATE_GENERATION_LABEL in labels and generation is not None:
            return str(labels[TEMPLATE_GENERATION_LABEL]) == str(generation)
        if newest_hash is not None and REVISION_HASH_LABEL in labels:
            return str(labels[REVISION_HASH_LABEL]) == newest_hash
        return True  # nothing tells the template apart: judge the pod

    return current


def _deployment_current(deployment: Mapping[str, Any], context: RolloutContext) -> Any:
    if not _observed(deployment):
        return lambda pod: False  # the controller has not made the new ReplicaSet yet
    newest = newest_replica_set(deployment, context.replica_sets)
    if newest is None:
        return lambda pod: False
    template_hash = _labels(newest).get(POD_TEMPLATE_HASH_LABEL)

    def current(pod: Mapping[str, Any]) -> bool:
        if owned_by(pod, newest):
            return True
        return template_hash is not None and _labels(pod).get(POD_TEMPLATE_HASH_LABEL) == template_hash

    return current


def _statefulset_current(sts: Mapping[str, Any], context: RolloutContext) -> Any:
    target = as_dict(sts.get("status")).get("updateRevision")
    if not _observed(sts):
        return lambda pod: False
    if not target:
        return lambda pod: True
    return lambda pod: _labels(pod).get(REVISION_HASH_LABEL) == target


_RULES = {
    "DaemonSet": _daemonset_current,
    "Deployment": _deployment_current,
    "StatefulSet": _statefulset_current,
}


def current_pods(
    workload: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    context: RolloutContext | None = None,
) -> list[dict[str, Any]]:
    """The workload's pods of its current template, not being deleted. `workload` is the LIVE object."""
    context = context or RolloutContext()
    if workload.get("kind") == "Pod":
        return [
            dict(p)
            for p in pods
            if meta(p).get("name") == meta(workload).get("name")
            and meta(p).get("namespace") == meta(workload).get("namespace")
            and not meta(p).get("deletionTimestamp")
        ]
    rule = _RULES.get(str(workload.get("kind") or ""))
    current = rule(workload, context) if rule is not None else (lambda pod: True)
    return [
        dict(p) for p in pods if not meta(p).get("deletionTimestamp") and selects(workload, p) and current(p)
    ]


def rollout_context(
    client: ClusterClient, workloads: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = ()
) -> RolloutContext:
    """What `current_pods` needs besides pods: ReplicaSets where Deployments live; ControllerRevisions
    only where a DaemonSet's pod lacks `pod-template-generation` (every pod the real controller makes has it).
    """
    workloads = list(workloads)
    deployment_namespaces: set[str] = set()
    daemonset_namespaces: set[str] = set()
    for wl in workloads:
        namespace = str(meta(wl).get("namespace") or "")
        if wl.get("kind") == "Deployment":
            deployment_namespaces.add(namespace)
        elif wl.get("kind") == "DaemonSet":
            daemonset_namespaces.add(namespace)
    replica_sets: list[dict[str, Any]] = []
    for namespace in sorted(deployment_namespaces):
        replica_sets += client.list_kind("apps", "ReplicaSet", namespace or None)
    # Each DaemonSet's generation, by uid: a pod's label is compared with its own DaemonSet's (another one
    # in the namespace may be at the same generation number).
    generations = {
        str(meta(wl).get("uid")): str(meta(wl).get("generation"))
        for wl in workloads
        if wl.get("kind") == "DaemonSet"
    }
    # Revisions where a pod's generation label does not tell: it has none, or not its DaemonSet's (a pod of
    # an older generation may run the current template again after a rollback).
    unlabelled = {
        str(meta(p).get("namespace") or "")
        for p in pods
        if REVISION_HASH_LABEL in _labels(p)
        and (
            TEMPLATE_GENERATION_LABEL not in _labels(p)
            or not any(
                generations.get(str(owner.get("uid"))) == str(_labels(p)[TEMPLATE_GENERATION_LABEL])
                for owner in meta(p).get("ownerReferences") or []
                if isinstance(owner, Mapping)
            )
        )
    }
    revisions: list[dict[str, Any]] = []
    for namespace in sorted(daemonset_namespaces & unlabelled):
        revisions += client.list_kind("apps", "ControllerRevision", namespace or None)
    return RolloutContext(tuple(replica_sets), tuple(revisions))


__all__ = [
    "RolloutContext",
    "current_pods",
    "newest_replica_set",
    "newest_revision_hash",
    "rollout_context",
    "selects",
]
