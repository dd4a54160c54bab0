"""When the scheduler's ties cannot matter at all (pure): every pod takes one device of one kind.

If every pod to place has a single claim of its own asking one device (ExactCount 1, one request, no
constraints, no capacity, no admin access) by the same request, may use the same nodes, and asks no
extended resource; and no device is shared, partitionable, or makes the request's selectors fail or
undecidable: then a pod fits exactly when some node it may use still reaches a free matching device,
and each pod that fits takes one of them wherever it goes. Which node it goes to cannot fragment
anything a later pod needs, so whether each pod fits does not depend on the ties (a Deployment of
single-device replicas, the common case). :func:`reconciler.dra.ties.explore` then follows one
placement and needs no search.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from reconciler.dra.devices import claim_spec, normalise_requests
from reconciler.dra.noderesources import extended_requests
from reconciler.dra.placement import Placement
from reconciler.dra.podinfo import PodInfo
from reconciler.model.readers import as_dict

__all__ = ["ties_cannot_matter"]


def _single_device_request(pod: PodInfo, placement: Placement) -> str | None:
    """The pod's one request as text when it asks exactly one device of its own claim; else None."""
    if len(pod.claims) != 1 or extended_requests(pod.spec):
        return None
    pc = pod.claims[0]
    if pc.claim is None or pc.key in placement.allocations:
        return None
    spec = claim_spec(pc.claim)
    if as_dict(spec.get("devices")).get("constraints"):
        return None
    requests = normalise_requests(spec)
    if len(requests) != 1 or "exactly" not in requests[0]:
        return None
    body = as_dict(requests[0].get("exactly"))
    if body.get("allocationMode", "ExactCount") != "ExactCount" or body.get("count", 1) != 1:
        return None
    if body.get("adminAccess") or body.get("capacity"):
        return None
    alternatives, unknown = placement.inv.alternatives(spec, placement.inv.devices, placement.usage)
    if unknown is not None or any(a.errors or a.setup_error for alts in alternatives for a in alts):
        return None
    return json.dumps(body, sort_keys=True, default=str)


def ties_cannot_matter(placement: Placement, pods: Sequence[PodInfo]) -> bool:
    """Whether no choice between tied nodes can change whether any of ``pods`` fits (see the module)."""
    if any(d.multi or d.consumes for d in placement.inv.devices):
        return False
    keys = [pc.key for pod in pods for pc in pod.claims]
    if len(set(keys)) != len(keys):
        return False  # a claim shared by pods
    requests = set()
    nodes = set()
    for pod in pods:
        request = _single_device_request(pod, placement)
        if request is None:
            return False
        requests.add(request)
        nodes.add(tuple(placement.passes_spec_filters(pod, node) for node in placement.nodes))
        if len(requests) > 1 or len(nodes) > 1:
            return False
    return True
