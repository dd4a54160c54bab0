"""The scheduler's part for extended resources backed by DRA (KEP-5004, DRAExtendedResource).

As kube-scheduler's DynamicResources plugin does it (the shapes: :mod:`reconciler.dra.extended`): a pod
asking a resource a DeviceClass backs, which no node advertises, is scheduled with one claim more, kept in
memory while the pod is tried on the nodes. Once a node is chosen (PreBind) the claim is created
(``<pod>-extended-resources-<random>``, owned by the pod, annotated
``resource.kubernetes.io/extended-resource-claim: "true"``), gets the delete-protection finalizer, its
allocation and the pod in ``reservedFor``; then ``pod.status.extendedResourceClaimStatus`` is written, and
the pod is bound. A claim of an earlier cycle found for a pod still waiting is stale (its binding did not
finish): it is deleted (the plugin's PostFilter) and the pod tried again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra.extended import (
    class_mapping,
    device_requests,
    extended_claim,
    extended_claim_name,
    is_extended_claim,
    request_mappings,
)
from reconciler.dra.placement import NodeInfo, PodClaim
from reconciler.dra.podinfo import EXTENDED_CLAIM
from reconciler.sim.controlplane.objects import controller_of, md
from reconciler.sim.storebase import Obj

__all__ = ["ExtendedResources", "extended_claim_name", "mappings_fn"]

# The claim's key while it exists only in the scheduler's memory: not a valid object name, as the real
# plugin's "<extended-resources>".
IN_MEMORY = "<extended-resources>"


@dataclass
class ExtendedResources:
    """What one scheduling pass knows of extended resources backed by DRA."""

    mapping: dict[str, str] = field(default_factory=dict)  # resource -> DeviceClass
    advertised: frozenset[str] = frozenset()  # resources some node's allocatable offers (device plugins)
    claims: dict[str, Obj] = field(default_factory=dict)  # pod uid -> its extended-resource claim

    @classmethod
    def of(
        cls, classes: Iterable[Mapping[str, Any]], nodes: Iterable[NodeInfo], claims: Iterable[Obj]
    ) -> ExtendedResources:
        owned: dict[str, Obj] = {}
        for c in claims:
            owner = controller_of(c)
            if is_extended_claim(c) and owner and owner.get("kind") == "Pod":
                owned[str(owner.get("uid"))] = c
        advertised = frozenset(name for n in nodes for name, q in n.allocatable.items() if q > 0)
        return cls(class_mapping(classes), advertised, owned)

    def claim_for(self, pod: Obj) -> PodClaim | None:
        """The in-memory claim for the pod's extended resources backed by DRA, or None when it asks none."""
        requests = device_requests(pod.get("spec") or {}, self.mapping, self.advertised)
        if not requests:
            return None
        ns = md(pod)["namespace"]
        body = extended_claim(ns, md(pod)["name"], requests, md(pod))
        return PodClaim(EXTENDED_CLAIM, (ns, f"{IN_MEMORY}{md(pod).get('uid')}"), body)

    def stale(self, pod: Obj) -> Obj | None:
        """The extended-resource claim an earlier cycle created for this (still waiting) pod."""
        return self.claims.get(str(md(pod).get("uid")))


def creatable(pc: PodClaim) -> Obj:
    """The claim to create: the in-memory one, without its status."""
    assert pc.claim is not None
    return {k: v for k, v in pc.claim.items() if k != "status"}


def mappings_fn(pod: Obj, claim: Obj) -> Any:
    """The pod status edit recording the claim and its request mappings."""
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    status = {
        "resourceClaimName": md(claim)["name"],
        "requestMappings": request_mappings(pod.get("spec") or {}, requests),
    }

    def fn(obj: Obj) -> None:
        obj.setdefault("status", {})["extendedResourceClaimStatus"] = status

    return fn
