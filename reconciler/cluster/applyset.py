"""The ApplySet of a reconciled target (kubectl ApplySet KEP-3659), so `kubectl` understands the set.

The parent is the ConfigMap `dra-gitops-<target>` in the reconciler namespace (the same ConfigMap the state
store uses); every managed object carries `applyset.kubernetes.io/part-of: <id>`. The parent's labels
and annotations are server-side applied by a field manager of their own, so they never disturb the state
data in the same ConfigMap.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from reconciler import __version__
from reconciler.cluster.client import ClusterClient, NotFound
from reconciler.errors import DraGitopsError
from reconciler.model.objects import ObjRef
from reconciler.model.scope import live_ref

PART_OF_LABEL = "applyset.kubernetes.io/part-of"
ID_LABEL = "applyset.kubernetes.io/id"
TOOLING_ANNOTATION = "applyset.kubernetes.io/tooling"
GROUP_KINDS_ANNOTATION = "applyset.kubernetes.io/contains-group-kinds"
# A digest of the desired state the set was last delivered from, written once that delivery verified and
# removed before the next delivery's first write (reconciler/cluster/apply/noop.py reads it).
DELIVERED_ANNOTATION = "dra-gitops.io/delivered-digest"
DEFAULT_TARGET = "default"
DEFAULT_NAMESPACE = "dra-gitops"
# The parent's ApplySet metadata has a field manager of its own: the state store writes data into the
# same ConfigMap, and an apply by one manager drops whatever that manager applied before and left out.
PARENT_FIELD_MANAGER = "dra-gitops-applyset"


def parent_name(target: str = DEFAULT_TARGET) -> str:
    return f"dra-gitops-{target}"


def applyset_id(target: str = DEFAULT_TARGET, namespace: str = DEFAULT_NAMESPACE) -> str:
    """`applyset-` + base64url(sha256("<name>.<namespace>.<Kind>.<group>")) unpadded + `-v1` (the KEP)."""
    material = f"{parent_name(target)}.{namespace}.ConfigMap."
    digest = base64.urlsafe_b64encode(hashlib.sha256(material.encode()).digest()).decode().rstrip("=")
    return f"applyset-{digest}-v1"


def group_kind(body: dict[str, Any]) -> str:
    """`Kind.group` as the KEP spells it (`Namespace` for core, `DeviceClass.resource.k8s.io`)."""
    api_version = str(body.get("apiVersion") or "")
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    kind = str(body.get("kind") or "")
    return f"{kind}.{group}" if group else kind


def label_body(body: dict[str, Any], set_id: str) -> dict[str, Any]:
    """A copy of one manifest with the part-of label (the input is never modified)."""
    labelled = copy.deepcopy(body)
    meta = labelled.setdefault("metadata", {})
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = {}
    meta["labels"] = {**labels, PART_OF_LABEL: set_id}
    return labelled


def label_objects(bodies: Iterable[dict[str, Any]], set_id: str) -> list[dict[str, Any]]:
    return [label_body(body, set_id) for body in bodies]


def _parse_group_kinds(value: Any) -> set[str]:
    return {item.strip() for item in str(value or "").split(",") if item.strip()}


def ensure_parent(
    client: ClusterClient,
    target: str = DEFAULT_TARGET,
    namespace: str = DEFAULT_NAMESPACE,
    group_kinds: Iterable[str] = (),
    record: dict[str, str] | None = None,
    delivered: str | None = None,
) -> dict[str, Any]:
    """Create the namespace if missing and apply the parent's ApplySet metadata (group-kinds: union).

    `delivered`: the digest of the desired state just delivered and verified, or None (before a delivery's
    writes) to remove the one recorded. `record` receives what was done to each of these bookkeeping
    objects ({ref: create|update|unchanged}): they are not the revision's objects and are counted apart.
    """
    record = record if record is not None else {}
    ns_resource = client.resource_for("v1", "Namespace")
    if client.get(ns_resource, None, namespace) is None:
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        record[f"Namespace/{namespace}"] = "create"
    resource = client.resource_for("v1", "ConfigMap")
    name = parent_name(target)
    live = client.get(resource, namespace, name)
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    kinds = ",".join(sorted(_parse_group_kinds(annotations.get(GROUP_KINDS_ANNOTATION)) | set(group_kinds)))
    labels = {ID_LABEL: applyset_id(target, namespace)}
    wanted = {TOOLING_ANNOTATION: f"dra-gitops/v{__version__}", GROUP_KINDS_ANNOTATION: kinds}
    if delivered is not None:
        wanted[DELIVERED_ANNOTATION] = delivered
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": wanted},
    }
    if live is not None:
        live_labels = (live.get("metadata") or {}).get("labels") or {}
        if (
            all(live_labels.get(k) == v for k, v in labels.items())
            and all(annotations.get(k) == v for k, v in wanted.items())
            and annotations.get(DELIVERED_ANNOTATION) == delivered
        ):
            record[f"ConfigMap/{namespace}/{name}"] = "unchanged"
            return live
    record[f"ConfigMap/{namespace}/{name}"] = "create" if live is None else "update"
    return dict(
        client.request(
            "PATCH",
            resource.path(namespace, name),
            query=[("fieldManager", PARENT_FIELD_MANAGER), ("force", "true")],
            body=body,
            content_type="application/apply-patch+yaml",
            where=f"ConfigMap/{namespace}/{name}",
        )
    )


def delivered_digest(
    client: ClusterClient, target: str = DEFAULT_TARGET, namespace: str = DEFAULT_NAMESPACE
) -> str | None:
    """The digest recorded by the last verified delivery of the set, if no delivery has written since."""
    live = client.get(client.resource_for("v1", "ConfigMap"), namespace, parent_name(target))
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(DELIVERED_ANNOTATION)
    return str(value) if value else None


def prune_candidates(
    client: ClusterClient,
    set_id: str,
    desired_refs: Iterable[ObjRef],
    group_kinds: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Live members of the set (by label, over the recorded group-kinds) that are no longer desired.

    Catches objects the plan does not know about (applied by a pass whose record was lost). Kinds the
    cluster no longer serves are skipped. Without `group_kinds`, the parent's recorded ones are used (the
    parent is found by its id label).
    """
    kinds = set(group_kinds)
    if not kinds:
        for parent in client.list_kind("", "ConfigMap", label_selector=f"{ID_LABEL}={set_id}"):
            annotations = (parent.get("metadata") or {}).get("annotations") or {}
            kinds |= _parse_group_kinds(annotations.get(GROUP_KINDS_ANNOTATION))
    desired = set(served_refs(client, desired_refs).values())
    found: list[dict[str, Any]] = []
    for gk in sorted(kinds):
        kind, _, group = gk.partition(".")
        try:
            items = client.list_kind(group, kind, label_selector=f"{PART_OF_LABEL}={set_id}")
        except NotFound:
            continue
        for item in items:
            if live_ref(item) not in desired and not (item.get("metadata") or {}).get("deletionTimestamp"):
                found.append(item)
    return found


