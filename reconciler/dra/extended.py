"""Extended resources backed by DRA (KEP-5004, DRAExtendedResource, Kubernetes 1.34+): the claim
kube-scheduler makes for them (pure).

Every DeviceClass backs its implicit resource ``deviceclass.resource.kubernetes.io/<class>``, and the one
its ``spec.extendedResourceName`` names (when several classes name the same resource, the newest class
wins, then the first by name). A pod asking such a resource (in its containers' requests, which default
to their limits) that no node advertises in ``status.allocatable`` gets one ResourceClaim of its own from
the scheduler: named ``<pod>-extended-resources-<random>``, annotated
``resource.kubernetes.io/extended-resource-claim: "true"``, owned by the pod, with one ExactCount request
per container and resource named ``container-<i>-request-<j>`` (``i``: the container's index among the
init containers then the containers; ``j``: the resource's index among the container's requests sorted
by name), the requests sorted by name. The pod's ``status.extendedResourceClaimStatus`` then says
which claim it is (``resourceClaimName``) and which request serves which container's resource
(``requestMappings[]{containerName, resourceName, requestName}``).

One simplification: a resource some node advertises is taken as a device plugin's on every node (the
real scheduler decides per node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.dra.quantity import quantity_or_none
from reconciler.model.readers import as_dict, as_list

__all__ = [
    "EXTENDED_CLAIM_ANNOTATION",
    "EXTENDED_CLAIM_INFIX",
    "IMPLICIT_PREFIX",
    "class_mapping",
    "container_requests",
    "device_requests",
    "extended_claim",
    "extended_claim_name",
    "is_extended_claim",
    "pending_extended_claim",
    "request_mappings",
]

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
EXTENDED_CLAIM_INFIX = "-extended-resources-"


def class_mapping(classes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass that backs it (implicit names and explicit ones)."""
    out: dict[str, str] = {}
    explicit: dict[str, tuple[str, str]] = {}  # resource -> (creationTimestamp, class name) of the winner
    for cls in classes:
        meta = as_dict(cls.get("metadata"))
        name = str(meta.get("name") or "")
        if not name:
            continue
        out[IMPLICIT_PREFIX + name] = name
        resource = as_dict(cls.get("spec")).get("extendedResourceName")
        if not isinstance(resource, str) or not resource:
            continue
        created = str(meta.get("creationTimestamp") or "")
        best = explicit.get(resource)
        # newest first; equal timestamps: the first by name
        if best is None or created > best[0] or (created == best[0] and name < best[1]):
            explicit[resource] = (created, name)
    for resource, (_, name) in explicit.items():
        out[resource] = name
    return out


def container_requests(container: Mapping[str, Any]) -> dict[str, Any]:
    """A container's requests as the API server stores them: each limit is the request it lacks."""
    resources = as_dict(container.get("resources"))
    return {**as_dict(resources.get("limits")), **as_dict(resources.get("requests"))}


def _containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [as_dict(c) for c in [*as_list(spec.get("initContainers")), *as_list(spec.get("containers"))]]


def _whole(raw: Any) -> int | None:
    q = quantity_or_none(raw)
    if q is None or q <= 0 or q.denominator != 1:
        return None
    return int(q)


def device_requests(
    spec: Mapping[str, Any], mapping: Mapping[str, str], advertised: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """The requests of the pod's extended-resource claim (empty: the pod needs none)."""
    served = set(advertised)
    out: list[dict[str, Any]] = []
    for index, container in enumerate(_containers(spec)):
        requests = container_requests(container)
        for position, resource in enumerate(sorted(str(k) for k in requests)):
            cls = mapping.get(resource)
            count = _whole(requests[resource])
            if cls is None or resource in served or count is None:
                continue
            out.append(
                {
                    "name": f"container-{index}-request-{position}",
                    "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count},
                }
            )
    return sorted(out, key=lambda r: str(r["name"]))


def request_mappings(spec: Mapping[str, Any], requests: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``status.extendedResourceClaimStatus.requestMappings``: which request serves which container's
    resource, in container order."""
    names = {str(r.get("name")) for r in requests}
    out: list[dict[str, str]] = []
    for index, container in enumerate(_containers(spec)):
        for position, resource in enumerate(sorted(str(k) for k in container_requests(container))):
            request = f"container-{index}-request-{position}"
            if request in names:
                out.append(
                    {
                        "containerName": str(container.get("name") or ""),
                        "resourceName": resource,
                        "requestName": request,
                    }
                )
    return out


def extended_claim(
    namespace: str, pod: str, requests: list[dict[str, Any]], owner: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The claim the scheduler creates for the pod (``generateName``: the server names it); ``owner``:
    the pod's ``metadata`` (name and uid), for the controller reference."""
    metadata: dict[str, Any] = {
        "generateName": f"{pod}{EXTENDED_CLAIM_INFIX}",
        "namespace": namespace,
        "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
    }
    if owner is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": str(owner.get("name")),
                "uid": str(owner.get("uid")),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {"devices": {"requests": requests}},
    }


def is_extended_claim(claim: Mapping[str, Any]) -> bool:
    annotations = as_dict(as_dict(claim.get("metadata")).get("annotations"))
    return annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true"


def extended_claim_name(pod: Mapping[str, Any]) -> str | None:
    """The name of the pod's extended-resource claim, once the scheduler has recorded it."""
    status = as_dict(as_dict(pod.get("status")).get("extendedResourceClaimStatus"))
    name = status.get("resourceClaimName")
    return str(name) if name else None


def pending_extended_claim(
    pod: Mapping[str, Any], mapping: Mapping[str, str], advertised: Iterable[str] = ()
) -> dict[str, Any] | None:
    """The claim the scheduler will make for the pod's extended resources backed by DRA while it has
    none yet (named ``<pod>-extended-resources``, as no server named it), or None."""
    if extended_claim_name(pod):
        return None
    requests = device_requests(as_dict(pod.get("spec")), mapping, advertised)
    if not requests:
        return None
    meta = as_dict(pod.get("metadata"))
    claim = extended_claim(str(meta.get("namespace") or ""), str(meta.get("name") or ""), requests)
    claim["metadata"]["name"] = f"{meta.get('name')}{EXTENDED_CLAIM_INFIX.rstrip('-')}"
    return claim