def served_refs(client: ClusterClient, refs: Iterable[ObjRef]) -> dict[ObjRef, ObjRef]:
    """`refs` as the cluster scopes them: a kind its discovery lists as cluster-scoped has no namespace (a
    desired state read without the cluster takes a custom kind it has no CRD for as namespaced), so a live
    object is compared with the reference the server gives it and never pruned or kept by a namespace."""
    scoped: dict[tuple[str, str], bool | None] = {}
    out: dict[ObjRef, ObjRef] = {}
    for ref in refs:
        key = (ref.group, ref.kind)
        if key not in scoped:
            try:
                resource = client.find_kind(*key)
            except DraGitopsError:
                resource = None
            scoped[key] = resource.namespaced if resource is not None else None
        out[ref] = dataclasses.replace(ref, namespace="") if scoped[key] is False and ref.namespace else ref
    return out


__all__ = [
    "DELIVERED_ANNOTATION",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TARGET",
    "GROUP_KINDS_ANNOTATION",
    "ID_LABEL",
    "PARENT_FIELD_MANAGER",
    "PART_OF_LABEL",
    "TOOLING_ANNOTATION",
    "applyset_id",
    "delivered_digest",
    "ensure_parent",
    "group_kind",
    "label_body",
    "label_objects",
    "parent_name",
    "prune_candidates",
    "served_refs",
]
